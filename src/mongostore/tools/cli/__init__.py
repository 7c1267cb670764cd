"""The ``mongostore`` command (also ``python -m mongostore``); see ``main`` and ``docs/cli.md``."""

from __future__ import annotations

from mongostore.tools.cli.app import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    Progress,
    build_parser,
    format_namespace,
    format_table,
    main,
    parse_namespace,
)

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "CLIError",
    "Progress",
    "build_parser",
    "format_namespace",
    "format_table",
    "main",
    "parse_namespace",
]
