"""Analytics: scoped pipelines (the allow-list), every report's exact pipeline, and every
report end-to-end on mongomock with documents of the stored shape and known timestamps."""

from __future__ import annotations

import html
import os
import re
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.errors import PipelineError
from mongostore.tools.analytics import (
    FORBIDDEN_STAGES,
    BreakdownRow,
    GrowthPoint,
    NamespaceCount,
    ReportPlan,
    StaleItem,
    acollect_reports,
    collect_reports,
    growth,
    growth_pipeline,
    namespace_counts,
    namespace_counts_pipeline,
    parse_growth,
    parse_stale,
    scoped_pipeline,
    stale_items,
    stale_oldest_pipeline,
    stale_summary_pipeline,
    ttl_outlook,
    ttl_outlook_pipeline,
    value_breakdown,
    value_breakdown_pipeline,
)
from mongostore.tools.report import render_html, render_text

UTC = timezone.utc
NOW = datetime(2024, 6, 15, 12, 0, tzinfo=UTC)


def d(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def item(
    ns: tuple[str, ...],
    key: str,
    created: datetime,
    updated: datetime | None = None,
    expires: datetime | None = None,
    **value: Any,
) -> dict[str, Any]:
    """A document of the stored shape (DESIGN.md section 4)."""
    path = "".join(label + "." for label in ns)
    doc: dict[str, Any] = {
        "_id": path + "\x00" + key,
        "namespace": list(ns),
        "path": path,
        "depth": len(ns),
        "key": key,
        "value": value,
        "created_at": created,
        "updated_at": updated or created,
    }
    if expires is not None:
        doc["expires_at"] = expires
        doc["ttl_minutes"] = 60.0
    return doc


# Under ("users",): 7 items in 5 namespaces. Outside: ("teams", ...) and ("usersx", ...).
DOCS = [
    item(("users", "alice", "memories"), "k1", d(2024, 6, 1, 10), expires=NOW + timedelta(days=30),
         kind="fact", meta={"source": "chat"}),
    item(("users", "alice", "memories"), "k2", d(2024, 6, 1, 11), d(2024, 6, 10, 9),
         kind="fact", meta={"source": "chat"}),
    item(("users", "alice", "prefs"), "p1", d(2024, 5, 1), kind="pref"),
    item(("users", "bob", "memories"), "b1", d(2024, 4, 20), expires=NOW + timedelta(minutes=30), kind="episode"),
    item(("users", "bob", "memories"), "b2", d(2024, 6, 14), expires=NOW + timedelta(hours=5)),
    item(("users", "carol"), "c1", d(2024, 6, 15, 8), expires=NOW + timedelta(days=3),
         kind="fact", meta={"source": "email"}),
    item(("users",), "u0", d(2024, 6, 12), expires=NOW - timedelta(hours=1), kind=3),
    item(("teams", "x", "memories"), "t1", d(2024, 1, 1), kind="fact"),
    item(("usersx", "y"), "x1", d(2024, 1, 2), kind="fact"),
]


class CollAgg:
    """The store's aggregate, minus the store: scope, check, run."""

    def __init__(self, coll: Any, now: datetime | None = None) -> None:
        self.coll = coll
        self.now = now
        self.sent: list[list[dict[str, Any]]] = []

    def aggregate(self, prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        full = scoped_pipeline(prefix, pipeline, now=self.now)
        self.sent.append(full)
        return list(self.coll.aggregate(full))


class AsyncCollAgg(CollAgg):
    async def aaggregate(self, prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.aggregate(prefix, pipeline)


@pytest.fixture
def coll() -> Any:
    c = in_memory_collection(collection_name="analytics")
    c.insert_many([dict(doc) for doc in DOCS])
    return c


@pytest.fixture
def agg(coll: Any) -> CollAgg:
    return CollAgg(coll)


# --------------------------------------------------------------------------- scoped_pipeline


def test_scope_match_comes_first_with_anchored_option_free_regex() -> None:
    user = [{"$group": {"_id": "$value.kind", "n": {"$sum": 1}}}, {"$sort": {"n": -1}}]
    out = scoped_pipeline(("users", "a+b"), user)
    assert out == [{"$match": {"path": {"$regex": r"^users\.a\+b\."}}}, *user]
    regex = out[0]["$match"]["path"]
    assert set(regex) == {"$regex"}  # no $options: the server scans only the index range
    assert isinstance(regex["$regex"], str) and regex["$regex"].startswith("^")
    assert out[1] is not user[0]  # stages are copied, the caller's list is not reused


def test_scope_empty_prefix_and_omit_expired() -> None:
    assert scoped_pipeline((), [{"$count": "n"}]) == [{"$match": {}}, {"$count": "n"}]
    assert scoped_pipeline(("users",), [], now=NOW) == [
        {"$match": {"path": {"$regex": r"^users\."}, "expires_at": {"$not": {"$lte": NOW}}}}
    ]


@pytest.mark.parametrize(
    "pipeline",
    [
        [{"$match": {"value.kind": "fact"}}, {"$project": {"key": 1}}, {"$addFields": {"x": 1}}, {"$set": {"y": 2}}],
        [{"$unwind": "$namespace"}, {"$group": {"_id": "$namespace", "n": {"$sum": 1}}}, {"$sort": {"n": -1}}],
        [{"$skip": 1}, {"$limit": 2}, {"$count": "n"}],
        [{"$bucket": {"groupBy": "$depth", "boundaries": [0, 2, 10]}}],
        [{"$facet": {"a": [{"$count": "n"}], "b": [{"$sortByCount": "$key"}]}}],
        [{"$replaceRoot": {"newRoot": "$value"}}, {"$replaceWith": "$$ROOT"}, {"$unset": "x"}],
        [{"$sample": {"size": 1}}, {"$setWindowFields": {"sortBy": {"updated_at": 1}, "output": {}}}],
        [{"$bucketAuto": {"groupBy": "$depth", "buckets": 2}}, {"$redact": "$$KEEP"}],
        [{"$match": {"$expr": {"$gt": ["$updated_at", "$created_at"]}}}],
    ],
)
def test_allowed_pipelines_pass(pipeline: list[dict[str, Any]]) -> None:
    assert scoped_pipeline(("users",), pipeline)[1:] == pipeline


@pytest.mark.parametrize("name", sorted(FORBIDDEN_STAGES))
def test_forbidden_stage_is_rejected_naming_it(name: str) -> None:
    with pytest.raises(PipelineError, match=rf"stage 1 \({re.escape(name)}\) is not allowed"):
        scoped_pipeline(("users",), [{"$match": {}}, {name: {}}])


@pytest.mark.parametrize(
    "stage",
    [
        {"$out": "other"},
        {"$merge": {"into": "other"}},
        {"$unionWith": "other"},
        {"$lookup": {"from": "memories", "localField": "key", "foreignField": "key", "as": "x"}},
        {"$graphLookup": {"from": "other", "startWith": "$key", "connectFromField": "a",
                          "connectToField": "b", "as": "x"}},
        {"$collStats": {"count": {}}},
        {"$indexStats": {}},
        {"$currentOp": {}},
        {"$listSessions": {}},
        {"$documents": [{"a": 1}]},
        {"$changeStream": {}},
        {"$search": {"text": {"query": "x", "path": "value"}}},
        {"$vectorSearch": {"index": "v", "path": "embedding", "queryVector": [0.1], "limit": 1}},
        {"$foo": {}},
        {"$geoNear": {"near": [0, 0], "distanceField": "d"}},
    ],
)
def test_issue_list_of_forbidden_stages(stage: dict[str, Any]) -> None:
    (name,) = stage
    with pytest.raises(PipelineError, match=re.escape(name)) as exc:
        scoped_pipeline(("users",), [stage])
    assert isinstance(exc.value, ValueError)
    assert "stage 0" in str(exc.value)


def test_unknown_stage_mentions_the_allow_list() -> None:
    with pytest.raises(PipelineError, match=r"stage 0 \(\$foo\).*allow-list.*\$match"):
        scoped_pipeline((), [{"$foo": 1}])


def test_nested_facet_pipelines_are_checked() -> None:
    bad = [{"$facet": {"ok": [{"$count": "n"}], "sneaky": [{"$limit": 1}, {"$lookup": {"from": "x", "as": "y"}}]}}]
    with pytest.raises(PipelineError, match=r"stage 0 \(\$facet\) > 'sneaky' > stage 1 \(\$lookup\)"):
        scoped_pipeline(("users",), bad)
    deeper = [{"$facet": {"a": [{"$facet": {"b": [{"$out": "x"}]}}]}}]
    with pytest.raises(PipelineError, match=r"\$out"):
        scoped_pipeline(("users",), deeper)
    with pytest.raises(PipelineError, match="sub-pipelines"):
        scoped_pipeline(("users",), [{"$facet": []}])


@pytest.mark.parametrize(
    ("pipeline", "operator"),
    [
        ([{"$match": {"$where": "this.a == 1"}}], "$where"),
        ([{"$match": {"$and": [{"a": 1}, {"$where": "sleep(100)"}]}}], "$where"),
        ([{"$match": {"$expr": {"$function": {"body": "return 1", "args": [], "lang": "js"}}}}], "$function"),
        ([{"$addFields": {"x": {"$cond": [True, {"$function": {"body": "f", "args": [], "lang": "js"}}, 0]}}}],
         "$function"),
        ([{"$group": {"_id": None, "x": {"$accumulator": {"init": "f", "accumulate": "g", "merge": "h",
                                                            "lang": "js", "accumulateArgs": []}}}}], "$accumulator"),
        ([{"$project": {"l": [{"deep": [{"$where": 1}]}]}}], "$where"),
        ([{"$facet": {"f": [{"$match": {"$or": [{"$where": "1"}]}}]}}], "$where"),
    ],
)
def test_javascript_operators_rejected_anywhere(pipeline: list[dict[str, Any]], operator: str) -> None:
    with pytest.raises(PipelineError, match=re.escape(operator)):
        scoped_pipeline(("users",), pipeline)


@pytest.mark.parametrize(
    "pipeline",
    [{"$match": {}}, "[]", [{"$match": {}, "$limit": 1}], [{}], ["$match"], [{"match": {}}]],
)
def test_malformed_pipelines(pipeline: Any) -> None:
    with pytest.raises(PipelineError):
        scoped_pipeline(("users",), pipeline)


@pytest.mark.parametrize("prefix", ["users", ("a.b",), ("a", ""), ("a\x00",), (1,)])
def test_bad_prefix(prefix: Any) -> None:
    with pytest.raises(ValueError, match="namespace prefix"):
        scoped_pipeline(prefix, [])


def test_user_pipeline_runs_only_inside_the_scope(agg: CollAgg) -> None:
    out = agg.aggregate(
        ("users",),
        [
            {"$group": {"_id": {"user": {"$arrayElemAt": ["$namespace", 1]}, "kind": "$value.kind"}, "n": {"$sum": 1}}},
            {"$match": {"_id.kind": "fact"}},
            {"$sort": {"n": -1, "_id.user": 1}},
        ],
    )
    assert out == [
        {"_id": {"user": "alice", "kind": "fact"}, "n": 2},
        {"_id": {"user": "carol", "kind": "fact"}, "n": 1},
    ]
    assert agg.aggregate(("users", "alice"), [{"$count": "n"}]) == [{"n": 3}]
    assert agg.aggregate((), [{"$count": "n"}]) == [{"n": len(DOCS)}]
    # The prefix ends at a label boundary: ("users",) never matches ("usersx", ...).
    assert agg.aggregate(("usersx",), [{"$count": "n"}]) == [{"n": 1}]
    assert agg.aggregate(("user",), [{"$count": "n"}]) == [{"n": 0}]


def test_omit_expired_leaves_expired_items_out(coll: Any) -> None:
    assert CollAgg(coll, now=NOW).aggregate(("users",), [{"$count": "n"}]) == [{"n": 6}]


# --------------------------------------------------------------------------- exact pipelines


def test_namespace_counts_pipeline_exact() -> None:
    assert namespace_counts_pipeline(1, limit=5) == [
        {"$group": {"_id": "$path", "items": {"$sum": 1}}},
        {
            "$group": {
                "_id": {"$ifNull": [{"$arrayElemAt": [{"$split": ["$_id", "."]}, 1]}, ""]},
                "items": {"$sum": "$items"},
                "namespaces": {"$sum": 1},
            }
        },
        {
            "$facet": {
                "top": [{"$sort": {"items": -1, "_id": 1}}, {"$limit": 5}],
                "total": [
                    {"$group": {"_id": None, "labels": {"$sum": 1}, "items": {"$sum": "$items"},
                                "namespaces": {"$sum": "$namespaces"}}}
                ],
            }
        },
    ]
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="level"):
            namespace_counts_pipeline(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        namespace_counts_pipeline(0, limit=0)


@pytest.mark.parametrize(("period", "fmt"), [("day", "%Y-%m-%d"), ("week", "%G-W%V"), ("month", "%Y-%m")])
def test_growth_pipeline_exact(period: Any, fmt: str) -> None:
    assert growth_pipeline(period) == [
        {
            "$facet": {
                "created": [
                    {"$group": {"_id": {"$dateToString": {"format": fmt, "date": "$created_at"}}, "n": {"$sum": 1}}}
                ],
                "updated": [
                    {
                        "$group": {
                            "_id": {"$dateToString": {"format": fmt, "date": "$updated_at"}},
                            "n": {"$sum": {"$cond": [{"$gt": ["$updated_at", "$created_at"]}, 1, 0]}},
                        }
                    }
                ],
            }
        }
    ]
    with pytest.raises(ValueError, match="period"):
        growth_pipeline("year")  # type: ignore[arg-type]


def test_stale_pipelines_exact() -> None:
    cutoff = d(2024, 5, 16, 12)
    assert stale_summary_pipeline(cutoff) == [
        {"$group": {"_id": None, "total": {"$sum": 1},
                    "stale": {"$sum": {"$cond": [{"$lt": ["$updated_at", cutoff]}, 1, 0]}}}}
    ]
    assert stale_oldest_pipeline(cutoff, 3) == [
        {"$match": {"updated_at": {"$lt": cutoff}}},
        {"$sort": {"updated_at": 1, "path": 1, "key": 1}},
        {"$limit": 3},
        {"$project": {"_id": 0, "namespace": 1, "key": 1, "updated_at": 1}},
    ]


def test_ttl_outlook_pipeline_exact() -> None:
    e = {"$ifNull": ["$expires_at", None]}

    def within(delta: timedelta) -> dict[str, Any]:
        return {"$sum": {"$cond": [{"$and": [{"$gt": [e, NOW]}, {"$lte": [e, NOW + delta]}]}, 1, 0]}}

    assert ttl_outlook_pipeline(NOW) == [
        {
            "$group": {
                "_id": None,
                "total": {"$sum": 1},
                "never": {"$sum": {"$cond": [{"$eq": [e, None]}, 1, 0]}},
                "expired": {"$sum": {"$cond": [{"$and": [{"$ne": [e, None]}, {"$lte": [e, NOW]}]}, 1, 0]}},
                "within_hour": within(timedelta(hours=1)),
                "within_day": within(timedelta(days=1)),
                "within_week": within(timedelta(days=7)),
            }
        }
    ]


def test_value_breakdown_pipeline_exact() -> None:
    assert value_breakdown_pipeline("meta.source", limit=7) == [
        {"$group": {"_id": {"$ifNull": ["$value.meta.source", None]}, "items": {"$sum": 1}}},
        {
            "$facet": {
                "top": [{"$sort": {"items": -1, "_id": 1}}, {"$limit": 7}],
                "total": [{"$group": {"_id": None, "values": {"$sum": 1}, "items": {"$sum": "$items"}}}],
            }
        },
    ]


@pytest.mark.parametrize("bad", ["", "$kind", "a.$b", "a..b", ".a", "a.", "k\x00", "a$b", None, 3])
def test_value_breakdown_field_is_validated(bad: Any) -> None:
    with pytest.raises(ValueError, match="field"):
        value_breakdown_pipeline(bad)


def test_report_pipelines_pass_the_allow_list_and_never_return_whole_documents() -> None:
    plan = ReportPlan(("users",), NOW)
    for name, pipeline in plan.pipelines().items():
        scoped_pipeline(("users",), pipeline)  # raises if a report used a refused stage
        last = next(iter(pipeline[-1]))
        assert last in ("$group", "$facet", "$project"), name
        assert "value" not in str(pipeline[-1].get("$project", {})), name


# --------------------------------------------------------------------------- end to end on mongomock


def test_namespace_counts_per_user(agg: CollAgg) -> None:
    report = namespace_counts(agg, ("users",))
    assert report.level == 1
    assert report.rows == (
        NamespaceCount("alice", 3, 2),
        NamespaceCount("bob", 2, 1),
        NamespaceCount(None, 1, 1),  # u0, directly in ("users",)
        NamespaceCount("carol", 1, 1),
    )
    assert (report.total_items, report.total_namespaces, report.total_labels) == (7, 5, 4)
    assert not report.truncated


def test_namespace_counts_levels_and_limit(agg: CollAgg) -> None:
    top = namespace_counts(agg, (), level=0)
    assert top.rows == (NamespaceCount("users", 7, 5), NamespaceCount("teams", 1, 1), NamespaceCount("usersx", 1, 1))
    deep = namespace_counts(agg, ("users",), level=2, limit=2)
    assert deep.rows == (NamespaceCount("memories", 4, 2), NamespaceCount(None, 2, 2))  # then "prefs" (1, 1)
    assert deep.truncated and deep.total_labels == 3 and deep.total_items == 7
    assert namespace_counts(agg, ("nobody",)).rows == ()
    assert namespace_counts(agg, ("nobody",)).total_items == 0


def test_growth_per_day(agg: CollAgg) -> None:
    report = growth(agg, ("users",), "day")
    points = {p.period: p for p in report.points}
    assert report.points[0].period == "2024-04-20" and report.points[-1].period == "2024-06-15"
    assert len(report.points) == 57  # gaps filled with zeros
    assert points["2024-04-20"] == GrowthPoint("2024-04-20", 1, 0, 1)
    assert points["2024-04-21"] == GrowthPoint("2024-04-21", 0, 0, 1)
    assert points["2024-06-01"] == GrowthPoint("2024-06-01", 2, 0, 4)
    assert points["2024-06-10"] == GrowthPoint("2024-06-10", 0, 1, 4)
    assert points["2024-06-15"] == GrowthPoint("2024-06-15", 1, 0, 7)
    assert sum(p.created for p in report.points) == 7
    assert sum(p.updated for p in report.points) == 1


def test_growth_per_iso_week_and_month(agg: CollAgg) -> None:
    weeks = growth(agg, ("users",), "week")
    assert [(p.period, p.created, p.updated, p.total) for p in weeks.points] == [
        ("2024-W16", 1, 0, 1),
        ("2024-W17", 0, 0, 1),
        ("2024-W18", 1, 0, 2),
        ("2024-W19", 0, 0, 2),
        ("2024-W20", 0, 0, 2),
        ("2024-W21", 0, 0, 2),
        ("2024-W22", 2, 0, 4),
        ("2024-W23", 0, 0, 4),
        ("2024-W24", 3, 1, 7),
    ]
    months = growth(agg, ("users",), "month")
    assert months.points == (
        GrowthPoint("2024-04", 1, 0, 1),
        GrowthPoint("2024-05", 1, 0, 2),
        GrowthPoint("2024-06", 5, 1, 7),
    )


def test_growth_iso_week_across_years_on_mongomock() -> None:
    coll = in_memory_collection(collection_name="weeks")
    coll.insert_many([
        item(("u",), "a", d(2020, 12, 22)),  # 2020-W52
        item(("u",), "b", d(2021, 1, 3, 23)),  # a Sunday: still ISO week 2020-W53
        item(("u",), "c", d(2021, 1, 4)),  # 2021-W01
        item(("u",), "e", d(2021, 12, 31), d(2022, 1, 2)),  # 2021-W52, updated in 2021-W52 too
    ])
    report = growth(CollAgg(coll), ("u",), "week")
    periods = [p.period for p in report.points]
    assert periods[:4] == ["2020-W52", "2020-W53", "2021-W01", "2021-W02"]
    assert periods[-1] == "2021-W52" and len(periods) == 2 + 52
    assert [p.created for p in report.points[:3]] == [1, 1, 1]
    assert report.points[-1] == GrowthPoint("2021-W52", 1, 1, 4)


def test_parse_growth_fills_month_gaps_across_years() -> None:
    rows = [{"created": [{"_id": "2023-11", "n": 2}, {"_id": "2024-02", "n": 1}], "updated": []}]
    assert [p.period for p in parse_growth(rows, (), "month").points] == ["2023-11", "2023-12", "2024-01", "2024-02"]
    # A real server returns [] for $count/$group over nothing, mongomock a zero row: both parse to empty.
    assert parse_growth([], (), "day").points == ()
    assert parse_growth([{"created": [], "updated": []}], (), "day").points == ()


def test_stale_items(agg: CollAgg) -> None:
    report = stale_items(agg, ("users",), 30, now=NOW, oldest=5)
    assert report.cutoff == d(2024, 5, 16, 12)
    assert (report.total, report.stale) == (7, 2)
    assert report.share == pytest.approx(2 / 7)
    assert report.oldest == (
        StaleItem(("users", "bob", "memories"), "b1", d(2024, 4, 20)),
        StaleItem(("users", "alice", "prefs"), "p1", d(2024, 5, 1)),
    )
    assert stale_items(agg, ("users",), 30, now=NOW, oldest=1).oldest[0].key == "b1"
    # Only namespace, key and updated_at come back for the oldest: never whole values.
    assert all(set(row) == {"namespace", "key", "updated_at"} for row in agg.coll.aggregate(agg.sent[-1]))
    nothing = stale_items(agg, ("nobody",), 30, now=NOW)
    assert (nothing.total, nothing.stale, nothing.share, nothing.oldest) == (0, 0, 0.0, ())
    with pytest.raises(ValueError, match="days"):
        stale_items(agg, ("users",), -1, now=NOW)


def test_ttl_outlook(agg: CollAgg) -> None:
    report = ttl_outlook(agg, ("users",), now=NOW)
    assert (report.total, report.never, report.expired) == (7, 2, 1)
    assert (report.within_hour, report.within_day, report.within_week, report.later) == (1, 2, 3, 1)


def test_ttl_outlook_with_omit_expired(coll: Any) -> None:
    report = ttl_outlook(CollAgg(coll, now=NOW), ("users",), now=NOW)
    assert (report.total, report.expired, report.never, report.later) == (6, 0, 2, 1)


def test_value_breakdown(agg: CollAgg) -> None:
    report = value_breakdown(agg, ("users",), "kind")
    assert report.rows == (
        BreakdownRow("fact", 3),
        BreakdownRow(None, 1),  # b2 has no kind
        BreakdownRow(3, 1),
        BreakdownRow("episode", 1),
        BreakdownRow("pref", 1),
    )
    assert (report.total_items, report.distinct_values, report.other_items) == (7, 5, 0)
    nested = value_breakdown(agg, ("users",), "meta.source")
    assert nested.rows == (BreakdownRow(None, 4), BreakdownRow("chat", 2), BreakdownRow("email", 1))
    top2 = value_breakdown(agg, ("users",), "kind", limit=2)
    assert top2.rows == (BreakdownRow("fact", 3), BreakdownRow(None, 1))
    assert top2.other_items == 3
    assert top2.table()[1][-1] == ["(other 3 values)", "3"]


def test_naive_datetimes_from_a_non_tz_aware_client_parse_as_utc() -> None:
    # pymongo without tz_aware=True returns naive UTC datetimes.
    naive = datetime(2024, 4, 20)
    report = parse_stale([{"total": 1, "stale": 1}], [{"namespace": ["u"], "key": "k", "updated_at": naive}],
                         ("u",), 30, datetime(2024, 5, 16, 12))
    assert report.oldest == (StaleItem(("u",), "k", d(2024, 4, 20)),)
    assert report.oldest[0].updated_at.tzinfo is not None and report.cutoff == d(2024, 5, 16, 12)


# --------------------------------------------------------------------------- all reports, text and HTML


def _check_bundle(bundle: Any) -> None:
    assert bundle.namespaces.total_items == 7
    assert bundle.growth.period == "week" and bundle.growth.points[-1].total == 7
    assert (bundle.stale.stale, bundle.stale.total) == (2, 7)
    assert bundle.ttl.within_week == 3
    assert bundle.breakdown is not None and bundle.breakdown.rows[0] == BreakdownRow("fact", 3)


def test_collect_reports(agg: CollAgg) -> None:
    bundle = collect_reports(agg, ("users",), now=NOW)
    _check_bundle(bundle)
    assert bundle.generated_at == NOW
    assert len(agg.sent) == 6
    no_breakdown = collect_reports(agg, ("users",), now=NOW, breakdown_field=None)
    assert no_breakdown.breakdown is None


async def test_acollect_reports(coll: Any) -> None:
    bundle = await acollect_reports(AsyncCollAgg(coll), ("users",), now=NOW)
    _check_bundle(bundle)


def test_render_text(agg: CollAgg) -> None:
    text = render_text(collect_reports(agg, ("users",), now=NOW))
    assert "mongostore stats for users" in text
    assert "2 of 7 (29%)" in text
    assert re.search(r"^alice\s+3\s+2$", text, re.M)
    assert re.search(r"^2024-W24\s+3\s+1\s+7$", text, re.M)
    # The TTL table has the chart's disjoint bins (not cumulative counts), summing to the total.
    for row, n in [("within an hour", 1), ("in 1 hour to 1 day", 1), ("in 1 day to 1 week", 1), ("never", 2)]:
        assert re.search(rf"^{row}\s+{n}$", text, re.M), row
    assert re.search(r"^total\s+7$", text, re.M)


def test_render_text_neutralises_terminal_escapes() -> None:
    coll = in_memory_collection(collection_name="ansi")
    coll.insert_one(item(("users", "\x1b[31mred"), "k\x07", d(2024, 1, 1), kind="\x1b]0;title\x07"))
    text = render_text(collect_reports(CollAgg(coll), ("users",), now=NOW))
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[31mred" in text


EVIL = "<script>alert(1)</script>"


def test_render_html_is_self_contained_and_escapes_user_data() -> None:
    coll = in_memory_collection(collection_name="evil")
    coll.insert_many([dict(doc) for doc in DOCS])
    coll.insert_one(item(("users", EVIL), '<img src=x onerror="alert(2)">', d(2024, 6, 2), kind='"><svg onload=x>'))
    page = render_html(collect_reports(CollAgg(coll), ("users",), now=NOW), title="Memories & <friends>")
    assert "<script" not in page.lower()
    assert "<img" not in page and "onerror=\"" not in page and "<svg onload" not in page
    assert html_escaped(EVIL) in page
    assert "Memories &amp; &lt;friends&gt;" in page
    assert not re.search(r"\b(?:src|href)\s*=", page)  # nothing to fetch
    assert "http://" not in page and "https://" not in page
    assert "Content-Security-Policy" in page
    for cls in ("chart growth", "chart namespaces", "chart stale", "chart ttl", "chart breakdown"):
        assert f'class="{cls}' in page


def html_escaped(text: str) -> str:
    return html.escape(text, quote=True)


def test_render_html_of_an_empty_prefix(agg: CollAgg) -> None:
    page = render_html(collect_reports(agg, ("nobody",), now=NOW), title="empty")
    assert "No items yet." in page and "0%" in page


# --------------------------------------------------------------------------- through the stores


def test_reports_through_mongostore() -> None:
    store = MongoStore.in_memory(ttl={"default_ttl": 60})
    store.setup()
    store.put(("users", "alice", "memories"), "a1", {"kind": "fact"})
    store.put(("users", "alice", "memories"), "a2", {"kind": "fact"})
    store.put(("users", "bob"), "b1", {"kind": "pref"}, ttl=None)
    store.put(("teams", "t"), "t1", {"kind": "fact"})
    bundle = collect_reports(store, ("users",))
    assert bundle.namespaces.rows == (NamespaceCount("alice", 2, 1), NamespaceCount("bob", 1, 1))
    assert (bundle.ttl.total, bundle.ttl.within_hour, bundle.ttl.never) == (3, 2, 1)
    assert bundle.breakdown is not None and bundle.breakdown.rows == (BreakdownRow("fact", 2), BreakdownRow("pref", 1))
    assert [(p.created, p.updated, p.total) for p in bundle.growth.points] == [(3, 0, 3)]
    assert (bundle.stale.total, bundle.stale.stale) == (3, 0)
    with pytest.raises(PipelineError, match=r"\$lookup"):
        store.aggregate(("users",), [{"$lookup": {"from": "x", "as": "y"}}])


async def test_reports_through_async_mongostore() -> None:
    from pymongo_async_mock import AsyncMongoMockClient

    store = AsyncMongoStore(AsyncMongoMockClient(tz_aware=True)["test"]["memories"])
    await store.setup()
    await store.aput(("users", "alice"), "a1", {"kind": "fact"})
    await store.aput(("users", "bob"), "b1", {})
    bundle = await acollect_reports(store, ("users",), stale_days=1)
    assert bundle.namespaces.total_items == 2 and bundle.namespaces.total_namespaces == 2
    assert bundle.breakdown is not None and bundle.breakdown.rows == (BreakdownRow(None, 1), BreakdownRow("fact", 1))
    assert (bundle.stale.total, bundle.stale.stale) == (2, 0)


# --------------------------------------------------------------------------- mongomock vs a real server

MONGODB_URI = os.environ.get("MONGODB_URI")


@pytest.mark.realserver
@pytest.mark.skipif(not MONGODB_URI, reason="needs a real MongoDB: set MONGODB_URI (e.g. `docker compose up -d`)")
def test_reports_agree_on_mongomock_and_a_real_server(coll: Any) -> None:
    from pymongo import MongoClient

    client: MongoClient[Any] = MongoClient(MONGODB_URI, tz_aware=True)
    db_name = f"mongostore_test_{uuid.uuid4().hex[:12]}"
    try:
        real = client[db_name]["memories"]
        real.insert_many([dict(doc) for doc in DOCS])
        for prefix in [(), ("users",), ("users", "alice"), ("nobody",)]:
            for now in (None, NOW):
                for period in ("day", "week", "month"):
                    kwargs: dict[str, Any] = {"now": NOW, "period": period}
                    fake = collect_reports(CollAgg(coll, now), prefix, **kwargs)
                    served = collect_reports(CollAgg(real, now), prefix, **kwargs)
                    assert served == fake, (prefix, now, period)
                fake_nested = value_breakdown(CollAgg(coll, now), prefix, "meta.source")
                assert value_breakdown(CollAgg(real, now), prefix, "meta.source") == fake_nested
    finally:
        client.drop_database(db_name)
        client.close()
