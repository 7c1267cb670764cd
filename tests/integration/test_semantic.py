"""Semantic search on both paths: local numpy ranking and $vectorSearch (issue 3).

Every test runs on ``make_semantic_store``'s backends: mongomock (local ranking),
the Atlas test double (the store's real ``$vectorSearch`` pipeline, executed), and a
real server when MONGODB_URI is set. Atlas indexes are eventually consistent, so on
a real server ``settle`` polls until the expected number of items is searchable.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from conftest import MakeStore, StoreAPI, text_index
from langgraph.store.base import PutOp, SearchOp

from mongostore.core import queries as q
from mongostore.tools.embeddings import HashingEmbeddings

MEMORIES = {
    "pizza": "I like pizza with extra cheese",
    "lisbon": "My sister lives in Lisbon",
    "nurse": "I work as a nurse at night",
    "peanuts": "I am allergic to peanuts",
    "meeting": "The meeting moved to Friday",
}


async def settle(api: StoreAPI, prefix: tuple[str, ...], query: str, n: int, **kw: Any) -> list[Any]:
    """Search; on a real server poll until ``n`` scored results are visible (mongot lags writes)."""
    found = await api.search(prefix, query=query, limit=max(n, 10), **kw)
    if not api.backend.endswith("real"):
        return list(found)
    for _ in range(60):
        if sum(r.score is not None for r in found) >= n:
            break
        await asyncio.sleep(0.5)
        found = await api.search(prefix, query=query, limit=max(n, 10), **kw)
    return list(found)


async def seeded(make: MakeStore, **kw: Any) -> tuple[StoreAPI, HashingEmbeddings]:
    emb = HashingEmbeddings(384)
    api = await make(index=text_index(emb, ["text"], **kw))
    await api.batch([PutOp(("users", "alice", "memories"), k, {"text": t}) for k, t in MEMORIES.items()])
    await settle(api, ("users",), "pizza", len(MEMORIES))
    return api, emb


async def test_closest_memory_ranks_first(make_semantic_store: MakeStore) -> None:
    api, _ = await seeded(make_semantic_store)
    results = await api.search(("users", "alice"), query="does she like pizza?")
    assert results[0].key == "pizza"
    assert results[0].score is not None and results[0].score > 0.3
    assert (await api.search(("users", "alice"), query="who lives in Lisbon"))[0].key == "lisbon"


async def test_scores_are_cosine_similarity(make_semantic_store: MakeStore) -> None:
    api, emb = await seeded(make_semantic_store)
    results = await api.search(("users",), query=MEMORIES["nurse"], limit=10)
    assert results[0].key == "nurse"
    assert results[0].score == pytest.approx(1.0, abs=1e-6)
    q = emb.embed_query("does she like pizza?")
    d = emb.embed_query(MEMORIES["pizza"])
    expected = sum(a * b for a, b in zip(q, d, strict=True))
    top = (await api.search(("users",), query="does she like pizza?"))[0]
    assert top.score == pytest.approx(expected, abs=1e-6)
    assert all(r.score is None or -1.0 - 1e-9 <= r.score <= 1.0 + 1e-9 for r in results)


async def test_scope_never_leaks_to_sibling_namespaces(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"]))
    await api.batch(
        [
            PutOp(("users", "alice"), "a", {"text": "pizza at home"}),
            PutOp(("users", "alicex"), "x", {"text": "pizza pizza pizza"}),
            PutOp(("users", "bob"), "b", {"text": "pizza"}),
            PutOp(("users",), "root", {"text": "pizza"}),
        ]
    )
    await settle(api, ("users",), "pizza", 4)
    got = await api.search(("users", "alice"), query="pizza")
    assert [(r.namespace, r.key) for r in got] == [(("users", "alice"), "a")]
    every = await settle(api, (), "pizza", 4)
    assert {r.key for r in every} == {"a", "x", "b", "root"}


async def test_filters_hold_with_a_query(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"], filter_fields=["kind"]))
    ops = [
        PutOp(("u",), f"k{i}", {"text": f"pizza number {i}", "kind": "food" if i % 2 else "other", "n": i})
        for i in range(10)
    ]
    await api.batch(ops)
    await settle(api, ("u",), "pizza", 10)
    # kind is a declared filter field (pre-filter); n is not (post-filter on the items).
    got = await api.search(("u",), query="pizza", filter={"kind": "food", "n": {"$gte": 5}}, limit=10)
    assert sorted(r.key for r in got) == ["k5", "k7", "k9"]
    assert all(r.value["kind"] == "food" for r in got)


async def test_paging_with_offset_covers_every_match_once(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"]))
    ops = [PutOp(("p",), f"k{i:02d}", {"text": "pizza " + "cheese " * (i % 4) + f"w{i}"}) for i in range(17)]
    ops += [PutOp(("p",), f"plain{i}", {"other": i}) for i in range(3)]  # no indexed field: no vector
    await api.batch(ops)
    await settle(api, ("p",), "pizza", 17)
    seen: list[str] = []
    scores: list[float | None] = []
    for offset in range(0, 25, 4):
        page = await api.search(("p",), query="pizza cheese", limit=4, offset=offset)
        seen += [r.key for r in page]
        scores += [r.score for r in page]
    assert sorted(seen) == sorted([f"k{i:02d}" for i in range(17)] + [f"plain{i}" for i in range(3)])
    assert len(seen) == len(set(seen)) == 20
    # scored first, best first; the three items without vectors last, with score None
    numeric = [s for s in scores if s is not None]
    assert scores[:17] == numeric and numeric == sorted(numeric, reverse=True)
    assert scores[17:] == [None, None, None]


async def test_each_text_gets_a_vector_and_the_best_one_scores(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["title", "notes[*]"]))
    await api.batch(
        [
            PutOp(("n",), "a", {"title": "fish", "notes": ["cat", "dog"]}),
            PutOp(("n",), "b", {"title": "bird", "notes": ["horse"]}),
        ]
    )
    await settle(api, ("n",), "cat", 2)
    got = await api.search(("n",), query="cat")
    assert got[0].key == "a" and got[0].score == pytest.approx(1.0, abs=1e-6)
    vec_fields = sorted(d["field"] for d in await api.docs("vectors"))
    assert vec_fields == ["notes[*]", "notes[*].0", "notes[*].1", "title", "title"]


async def test_index_false_and_overrides(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"]))
    await api.put(("o",), "a", {"text": "pizza", "alt": "sushi"})
    await settle(api, ("o",), "pizza", 1)
    assert len(await api.docs("vectors")) == 1
    # index=False: the item stays, its vectors go, and a query returns it unscored
    await api.put(("o",), "a", {"text": "pizza", "alt": "sushi"}, index=False)
    await api.sweep_after_grace()  # (written within VECTOR_GRACE: unlisted until the sweep)
    assert await api.docs("vectors") == []
    got = await api.search(("o",), query="pizza")
    assert [(r.key, r.score) for r in got] == [("a", None)]
    # index=[...] overrides the fields for this item only
    await api.put(("o",), "a", {"text": "pizza", "alt": "sushi"}, index=["alt"])
    await api.sweep_after_grace()
    assert [d["field"] for d in await api.docs("vectors")] == ["alt"]
    top = (await settle(api, ("o",), "sushi", 1))[0]
    assert top.score is not None and top.score > 0.9
    # a missing field is skipped, never an error
    await api.put(("o",), "b", {"nothing": "here"})
    assert await api.get(("o",), "b") is not None


async def test_embedding_calls_are_batched_and_skipped_when_unchanged(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text", "tags[*]"]))
    emb.reset_counters()
    await api.batch(
        [
            PutOp(("e",), "a", {"text": "same words", "tags": ["red", "blue"]}),
            PutOp(("e",), "b", {"text": "same words", "tags": ["red"]}),
            PutOp(("e",), "c", {"text": "other words"}),
        ]
    )
    # one call; identical texts embedded once: "same words", "red", "blue", "other words"
    assert (emb.calls, emb.texts_embedded) == (1, 4)
    emb.reset_counters()
    await api.put(("e",), "a", {"text": "same words", "tags": ["red", "blue"]})  # nothing changed
    await api.delete(("e",), "c")
    assert (emb.calls, emb.texts_embedded) == (0, 0)
    await api.put(("e",), "a", {"text": "new words", "tags": ["red", "blue"]})  # only the changed text
    assert (emb.calls, emb.texts_embedded) == (1, 1)
    emb.reset_counters()
    await api.batch([SearchOp(("e",), query="red"), SearchOp(("e",), query="words"), SearchOp(("e",), query="red")])
    assert (emb.calls, emb.texts_embedded) == (1, 2)


async def test_query_without_index_or_empty_query_is_a_plain_search(make_semantic_store: MakeStore) -> None:
    api = await make_semantic_store()
    await api.put(("q",), "k", {"text": "hello"})
    got = await api.search(("q",), query="hello", filter={"text": "hello"})
    assert [(r.key, r.score) for r in got] == [("k", None)]
    emb = HashingEmbeddings(384)
    api2 = await make_semantic_store(index=text_index(emb, ["text"]))
    await api2.put(("q",), "k", {"text": "hello"})
    emb.reset_counters()
    assert [(r.key, r.score) for r in await api2.search(("q",), query="")] == [("k", None)]
    assert emb.calls == 0


async def test_delete_removes_vectors_and_vectors_carry_expiry(make_semantic_store: MakeStore) -> None:
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"]), ttl={"default_ttl": 60})
    await api.put(("t",), "a", {"text": "pizza"})
    [vec] = await api.docs("vectors")
    [item] = await api.docs("items")
    assert vec["expires_at"] == item["expires_at"] + q.VECTOR_GRACE  # a refresh racing the sweep finds it
    assert vec["ns_prefixes"] == ["t."]
    await api.delete(("t",), "a")
    # a vector written within VECTOR_GRACE stays (a put in flight may list it), unlisted, then swept
    assert (await api.status())["stale_vectors"] == 1
    await api.sweep_after_grace()
    assert await api.docs("vectors") == []


async def test_same_ranking_on_both_paths(make_semantic_store: MakeStore) -> None:
    """Rank on this backend and on a plain local store: same keys, same scores."""
    from mongostore import MongoStore

    api, emb = await seeded(make_semantic_store)
    local = MongoStore.in_memory(index=text_index(emb, ["text"], vector_search="local"))
    local.batch([PutOp(("users", "alice", "memories"), k, {"text": t}) for k, t in MEMORIES.items()])
    for query in ("pizza and cheese", "my sister", "allergic to nuts", "friday meeting at night"):
        ours = [(r.key, round(r.score or 0, 6)) for r in await api.search(("users",), query=query, limit=5)]
        ref = [(r.key, round(r.score or 0, 6)) for r in local.search(("users",), query=query, limit=5)]
        assert ours == ref, query


def test_atlas_index_json_is_what_setup_creates() -> None:
    import json
    from pathlib import Path

    from mongostore.core.retrieval import vector_index_definition

    doc = json.loads((Path(__file__).parents[2] / "atlas-index.json").read_text())
    assert doc["type"] == "vectorSearch" and doc["name"] == "mongostore_vectors"
    assert doc["definition"] == vector_index_definition(384, "cosine", [])


def test_cosine_of_zero_vector_is_zero() -> None:
    from mongostore.core.vectors import similarities

    s = similarities([1.0, 0.0], [[0.0, 0.0], [2.0, 0.0], [-1.0, 0.0]], "cosine")
    assert s.tolist() == [0.0, 1.0, -1.0]
    assert math.isclose(similarities([1.0, 0.0], [[3.0, 4.0]], "euclidean")[0], -math.sqrt(20))


async def test_status_reports_what_the_server_can_do(make_semantic_store: MakeStore) -> None:
    """``status()`` (``mongostore doctor``) after setup: indexes, counts, and a search path and
    bulk-write path that match the server's own answers (buildInfo, hello) on a real one."""
    from conftest import TEST_SERVER

    api, _ = await seeded(make_semantic_store)
    status = await api.status()
    assert {"path_key", "path_updated_at", "expires_at_ttl"} <= set(status["item_indexes"])
    assert {"item_id", "ns_prefixes", "expires_at_ttl"} <= set(status["vector_indexes"])
    assert (status["items"], status["vectors"]) == (len(MEMORIES), len(MEMORIES))
    assert status["search_path"] == ("atlas" if status["vector_search_available"] else "local")
    if api.backend.endswith("local"):
        assert (status["emulated"], status["search_path"], status["client_bulk_write"]) == (True, "local", False)
    elif api.backend.endswith("atlas"):
        assert status["search_path"] == "atlas" and status["vector_search_index"]["queryable"] is True
    else:
        admin = api.store.collection.database.client.admin
        info, hello = admin.command("buildInfo"), admin.command("hello")
        if api.is_async:
            info, hello = await info, await hello
        assert status["emulated"] is False and status["server_version"] == info["version"]
        assert status["client_bulk_write"] is (hello["maxWireVersion"] >= 25)
        if TEST_SERVER == "mongoeco":  # no search commands: the uncoded refusal means "rank locally"
            assert status["search_path"] == "local" and "uncoded answer" in status["detail"]


