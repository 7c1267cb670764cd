"""Analytics over memories: scoped aggregation pipelines and ready-made reports.

Ask questions of the memories where they live. ``store.aggregate(prefix, pipeline)``
(and ``await store.aaggregate(...)``) runs *your* aggregation pipeline over the
items under a namespace prefix, and nothing else: :func:`scoped_pipeline` puts an
index-friendly ``$match`` on the prefix in front of it and refuses every stage that
could read or write outside that scope or outside the items collection.

The stored fields
=================

One document per item, in the items collection (DESIGN.md section 4)::

    {
      "_id":         "users.alice.memories.\\x00k1",   # path + NUL + key (internal)
      "namespace":   ["users", "alice", "memories"],    # the namespace tuple, as an array
      "path":        "users.alice.memories.",           # labels joined by '.', trailing '.'
      "depth":       3,                                 # len(namespace)
      "key":         "k1",
      "value":       {...},                             # the dict you put, unchanged
      "created_at":  ISODate(...),                      # first put (kept on update), UTC
      "updated_at":  ISODate(...),                      # last put, UTC
      "expires_at":  ISODate(...),                      # only for items with a TTL
      "ttl_minutes": 60.0,                              # only for items with a TTL
      "vectors":     [...],                             # internal: hashes of the indexed texts
    }

- ``namespace.N`` / ``{"$arrayElemAt": ["$namespace", N]}`` is the label at level N
  (0-based): under ``("users",)``, level 1 is the user.
- ``path`` is a string prefix of every descendant's path, so ``path`` (indexed, also
  with ``key`` and with ``updated_at``) is the field to filter namespaces on.
- Value fields are under ``value.``: ``"$value.kind"``.
- Dates are BSON dates in UTC. ``expires_at`` is missing for items that never expire.
  Expired items may linger until the server's TTL monitor removes them (about a
  minute); ``omit_expired`` leaves them out of ``aggregate`` too.

Example: memories per kind for each user under ``("users",)``::

    store.aggregate(("users",), [
        {"$group": {"_id": {"user": {"$arrayElemAt": ["$namespace", 1]}, "kind": "$value.kind"},
                    "n": {"$sum": 1}}},
        {"$sort": {"n": -1}},
        {"$limit": 20},
    ])

What a pipeline may hold
========================

Stages on :data:`ALLOWED_STAGES` only (``$facet`` sub-pipelines are checked the
same way). Refused with a :class:`~mongostore.errors.PipelineError` (a
``ValueError``) naming the stage: stages that write (``$out``, ``$merge``), read
other collections or other namespaces (``$lookup``, ``$graphLookup``,
``$unionWith``, ``$documents``), read server state (``$collStats``,
``$indexStats``, ``$currentOp``, ``$listSessions``, ``$changeStream``...), must be
first (``$search``, ``$vectorSearch``, ``$geoNear``), and anything else not on the
list; and the JavaScript operators ``$where``, ``$function`` and ``$accumulator``
anywhere in any stage.

The embedded mongomock default lacks several allowed stages (see
:data:`MONGOMOCK_MISSING_STAGES`) and operators (``$dateTrunc``, ``$isoWeek``,
``$reduce``, ``$type``...); they work on a real server.

Reports
=======

Each report is a pure pipeline builder (the stages *after* the scoping match), a
frozen dataclass result, a parser from the aggregate output, and a runner taking
anything with an ``aggregate(prefix, pipeline)`` method (:class:`Aggregator`):

============================  =======================================  ==========================
runner                        builder(s)                               result
============================  =======================================  ==========================
:func:`namespace_counts`      :func:`namespace_counts_pipeline`        :class:`NamespaceCountsReport`
:func:`growth`                :func:`growth_pipeline`                  :class:`GrowthReport`
:func:`stale_items`           :func:`stale_summary_pipeline`,          :class:`StaleReport`
                              :func:`stale_oldest_pipeline`
:func:`ttl_outlook`           :func:`ttl_outlook_pipeline`             :class:`TTLOutlookReport`
:func:`value_breakdown`       :func:`value_breakdown_pipeline`         :class:`BreakdownReport`
============================  =======================================  ==========================

:func:`collect_reports` / :func:`acollect_reports` run them all into a
:class:`ReportBundle` (what ``mongostore stats`` prints and ``mongostore report``
renders). Every report pipeline uses only stages and operators that both mongomock
4.3 and MongoDB 7/8 implement, and returns only counts or a few projected fields:
no report pulls whole documents into Python.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Protocol

from langgraph.store.base import InvalidNamespaceError

from mongostore._codec import as_utc
from mongostore._queries import not_expired, prefix_filter
from mongostore.errors import PipelineError

__all__ = [
    "ALLOWED_STAGES",
    "FORBIDDEN_OPERATORS",
    "FORBIDDEN_STAGES",
    "MONGOMOCK_MISSING_STAGES",
    "Aggregator",
    "AsyncAggregator",
    "BreakdownReport",
    "BreakdownRow",
    "GrowthPoint",
    "GrowthReport",
    "NamespaceCount",
    "NamespaceCountsReport",
    "Period",
    "ReportBundle",
    "ReportPlan",
    "StaleItem",
    "StaleReport",
    "TTLOutlookReport",
    "Table",
    "acollect_reports",
    "check_pipeline",
    "check_value_field",
    "collect_reports",
    "growth",
    "growth_pipeline",
    "namespace_counts",
    "namespace_counts_pipeline",
    "parse_growth",
    "parse_namespace_counts",
    "parse_stale",
    "parse_ttl_outlook",
    "parse_value_breakdown",
    "scope_filter",
    "scoped_pipeline",
    "stale_items",
    "stale_oldest_pipeline",
    "stale_summary_pipeline",
    "ttl_outlook",
    "ttl_outlook_pipeline",
    "value_breakdown",
    "value_breakdown_pipeline",
]

# --------------------------------------------------------------------------- scoping

#: Stages a user pipeline may hold: each reads only the documents flowing into it.
ALLOWED_STAGES = frozenset(
    {
        "$match",
        "$project",
        "$addFields",
        "$set",
        "$unset",
        "$group",
        "$sort",
        "$skip",
        "$limit",
        "$count",
        "$unwind",
        "$bucket",
        "$bucketAuto",
        "$facet",
        "$replaceRoot",
        "$replaceWith",
        "$sample",
        "$sortByCount",
        "$redact",
        "$setWindowFields",
        "$densify",
        "$fill",
    }
)

#: Allowed stages that mongomock 4.3 does not implement (they raise NotImplementedError
#: there); they work on a real server.
MONGOMOCK_MISSING_STAGES = frozenset(
    {"$unset", "$bucketAuto", "$replaceWith", "$sortByCount", "$redact", "$setWindowFields", "$densify", "$fill"}
)

#: Stages refused with a specific reason (anything else off the allow-list is refused too).
FORBIDDEN_STAGES: Mapping[str, str] = {
    "$out": "it writes to another collection",
    "$merge": "it writes to another collection",
    "$unionWith": "it reads another collection",
    "$lookup": "it reads another collection or items outside the namespace prefix",
    "$graphLookup": "it reads another collection or items outside the namespace prefix",
    "$documents": "it reads documents from outside the items collection",
    "$collStats": "it reads collection statistics",
    "$indexStats": "it reads index statistics",
    "$planCacheStats": "it reads the server's plan cache",
    "$currentOp": "it reads the server's operations",
    "$listSessions": "it reads the server's sessions",
    "$listLocalSessions": "it reads the server's sessions",
    "$listSearchIndexes": "it reads index definitions",
    "$listSampledQueries": "it reads the server's sampled queries",
    "$queryStats": "it reads the server's query statistics",
    "$shardedDataDistribution": "it reads cluster metadata",
    "$changeStream": "it opens a change stream",
    "$changeStreamSplitLargeEvent": "it belongs to change streams",
    "$search": "it must be the first stage, and the store's scoping $match comes first",
    "$searchMeta": "it must be the first stage, and the store's scoping $match comes first",
    "$vectorSearch": "it must be the first stage, and the store's scoping $match comes first",
    "$rankFusion": "it must be the first stage, and the store's scoping $match comes first",
    "$scoreFusion": "it must be the first stage, and the store's scoping $match comes first",
    "$geoNear": "it must be the first stage, and the store's scoping $match comes first",
}

#: Operators refused anywhere in any stage: they run server-side JavaScript.
FORBIDDEN_OPERATORS: Mapping[str, str] = {
    "$where": "it runs server-side JavaScript",
    "$function": "it runs server-side JavaScript",
    "$accumulator": "it runs server-side JavaScript",
}


def _stage_error(where: str, name: str, reason: str) -> PipelineError:
    return PipelineError(f"pipeline {where} ({name}) is not allowed: {reason}")


def _find_forbidden_operator(spec: Any) -> str | None:
    """The first forbidden operator name found anywhere in ``spec`` (keys, at any depth)."""
    if isinstance(spec, Mapping):
        for k, v in spec.items():
            if isinstance(k, str) and k in FORBIDDEN_OPERATORS:
                return k
            found = _find_forbidden_operator(v)
            if found:
                return found
    elif isinstance(spec, (list, tuple)):
        for v in spec:
            found = _find_forbidden_operator(v)
            if found:
                return found
    return None


def check_pipeline(pipeline: Sequence[Mapping[str, Any]], _where: str = "") -> None:
    """Raise ``PipelineError`` unless every stage (and ``$facet`` sub-pipeline) is allowed.

    The message names the stage's position (0-based, in the pipeline you passed) and name.
    """
    if isinstance(pipeline, (str, bytes, Mapping)) or not isinstance(pipeline, Sequence):
        raise PipelineError(
            f"a pipeline{_where and ' at ' + _where} must be a list of stages, got {type(pipeline).__name__}"
        )
    for index, stage in enumerate(pipeline):
        where = f"{_where} > stage {index}" if _where else f"stage {index}"
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise PipelineError(f"pipeline {where} must be a dict with exactly one stage name, got {stage!r}")
        ((name, spec),) = stage.items()
        if not isinstance(name, str) or not name.startswith("$"):
            raise PipelineError(f"pipeline {where}: {name!r} is not a stage name (stage names start with '$')")
        if name in FORBIDDEN_STAGES:
            raise _stage_error(where, name, FORBIDDEN_STAGES[name])
        if name not in ALLOWED_STAGES:
            allowed = " ".join(sorted(ALLOWED_STAGES))
            raise _stage_error(where, name, f"it is not on the allow-list ({allowed})")
        if name == "$facet":
            if not isinstance(spec, Mapping) or not spec:
                raise PipelineError(f"pipeline {where} ($facet) takes a dict of named sub-pipelines")
            for facet_name, sub in spec.items():
                check_pipeline(sub, f"{where} ($facet) > {facet_name!r}")
            continue
        operator = _find_forbidden_operator(spec)
        if operator:
            reason = FORBIDDEN_OPERATORS[operator]
            raise PipelineError(f"pipeline {where} ({name}) uses {operator}, which is not allowed: {reason}")


def _check_prefix(namespace_prefix: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(namespace_prefix, str) or not isinstance(namespace_prefix, (tuple, list)):
        raise InvalidNamespaceError(f"a namespace prefix must be a tuple of labels, got {namespace_prefix!r}")
    for label in namespace_prefix:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace prefix {namespace_prefix!r}: labels are non-empty strings "
                "without '.' or NUL"
            )
    return tuple(namespace_prefix)


def scope_filter(namespace_prefix: tuple[str, ...], now: datetime | None = None) -> dict[str, Any]:
    """The scoping ``$match`` filter: the prefix's anchored ``path`` regex, and unexpired when ``now``."""
    scope = prefix_filter(_check_prefix(namespace_prefix))
    if now is not None:
        scope.update(not_expired(now))
    return scope


