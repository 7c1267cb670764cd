"""The ``mongostore`` command (also ``python -m mongostore``); its modules: docs/cli.md, "Where the code lives"."""

from __future__ import annotations

from mongostore.tools.cli.app import main
from mongostore.tools.cli.output import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    Progress,
    format_namespace,
    format_table,
    parse_namespace,
)
from mongostore.tools.cli.parser import build_parser

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
