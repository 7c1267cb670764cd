"""Local ranking from the client-side matrix (``_vectors.VectorCache``), issue 13.

The store keeps the embeddings it has seen as one float32 matrix and reuses it
across searches; each search still reads its candidate items, so it must see every
write: from this store, or from another store instance on the same collection (two
stores here stand for two processes). Each test runs on every ``make_store`` backend
(sync mongomock, both async doubles, a real server without ``$vectorSearch``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import MakeStore, StoreAPI, text_index
from langgraph.store.base import PutOp

from mongostore import MongoStore
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.tools.embeddings import HashingEmbeddings

NS = ("users", "alice")
TEXTS = [f"note {i} about {topic}" for i, topic in enumerate(["pizza", "lisbon", "nursing", "peanuts"] * 5)]


def cosine(u: list[float], v: list[float]) -> float:
    a, b = np.asarray(u), np.asarray(v)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def index(e: HashingEmbeddings) -> dict[str, Any]:
    return text_index(e, ["text"], vector_search="local")


async def two_stores(make_store: MakeStore) -> tuple[StoreAPI, StoreAPI, HashingEmbeddings]:
    e = HashingEmbeddings(384)
    a = await make_store(index=index(e))
    b = await make_store(index=index(e), collection=a.store.collection, setup=False)
    return a, b, e


async def ranking(api: StoreAPI, query: str, **kw: Any) -> list[tuple[str, float | None]]:
    return [(r.key, r.score) for r in await api.search(NS, query=query, limit=50, **kw)]


async def fresh_ranking(api: StoreAPI, make_store: MakeStore, e: HashingEmbeddings, query: str) -> Any:
    """What a store with an empty cache answers on the same collection."""
    cold = await make_store(index=index(e), collection=api.store.collection, setup=False)
    return await ranking(cold, query)


async def test_a_warm_search_sees_every_write_of_another_store(make_store: MakeStore) -> None:
    a, b, e = await two_stores(make_store)
    await a.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])
    first = await ranking(a, "pizza")
    assert first == await fresh_ranking(a, make_store, e, "pizza")
    assert len(a.store._vector_cache) == len(TEXTS)  # type: ignore[union-attr, arg-type]

    # b writes: a new best match, a changed text, a delete, an item taken out of the index
    await b.put(NS, "new", {"text": "pizza pizza"})
    await b.put(NS, "k0", {"text": "a note about lisbon"})
    await b.delete(NS, "k4")
    await b.put(NS, "k8", {"text": "note 8 about pizza"}, index=False)
    got = await ranking(a, "pizza")
    assert got == await fresh_ranking(a, make_store, e, "pizza")
    keys = [k for k, _ in got]
    assert keys[0] == "new" and "k4" not in keys
    assert dict(got)["k8"] is None  # no vectors: after every scored item
    assert dict(got)["k0"] == pytest.approx(cosine(e.embed_query("pizza"), e.embed_query("a note about lisbon")))

    # a's own writes are seen too, and b's cache follows a's writes
    await a.put(NS, "k0", {"text": "pizza again"})
    assert (await ranking(a, "pizza again"))[0] == ("k0", pytest.approx(1.0))
    assert (await ranking(b, "pizza again"))[0] == ("k0", pytest.approx(1.0))
    assert await ranking(b, "lisbon") == await ranking(a, "lisbon") == await fresh_ranking(a, make_store, e, "lisbon")


async def test_filters_offsets_and_prefixes_match_a_cold_store(make_store: MakeStore) -> None:
    a, _, e = await two_stores(make_store)
    ops = [PutOp(NS, f"k{i}", {"text": t, "n": i % 3}) for i, t in enumerate(TEXTS)]
    ops += [PutOp(("users", "bob"), f"b{i}", {"text": t}) for i, t in enumerate(TEXTS[:5])]
    await a.batch(ops)
    await a.search(("users",), query="warm up")
    cold = await make_store(index=index(e), collection=a.store.collection, setup=False)
    for prefix, kw in [
        (("users",), {}),
        (NS, {"filter": {"n": 1}}),
        (NS, {"offset": 3, "limit": 4}),
        (("users", "bob"), {"limit": 2}),
        (("nobody",), {}),
    ]:
        want = [(r.key, r.score) for r in await cold.search(prefix, query="pizza lisbon", **kw)]
        got = [(r.key, r.score) for r in await a.search(prefix, query="pizza lisbon", **kw)]
        assert got == want, (prefix, kw)


class Recorder:
    """Wraps a mongomock collection and records each find on it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.finds: list[tuple[dict[str, Any], dict[str, Any] | None]] = []

    def find(self, filter: dict[str, Any], projection: Any = None, *a: Any, **kw: Any) -> Any:
        self.finds.append((filter, projection))
        return self.inner.find(filter, projection, *a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_warm_search_reads_only_items_and_what_it_lacks() -> None:
    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name="warm")
    writer = MongoStore(coll, index=index(e))
    writer.setup()
    writer.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])
    vectors = Recorder(coll.database[coll.name + "_vectors"])
    reader = MongoStore(coll, index=index(e), vectors_collection=vectors)  # type: ignore[arg-type]

    def embeddings_read() -> list[dict[str, Any]]:
        return [f for f, p in vectors.finds if p and p.get("embedding")]

    reader.search(NS, query="pizza")
    assert len(embeddings_read()) == 1  # cold: every vector under the prefix, once
    vectors.finds.clear()
    reader.search(NS, query="lisbon")
    reader.search(NS, query="peanuts", limit=3)
    assert embeddings_read() == []  # warm: only the page's check (ids and hashes)
    writer.put(NS, "k1", {"text": "new text"})
    writer.put(NS, "z", {"text": "another"})
    reader.search(NS, query="pizza")
    [fetch] = embeddings_read()
    assert sorted(fetch["item_id"]["$in"]) == [f"users.alice.\x00{k}" for k in ("k1", "z")]


