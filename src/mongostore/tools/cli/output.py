"""Output and input text: exit codes, namespaces, tables, JSON documents, the progress bar, one-line errors."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TextIO

from bson import json_util
from langgraph.store.base import Item, SearchItem

from mongostore.core.codec import as_utc
from mongostore.tools.settings import _one_line

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_INTERRUPTED = 130

PROG = "mongostore"
JSON_OUT = json_util.RELAXED_JSON_OPTIONS
JSON_IN = json_util.RELAXED_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=timezone.utc)


class CLIError(Exception):
    """A one-line error for the user, with the exit status to leave with."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def parse_namespace(text: str, *, what: str = "namespace", allow_empty: bool = False) -> tuple[str, ...]:
    """``"users.alice"`` (or ``users.alice.``, as in the stored ``path``) -> ``("users", "alice")``;
    ``""`` -> ``()`` when ``allow_empty``."""
    raw = text.strip()
    if raw.endswith(".") and raw != ".":
        raw = raw[:-1]
    if not raw:
        if allow_empty:
            return ()
        raise CLIError(f"{what} is empty: write it with dots, e.g. users.alice.memories")
    labels = tuple(raw.split("."))
    if any(label == "" for label in labels):
        raise CLIError(f"{what} {text!r} has an empty label: write it with single dots, e.g. users.alice.memories")
    return labels


def format_namespace(namespace: Sequence[str]) -> str:
    return ".".join(namespace) if namespace else "(root)"


def _clip(text: str, width: int) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> str:
    """A plain-text table: a header, a rule, one line per row; long cells end with ``…``."""
    cells = [[_clip("" if c is None else str(c), max_width) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """JSON for output: plain JSON, with BSON-only values (dates...) in relaxed Extended JSON."""
    return json_util.dumps(obj, json_options=JSON_OUT, ensure_ascii=False, indent=indent)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else as_utc(value).isoformat()


def _item_json(item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
    }
    if isinstance(item, SearchItem):
        out["score"] = item.score
    return out


def _when(value: datetime) -> str:
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S")


class Progress:
    """A one-line progress bar on stderr, redrawn with ``\\r`` at most ten times a second, only on a
    terminal (so logs and tests stay clean); ``total=None`` shows a counter instead of a bar."""

    def __init__(
        self, label: str, total: int | None, *, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._last = 0.0
        self._drawn = False
        self.suffix = ""

    def render(self) -> str:
        counts = self.suffix or (f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}")
        if self.total:
            frac = min(self.done / self.total, 1.0)
            filled = int(frac * 30)
            return f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%} {counts}"
        return f"{self.label} {counts}"

    def update(self, done: int, *, force: bool = False, suffix: str | None = None) -> None:
        """Set the amount done; ``suffix`` replaces the ``done/total`` counts (e.g. "1,204 lines")."""
        self.done = done
        if suffix is not None:
            self.suffix = suffix
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now - self._last >= 0.1 or (self.total is not None and done >= self.total):
            self._last = now
            self.stream.write("\r" + self.render() + "\033[K")
            self.stream.flush()
            self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.update(self.done, force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False  # closing twice draws one line


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name}, which is not a JSON number (JSON has no NaN or Infinity): store a string or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotFinite(f"{text}, a number too large for a double (it would be stored as Infinity)")
    return value


def _object(pairs: list[tuple[str, Any]]) -> Any:
    """One JSON object with Extended JSON's types (``$date``, ``$oid``...), except that one with ``$ref``
    stays a dict (JSON Schema's ``$ref``): Extended JSON would make ``{"$ref", "$id"}`` a DBRef."""
    if any(k == "$ref" for k, _ in pairs):
        return dict(pairs)
    return json_util.object_pairs_hook(pairs, JSON_IN)


def loads_json(text: str) -> Any:
    """Strict JSON with Extended JSON types (dates...): no NaN / Infinity, no overflowing numbers;
    any failure (``{"$oid": "zzz"}``, nesting too deep...) is a ``ValueError`` with the reason."""
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:
        raise
    except Exception as exc:  # bson's InvalidId, decimal.InvalidOperation, OverflowError...
        raise ValueError(f"bad Extended JSON: {type(exc).__name__}: {_one_line(exc)}") from None
    # Python 3.11 and 3.12 stop parsing near their recursion limit, 3.13 does not: one limit for all.
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and _deeper_than(value, MAX_JSON_DEPTH):
        raise ValueError("nested too deeply")
    return value


MAX_JSON_DEPTH = 512  # JSON nesting a line may hold (MongoDB stores 100; Python <= 3.12 parses ~990)


def _deeper_than(value: Any, limit: int) -> bool:
    """Does ``value`` nest objects and arrays more than ``limit`` deep (no recursion)?"""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False
