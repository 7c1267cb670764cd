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
from mongostore.embeddings import HashingEmbeddings

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


@pytest.mark.parametrize("omit_expired", [False, True])
def test_against_a_server_candidates_are_read_shaped_for_decoding(omit_expired: bool) -> None:
    """Without write versions every search reads its candidates, and pymongo's decoding of
    100k of them is most of the search: the server projects them compactly (one hash as a
    string, dates as milliseconds); the embedded engine reads the stored fields. Both rank
    the same, unscored items included, newest first."""
    import time

    from mongostore.core.plan.search import COMPACT_ITEM

    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name=f"shaped{omit_expired}")
    ttl = {"default_ttl": 60, "omit_expired": omit_expired}
    embedded = MongoStore(coll, index=index(e), ttl=ttl)
    embedded.setup()
    embedded.batch([PutOp(NS, f"k{i}", {"text": t}) for i, t in enumerate(TEXTS)])
    for i in range(3):  # unscored items, 2 ms apart (dates keep milliseconds)
        time.sleep(0.002)
        embedded.put(NS, f"plain{i}", {"n": i})
    server = ServerLike(coll)
    store = MongoStore(server, index=index(e), ttl=ttl, vectors_collection=coll.database[coll.name + "_vectors"])  # type: ignore[arg-type]
    for query in ("pizza", "lisbon"):
        want = pairs(embedded.search(NS, query=query, limit=50))
        assert pairs(store.search(NS, query=query, limit=50)) == want
        assert [k for k, s in want if s is None] == ["plain2", "plain1", "plain0"]
    shaped = [p[1]["$project"] for p in server.pipelines if len(p) == 2 and "$project" in p[1]]
    assert len(shaped) == 2
    assert all({k: v for k, v in proj.items() if k != "expires_at"} == COMPACT_ITEM for proj in shaped)
    assert all(("expires_at" in proj) == omit_expired for proj in shaped)
    assert not any(isinstance(p, dict) and p.get("vectors") == 1 and "text" not in p for p in server.projections)


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


# --------------------------------------------------------------------------- candidates kept between searches


