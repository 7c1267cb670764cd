"""The ``mongostore`` command (also ``python -m mongostore``): ``app`` (``main``, dispatch, errors),
``parser``, ``connect`` (options to a store), ``output``, and one module per group of commands:
``items`` (put/get/rm/search/ls), ``transfer`` (export/import), ``admin`` (setup/doctor/reindex),
``reports`` (stats/report/demo). See ``docs/cli.md``.
"""

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
