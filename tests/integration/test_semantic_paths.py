"""Which search path runs, and how each behaves at its edges (issue 3).

The Atlas path runs the store's real pipeline through the test double in
``tests/fakes/atlas.py``; the local path runs on mongomock.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from conftest import text_index
from fakes.atlas import async_atlas_collection, atlas_collection
from langgraph.store.base import PutOp

from mongostore import AsyncMongoStore, MongoStore, VectorIndexError
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.tools.embeddings import HashingEmbeddings


def emb() -> HashingEmbeddings:
    return HashingEmbeddings(384)


def test_the_path_is_decided_from_what_the_server_says() -> None:
    e = emb()
    local = MongoStore.in_memory(index=text_index(e, ["text"]))
    assert local.status()["search_path"] == "local"
    atlas = MongoStore(atlas_collection(), index=text_index(e, ["text"]))
    atlas.setup()
    assert atlas.status()["search_path"] == "atlas"
    forced = MongoStore(atlas_collection(), index=text_index(e, ["text"], vector_search="local"))
    forced.put(("a",), "k", {"text": "pizza"})
    assert forced.search(("a",), query="pizza")[0].key == "k"
    assert forced._io.caps is not None and not forced._io.caps.vector_search
    assert forced.collection.atlas.vector_search_calls == 0


def test_atlas_path_runs_vector_search_with_candidates_in_bounds() -> None:
    e = emb()
    coll = atlas_collection()
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()
    store.batch([PutOp(("a",), f"k{i}", {"text": f"pizza {i}"}) for i in range(30)])
    got = store.search(("a",), query="pizza", limit=7, offset=3)
    assert len(got) == 7
    [req] = coll.atlas.requests
    assert req.num_candidates is not None
    assert req.limit <= req.num_candidates <= 10_000
    assert req.num_candidates >= 20 * 7  # Atlas recommends >= 20 x limit
    assert req.filter == {"ns_prefixes": "a."}


def test_short_page_asks_again_with_more_candidates() -> None:
    e = emb()
    coll = atlas_collection()
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()
    # 200 items, only 5 of which pass a post-filter (n is not a declared filter field)
    store.batch([PutOp(("a",), f"k{i:03d}", {"text": "pizza", "n": i}) for i in range(200)])
    got = store.search(("a",), query="pizza", filter={"n": {"$gte": 195}}, limit=5)
    assert sorted(r.key for r in got) == [f"k{i}" for i in range(195, 200)]
    limits = coll.atlas.limits_asked
    assert len(limits) >= 2 and limits == sorted(limits) and limits[-1] > limits[0]
    assert max(coll.atlas.num_candidates_asked or [0]) <= 10_000  # type: ignore[type-var]


def test_falls_back_to_local_when_the_server_has_no_search(caplog: pytest.LogCaptureFixture) -> None:
    e = emb()
    coll = atlas_collection(search_enabled=False)  # answers like mongod 8 without mongot (31082)
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()  # no vector index attempted
    store.put(("a",), "k", {"text": "pizza"})
    assert store.search(("a",), query="pizza")[0].key == "k"
    assert store.status()["search_path"] == "local"


def test_vector_search_error_at_query_time_switches_to_local(caplog: pytest.LogCaptureFixture) -> None:
    e = emb()
    coll = atlas_collection()
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()
    store.put(("a",), "k", {"text": "pizza"})
    coll.atlas.search_enabled = False  # e.g. the search node went away: 31082
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        assert store.search(("a",), query="pizza")[0].key == "k"
    assert "ranking locally" in caplog.text
    assert store.status()["search_path"] == "local"


def test_setup_creates_updates_and_waits_for_the_index(caplog: pytest.LogCaptureFixture) -> None:
    e = emb()
    coll = atlas_collection(queryable_after=2)
    store = MongoStore(coll, index=text_index(e, ["text"], filter_fields=["kind"]))
    with caplog.at_level(logging.INFO, logger="mongostore"):
        store.setup()
    [idx] = list(coll.database["memories_vectors"].list_search_indexes())
    assert idx["queryable"] is True
    fields = idx["latestDefinition"]["fields"]
    assert {"type": "filter", "path": "value.kind"} in fields
    assert "waiting for vector search index" in caplog.text
    store.setup()  # idempotent: no second index, no update
    assert len(list(coll.database["memories_vectors"].list_search_indexes())) == 1
    # a changed dims/filter set updates the definition in place
    e2 = HashingEmbeddings(128)
    store2 = MongoStore(coll, index=text_index(e2, ["text"]))
    store2.setup()
    [idx] = list(coll.database["memories_vectors"].list_search_indexes())
    vec = next(f for f in idx["latestDefinition"]["fields"] if f["type"] == "vector")
    assert vec["numDimensions"] == 128


def test_setup_wait_is_bounded() -> None:
    coll = atlas_collection(queryable_after=10_000)
    store = MongoStore(coll, index=text_index(emb(), ["text"], setup_timeout=0.5))
    with pytest.raises(VectorIndexError, match="not ready on the wanted definition after"):
        store.setup()


@pytest.mark.parametrize("path", ["atlas", "local"])
def test_failed_item_write_leaves_no_stale_match_and_next_put_repairs(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = emb()
    coll = atlas_collection() if path == "atlas" else in_memory_collection()
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()
    store.put(("a",), "k", {"text": "pizza"})
    assert store.search(("a",), query="pizza")[0].score == pytest.approx(1.0)

    items = store._io.items
    real_bulk_write = items.bulk_write

    def failing(*a: Any, **kw: Any) -> Any:
        raise ConnectionError("network went away between the two writes")

    monkeypatch.setattr(items, "bulk_write", failing, raising=False)
    with pytest.raises(ConnectionError):
        store.put(("a",), "k", {"text": "sushi"})  # vectors landed, the item did not
    monkeypatch.setattr(items, "bulk_write", real_bulk_write, raising=False)

    # the item still says "pizza" and its "pizza" vector is still there (one vector document per
    # text since issue 34: the new one overwrote nothing); the "sushi" vector, unlisted, never matches
    assert store.get(("a",), "k").value == {"text": "pizza"}  # type: ignore[union-attr]
    assert [(i.key, i.score) for i in store.search(("a",), query="pizza")] == [("k", pytest.approx(1.0))]
    [(key, score)] = [(i.key, i.score) for i in store.search(("a",), query="sushi")]
    assert key == "k" and score is not None and score < 0.99
    assert store.status()["items_missing_vectors"] == 0 and store.status()["stale_vectors"] == 1
    assert [i.key for i in store.search(("a",))] == ["k"]  # plain search still finds it
    # the next put repairs it, and the text already embedded is not embedded again
    e.reset_counters()
    store.put(("a",), "k", {"text": "sushi"})
    assert e.calls == 0
    top = store.search(("a",), query="sushi")[0]
    assert top.key == "k" and top.score == pytest.approx(1.0)
    assert store.status()["items_missing_vectors"] == 0 and store.status()["stale_vectors"] == 1  # "pizza" now


async def test_async_store_on_the_atlas_double() -> None:
    e = emb()
    coll = async_atlas_collection()
    store = AsyncMongoStore(coll, index=text_index(e, ["text"]))
    await store.setup()
    await store.abatch([PutOp(("a",), f"k{i}", {"text": f"pizza {i}"}) for i in range(5)])
    got = await store.asearch(("a",), query="pizza 3")
    assert got[0].key == "k3"
    assert coll.atlas.vector_search_calls == 1
    assert (await store.status())["search_path"] == "atlas"


@pytest.mark.parametrize("path", ["atlas", "local"])
def test_failed_vector_write_leaves_no_stale_match_and_next_put_re_embeds(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order (the two bulk writes run at once on a real driver): the item
    lands with its new text, its new vector does not."""
    from mongostore.core.steps import Write

    e = emb()
    coll = atlas_collection() if path == "atlas" else in_memory_collection()
    store = MongoStore(coll, index=text_index(e, ["text"]))
    store.setup()
    store.put(("a",), "k", {"text": "pizza"})
    io = store._io
    real_execute = io.execute

    def items_only_then_fail(step: Any) -> Any:
        if not isinstance(step, Write):
            return real_execute(step)
        real_execute(Write(tuple(r for r in step.requests if r.role == "items")))
        raise ConnectionError("the vector write was lost")

    monkeypatch.setattr(io, "execute", items_only_then_fail)
    with pytest.raises(ConnectionError):
        store.put(("a",), "k", {"text": "sushi"})
    monkeypatch.setattr(io, "execute", real_execute)
    assert store.get(("a",), "k").value == {"text": "sushi"}  # type: ignore[union-attr]
    # the old "pizza" vector no longer matches the item: never a stale match
    assert [r.key for r in store.search(("a",), query="pizza") if r.score is not None] == []
    e.reset_counters()
    store.put(("a",), "k", {"text": "sushi"})
    assert (e.calls, e.texts_embedded) == (1, 1)  # the missing vector is embedded again
    top = store.search(("a",), query="sushi")[0]
    assert top.key == "k" and top.score == pytest.approx(1.0)