def test_a_held_row_whose_vector_document_is_gone_is_not_used() -> None:
    """A failed write can leave an item listing a hash whose vector document was
    overwritten: the matrix must not score it from the row it still holds; like the
    reference path it comes back unscored, after every scored item (issue 11)."""
    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name="gone")
    store = MongoStore(coll, index=index(e))
    store.setup()
    store.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])
    assert store.search(NS, query=TEXTS[2])[0].key == "k2"
    coll.database[coll.name + "_vectors"].delete_one({"item_id": "users.alice.\x00k2"})
    got = store.search(NS, query=TEXTS[2], limit=50)
    scores = {r.key: r.score for r in got}
    assert scores["k2"] is None
    assert [r.key for r in got if r.score is None] == [r.key for r in got][-1:]
    cold = MongoStore(coll, index=index(e))
    assert [(r.key, r.score) for r in cold.search(NS, query=TEXTS[2], limit=50)] == [(r.key, r.score) for r in got]


class ServerLike:
    """A mongomock collection as a server looks to the store: it tells no write versions
    (``write_state`` is mongomock's only), and its candidate reads are recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pipelines: list[list[dict[str, Any]]] = []
        self.projections: list[Any] = []

    def aggregate(self, pipeline: list[dict[str, Any]], *a: Any, **kw: Any) -> Any:
        self.pipelines.append(pipeline)
        return self.inner.aggregate(pipeline, *a, **kw)

    def find(self, filter: Any = None, projection: Any = None, *a: Any, **kw: Any) -> Any:
        self.projections.append(projection)
        return self.inner.find(filter, projection, *a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_searches_and_puts_from_several_threads_share_one_matrix_safely() -> None:
    import concurrent.futures

    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name="threads")
    store = MongoStore(coll, index=index(e))
    store.setup()
    store.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])

    def work(i: int) -> None:
        if i % 3 == 0:
            store.put(NS, f"t{i}", {"text": f"thread note {i} about pizza"})
        else:
            store.search(NS, query="pizza", limit=5, offset=i % 4)

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(30)))
    cold = MongoStore(coll, index=index(e))
    for query in ("pizza", "thread note 9 about pizza", "lisbon"):
        want = [(r.key, r.score) for r in cold.search(NS, query=query, limit=50)]
        assert [(r.key, r.score) for r in store.search(NS, query=query, limit=50)] == want


def test_a_store_that_never_ranks_locally_holds_no_vectors() -> None:
    from fakes.atlas import atlas_collection

    e = HashingEmbeddings(384)
    store = MongoStore(atlas_collection(), index=text_index(e, ["text"]))
    store.setup()
    store.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])
    assert store.search(NS, query="pizza")[0].score is not None  # ranked by $vectorSearch
    assert store._vector_cache is not None and len(store._vector_cache) == 0


# --------------------------------------------------------------------------- warm searches and other writers


def seeded_store(name: str, **kw: Any) -> tuple[MongoStore, Any, HashingEmbeddings]:
    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name=name)
    store = MongoStore(coll, index=index(e), **kw)
    store.setup()
    store.batch([PutOp(NS, f"k{i}", {"text": t, "n": i}) for i, t in enumerate(TEXTS)])
    return store, coll, e


def pairs(results: Any) -> list[tuple[str, float | None]]:
    return [(r.key, r.score) for r in results]


def test_a_warm_page_sees_every_write_of_another_store() -> None:
    store, coll, e = seeded_store("recall2")
    other = MongoStore(coll, index=index(e))  # another instance (or process) on the same collection
    cold = lambda q, **kw: pairs(MongoStore(coll, index=index(e)).search(NS, query=q, limit=50, **kw))  # noqa: E731
    store.search(NS, query="pizza", limit=50)
    store.search(NS, query="pizza", limit=50, filter={"n": {"$lt": 10}})
    for write in (
        lambda: other.put(NS, "new", {"text": "pizza pizza", "n": 0}),
        lambda: other.put(NS, "k3", {"text": "pizza at last", "n": 3}),
        lambda: other.put(NS, "k5", {"text": TEXTS[5], "n": 50}),  # same text: only the filter changes
        lambda: other.delete(NS, "k0"),
        lambda: other.put(NS, "k7", {"text": "pizza", "n": 7}, index=False),
    ):
        write()
        assert pairs(store.search(NS, query="pizza", limit=50)) == cold("pizza")
        assert pairs(store.search(NS, query="pizza", limit=50, filter={"n": {"$lt": 10}})) == cold(
            "pizza", filter={"n": {"$lt": 10}}
        )
    keys = [k for k, _ in pairs(store.search(NS, query="pizza", limit=50, filter={"n": {"$lt": 10}}))]
    assert keys[0] == "new" and "k5" not in keys and "k0" not in keys


def test_a_vector_that_lands_after_its_item_is_scored_at_the_next_search() -> None:
    """An item whose listed vector is missing is unscored; when the vector lands (a vector
    write arriving after the item write, or a repair), the next search scores it, though
    the items collection did not change."""
    store, coll, _ = seeded_store("late")
    vectors = coll.database[coll.name + "_vectors"]
    doc = vectors.find_one({"item_id": "users.alice.\x00k2"})
    vectors.delete_one({"_id": doc["_id"]})
    assert dict(pairs(store.search(NS, query=TEXTS[2], limit=50)))["k2"] is None
    assert dict(pairs(store.search(NS, query=TEXTS[2], limit=50)))["k2"] is None
    vectors.insert_one(doc)
    assert pairs(store.search(NS, query=TEXTS[2], limit=50))[0] == ("k2", pytest.approx(1.0))


@pytest.mark.parametrize("omit_expired", [False, True])
def test_an_item_that_expires_between_two_searches_is_not_found(omit_expired: bool) -> None:
    import time

    store, _, _ = seeded_store(f"expiry{omit_expired}", ttl={"default_ttl": None, "omit_expired": omit_expired})
    store.put(NS, "brief", {"text": "pizza pizza"}, ttl=0.003)  # 180 ms
    assert pairs(store.search(NS, query="pizza pizza", limit=1, refresh_ttl=False)) == [("brief", pytest.approx(1.0))]
    time.sleep(0.3)  # no write since: only the clock says it is gone
    [(key, _)] = pairs(store.search(NS, query="pizza pizza", limit=1, refresh_ttl=False))  # the page is still full
    assert key != "brief"
    got = pairs(store.search(NS, query="pizza pizza", limit=50))
    assert "brief" not in dict(got) and len(got) == len(TEXTS)


@pytest.mark.parametrize("seed", range(3))
def test_warm_searches_agree_with_a_cold_store_under_random_writes(seed: int) -> None:
    """Random puts, re-puts, deletes and unindexed puts from two stores, each followed by
    searches with and without a filter: every answer equals a cold store's."""
    import random

    rng = random.Random(seed)
    store, coll, e = seeded_store(f"random{seed}")
    other = MongoStore(coll, index=index(e))
    words = ["pizza", "lisbon", "nursing", "peanuts", "tea"]
    for _ in range(40):
        writer = rng.choice([store, other])
        key = f"k{rng.randrange(30)}"
        action = rng.random()
        if action < 0.2:
            writer.delete(NS, key)
        elif action < 0.3:
            writer.put(NS, key, {"text": rng.choice(words), "n": rng.randrange(10)}, index=False)
        else:
            text = " ".join(rng.choice(words) for _ in range(2))
            writer.batch([PutOp(NS, key, {"text": text, "n": rng.randrange(10)})])
        query = rng.choice(words)
        for kw in ({}, {"filter": {"n": {"$lt": 5}}}, {"offset": 3, "limit": 4}):
            want = pairs(MongoStore(coll, index=index(e)).search(NS, query=query, **{"limit": 50, **kw}))
            assert pairs(store.search(NS, query=query, **{"limit": 50, **kw})) == want