@pytest.mark.parametrize("weight", [None, 0, 0.5])
async def test_recency_ranks_the_newer_of_two_equals_first(make_semantic_store: MakeStore, weight: Any) -> None:
    """Issue 36.4: two equally similar memories rank newer first with ``index["recency"]``, and as
    before (ties by key) without it or with weight 0, with the same scores then."""
    emb = HashingEmbeddings(384)
    extra = {} if weight is None else {"recency": {"half_life_days": 1, "weight": weight}}
    api = await make_semantic_store(index=text_index(emb, ["text"], **extra))
    await api.put(("u",), "a-old", {"text": "I like pizza"})
    await asyncio.sleep(0.01)  # a later updated_at, even on a coarse clock
    await api.put(("u",), "b-new", {"text": "I like pizza"})
    await api.put(("u",), "c-far", {"text": "the meeting moved to friday"})
    found = await settle(api, ("u",), "I like pizza", 3)
    keys = [r.key for r in found]
    if weight:
        assert keys[:2] == ["b-new", "a-old"]
        assert found[0].score is not None and found[1].score is not None
        assert found[0].score > found[1].score  # the newer one's age part is larger
        assert found[0].score == pytest.approx(0.5 * 1.0 + 0.5, abs=1e-3)  # similarity 1, age ~0
    else:
        assert keys[:2] == ["a-old", "b-new"]
        assert found[0].score == pytest.approx(1.0) and found[1].score == pytest.approx(1.0)
