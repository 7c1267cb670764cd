"""``purge``: delete every item under a namespace prefix, after a confirmation (or ``--yes``)."""

from __future__ import annotations

import argparse
import sys

from mongostore import PurgeReport
from mongostore.tools.cli.connect import Ctx
from mongostore.tools.cli.output import EXIT_FAILURE, EXIT_OK, CLIError, format_namespace, parse_namespace


def check_purge(a: argparse.Namespace) -> None:
    """The prefix (not empty), and a way to confirm: a terminal to answer on, or ``--yes``."""
    a.prefix_ns = parse_namespace(a.namespace, what="namespace prefix")
    if not (a.dry_run or a.yes or sys.stdin.isatty()):
        raise CLIError(
            f"purge deletes every item under {a.namespace}: without a terminal to confirm on, pass --yes "
            "(or --dry-run to count what it would delete)"
        )


def cmd_purge(ctx: Ctx) -> int:
    a = ctx.args
    prefix = a.prefix_ns
    if not (a.dry_run or a.yes):
        would = ctx.store.purge(prefix, dry_run=True)
        if would.items == 0 and would.vectors == 0:
            return _report(ctx, would)
        sys.stderr.write(
            f"delete {would.items} item(s) and {would.vectors} vector(s) under {format_namespace(prefix)} "
            f"in {ctx.where}? This cannot be undone. [y/N] "
        )
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            ctx.warn("nothing deleted")
            return EXIT_FAILURE
    return _report(ctx, ctx.store.purge(prefix, dry_run=a.dry_run))


def _report(ctx: Ctx, report: PurgeReport) -> int:
    if ctx.json:
        ctx.emit(
            {
                "namespace": list(report.namespace_prefix),
                "items": report.items,
                "vectors": report.vectors,
                "dry_run": report.dry_run,
            }
        )
    else:
        verb = "would delete" if report.dry_run else "deleted"
        where = format_namespace(report.namespace_prefix)
        ctx.print(f"{verb} {report.items} item(s) and {report.vectors} vector(s) under {where} in {ctx.where}")
    return EXIT_OK