class FindLog:
    """Records the candidate reads (finds on the items that project ``vectors``) of mongomock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from mongomock.collection import Collection

        self.candidate_reads = 0
        self.partial: list[list[str]] = []  # the ids of each read of changed candidates only
        original = Collection.find
        log = self

        def find(coll: Any, filter: Any = None, projection: Any = None, *a: Any, **kw: Any) -> Any:
            if isinstance(projection, dict) and projection.get("vectors") == 1 and "text" not in projection:
                first = (filter.get("$and") or [{}])[0] if isinstance(filter, dict) else {}
                if isinstance(first.get("_id"), dict):
                    log.partial.append(sorted(first["_id"]["$in"]))
                else:
                    log.candidate_reads += 1
            return original(coll, filter, projection, *a, **kw)

        monkeypatch.setattr(Collection, "find", find)


def seeded_store(name: str, **kw: Any) -> tuple[MongoStore, Any, HashingEmbeddings]:
    e = HashingEmbeddings(384)
    coll = in_memory_collection(collection_name=name)
    store = MongoStore(coll, index=index(e), **kw)
    store.setup()
    store.batch([PutOp(NS, f"k{i}", {"text": t, "n": i}) for i, t in enumerate(TEXTS)])
    return store, coll, e


def pairs(results: Any) -> list[tuple[str, float | None]]:
    return [(r.key, r.score) for r in results]


def test_an_unchanged_prefix_is_ranked_without_reading_its_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    store, coll, e = seeded_store("recall")
    log = FindLog(monkeypatch)
    first = pairs(store.search(NS, query="pizza", limit=50))
    assert log.candidate_reads == 1
    again = [pairs(store.search(NS, query=q, limit=50)) for q in ("pizza", "lisbon")]
    page = pairs(store.search(NS, query="lisbon", limit=3, offset=2))
    assert log.candidate_reads == 1  # nothing changed: no candidate read
    cold = MongoStore(coll, index=index(e))
    assert again == [first, pairs(cold.search(NS, query="lisbon", limit=50))]
    assert page == pairs(cold.search(NS, query="lisbon", limit=3, offset=2))
    # a filter or another prefix is another set of candidates
    log.candidate_reads = 0
    store.search(NS, query="pizza", filter={"n": {"$gte": 3}})
    store.search(("users",), query="pizza")
    assert log.candidate_reads == 2


def test_after_a_write_a_search_reads_only_the_changed_items(monkeypatch: pytest.MonkeyPatch) -> None:
    store, coll, e = seeded_store("delta")
    other = MongoStore(coll, index=index(e))
    store.search(NS, query="pizza", limit=50)
    log = FindLog(monkeypatch)
    other.put(NS, "k1", {"text": "pizza pizza", "n": 1})
    store.put(NS, "mine", {"text": "more pizza", "n": 2})
    other.delete(NS, "k2")
    got = pairs(store.search(NS, query="pizza", limit=50))
    assert log.candidate_reads == 0
    assert log.partial == [sorted(f"users.alice.\x00{k}" for k in ("k1", "k2", "mine"))]
    assert got == pairs(MongoStore(coll, index=index(e)).search(NS, query="pizza", limit=50))
    assert got[0][0] == "k1" and "k2" not in dict(got) and "mine" in dict(got)


def test_a_kept_page_sees_every_write_of_another_store(monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_kept_candidates_hold_until_a_write_an_expiry_or_a_released_row() -> None:
    from datetime import datetime, timedelta, timezone

    from mongostore.core.vectors import VectorCache

    cache = VectorCache(4)
    cache.add("a", "text", "h1", [1.0, 0.0, 0.0, 0.0])
    now = datetime.now(timezone.utc)
    items = [{"_id": "a", "vectors": ["h1"], "updated_at": now}]

    def keep(until: Any = None) -> None:
        cache.remember("key", (1, 1), cache.candidates(items), [], until)

    keep(now + timedelta(seconds=1))
    hit = cache.recall("key", (1, []), (1, []), now)
    assert hit is not None and hit.cands is not None and hit.cands.rows.tolist() == [0]
    assert cache.recall("key", (1, []), (1, []), now + timedelta(seconds=1)) is None  # an item expired
    keep()
    assert cache.recall("key", None, (1, []), now) is None  # a server: no versions, nothing kept
    stale = cache.recall("key", (2, [(2, "b")]), (1, []), now)  # a write: re-read what changed
    assert stale is not None and stale.cands is None and stale.changed == ["b"] and stale.since == 1
    assert cache.recall("key", (3, None), (1, []), now) is None  # too many writes to tell
    keep()
    cache.forget("a")  # a row released: the mapping no longer holds
    assert cache.recall("key", (1, []), (1, []), now) is None


def test_kept_candidates_are_patched_with_the_changed_items() -> None:
    from datetime import datetime, timezone

    from mongostore.core.vectors import VectorCache

    cache = VectorCache(2)
    now = datetime.now(timezone.utc)
    for name, vec in (("a", [1.0, 0.0]), ("b", [0.0, 1.0]), ("c", [0.6, 0.8])):
        cache.add(name, "text", f"h{name}", vec)
    items = [{"_id": n, "vectors": [f"h{n}"], "updated_at": now} for n in "ab"]
    unscored = {"_id": "u", "updated_at": now}
    cands = cache.candidates([*items, unscored])
    cache.remember("key", (1, 1), cands, [unscored], None)
    # b changed (now out of the filter), c arrived, u lost its place
    fresh = cache.candidates([{"_id": "c", "vectors": ["hc"], "updated_at": now}])
    got = cache.patch("key", 1, (5, 1), ["b", "c", "u"], fresh, None)
    assert got is not None
    patched, leftover = got
    assert leftover == []
    assert [iid for iid, _, _ in cache.rank([0.0, 1.0], patched, "cosine", 10)] == ["c", "a"]
    again = cache.recall("key", (5, []), (1, []), now)
    assert again is not None and again.cands is not None
    assert cache.patch("key", 1, (6, 1), [], fresh, None) is None  # patched since: not from version 1


@pytest.mark.parametrize("seed", range(3))
def test_kept_candidates_agree_with_a_cold_store_under_random_writes(seed: int) -> None:
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
