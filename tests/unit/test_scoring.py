"""Recency-aware ranking (issue 36.4): the blend in Python and as an aggregation expression agree,
and ``index["recency"]`` is checked before any I/O."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import mongomock
import pytest

from mongostore import ConfigurationError
from mongostore.config import RecencySettings, index_settings
from mongostore.core.scoring import blend, blend_expression, by_recency
from mongostore.tools.embeddings import HashingEmbeddings

NOW = datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
REC = RecencySettings(half_life_days=7, weight=0.25)


def test_the_blend_is_the_documented_formula() -> None:
    assert blend(0.8, NOW, NOW, REC) == pytest.approx(0.75 * 0.8 + 0.25)
    assert blend(0.8, NOW - timedelta(days=7), NOW, REC) == pytest.approx(0.75 * 0.8 + 0.25 * 0.5)
    assert blend(0.8, NOW - timedelta(days=21), NOW, REC) == pytest.approx(0.75 * 0.8 + 0.25 * 0.125)
    assert blend(0.8, NOW + timedelta(days=3), NOW, REC) == blend(0.8, NOW, NOW, REC)  # a clock ahead: new
    assert blend(0.8, None, NOW, REC) == pytest.approx(0.75 * 0.8)  # no date: as old as can be
    naive = (NOW - timedelta(days=7)).replace(tzinfo=None)  # a client without tz_aware reads naive UTC
    assert blend(0.8, naive, NOW, REC) == blend(0.8, NOW - timedelta(days=7), NOW, REC)


def test_the_pipeline_expression_gives_the_python_blend() -> None:
    """What the Atlas page computes on the server is what the local paths compute (mongomock evaluates
    the expression; the read time's microseconds are cut as BSON cuts them)."""
    ages: list[Any] = [timedelta(0), timedelta(days=1.5), timedelta(days=30), timedelta(days=-2), None]
    coll = mongomock.MongoClient(tz_aware=True)["s"]["c"]
    for i, age in enumerate(ages):
        coll.insert_one({"_id": i, "score": 0.1 * i, **({"u": NOW - age} if age is not None else {})})
    got = coll.aggregate([{"$project": {"b": blend_expression("$score", "$u", NOW, REC)}}, {"$sort": {"_id": 1}}])
    stored = {d["_id"]: d.get("u") for d in coll.find()}
    for doc in got:
        assert doc["b"] == pytest.approx(blend(0.1 * doc["_id"], stored[doc["_id"]], NOW, REC), rel=1e-12)


def test_by_recency_orders_best_first_ties_by_id() -> None:
    updated = {"a": NOW - timedelta(days=30), "b": NOW, "c": NOW}
    order = by_recency([("a", 0.9), ("b", 0.5), ("c", 0.5)], updated, NOW, RecencySettings(1, 0.5))
    assert [iid for iid, _ in order] == ["b", "c", "a"]


@pytest.mark.parametrize(
    ("recency", "message"),
    [
        ({"half_life_days": 7}, "needs 'weight'"),
        ({"weight": 0.2}, "needs 'half_life_days'"),
        ({"half_life_days": 0, "weight": 0.2}, "must be positive"),
        ({"half_life_days": 7, "weight": 1.5}, "from 0"),
        ({"half_life_days": 7, "weight": float("nan")}, "finite"),
        ({"half_life_days": "7", "weight": 0.2}, "finite number"),
        ({"half_life_days": 7, "weight": 0.2, "decay": 1}, "unknown key"),
        (0.2, "must be a dict"),
    ],
)
def test_bad_recency_settings_are_refused_by_name(recency: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        index_settings({"dims": 8, "embed": HashingEmbeddings(8), "recency": recency})
    assert "index['recency']" in str(info.value)


def test_a_zero_weight_is_no_recency_at_all() -> None:
    settings = index_settings({"dims": 8, "embed": HashingEmbeddings(8), "recency": {"half_life_days": 7, "weight": 0}})
    assert settings is not None and settings.recency is None
    settings = index_settings({"dims": 8, "embed": HashingEmbeddings(8), "recency": {"half_life_days": 7, "weight": 1}})
    assert settings is not None and settings.recency == RecencySettings(7.0, 1.0)
