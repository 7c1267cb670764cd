"""The report pipelines: pure builders of the stages that follow the scoping ``$match`` (no I/O)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from mongostore.core.codec import as_utc

__all__ = [
    "PERIOD_FORMATS",
    "TTL_HORIZONS",
    "Period",
    "check_value_field",
    "growth_pipeline",
    "namespace_counts_pipeline",
    "stale_oldest_pipeline",
    "stale_summary_pipeline",
    "ttl_outlook_pipeline",
    "value_breakdown_pipeline",
]

Period = Literal["day", "week", "month"]

# mongomock 4.3 lacks $dateTrunc, $isoWeek/$isoWeekYear and $dateToString's `timezone`; $dateToString
# with these formats works on both (mongomock uses strftime, which knows %G and %V), in UTC, and the
# strings sort in time order.
PERIOD_FORMATS: Mapping[str, str] = {"day": "%Y-%m-%d", "week": "%G-W%V", "month": "%Y-%m"}

TTL_HORIZONS: Mapping[str, timedelta] = {
    "within_hour": timedelta(hours=1),
    "within_day": timedelta(days=1),
    "within_week": timedelta(days=7),
}

_FIELD_SEGMENT = re.compile(r"[^$.\x00][^.\x00]*")


def _check_limit(limit: int, what: str) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{what} must be a positive integer, got {limit!r}")
    return limit


def _check_period(period: str) -> Period:
    if period not in PERIOD_FORMATS:
        raise ValueError(f"period must be one of {', '.join(PERIOD_FORMATS)}, got {period!r}")
    return period  # type: ignore[return-value]


def _cutoff(now: datetime, days: float) -> datetime:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) or days < 0:
        raise ValueError(f"days must be a number >= 0, got {days!r}")
    return as_utc(now) - timedelta(days=days)


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


def namespace_counts_pipeline(level: int, *, limit: int = 100) -> list[dict[str, Any]]:
    """Items and distinct namespaces per label at ``level`` (0-based), most items first.

    Groups by ``path`` first (one row per namespace) and splits that path once per namespace;
    needing only ``path``, the server can answer from the ``{path: 1, ...}`` indexes. Output:
    ``{top: [{_id: label, items, namespaces}...], total: [{labels, items, namespaces}]}``; ``_id``
    is ``""`` for items whose namespace is shorter than ``level + 1`` (labels are never empty).
    """
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"level must be an integer >= 0 (0 = the first label), got {level!r}")
    label = {"$ifNull": [{"$arrayElemAt": [{"$split": ["$_id", "."]}, level]}, ""]}
    return [
        {"$group": {"_id": "$path", "items": {"$sum": 1}}},
        {"$group": {"_id": label, "items": {"$sum": "$items"}, "namespaces": {"$sum": 1}}},
        _top_and_total(limit, labels={"$sum": 1}, items={"$sum": "$items"}, namespaces={"$sum": "$namespaces"}),
    ]


def _top_and_total(limit: int, **total: Any) -> dict[str, Any]:
    """The ``$facet`` of the grouped rows: the ``limit`` largest (``top``) and their ``total``."""
    top = [{"$sort": {"items": -1, "_id": 1}}, {"$limit": _check_limit(limit, "limit")}]
    return {"$facet": {"top": top, "total": [{"$group": {"_id": None, **total}}]}}


def growth_pipeline(period: Period = "day") -> list[dict[str, Any]]:
    """Items created, and items last updated, per day / ISO week / month (UTC).

    Output: one document ``{created: [{_id: period, n}], updated: [{_id: period, n}]}``.
    """
    fmt = PERIOD_FORMATS[_check_period(period)]

    def per_period(date: str, n: Any) -> list[dict[str, Any]]:
        return [{"$group": {"_id": {"$dateToString": {"format": fmt, "date": date}}, "n": {"$sum": n}}}]

    rewritten = {"$cond": [{"$gt": ["$updated_at", "$created_at"]}, 1, 0]}
    return [{"$facet": {"created": per_period("$created_at", 1), "updated": per_period("$updated_at", rewritten)}}]


def stale_summary_pipeline(cutoff: datetime) -> list[dict[str, Any]]:
    """``{total, stale}``: items in scope, and those with ``updated_at < cutoff`` (index-covered)."""
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


def ttl_outlook_pipeline(now: datetime) -> list[dict[str, Any]]:
    """One ``$group`` of conditional sums on ``expires_at`` against literal dates.

    A missing ``expires_at`` is made an explicit null: null sorts before every date, so
    ``$lte: [null, now]`` is true and "expired" must exclude it (mongomock lacks ``$type``).
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


def value_breakdown_pipeline(field_path: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Items per value of ``value.<field_path>``, most first; missing and null count as null.

    Output: one document ``{top: [{_id: value, items}], total: [{values, items}]}``. Among
    equal counts the server orders values by BSON type then value; mongomock orders values
    of different types differently, so with ``limit`` a tie across types may cut differently.
    """
    path = "$value." + check_value_field(field_path)
    return [
        {"$group": {"_id": {"$ifNull": [path, None]}, "items": {"$sum": 1}}},
        _top_and_total(limit, values={"$sum": 1}, items={"$sum": "$items"}),
    ]
