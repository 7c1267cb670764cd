"""Items and vectors never out of step (issue 34, part 1): no interleaving of writers leaves an item
listing a text hash with no vector document, and stale vector documents (no item lists them) are
gone once ``VECTOR_GRACE`` has passed and the sweep ran.

The three interleavings of the issue are driven step by step: each store operation's plan is pumped
by the test (``Stepper``), so it stops between its steps and its one ``Write`` can land a collection
at a time, as a server applies two bulk writes, or the parts of a client-level ``bulkWrite``, in any
order. They run on mongomock, the local store, the mongos double (7.0 and 8.0 rules) and their async
stores. A bounded randomized run of several writers follows (``test_randomized_writers...``).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import CountingEmbeddings
from fakes.mongos import Cluster
from langgraph.store.base import GetOp, Op, PutOp, SearchOp

from mongostore import AsyncMongoStore, MongoStore
from mongostore.core import plan as _plan
from mongostore.core import queries as q
from mongostore.core.codec import as_utc, text_hash
from mongostore.core.steps import Find, Parallel, Write, WriteOutcome
from mongostore.drivers.aio import run_async
from mongostore.drivers.sync import run_sync
from mongostore.tools.embeddings import HashingEmbeddings

NS = ("users", "alice", "memories")
SPLITS = ["users.c", "users.e"]
Store = MongoStore | AsyncMongoStore


def index(emb: HashingEmbeddings) -> dict[str, Any]:
    return {"dims": 64, "embed": emb, "fields": ["text"]}


def cluster(version: str) -> Cluster:
    c = Cluster(version)
    c.shard_collection("app.memories", {"_id": 1}, SPLITS)
    c.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
    return c


BACKENDS = ["mongomock", "local", "mongos-7.0", "mongos-8.0", "async-embedded", "async-local", "async-mongos-7.0"]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store with a text index and ``refresh_on_read`` (expired items are still read: no
    ``omit_expired``), no ``setup()``: no TTL index, so only the sweep removes what expired."""
    name: str = request.param
    kw: dict[str, Any] = {"index": index(CountingEmbeddings(64)), "ttl": {"refresh_on_read": True}}
    cls: Any = AsyncMongoStore if name.startswith("async") else MongoStore
    kind = name.removeprefix("async-")
    if kind in ("mongomock", "embedded"):
        made = cls.in_memory(**kw, db_name="app", collection_name="memories")
    elif kind == "local":
        made = cls.local(tmp_path, **kw, db_name="app", collection_name="memories")
    else:
        c = cluster(kind.removeprefix("mongos-") + (".12" if kind.endswith("7.0") else ".4"))
        client = c.async_client() if cls is AsyncMongoStore else c.client()
        made = cls(client["app"]["memories"], **kw)
    yield made


async def run(store: Store, plan: Any) -> Any:
    """A plan on the store's driver, as its methods run them."""
    if isinstance(store, AsyncMongoStore):
        return await run_async(plan, store._io)
    return run_sync(plan, store._io)


async def batch(store: Store, ops: Sequence[Op]) -> list[Any]:
    if isinstance(store, AsyncMongoStore):
        return await store.abatch(ops)
    return store.batch(ops)


def batch_plan(store: Store, ops: Sequence[Op]) -> Any:
    return store._batch_plan(list(ops), _plan.batch_plan)


