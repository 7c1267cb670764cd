"""The builders for a sharded cluster (``core.queries.sharding``) and what a sharded plan sends."""

from __future__ import annotations

import random
import re
from datetime import datetime, timezone
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from mongostore.config import index_settings
from mongostore.core import queries as q
from mongostore.core.codec import item_id, namespace_path, vector_id
from mongostore.core.plan import PlanContext, batch_plan
from mongostore.core.scope import scoped_pipeline
from mongostore.core.steps import Aggregate, Embed, Find, Parallel, Probe, Step, Write, WriteOutcome
from mongostore.tools.embeddings import HashingEmbeddings

NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


def test_prefix_range_is_the_string_range_of_the_path() -> None:
    assert q.prefix_range(("users", "alice")) == {"$gte": "users.alice.", "$lt": "users.alice/"}
    assert q.prefix_range(()) is None
    assert q.shard_range_filter(("a",)) == {"_id": {"$gte": "a.", "$lt": "a/"}}
    assert q.shard_range_filter(("a",), "vectors") == {"item_id": {"$gte": "a.", "$lt": "a/"}}
    assert q.shard_range_filter(()) == {}


def test_the_range_holds_exactly_the_ids_under_the_prefix() -> None:
    """``_id`` in ``[P, P[:-1] + "/")`` iff the item's namespace starts with the prefix, as
    UTF-8 bytes compare (MongoDB's simple collation), for labels with every kind of character."""
    rng = random.Random(27)
    alphabet = ["a", "b", "-", "/", "0", "~", " ", "é", "\u00ff", "z", "A", "\U0001f600", "!", "+"]

    def label() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))

    namespaces = [tuple(label() for _ in range(rng.randint(1, 3))) for _ in range(300)]
    ids = [(ns, item_id(ns, label())) for ns in namespaces]
    for prefix in {ns[: rng.randint(1, len(ns))] for ns in namespaces[:80]}:
        bounds = q.prefix_range(prefix)
        assert bounds is not None
        lo, hi = bounds["$gte"].encode(), bounds["$lt"].encode()
        for ns, iid in ids:
            inside = lo <= iid.encode() < hi
            assert inside == (ns[: len(prefix)] == prefix), (prefix, ns)
            vid = vector_id(iid, "0123456789abcdef01234567")
            assert (lo <= vid.encode() < hi) == inside


def test_replica_set_filters_are_unchanged() -> None:
    plain = q.search_filter(("a",), {"x": 1}, None)
    assert plain["$and"][0] == {"path": {"$regex": "^a\\."}} and len(plain["$and"]) == 2
    assert q.search_filter(("a",), {"x": 1}, None, sharded=True)["$and"] == [
        plain["$and"][0],
        {"_id": {"$gte": "a.", "$lt": "a/"}},
        plain["$and"][1],
    ]
    assert q.search_filter(("a",), None, None, sharded=True) == {
        "$and": [{"path": {"$regex": "^a\\."}}, {"_id": {"$gte": "a.", "$lt": "a/"}}]
    }
    assert q.vector_candidates_filter(("a",), None) == {"ns_prefixes": "a."}
    assert q.vector_candidates_filter(("a",), None, sharded=True) == {
        "$and": [{"item_id": {"$gte": "a.", "$lt": "a/"}}, {"ns_prefixes": "a."}]
    }
    assert q.vector_candidates_filter((), None, sharded=True) == {}


def test_item_indexes_on_a_cluster() -> None:
    assert [s.unique for s in q.item_indexes()] == [True, False, False]
    assert [s.unique for s in q.item_indexes(sharded=True)] == [False, False, False]
    assert [s.keys for s in q.item_indexes(sharded=True)] == [s.keys for s in q.item_indexes()]


@pytest.mark.parametrize(
    ("conditions", "prefix"),
    [
        ([MatchCondition("prefix", ("a", "b"))], ("a", "b")),
        ([MatchCondition("prefix", ("a", "*", "c"))], ("a",)),
        ([MatchCondition("prefix", ("*", "c"))], ()),
        ([MatchCondition("suffix", ("c",))], ()),
        ([MatchCondition("suffix", ("c",)), MatchCondition("prefix", ("x",))], ("x",)),
        (None, ()),
    ],
)
def test_literal_prefix_of_list_namespaces_conditions(conditions: Any, prefix: tuple[str, ...]) -> None:
    assert q.literal_prefix(conditions) == prefix


def test_list_namespaces_pipeline_on_a_cluster() -> None:
    conds = [MatchCondition("prefix", ("a", "*"))]
    plain = q.list_namespaces_pipeline(conds, None, None, 0, 10)
    sharded = q.list_namespaces_pipeline(conds, None, None, 0, 10, sharded=True)
    assert plain[1:] == sharded[1:]
    assert sharded[0] == {"$match": {"$and": [{"_id": {"$gte": "a.", "$lt": "a/"}}, plain[0]["$match"]]}}
    unbounded = q.list_namespaces_pipeline(None, None, None, 0, 10, sharded=True)
    assert unbounded == q.list_namespaces_pipeline(None, None, None, 0, 10)


def test_scoped_pipeline_on_a_cluster() -> None:
    assert scoped_pipeline(("a",), [])[0] == {"$match": {"path": {"$regex": "^a\\."}}}
    assert scoped_pipeline(("a",), [], sharded=True)[0] == {
        "$match": {"path": {"$regex": "^a\\."}, "_id": {"$gte": "a.", "$lt": "a/"}}
    }