def test_recency_asks_again_while_an_item_beyond_the_hits_could_blend_into_the_page() -> None:
    """Issue 36.4: ``$vectorSearch`` returns the most similar vectors; a newer, less similar memory
    may blend above them all. While the lowest hit's similarity, blended as if brand new, could
    still beat the page, the store asks again with more candidates: the page is exact."""
    from datetime import datetime, timedelta, timezone

    e = emb()
    for recency, first in ((None, "old00"), ({"half_life_days": 1, "weight": 0.5}, "new")):
        coll = atlas_collection()
        extra = {} if recency is None else {"recency": recency}
        store = MongoStore(coll, index=text_index(e, ["text"], **extra))
        store.setup()
        store.batch([PutOp(("a",), f"old{i:02d}", {"text": "pizza"}) for i in range(15)])
        store.put(("a",), "new", {"text": "pizza with pasta"})
        store.collection.update_many(
            {"key": {"$regex": "^old"}}, {"$set": {"updated_at": datetime.now(timezone.utc) - timedelta(days=100)}}
        )
        found = store.search(("a",), query="pizza", limit=1)
        assert [r.key for r in found] == [first]
        limits = coll.atlas.limits_asked
        assert len(limits) == (1 if recency is None else 2), limits  # the first 10 hits were all old