class Stepper:
    """One store operation's plan, pumped by the test: ``until_write`` runs its steps up to its
    ``Write``; ``land(role, ...)`` applies that Write's requests on those collections only (the plan
    gets the whole answer once every request landed); ``finish`` runs it to its end."""

    def __init__(self, store: Store, plan: Any) -> None:
        self.io = store._io
        self.gen = plan
        self.step: Any = next(plan)
        self.done = False
        self.result: Any = None
        self._landed: list[tuple[list[int], WriteOutcome]] = []

    async def _resolve(self, x: Any) -> Any:
        out = self.io.resolve(x)
        return await out if inspect.isawaitable(out) else out

    def _answer(self, value: Any) -> None:
        try:
            self.step = self.gen.send(value)
        except StopIteration as stop:
            self.done, self.result = True, stop.value

    async def until_write(self) -> None:
        while not self.done and not isinstance(self.step, Write):
            self._answer(await self._resolve(self.step))

    async def land(self, *roles: str) -> None:
        assert isinstance(self.step, Write), self.step
        done = {i for idx, _ in self._landed for i in idx}
        idx = [i for i, r in enumerate(self.step.requests) if r.role in roles and i not in done]
        if idx:
            self._landed.append((idx, await self._resolve(Write(tuple(self.step.requests[i] for i in idx)))))
        if sum(len(i) for i, _ in self._landed) == len(self.step.requests):
            errors = [(idx[j], msg) for idx, out in self._landed for j, msg in out.errors]
            deleted = sum(out.deleted for _, out in self._landed)
            self._landed = []
            self._answer(WriteOutcome(errors, deleted))

    async def finish(self) -> Any:
        while not self.done:
            await self.until_write()
            if not self.done:
                await self.land("vectors", "items")
        return self.result


def snapshot_plan() -> Any:
    items, vectors = yield Parallel(
        (
            Find("items", {}, {"_id": 1, "vectors": 1}),
            Find("vectors", {}, {"_id": 1, "item_id": 1, "text_hash": 1, "updated_at": 1}),
        )
    )
    return items, vectors


def expiries_plan() -> Any:
    items, vectors = yield Parallel(
        (Find("items", {}, {"ttl_minutes": 1, "expires_at": 1}), Find("vectors", {}, {"expires_at": 1}))
    )
    return items, vectors


async def out_of_step(store: Store) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """(listed hashes with no vector document, vector documents no item lists)."""
    items, vectors = await run(store, snapshot_plan())
    held = {(v["item_id"], v["text_hash"]) for v in vectors}
    missing = [(d["_id"], h) for d in items for h in d.get("vectors") or () if (d["_id"], h) not in held]
    return missing, q.unlisted_vectors(items, vectors)


async def sweep_after_grace(store: Store) -> None:
    """The sweep, as it runs once ``VECTOR_GRACE`` has passed."""
    later = datetime.now(timezone.utc) + q.VECTOR_GRACE + timedelta(seconds=1)
    await run(store, _plan.sweep_plan(later, with_vectors=True, items_collection=store.collection.name))


async def status(store: Store) -> dict[str, Any]:
    return await store.status() if isinstance(store, AsyncMongoStore) else store.status()


async def scored(store: Store, query: str) -> list[tuple[str, float | None]]:
    [found] = await batch(store, [SearchOp(NS, query=query, limit=5)])
    return [(i.key, None if i.score is None else round(i.score, 6)) for i in found]


def embedded(store: Store) -> list[str]:
    emb = store._io.embeddings
    assert isinstance(emb, CountingEmbeddings)
    return emb.texts


# --------------------------------------------------------------------------- the three interleavings


async def test_two_puts_of_one_key_with_different_texts(store: Store) -> None:
    """A writes its vector; B writes its vector, removes the item's other vectors and writes the item;
    A's item write lands last and lists A's hash: A's vector must be there."""
    await batch(store, [PutOp(NS, "k", {"text": "chess openings"})])
    a = Stepper(store, batch_plan(store, [PutOp(NS, "k", {"text": "pizza with olives"})]))
    b = Stepper(store, batch_plan(store, [PutOp(NS, "k", {"text": "sushi rolls"})]))
    await a.until_write()
    await b.until_write()
    await a.land("vectors")
    await b.finish()
    await a.land("items")
    assert a.done and a.result == [None]
    missing, stale = await out_of_step(store)
    assert missing == []
    assert (await scored(store, "pizza with olives"))[0] == ("k", 1.0)
    # B's vector and the first text's: no item lists them; kept for VECTOR_GRACE (a write in
    # flight could), then swept
    assert sorted(v["text_hash"] for v in stale) == sorted(
        text_hash("text", t) for t in ("sushi rolls", "chess openings")
    )
    assert (await status(store))["stale_vectors"] == 2
    await sweep_after_grace(store)
    assert await out_of_step(store) == ([], [])