def test_targeted_writes_add_item_id_to_vector_writes_only() -> None:
    ns, key = ("u", "a"), "k"
    iid = item_id(ns, key)
    vec = q.put_vector_request(ns, key, "text", "h", [0.5, 0.5], {}, NOW, None)
    item = q.put_item_request(ns, key, {"text": "x"}, NOW, None, ["h"])
    prune = q.stale_vectors_request(ns, key, ["h"], NOW)
    out = q.targeted_writes([vec, item, prune])
    assert out[0].filter == {"_id": vector_id(iid, "h"), "item_id": iid}
    assert out[0].update == vec.update and out[0].upsert
    assert out[1] is item and out[2] is prune
    assert vec.filter == {"_id": vector_id(iid, "h")}  # the request given is not changed


@pytest.mark.parametrize(
    ("role", "key", "verdict"),
    [
        ("items", None, "unsharded"),
        ("items", {"_id": 1}, "recommended"),
        ("items", {"_id": 1.0}, "recommended"),
        ("items", {"_id": "hashed"}, "supported"),
        ("items", {"path": 1, "key": 1}, "unsupported"),
        ("vectors", {"item_id": 1}, "recommended"),
        ("vectors", {"item_id": "hashed"}, "supported"),
        ("vectors", {"_id": 1}, "unsupported"),
        ("vectors", {"item_id": 1, "_id": 1}, "supported"),  # refineCollectionShardKey of {item_id: 1}
        ("vectors", {"item_id": "hashed", "_id": 1}, "supported"),
        ("vectors", {"item_id": 1, "field": 1}, "unsupported"),  # not carried by the store's writes
        ("vectors", {"_id": 1, "item_id": 1}, "unsupported"),  # prefix reads bound item_id, not _id
        ("items", {"_id": 1, "path": 1}, "unsupported"),
    ],
)
def test_shard_key_verdicts(role: Any, key: Any, verdict: str) -> None:
    got, advice = q.shard_key_verdict(role, key)
    assert got == verdict and advice
    if verdict == "unsupported":
        assert "reshardCollection" in advice


# --------------------------------------------------------------------------- plans


def run(ops: list[Any], sharded: bool, stored: list[dict[str, Any]] | None = None) -> list[Step]:
    index = index_settings({"dims": 4, "embed": HashingEmbeddings(4), "fields": ["text"]})
    ctx = PlanContext("memories", index, None, NOW, clock=lambda: NOW, ranges=sharded)
    plan = batch_plan(ops, ctx)
    steps: list[Step] = []

    def answer(step: Step) -> Any:
        if isinstance(step, Parallel):
            return [answer(s) for s in step.steps]
        if isinstance(step, Probe):
            from mongostore.core.steps import Capabilities

            return Capabilities("7.0.12", False, False, False, sharded=sharded)
        if isinstance(step, Embed):
            return [[0.5, 0.5, 0.5, 0.5] for _ in step.texts]
        if isinstance(step, Write):
            return WriteOutcome()
        if isinstance(step, Find) and step.role == "vectors" and stored is not None:
            return stored
        return []

    try:
        step = next(plan)
        while True:
            steps.append(step)
            step = plan.send(answer(step))
    except StopIteration:
        return steps


def flat(steps: list[Step]) -> list[Step]:
    out: list[Step] = []
    for s in steps:
        out.extend(flat(list(s.steps)) if isinstance(s, Parallel) else [s])
    return out


def _clauses(filt: dict[str, Any]) -> list[dict[str, Any]]:
    return list(filt["$and"]) if set(filt) == {"$and"} else [filt]


def test_a_sharded_batch_targets_and_a_replica_set_batch_is_unchanged() -> None:
    ops = [
        PutOp(("u", "a"), "k", {"text": "hello"}),
        GetOp(("u", "a"), "k"),
        SearchOp(("u",), filter={"n": 1}),
        SearchOp(("u",), query="hello"),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("u",)),)),
    ]
    plain, sharded = flat(run(ops, False)), flat(run(ops, True))
    assert [type(s) for s in plain] == [type(s) for s in sharded]
    rng = {"$gte": "u.", "$lt": "u/"}
    diffs = [(a, b) for a, b in zip(plain, sharded, strict=True) if a != b]
    for a, b in diffs:
        if isinstance(a, Find) and isinstance(b, Find):
            field = "_id" if a.role == "items" else "item_id"
            assert [c for c in b.filter["$and"] if c != {field: rng}] == _clauses(a.filter)
        elif isinstance(a, Aggregate) and isinstance(b, Aggregate):
            assert b.pipeline[1:] == a.pipeline[1:]
            assert [c for c in b.pipeline[0]["$match"]["$and"] if c != {"_id": rng}] == _clauses(
                a.pipeline[0]["$match"]
            )
        else:
            assert isinstance(a, Write) and isinstance(b, Write)
            for ra, rb in zip(a.requests, b.requests, strict=True):
                if ra.role == "vectors" and "_id" in ra.filter:
                    assert rb.filter == {**ra.filter, "item_id": item_id(("u", "a"), "k")}
                else:
                    assert ra == rb
    kinds = {type(a).__name__ for a, _ in diffs}
    assert kinds == {"Find", "Aggregate", "Write"}, kinds
    # the sharded write's vector upsert names its shard key
    [write] = [s for s in sharded if isinstance(s, Write)]
    assert all("item_id" in r.filter for r in write.requests if r.role == "vectors")
    assert namespace_path(("u", "a")) + "\x00k" == item_id(("u", "a"), "k")
    assert re.escape("u.") == "u\\."