def scoped_pipeline(
    namespace_prefix: tuple[str, ...],
    pipeline: Sequence[Mapping[str, Any]],
    *,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The pipeline to send: the scoping ``$match`` first, then the user's checked stages.

    ``now`` (given by the store only when ``omit_expired`` is set) also leaves out items
    whose ``expires_at`` has passed. Raises ``PipelineError`` for a refused stage or
    operator, and ``InvalidNamespaceError`` for a malformed prefix.
    """
    scope = scope_filter(namespace_prefix, now)
    # One deep copy, checked and then sent: what is sent is exactly what was checked,
    # whatever the caller's objects do afterwards (or on a second iteration).
    stages: Any = _plain_copy(pipeline) if _is_stage_list(pipeline) else pipeline
    check_pipeline(stages)
    return [{"$match": scope}, *stages]


def _is_stage_list(pipeline: Any) -> bool:
    return isinstance(pipeline, Sequence) and not isinstance(pipeline, (str, bytes))


def _plain_copy(obj: Any) -> Any:
    """``obj`` rebuilt from plain dicts and lists (tuples become lists, as BSON stores them)."""
    if isinstance(obj, Mapping):
        return {k: _plain_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or _is_stage_list(obj):
        return [_plain_copy(v) for v in obj]
    return obj


class Aggregator(Protocol):
    """Anything that runs a pipeline over the items under a prefix (e.g. ``MongoStore``)."""

    def aggregate(self, namespace_prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ...


class AsyncAggregator(Protocol):
    """The async twin (e.g. ``AsyncMongoStore``)."""

    def aaggregate(
        self, namespace_prefix: tuple[str, ...], pipeline: list[dict[str, Any]]
    ) -> Awaitable[list[dict[str, Any]]]:
        ...


#: A table for display: (headers, rows of cells as strings).
Table = tuple[list[str], list[list[str]]]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


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


def _check_limit(limit: int, what: str) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{what} must be a positive integer, got {limit!r}")
    return limit


# --------------------------------------------------------------------------- (a) namespaces


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
        rows = [[_label(r.label), str(r.items), str(r.namespaces)] for r in self.rows]
        return [f"label at level {self.level}", "items", "namespaces"], rows


def _label(label: str | None) -> str:
    return "(directly in the namespace above)" if label is None else label


def namespace_counts_pipeline(level: int, *, limit: int = 100) -> list[dict[str, Any]]:
    """Items and distinct namespaces per label at ``level`` (0-based), most items first.

    Groups by ``path`` first (one row per namespace) and splits that path only once per
    namespace; the pipeline needs only ``path``, so with the scoping ``$match`` the server
    can answer it from the ``{path: 1, ...}`` indexes without fetching documents.
    The output is one document ``{top: [{_id: label, items, namespaces}...], total: [{labels,
    items, namespaces}]}``; ``_id`` is ``""`` for items whose namespace is shorter than
    ``level + 1`` (labels are never empty).
    """
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"level must be an integer >= 0 (0 = the first label), got {level!r}")
    _check_limit(limit, "limit")
    label = {"$ifNull": [{"$arrayElemAt": [{"$split": ["$_id", "."]}, level]}, ""]}
    return [
        {"$group": {"_id": "$path", "items": {"$sum": 1}}},
        {"$group": {"_id": label, "items": {"$sum": "$items"}, "namespaces": {"$sum": 1}}},
        {
            "$facet": {
                "top": [{"$sort": {"items": -1, "_id": 1}}, {"$limit": limit}],
                "total": [
                    {
                        "$group": {
                            "_id": None,
                            "labels": {"$sum": 1},
                            "items": {"$sum": "$items"},
                            "namespaces": {"$sum": "$namespaces"},
                        }
                    }
                ],
            }
        },
    ]


def parse_namespace_counts(
    rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], level: int
) -> NamespaceCountsReport:
    top = [
        NamespaceCount(label=str(r["_id"]) if r.get("_id") else None, items=_int(r, "items"),
                       namespaces=_int(r, "namespaces"))
        for r in _facet(rows, "top")
    ]
    top.sort(key=lambda r: (-r.items, r.label or ""))
    total = _first(_facet(rows, "total"))
    return NamespaceCountsReport(
        prefix=tuple(prefix),
        level=level,
        rows=tuple(top),
        total_items=_int(total, "items"),
        total_namespaces=_int(total, "namespaces"),
        total_labels=_int(total, "labels"),
    )


def namespace_counts(
    store: Aggregator, prefix: tuple[str, ...], level: int | None = None, *, limit: int = 100
) -> NamespaceCountsReport:
    """Items and namespaces per label at ``level`` (default: the level right below ``prefix``,
    e.g. per user under ``("users",)``)."""
    level = len(prefix) if level is None else level
    return parse_namespace_counts(store.aggregate(tuple(prefix), namespace_counts_pipeline(level, limit=limit)),
                                  tuple(prefix), level)


# --------------------------------------------------------------------------- (b) growth

Period = Literal["day", "week", "month"]

# $dateTrunc (MongoDB 5.0+) would return dates, but mongomock 4.3 lacks it, and also
# $isoWeek/$isoWeekYear and the `timezone` option of $dateToString. $dateToString with
# these formats works on both (mongomock formats with Python's strftime, which knows
# the ISO codes %G and %V), in UTC, and the strings sort in time order.
PERIOD_FORMATS: Mapping[str, str] = {"day": "%Y-%m-%d", "week": "%G-W%V", "month": "%Y-%m"}


@dataclass(frozen=True)
class GrowthPoint:
    """One period (``2024-05-06``, ``2024-W19`` or ``2024-05``, UTC).

    ``created``: items first put in the period. ``updated``: items whose latest put falls in
    the period and came after their first (a put only keeps its latest time, so an item
    re-put in several periods counts in the last one). ``total``: items created up to and
    including the period that still exist.
    """

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


def _check_period(period: str) -> Period:
    if period not in PERIOD_FORMATS:
        raise ValueError(f"period must be one of {', '.join(PERIOD_FORMATS)}, got {period!r}")
    return period  # type: ignore[return-value]


def growth_pipeline(period: Period = "day") -> list[dict[str, Any]]:
    """Items created, and items last updated, per day / ISO week / month (UTC).

    Output: one document ``{created: [{_id: period, n}], updated: [{_id: period, n}]}``.
    """
    fmt = PERIOD_FORMATS[_check_period(period)]
    rewritten = {"$cond": [{"$gt": ["$updated_at", "$created_at"]}, 1, 0]}
    return [
        {
            "$facet": {
                "created": [
                    {"$group": {"_id": {"$dateToString": {"format": fmt, "date": "$created_at"}}, "n": {"$sum": 1}}}
                ],
                "updated": [
                    {
                        "$group": {
                            "_id": {"$dateToString": {"format": fmt, "date": "$updated_at"}},
                            "n": {"$sum": rewritten},
                        }
                    }
                ],
            }
        }
    ]


def _period_start(period: Period, label: str) -> datetime:
    if period == "day":
        return datetime.strptime(label, "%Y-%m-%d")
    if period == "week":
        return datetime.strptime(label + "-1", "%G-W%V-%u")
    return datetime.strptime(label, "%Y-%m")


def _next_period(period: Period, start: datetime) -> datetime:
    if period == "day":
        return start + timedelta(days=1)
    if period == "week":
        return start + timedelta(days=7)
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


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
        current = _next_period(period, current)
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


def growth(store: Aggregator, prefix: tuple[str, ...], period: Period = "day") -> GrowthReport:
    return parse_growth(store.aggregate(tuple(prefix), growth_pipeline(period)), tuple(prefix), period)


# --------------------------------------------------------------------------- (c) stale items


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


def _cutoff(now: datetime, days: float) -> datetime:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) or days < 0:
        raise ValueError(f"days must be a number >= 0, got {days!r}")
    return as_utc(now) - timedelta(days=days)


def stale_summary_pipeline(cutoff: datetime) -> list[dict[str, Any]]:
    """``{total, stale}``: items in scope, and those with ``updated_at < cutoff``.

    Needs only ``path`` and ``updated_at``: the ``{path: 1, updated_at: -1}`` index covers it.
    """
    stale = {"$cond": [{"$lt": ["$updated_at", cutoff]}, 1, 0]}
    return [{"$group": {"_id": None, "total": {"$sum": 1}, "stale": {"$sum": stale}}}]


def stale_oldest_pipeline(cutoff: datetime, limit: int = 10) -> list[dict[str, Any]]:
    """The ``limit`` least recently updated stale items: namespace, key and updated_at only."""
    _check_limit(limit, "limit")
    return [
        {"$match": {"updated_at": {"$lt": cutoff}}},
        {"$sort": {"updated_at": 1, "path": 1, "key": 1}},
        {"$limit": limit},
        {"$project": {"_id": 0, "namespace": 1, "key": 1, "updated_at": 1}},
    ]


def parse_stale(
    summary_rows: Sequence[Mapping[str, Any]],
    oldest_rows: Sequence[Mapping[str, Any]],
    prefix: tuple[str, ...],
    days: float,
    cutoff: datetime,
) -> StaleReport:
    summary = _first(summary_rows)
    oldest = tuple(
        StaleItem(tuple(r["namespace"]), str(r["key"]), as_utc(r["updated_at"])) for r in oldest_rows
    )
    return StaleReport(
        prefix=tuple(prefix),
        days=days,
        cutoff=as_utc(cutoff),
        total=_int(summary, "total"),
        stale=_int(summary, "stale"),
        oldest=oldest,
    )


def stale_items(
    store: Aggregator, prefix: tuple[str, ...], days: float = 30, *, now: datetime | None = None, oldest: int = 10
) -> StaleReport:
    """Items not updated for ``days`` days: how many, their share, and the ``oldest`` oldest."""
    prefix = tuple(prefix)
    cutoff = _cutoff(now or _utcnow(), days)
    summary = store.aggregate(prefix, stale_summary_pipeline(cutoff))
    rows = store.aggregate(prefix, stale_oldest_pipeline(cutoff, oldest))
    return parse_stale(summary, rows, prefix, days, cutoff)


# --------------------------------------------------------------------------- (d) TTL outlook

TTL_HORIZONS: Mapping[str, timedelta] = {
    "within_hour": timedelta(hours=1),
    "within_day": timedelta(days=1),
    "within_week": timedelta(days=7),
}


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


def ttl_outlook_pipeline(now: datetime) -> list[dict[str, Any]]:
    """One ``$group`` of conditional sums on ``expires_at`` against literal dates.

    Missing ``expires_at`` is made an explicit null first: in expressions null sorts before
    every date (on the server and in mongomock), so ``$lte: [null, now]`` is true and the
    never-expiring items must be excluded from "expired" explicitly. (``$type`` would say
    it more directly, but mongomock lacks it.)
    """
    now = as_utc(now)
    expires = {"$ifNull": ["$expires_at", None]}

    def count(cond: dict[str, Any]) -> dict[str, Any]:
        return {"$sum": {"$cond": [cond, 1, 0]}}

    group: dict[str, Any] = {
        "_id": None,
        "total": {"$sum": 1},
        "never": count({"$eq": [expires, None]}),
        "expired": count({"$and": [{"$ne": [expires, None]}, {"$lte": [expires, now]}]}),
    }
    for name, horizon in TTL_HORIZONS.items():
        group[name] = count({"$and": [{"$gt": [expires, now]}, {"$lte": [expires, now + horizon]}]})
    return [{"$group": group}]


def parse_ttl_outlook(rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], now: datetime) -> TTLOutlookReport:
    doc = _first(rows)
    return TTLOutlookReport(
        prefix=tuple(prefix),
        now=as_utc(now),
        total=_int(doc, "total"),
        never=_int(doc, "never"),
        expired=_int(doc, "expired"),
        within_hour=_int(doc, "within_hour"),
        within_day=_int(doc, "within_day"),
        within_week=_int(doc, "within_week"),
    )


def ttl_outlook(store: Aggregator, prefix: tuple[str, ...], *, now: datetime | None = None) -> TTLOutlookReport:
    now = as_utc(now or _utcnow())
    return parse_ttl_outlook(store.aggregate(tuple(prefix), ttl_outlook_pipeline(now)), tuple(prefix), now)


# --------------------------------------------------------------------------- (e) value breakdown

_FIELD_SEGMENT = re.compile(r"[^$.\x00][^.\x00]*")


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


def check_value_field(field_path: str) -> str:
    """A dotted path inside ``value`` (``kind``, ``meta.source``): no ``$``, NUL or empty parts."""
    if not isinstance(field_path, str) or not field_path:
        raise ValueError(f"the field must be a non-empty string such as 'kind', got {field_path!r}")
    for part in field_path.split("."):
        if not _FIELD_SEGMENT.fullmatch(part) or "$" in part:
            raise ValueError(
                f"invalid value field {field_path!r}: use a dotted path of field names inside value "
                "(e.g. 'kind' or 'meta.source'), with no '$', NUL or empty parts"
            )
    return field_path


def _type_rank(value: Any) -> int:
    # MongoDB's sort order of BSON types, roughly: null, numbers, strings, objects, arrays, bools, dates.
    if value is None:
        return 0
    if isinstance(value, bool):
        return 5
    if isinstance(value, (int, float)):
        return 1
    if isinstance(value, str):
        return 2
    if isinstance(value, Mapping):
        return 3
    if isinstance(value, (list, tuple)):
        return 4
    return 6


def value_breakdown_pipeline(field_path: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Items per value of ``value.<field_path>``, most first; missing and null count as null.

    Output: one document ``{top: [{_id: value, items}], total: [{values, items}]}``. Among
    equal counts the server orders values by BSON type then value; mongomock orders values
    of different types differently, so with ``limit`` a tie across types may cut differently.
    """
    path = "$value." + check_value_field(field_path)
    _check_limit(limit, "limit")
    return [
        {"$group": {"_id": {"$ifNull": [path, None]}, "items": {"$sum": 1}}},
        {
            "$facet": {
                "top": [{"$sort": {"items": -1, "_id": 1}}, {"$limit": limit}],
                "total": [{"$group": {"_id": None, "values": {"$sum": 1}, "items": {"$sum": "$items"}}}],
            }
        },
    ]


def parse_value_breakdown(
    rows: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], field_path: str
) -> BreakdownReport:
    top = [BreakdownRow(r.get("_id"), _int(r, "items")) for r in _facet(rows, "top")]
    top.sort(key=lambda r: (-r.items, _type_rank(r.value), repr(r.value)))
    total = _first(_facet(rows, "total"))
    return BreakdownReport(
        prefix=tuple(prefix),
        field=field_path,
        rows=tuple(top),
        total_items=_int(total, "items"),
        distinct_values=_int(total, "values"),
    )