@pytest.mark.parametrize("when", ["before the re-put's write", "between its vectors and its item"])
async def test_an_unchanged_re_put_against_a_delete(store: Store, when: str) -> None:
    """The re-put read the stored hash (its text is unchanged: nothing to embed); the delete lands
    before the re-put's write, or between its two halves; the re-put's item lands last."""
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"})])
    before = len(embedded(store))
    put = Stepper(store, batch_plan(store, [PutOp(NS, "k", {"text": "pizza with olives", "n": 2})]))
    delete = Stepper(store, batch_plan(store, [PutOp(NS, "k", None)]))
    await put.until_write()
    await delete.until_write()
    if when == "between its vectors and its item":
        await put.land("vectors")
    await delete.finish()
    await put.finish()
    assert len(embedded(store)) == before  # 0 re-embedded unchanged texts
    assert await out_of_step(store) == ([], [])
    assert (await scored(store, "pizza with olives")) == [("k", 1.0)]


async def test_a_ttl_refresh_on_read_against_the_sweep(store: Store) -> None:
    """An expired item not yet swept is read with ``refresh_ttl``; the sweep deletes expired vectors,
    the refresh lands, then the sweep's item delete (which no longer matches the refreshed item)."""
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=0.001)])  # 60 ms
    await asyncio.sleep(0.1)
    read = Stepper(store, batch_plan(store, [GetOp(NS, "k", refresh_ttl=True)]))
    sweep = Stepper(store, store._sweep_plan())
    await read.until_write()
    await sweep.until_write()
    await sweep.land("vectors")
    await read.finish()
    await sweep.land("items")
    assert sweep.done
    [got] = read.result
    assert got is not None and got.key == "k"
    assert await out_of_step(store) == ([], [])
    assert (await scored(store, "pizza with olives")) == [("k", 1.0)]


async def test_a_ttl_refresh_against_a_put_that_drops_the_ttl(store: Store) -> None:
    """A read with ``refresh_ttl`` of an item with a TTL; before its refresh lands, a put of the same text
    without a TTL rewrites the vector and the item, neither expiring. The refresh must not give the vector
    back an expiry the item no longer has: once it passed, the sweep removed the vector the item lists
    (found by the randomized test below, under load)."""
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=0.005)])  # 0.3 s
    read = Stepper(store, batch_plan(store, [GetOp(NS, "k", refresh_ttl=True)]))
    await read.until_write()
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=None)])
    await read.finish()
    assert await out_of_step(store) == ([], [])
    await sweep_after_grace(store)  # 10 minutes on: past any expiry the refresh could have set
    assert await out_of_step(store) == ([], [])
    assert (await scored(store, "pizza with olives")) == [("k", 1.0)]


async def test_a_ttl_refresh_against_a_put_that_changes_the_ttl(store: Store) -> None:
    """A read with ``refresh_ttl`` saw a 5-minute TTL; a put of the same text with 60 minutes lands before
    the refresh: the item keeps the put's 60 minutes (the read's refresh does not shorten it), and its
    vector still outlives it."""
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=5)])
    read = Stepper(store, batch_plan(store, [GetOp(NS, "k", refresh_ttl=True)]))
    await read.until_write()
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=60)])
    await read.finish()
    items, vectors = await run(store, expiries_plan())
    [item] = items
    [vector] = vectors
    now = datetime.now(timezone.utc)
    assert item["ttl_minutes"] == 60 and as_utc(item["expires_at"]) > now + timedelta(minutes=55)
    assert as_utc(vector["expires_at"]) >= as_utc(item["expires_at"]) + q.VECTOR_GRACE - timedelta(seconds=5)


