"""Results: the ``Row`` of a table, number formatting, tables, the JSON files under
``bench/results/``, and the machine line."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _setup import RESULTS

# --------------------------------------------------------------------------- results


@dataclass
class Row:
    """One line of a result table: ours vs theirs, and the ratio theirs/ours."""

    section: str
    workload: str
    ours: float | None
    theirs: float | None
    unit: str
    note: str = ""
    ratio_of: str = "theirs/ours"

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.theirs is None:
            return None
        if self.ours == 0:
            return None if self.theirs == 0 else float("inf")
        return self.theirs / self.ours

    def as_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "workload": self.workload,
            "ours": self.ours,
            "theirs": self.theirs,
            "unit": self.unit,
            "ratio": self.ratio,
            "note": self.note,
        }


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("calls", "trips", "docs", "texts", "n", "round trips"):
        return f"{value:.0f}"
    if unit == "KB":
        return f"{value:.1f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    if r == float("inf"):
        return "inf"
    if r >= 10:
        return f"{r:.0f}x"
    return f"{r:.2f}x"


def table(rows: Sequence[Row], title: str = "", markdown: bool = False) -> str:
    head = ["section", "workload", "ours", "theirs", "unit", "theirs/ours", "note"]
    body = [
        [r.section, r.workload, fmt(r.ours, r.unit), fmt(r.theirs, r.unit), r.unit, fmt_ratio(r.ratio), r.note]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return (f"**{title}**\n\n" if title else "") + "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    out = [title] if title else []
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in body]
    return "\n".join(out)


def save(name: str, rows: Sequence[Row], extra: dict[str, Any] | None = None) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"rows": [r.as_dict() for r in rows], **(extra or {})}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def machine() -> str:
    import platform

    import langgraph.store.mongodb  # noqa: F401
    import pymongo

    try:
        from importlib.metadata import version

        theirs = version("langgraph-store-mongodb")
        lg = version("langgraph")
    except Exception:  # pragma: no cover
        theirs = lg = "?"
    return (
        f"python {platform.python_version()}, {os.cpu_count()} cores, pymongo {pymongo.version}, "
        f"langgraph {lg}, langgraph-store-mongodb {theirs}"
    )
