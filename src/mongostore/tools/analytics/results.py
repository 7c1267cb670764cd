"""The typed report results, and the parsers that build them from the pipelines' output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mongostore.core.codec import as_utc
from mongostore.tools.analytics.pipelines import PERIOD_FORMATS, TTL_HORIZONS, Period, _check_period

__all__ = [
    "BreakdownReport",
    "BreakdownRow",
    "GrowthPoint",
    "GrowthReport",
    "NamespaceCount",
    "NamespaceCountsReport",
    "ReportBundle",
    "StaleItem",
    "StaleReport",
    "TTLOutlookReport",
    "Table",
    "parse_growth",
    "parse_namespace_counts",
    "parse_stale",
    "parse_ttl_outlook",
    "parse_value_breakdown",
]

#: A table for display: (headers, rows of cells as strings).
Table = tuple[list[str], list[list[str]]]


def _int(doc: Mapping[str, Any] | None, name: str) -> int:
    if not doc:
        return 0
    value = doc.get(name)
    return int(value) if isinstance(value, (int, float)) else 0


def _first(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return rows[0] if rows else None


def _facet(rows: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    doc = _first(rows)
    facet = doc.get(name) if doc else None
    return list(facet) if isinstance(facet, list) else []


@dataclass(frozen=True)
class NamespaceCount:
    """One label at the report's level. ``label`` is None for items whose namespace ends above it."""

    label: str | None
    items: int
    namespaces: int


@dataclass(frozen=True)
class NamespaceCountsReport:
    prefix: tuple[str, ...]
    level: int
    rows: tuple[NamespaceCount, ...]
    total_items: int
    total_namespaces: int
    total_labels: int

    @property
    def truncated(self) -> bool:
        """True when more labels exist than the rows show (the builder's ``limit``)."""
        return self.total_labels > len(self.rows)

    def table(self) -> Table:
        above = "(directly in the namespace above)"
        rows = [[above if r.label is None else r.label, str(r.items), str(r.namespaces)] for r in self.rows]
        return [f"label at level {self.level}", "items", "namespaces"], rows


def parse_namespace_counts(
    rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], level: int
) -> NamespaceCountsReport:
    top = [
        NamespaceCount(str(r["_id"]) if r.get("_id") else None, _int(r, "items"), _int(r, "namespaces"))
        for r in _facet(rows, "top")
    ]
    top.sort(key=lambda r: (-r.items, r.label or ""))
    total = _first(_facet(rows, "total"))
    totals = {f"total_{name}": _int(total, name) for name in ("items", "namespaces", "labels")}
    return NamespaceCountsReport(tuple(prefix), level, tuple(top), **totals)


@dataclass(frozen=True)
class GrowthPoint:
    """One period (``2024-05-06``, ``2024-W19`` or ``2024-05``, UTC): items first put in it (``created``),
    items whose latest put, after their first, falls in it (``updated``: a put keeps only its latest
    time), and items created up to it that still exist (``total``)."""

    period: str
    created: int
    updated: int
    total: int


@dataclass(frozen=True)
class GrowthReport:
    prefix: tuple[str, ...]
    period: Period
    points: tuple[GrowthPoint, ...]

    def table(self) -> Table:
        rows = [[p.period, str(p.created), str(p.updated), str(p.total)] for p in self.points]
        return [self.period, "created", "updated", "total"], rows


def _period_start(period: Period, label: str) -> datetime:
    if period == "week":
        return datetime.strptime(label + "-1", "%G-W%V-%u")  # its Monday
    return datetime.strptime(label, PERIOD_FORMATS[period])


def _all_periods(period: Period, labels: Sequence[str]) -> list[str]:
    """Every period from the first to the last label, so gaps show as zeros."""
    if not labels:
        return []
    fmt = PERIOD_FORMATS[period]
    try:
        start, end = _period_start(period, min(labels)), _period_start(period, max(labels))
    except ValueError:
        return sorted(labels)
    out: list[str] = []
    current = start
    while current <= end and len(out) < 100_000:
        out.append(current.strftime(fmt))
        if period == "month":
            current = current.replace(year=current.year + current.month // 12, month=current.month % 12 + 1)
        else:
            current += timedelta(days=7 if period == "week" else 1)
    return sorted(set(out) | set(labels))


def parse_growth(rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], period: Period = "day") -> GrowthReport:
    period = _check_period(period)
    created = {str(r["_id"]): _int(r, "n") for r in _facet(rows, "created") if r.get("_id") is not None}
    updated = {str(r["_id"]): _int(r, "n") for r in _facet(rows, "updated") if r.get("_id") is not None}
    points: list[GrowthPoint] = []
    total = 0
    for label in _all_periods(period, sorted(set(created) | set(updated))):
        total += created.get(label, 0)
        points.append(GrowthPoint(label, created.get(label, 0), updated.get(label, 0), total))
    return GrowthReport(prefix=tuple(prefix), period=period, points=tuple(points))