def value_breakdown(
    store: Aggregator, prefix: tuple[str, ...], field_path: str = "kind", *, limit: int = 50
) -> BreakdownReport:
    """Items per value of ``value.<field_path>`` (e.g. ``kind`` -> ``$value.kind``)."""
    pipeline = value_breakdown_pipeline(field_path, limit=limit)
    return parse_value_breakdown(store.aggregate(tuple(prefix), pipeline), tuple(prefix), field_path)


# --------------------------------------------------------------------------- all at once


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


@dataclass(frozen=True)
class ReportPlan:
    """The pipelines of every report, and how to read their outputs back (no I/O).

    ``run`` with a sync store, ``arun`` with an async one; both send the same pipelines.
    """

    prefix: tuple[str, ...]
    now: datetime
    level: int | None = None
    period: Period = "week"
    stale_days: float = 30
    oldest: int = 10
    breakdown_field: str | None = "kind"
    limit: int = 50
    cutoff: datetime = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", _check_prefix(self.prefix))
        object.__setattr__(self, "now", as_utc(self.now))
        object.__setattr__(self, "cutoff", _cutoff(self.now, self.stale_days))

    @property
    def namespace_level(self) -> int:
        return len(self.prefix) if self.level is None else self.level

    def pipelines(self) -> dict[str, list[dict[str, Any]]]:
        out = {
            "namespaces": namespace_counts_pipeline(self.namespace_level, limit=self.limit),
            "growth": growth_pipeline(self.period),
            "stale_summary": stale_summary_pipeline(self.cutoff),
            "stale_oldest": stale_oldest_pipeline(self.cutoff, self.oldest),
            "ttl": ttl_outlook_pipeline(self.now),
        }
        if self.breakdown_field is not None:
            out["breakdown"] = value_breakdown_pipeline(self.breakdown_field, limit=self.limit)
        return out

    def parse(self, outputs: Mapping[str, Sequence[Mapping[str, Any]]]) -> ReportBundle:
        p = self.prefix
        return ReportBundle(
            prefix=p,
            generated_at=self.now,
            namespaces=parse_namespace_counts(outputs["namespaces"], p, self.namespace_level),
            growth=parse_growth(outputs["growth"], p, self.period),
            stale=parse_stale(outputs["stale_summary"], outputs["stale_oldest"], p, self.stale_days, self.cutoff),
            ttl=parse_ttl_outlook(outputs["ttl"], p, self.now),
            breakdown=(
                parse_value_breakdown(outputs["breakdown"], p, self.breakdown_field)
                if self.breakdown_field is not None
                else None
            ),
        )

    def run(self, store: Aggregator) -> ReportBundle:
        return self.parse({name: store.aggregate(self.prefix, pl) for name, pl in self.pipelines().items()})

    async def arun(self, store: AsyncAggregator) -> ReportBundle:
        pipelines = self.pipelines()
        results = await asyncio.gather(*(store.aaggregate(self.prefix, pl) for pl in pipelines.values()))
        return self.parse(dict(zip(pipelines, results, strict=True)))


def collect_reports(
    store: Aggregator,
    prefix: tuple[str, ...] = (),
    *,
    level: int | None = None,
    period: Period = "week",
    stale_days: float = 30,
    breakdown_field: str | None = "kind",
    limit: int = 50,
    now: datetime | None = None,
) -> ReportBundle:
    """Run every report for ``prefix`` (what ``mongostore stats`` shows)."""
    plan = ReportPlan(tuple(prefix), now or _utcnow(), level=level, period=period, stale_days=stale_days,
                      breakdown_field=breakdown_field, limit=limit, oldest=min(limit, 10))
    return plan.run(store)


async def acollect_reports(
    store: AsyncAggregator,
    prefix: tuple[str, ...] = (),
    *,
    level: int | None = None,
    period: Period = "week",
    stale_days: float = 30,
    breakdown_field: str | None = "kind",
    limit: int = 50,
    now: datetime | None = None,
) -> ReportBundle:
    """``collect_reports`` for an async store; the pipelines run concurrently."""
    plan = ReportPlan(tuple(prefix), now or _utcnow(), level=level, period=period, stale_days=stale_days,
                      breakdown_field=breakdown_field, limit=limit, oldest=min(limit, 10))
    return await plan.arun(store)
