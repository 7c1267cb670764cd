"""How a search result's score is made from its similarity: the one place for rules beyond similarity.

``recency`` (``index["recency"]``) blends a result's score with its age, ``(1 - W) * score + W *
0.5 ** (age_days / H)``, age from the item's ``updated_at`` (an item updated in the future, a clock
ahead of ours, counts as new). The same rule in Python (``blend``, for the local paths) and as an
aggregation expression (``blend_expression``, for the Atlas pipeline), so every path orders alike.
Pure code, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from mongostore.config import RecencySettings
from mongostore.core.codec import as_utc

DAY_MS = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)


def _ms(value: datetime) -> int:
    """Milliseconds since the epoch, as BSON keeps a date (so Python and the server agree)."""
    return (as_utc(value) - _EPOCH) // _ONE_MS


def blend(score: float, updated_at: datetime | None, now: datetime, recency: RecencySettings) -> float:
    """``score`` blended with the age of an item last written at ``updated_at`` (None: as old as can be)."""
    freshness = 0.0
    if isinstance(updated_at, datetime):
        age_ms = max(0, _ms(now) - _ms(updated_at))
        freshness = 0.5 ** (age_ms / (recency.half_life_days * DAY_MS))
    return (1 - recency.weight) * score + recency.weight * freshness


def blend_expression(score: Any, updated_at: Any, now: datetime, recency: RecencySettings) -> dict[str, Any]:
    """``blend`` as an aggregation expression over ``score`` and ``updated_at`` (field paths or
    expressions), with ``now`` a literal date: ``$subtract`` of two dates is their milliseconds."""
    age_ms = {"$max": [0, {"$subtract": [now, updated_at]}]}
    freshness = {"$pow": [0.5, {"$divide": [age_ms, recency.half_life_days * DAY_MS]}]}
    fresh = {"$cond": [{"$ifNull": [updated_at, False]}, freshness, 0.0]}  # no date: as old as can be
    return {"$add": [{"$multiply": [1 - recency.weight, score]}, {"$multiply": [recency.weight, fresh]}]}


def by_recency(
    scores: Iterable[tuple[str, float]],
    updated: Mapping[str, datetime | None],
    now: datetime,
    recency: RecencySettings,
) -> list[tuple[str, float]]:
    """``(item id, score)`` pairs with each score blended, best first (ties by item id, as every path)."""
    blended = [(iid, blend(score, updated.get(iid), now, recency)) for iid, score in scores]
    return sorted(blended, key=lambda pair: (-pair[1], pair[0]))