async def test_two_puts_of_one_text_with_and_without_a_ttl(store: Store) -> None:
    """Both puts write the one vector document of their text; the TTL put's vector write lands after the
    other's, the other's item write lands last (no TTL): the vector must not expire before its item
    (found by the randomized test below, at 150 rounds)."""
    await batch(store, [PutOp(NS, "k", {"text": "chess openings"})])
    timed = Stepper(store, batch_plan(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=0.005)]))
    plain = Stepper(store, batch_plan(store, [PutOp(NS, "k", {"text": "pizza with olives"})]))
    await timed.until_write()
    await plain.until_write()
    await plain.land("vectors")
    await timed.land("vectors")
    await timed.land("items")
    await plain.land("items")
    await timed.finish()
    await plain.finish()
    await sweep_after_grace(store)  # 10 minutes on: past the TTL put's expiry
    assert await out_of_step(store) == ([], [])
    assert (await scored(store, "pizza with olives")) == [("k", 1.0)]


async def test_the_sweep_takes_the_vectors_of_the_items_it_deletes(store: Store) -> None:
    """A put without a TTL, then one of the same text with a TTL: the vector keeps the later expiry of
    the two (none); once the item's TTL ran out past what a refresh revives, one sweep deletes the item
    and its vector."""
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"})])
    await batch(store, [PutOp(NS, "k", {"text": "pizza with olives"}, ttl=0.005)])  # 0.3 s
    _, [vector] = await run(store, expiries_plan())
    assert as_utc(vector["expires_at"]) == q.NO_EXPIRY
    await sweep_after_grace(store)
    assert await run(store, snapshot_plan()) == ([], [])


# --------------------------------------------------------------------------- several writers at random

KEYS = [(("users", "alice", "memories"), "k1"), (("users", "erin"), "k2")]
TEXTS = ["pizza with olives", "sushi rolls", "chess openings"]


class SlowEmbeddings(HashingEmbeddings):
    """An embedder that takes its time (up to 2 ms): the window between a put's read and its write."""

    def __init__(self, dims: int, seed: int) -> None:
        super().__init__(dims)
        self.rng = random.Random(seed)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.rng.random() * 0.002)
        return super().embed_documents(texts)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(self.rng.random() * 0.002)
        return super().embed_documents(texts)


class Latency:
    """A collection whose every call waits up to ``most`` seconds first, as a network would: the
    halves of one write (items, vectors) land apart, and other writers' requests land between."""

    def __init__(self, inner: Any, seed: int, most: float = 0.001) -> None:
        self._inner, self._rng, self._most = inner, random.Random(seed), most

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            time.sleep(self._rng.random() * self._most)
            return attr(*args, **kwargs)

        return call


def random_op(rng: random.Random) -> Op:
    ns, key = rng.choice(KEYS)
    roll = rng.random()
    if roll < 0.55:
        ttl = 0.002 if rng.random() < 0.2 else None  # 120 ms: some expire, are refreshed and swept
        return PutOp(ns, key, {"text": rng.choice(TEXTS)}, ttl=ttl)
    if roll < 0.7:
        return PutOp(ns, key, None)
    if roll < 0.9:
        return GetOp(ns, key, refresh_ttl=True)
    return SearchOp(ns[:2], query=rng.choice(TEXTS), limit=3)


