"""``stats``, ``report`` and ``demo``: the analytics reports as text or HTML, and the memory demo."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from mongostore.tools.cli.connect import Ctx, _empty_hint
from mongostore.tools.cli.output import EXIT_OK, CLIError, _iso, parse_namespace
from mongostore.tools.cli.transfer import check_out_file
from mongostore.tools.embeddings import HashingEmbeddings


def _plain(obj: Any) -> Any:
    """Dataclass output as JSON-ready data: dates as ISO strings, tuples as lists."""
    if isinstance(obj, datetime):
        return _iso(obj)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def check_reports(a: argparse.Namespace) -> None:
    """``stats`` and ``report``: the prefix, ``--stale-days``, ``--limit`` and ``--out``, before the store opens."""
    if not (a.stale_days > 0 and math.isfinite(a.stale_days)):  # NaN too
        raise CLIError(f"--stale-days must be positive (a number of days), got {a.stale_days:g}")
    if a.limit < 1:
        raise CLIError(f"--limit must be at least 1, got {a.limit}")
    a.prefix_ns = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    if getattr(a, "out", None) not in (None, "-"):
        check_out_file(a.out, "--out")


def _collect(ctx: Ctx) -> Any:
    from mongostore.tools.analytics import collect_reports

    a = ctx.args
    return collect_reports(
        ctx.store,
        a.prefix_ns,
        level=a.level,
        period=a.period,
        stale_days=a.stale_days,
        breakdown_field=None if a.no_breakdown else a.breakdown,
        limit=a.limit,
    )


def cmd_stats(ctx: Ctx) -> int:
    from mongostore.tools.report import render_text

    reports = _collect(ctx)
    if ctx.json:
        ctx.emit(_plain(asdict(reports)))
    else:
        ctx.print(f"store: {ctx.where}")
        sys.stdout.write(render_text(reports))
        if reports.namespaces.total_items == 0:
            ctx.warn(f"no items in {ctx.where}{_empty_hint(ctx)}")
    return EXIT_OK


def cmd_report(ctx: Ctx) -> int:
    from mongostore.tools.report import render_html

    reports = _collect(ctx)
    page = render_html(reports, title=ctx.args.title)
    target = ctx.args.out
    if target == "-":
        sys.stdout.write(page)
        return EXIT_OK
    Path(target).write_text(page, encoding="utf-8")
    if ctx.json:
        ctx.emit({"out": target, "bytes": len(page.encode("utf-8"))})
    else:
        ctx.print(f"wrote {target} ({len(page.encode('utf-8')):,} bytes): open it in a browser, it needs no network")
    return EXIT_OK


def cmd_demo(ctx: Ctx) -> int:
    from mongostore.tools.demo import render_demo, run_demo

    embed = (ctx.store.index_config or {}).get("embed")
    result = run_demo(
        ctx.store,
        user_id=ctx.args.user,
        store_label=ctx.label(),
        embedder=ctx.embedder,
        semantic=not isinstance(embed, HashingEmbeddings),
    )
    if ctx.json:
        ctx.emit(asdict(result))
    else:
        render_demo(result, sys.stdout)
        if ctx.settings.in_memory and not ctx.injected:
            ctx.print(
                "The in-memory store is gone now. Keep the memories in the local store, or on a server:\n"
                "  mongostore demo --uri mongostore-local://\n"
                "  mongostore demo --uri mongodb://localhost:27017/?directConnection=true"
            )
        else:
            ctx.print(
                f"The memories stay in database {ctx.settings.db!r}; look at them with:\n"
                f"  mongostore --db {ctx.settings.db} search {result.user_id}.memories --query 'food'"
            )
    return EXIT_OK