@dataclass(frozen=True)
class StaleItem:
    namespace: tuple[str, ...]
    key: str
    updated_at: datetime


@dataclass(frozen=True)
class StaleReport:
    """Items not updated since ``cutoff`` (``now - days``), with the oldest few."""

    prefix: tuple[str, ...]
    days: float
    cutoff: datetime
    total: int
    stale: int
    oldest: tuple[StaleItem, ...]

    @property
    def share(self) -> float:
        return self.stale / self.total if self.total else 0.0

    def table(self) -> Table:
        rows = [[".".join(s.namespace), s.key, s.updated_at.strftime("%Y-%m-%d %H:%M")] for s in self.oldest]
        return ["namespace", "key", "updated_at (UTC)"], rows


def parse_stale(
    summary_rows: Sequence[Mapping[str, Any]],
    oldest_rows: Sequence[Mapping[str, Any]],
    prefix: tuple[str, ...],
    days: float,
    cutoff: datetime,
) -> StaleReport:
    summary = _first(summary_rows)
    oldest = tuple(StaleItem(tuple(r["namespace"]), str(r["key"]), as_utc(r["updated_at"])) for r in oldest_rows)
    total, stale = _int(summary, "total"), _int(summary, "stale")
    return StaleReport(prefix=tuple(prefix), days=days, cutoff=as_utc(cutoff), total=total, stale=stale, oldest=oldest)


@dataclass(frozen=True)
class TTLOutlookReport:
    """How many items expire soon. The ``within_*`` counts are cumulative: an item expiring in
    ten minutes counts in all three. ``expired``: past ``expires_at`` but not yet removed by
    the TTL monitor (always 0 with ``omit_expired``). ``later``: expiring after a week."""

    prefix: tuple[str, ...]
    now: datetime
    total: int
    never: int
    expired: int
    within_hour: int
    within_day: int
    within_week: int

    @property
    def later(self) -> int:
        return self.total - self.never - self.expired - self.within_week

    def bins(self) -> list[tuple[str, int]]:
        """Disjoint bins that add up to ``total`` (what the chart and the tables show)."""
        return [
            ("expired, not yet removed", self.expired),
            ("within an hour", self.within_hour),
            ("in 1 hour to 1 day", self.within_day - self.within_hour),
            ("in 1 day to 1 week", self.within_week - self.within_day),
            ("later", self.later),
            ("never", self.never),
        ]

    def table(self) -> Table:
        rows = [[name, str(n)] for name, n in self.bins()]
        rows.append(["total", str(self.total)])
        return ["expire", "items"], rows


def parse_ttl_outlook(rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], now: datetime) -> TTLOutlookReport:
    doc = _first(rows)
    counts = {name: _int(doc, name) for name in ("total", "never", "expired", *TTL_HORIZONS)}
    return TTLOutlookReport(prefix=tuple(prefix), now=as_utc(now), **counts)


@dataclass(frozen=True)
class BreakdownRow:
    """Items whose ``value.<field>`` equals ``value`` (None: missing or null)."""

    value: Any
    items: int


@dataclass(frozen=True)
class BreakdownReport:
    prefix: tuple[str, ...]
    field: str
    rows: tuple[BreakdownRow, ...]
    total_items: int
    distinct_values: int

    @property
    def other_items(self) -> int:
        """Items with a value not among the rows (the builder's ``limit``)."""
        return self.total_items - sum(r.items for r in self.rows)

    def table(self) -> Table:
        rows = [[_show(r.value), str(r.items)] for r in self.rows]
        if self.other_items:
            rows.append([f"(other {self.distinct_values - len(self.rows)} values)", str(self.other_items)])
        return [f"value.{self.field}", "items"], rows


def _show(value: Any) -> str:
    return "(missing)" if value is None else str(value)


#: MongoDB's sort order of BSON types, roughly (bool before int: it is one); dates and the rest come last.
_TYPE_ORDER = ((bool, 5), (type(None), 0), ((int, float), 1), (str, 2), (Mapping, 3), ((list, tuple), 4))


def _type_rank(value: Any) -> int:
    return next((rank for kind, rank in _TYPE_ORDER if isinstance(value, kind)), 6)


def parse_value_breakdown(
    rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], field_path: str
) -> BreakdownReport:
    top = [BreakdownRow(r.get("_id"), _int(r, "items")) for r in _facet(rows, "top")]
    top.sort(key=lambda r: (-r.items, _type_rank(r.value), repr(r.value)))
    total = _first(_facet(rows, "total"))
    items, values = _int(total, "items"), _int(total, "values")
    return BreakdownReport(tuple(prefix), field_path, tuple(top), total_items=items, distinct_values=values)


@dataclass(frozen=True)
class ReportBundle:
    """Every report for one prefix, as ``mongostore stats`` prints and ``report`` renders them."""

    prefix: tuple[str, ...]
    generated_at: datetime
    namespaces: NamespaceCountsReport
    growth: GrowthReport
    stale: StaleReport
    ttl: TTLOutlookReport
    breakdown: BreakdownReport | None = None