ROUNDS, OPS_PER_ROUND = 25, 8


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_randomized_writers_leave_every_listed_hash_backed(version: str) -> None:
    """Four threads on two store instances and two tasks of an async store, on one cluster (the mongos
    double: each operation atomic, plans interleaved, each call delayed up to 1 ms, a chunk of each
    collection moved to another shard mid-round), 25 rounds of 8 operations each over two keys, with
    sweeps: after every round every listed hash has its vector;
    at the end, once ``VECTOR_GRACE`` has passed, the sweep leaves no vector that no item lists."""
    c = cluster(version)
    ttl: Any = {"refresh_on_read": True}
    db = c.client()["app"]
    stores = [
        MongoStore(
            Latency(db["memories"], seed),
            vectors_collection=Latency(db["memories_vectors"], seed + 10),
            index=index(SlowEmbeddings(64, seed)),
            ttl=ttl,
        )
        for seed in (1, 2)
    ]
    check = MongoStore(db["memories"], index=index(HashingEmbeddings(64)))
    rounds = threading.Barrier(6)  # 4 threads, the async store's thread, this one
    errors: list[BaseException] = []

    def worker(store: MongoStore, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for r in range(ROUNDS):
                rounds.wait()
                for n in range(OPS_PER_ROUND):
                    if (r * OPS_PER_ROUND + n) % 50 == 49:
                        store.sweep_ttl()
                    else:
                        store.batch([random_op(rng)])
                rounds.wait()
        except BaseException as exc:  # reported below
            errors.append(exc)
            rounds.abort()

    def async_worker() -> None:
        async def main() -> None:
            store = AsyncMongoStore(c.async_client()["app"]["memories"], index=index(SlowEmbeddings(64, 9)), ttl=ttl)
            rngs = [random.Random(100 + i) for i in range(2)]

            async def task(rng: random.Random) -> None:
                for _ in range(OPS_PER_ROUND):
                    await store.abatch([random_op(rng)])

            for _ in range(ROUNDS):
                await asyncio.to_thread(rounds.wait)
                await asyncio.gather(*(task(rng) for rng in rngs))
                await asyncio.to_thread(rounds.wait)

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)
            rounds.abort()

    threads = [threading.Thread(target=worker, args=(stores[i % 2], i)) for i in range(4)]
    threads.append(threading.Thread(target=async_worker))
    for t in threads:
        t.start()
    broken: list[tuple[int, list[tuple[str, str]]]] = []
    moves = random.Random(7)
    try:
        for r in range(ROUNDS):
            rounds.wait()
            time.sleep(0.002)
            for name in ("app.memories", "app.memories_vectors"):  # a chunk changes shards mid-round
                sns = c.sharded[name]
                c.move_chunk(name, moves.randrange(len(sns.owners)), moves.choice(c.shards))
            rounds.wait()  # every writer is between two rounds: nothing in flight
            missing, _stale = asyncio.run(out_of_step(check))
            if missing:
                broken.append((r, missing))
    finally:
        for t in threads:
            t.join(120)
    assert not errors, errors
    assert broken == []
    assert check.status()["items_missing_vectors"] == 0
    asyncio.run(sweep_after_grace(check))
    assert asyncio.run(out_of_step(check)) == ([], [])
    assert check.status()["stale_vectors"] == 0


def test_a_store_written_before_keeps_its_field_keyed_vectors_until_their_text_changes() -> None:
    """Vector documents written before issue 34 are keyed ``item_id + NUL + field``: an unchanged
    re-put rewrites the one it finds under its own ``_id`` (no embedding call, no second document);
    a changed text gets a document of its own, and the old one, not written for VECTOR_GRACE, goes."""
    emb = CountingEmbeddings(64)
    store = MongoStore.in_memory(index=index(emb))
    store.put(NS, "k", {"text": "pizza with olives"})
    vectors = store.vectors_collection
    assert vectors is not None
    [doc] = list(vectors.find({}))
    vectors.delete_many({})
    legacy = {**doc, "_id": doc["item_id"] + "\x00text", "updated_at": doc["updated_at"] - timedelta(hours=1)}
    vectors.insert_one(legacy)
    emb.texts.clear()
    store.put(NS, "k", {"text": "pizza with olives", "n": 1})
    assert emb.texts == [] and [d["_id"] for d in vectors.find({})] == [legacy["_id"]]
    vectors.update_one({"_id": legacy["_id"]}, {"$set": {"updated_at": legacy["updated_at"]}})
    store.put(NS, "k", {"text": "sushi rolls"})
    assert [d["text_hash"] for d in vectors.find({})] == [text_hash("text", "sushi rolls")]
    assert (store.search(NS, query="sushi rolls")[0].key, store.status()["stale_vectors"]) == ("k", 0)
