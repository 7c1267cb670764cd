"""A bad call fails only its caller; injected server faults are reported truthfully.

``Faulty`` wraps a collection (sync or async) and, at a chosen call, injects what a
real server or driver can answer: a network error before the call, a write-concern
error after the writes were applied, or an unordered bulk write that rejects its
first request and applies the rest. Each workload is run once cleanly to count its
calls, then once per (call position, fault kind), and every caller's answer is
checked against what the store holds: a success is never a lie, and nothing
reported written is lost. AsyncMongoStore workloads are many coroutines started in
one loop tick, so they are coalesced into one batch.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ASYNC_BACKENDS, MakeStore, StoreAPI, text_index
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from pymongo.errors import AutoReconnect, BulkWriteError

from mongostore import AsyncMongoStore, InvalidValueError, MongoStore, WriteError
from mongostore.tools.embeddings import HashingEmbeddings

CALLS = frozenset({"find", "aggregate", "bulk_write", "count_documents"})
FAULTS = ["network", "write-concern", "reject-first"]

WC_ERROR = {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out"}


def _is_real(api: StoreAPI) -> bool:
    return api.backend.endswith("real")


class Calls:
    """A call counter shared by the wrapped collections, with the fault to inject."""

    def __init__(self) -> None:
        self.n = 0
        self.at: int | None = None
        self.kind = ""
        self.injected = False

    def arm(self, at: int, kind: str) -> None:
        self.n, self.at, self.kind, self.injected = 0, at, kind, False


class Faulty:
    """A collection proxy that injects one fault at call number ``calls.at``."""

    def __init__(self, inner: Any, calls: Calls, is_async: bool) -> None:
        self._inner = inner
        self._calls = calls
        self._async = is_async

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in CALLS or not callable(attr):
            return attr
        calls = self._calls

        def call(*a: Any, **kw: Any) -> Any:
            pos = calls.n
            calls.n += 1
            if pos != calls.at:
                return attr(*a, **kw)
            kind = calls.kind
            if kind == "network" or (name != "bulk_write" and kind != "network"):
                # Reads only fail as a whole; a write-side fault kind on a read is a network error.
                calls.injected = True
                raise AutoReconnect(f"injected: connection lost at call {pos} ({name})")
            calls.injected = True
            models = list(a[0] if a else kw["requests"])
            rest_kw = {k: v for k, v in kw.items() if k != "requests"}
            if kind == "write-concern":
                return _then(attr(models, **rest_kw), _wc_error, self._async)
            # reject-first: the server refuses request 0 and, unordered, applies the rest
            err = BulkWriteError(
                {"writeErrors": [{"index": 0, "code": 121, "errmsg": "injected: document failed validation"}]}
            )
            applied = attr(models[1:], **rest_kw) if models[1:] else None
            return _then(applied, lambda _: _raise(err), self._async)

        return call


def _raise(exc: Exception) -> Any:
    raise exc


def _wc_error(_: Any) -> Any:
    raise BulkWriteError({"writeErrors": [], "writeConcernErrors": [WC_ERROR], "nInserted": 0, "nUpserted": 1})


def _then(result: Any, after: Callable[[Any], Any], is_async: bool) -> Any:
    """Run ``after`` once ``result`` is ready (awaited first for async collections)."""
    if not is_async:
        return after(result)

    async def wait() -> Any:
        return after(await result if inspect.isawaitable(result) else result)

    return wait()


async def faulty_store(make_store: MakeStore, calls: Calls, indexed: bool) -> StoreAPI:
    base = await make_store(index=text_index(HashingEmbeddings(64), ["text"]) if indexed else None)
    if _is_real(base):
        pytest.skip("faults are injected into the mongomock backends")
    kw: dict[str, Any] = {}
    if indexed:
        kw["index"] = text_index(HashingEmbeddings(64), ["text"])
        kw["vectors_collection"] = Faulty(base.store.vectors_collection, calls, base.is_async)
    return await make_store(collection=Faulty(base.store.collection, calls, base.is_async), setup=False, **kw)


SEEDED = {f"s{i}": {"text": f"seeded memory {i}", "v": "seed"} for i in range(4)}
DOOMED = {f"d{i}": {"text": f"doomed memory {i}", "v": "old"} for i in range(3)}
NEW = {f"p{i}": {"text": f"new memory {i}", "v": i} for i in range(6)}


def workload_ops() -> list[Any]:
    return [
        *(PutOp(("w",), k, v) for k, v in NEW.items()),
        *(PutOp(("w",), k, None) for k in DOOMED),
        *(GetOp(("s",), k) for k in SEEDED),
        SearchOp(("s",)),
        SearchOp(("s",), query="seeded memory"),
        ListNamespacesOp(),
    ]


async def run_workload(api: StoreAPI) -> list[Any]:
    """The ops as one batch (sync) or as one coroutine each, all started in one tick (async)."""
    ops = workload_ops()
    if not api.is_async:
        try:
            return await api.batch(ops)
        except Exception as exc:
            return [exc] * len(ops)
    store = api.store
    assert isinstance(store, AsyncMongoStore)
    coros: list[Any] = []
    for op in ops:
        if isinstance(op, PutOp) and op.value is None:
            coros.append(store.adelete(op.namespace, op.key))
        elif isinstance(op, PutOp):
            coros.append(store.aput(op.namespace, op.key, op.value))
        elif isinstance(op, GetOp):
            coros.append(store.aget(op.namespace, op.key))
        elif isinstance(op, SearchOp):
            coros.append(store.asearch(op.namespace_prefix, query=op.query))
        else:
            coros.append(store.alist_namespaces())
    return list(await asyncio.gather(*coros, return_exceptions=True))


async def stored_values(api: StoreAPI) -> dict[str, Any]:
    return {d["key"]: d["value"] for d in await api.docs() if d["namespace"] == ["w"]}


async def check_truth(api: StoreAPI, results: list[Any], faulted: bool) -> None:
    """Every answer agrees with the store: successes really happened, errors say what failed."""
    ops = workload_ops()
    held = await stored_values(api)
    # A sync batch has one caller, who gets its one error; in the async store a read is
    # answered unless a read itself failed, whatever happened to the write.
    read_errors: tuple[type[Exception], ...] = (
        (AutoReconnect,) if api.is_async else (AutoReconnect, BulkWriteError, WriteError)
    )
    for op, res in zip(ops, results, strict=True):
        if isinstance(op, PutOp):
            target = (op.namespace, op.key)
            if not isinstance(res, Exception):
                assert res is None
                if op.value is None:
                    assert op.key not in held, f"delete of {op.key} reported done, item still there"
                else:
                    assert held.get(op.key) == op.value, f"put of {op.key} reported done, value lost"
            elif isinstance(res, WriteError):
                failed = {(ns, k) for ns, k, _ in res.failures}
                if target not in failed:
                    # The batch's error (sync: one caller) names the others; this op landed.
                    assert not api.is_async, f"{op.key} got a WriteError that does not name it"
                    if op.value is None:
                        assert op.key not in held
                    else:
                        assert held.get(op.key) == op.value, f"{op.key} not named as failed, but lost"
                elif target not in res.stored and op.value is not None:
                    assert held.get(op.key) != op.value, f"{op.key} reported not stored, but it was"
                elif target in res.stored:
                    assert held.get(op.key) == op.value, f"{op.key} reported stored, but it was not"
            else:
                # The whole write failed or was not acknowledged: the caller knows it is unknown.
                assert isinstance(res, (AutoReconnect, BulkWriteError)), repr(res)
                assert faulted
        elif isinstance(op, GetOp):
            if not isinstance(res, Exception):
                assert res is not None and res.value == SEEDED[op.key]
            else:
                assert faulted and isinstance(res, read_errors), repr(res)
        elif isinstance(op, SearchOp):
            if not isinstance(res, Exception):
                assert sorted(i.key for i in res) == sorted(SEEDED)
            else:
                assert faulted and isinstance(res, read_errors), repr(res)
        elif not isinstance(res, Exception):
            assert ("s",) in res
        else:
            assert faulted and isinstance(res, read_errors), repr(res)


async def converged(api: StoreAPI) -> None:
    """After a clean re-run, the store holds exactly what the workload asks, vectors included."""
    results = await run_workload(api)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert await stored_values(api) == NEW
    if api.store.vectors_collection is not None:
        assert (await api.status())["items_missing_vectors"] == 0
        found = await api.search(("w",), query="new memory 3", limit=20)
        assert found and all(i.score is not None for i in found)


@pytest.mark.parametrize("indexed", [False, True], ids=["plain", "indexed"])
async def test_faults_at_every_call_are_reported_truthfully(make_store: MakeStore, indexed: bool) -> None:
    calls = Calls()
    clean = await faulty_store(make_store, calls, indexed)
    seed = [PutOp(("s",), k, v) for k, v in SEEDED.items()] + [PutOp(("w",), k, v) for k, v in DOOMED.items()]
    await clean.batch(seed)
    calls.arm(-1, "")
    clean_results = await run_workload(clean)
    positions = calls.n
    await check_truth(clean, clean_results, faulted=False)
    assert positions >= 4  # reads, the write(s): the workload reaches the collections
    for at in range(positions):
        for kind in FAULTS:
            api = await faulty_store(make_store, calls, indexed)
            calls.arm(-1, "")
            await api.batch(seed)
            calls.arm(at, kind)
            results = await run_workload(api)
            assert calls.injected, (at, kind)
            calls.arm(-1, "")
            await check_truth(api, results, faulted=True)
            await converged(api)


# --------------------------------------------------------------------------- one bad call among many


class RejectKey:
    """A collection proxy whose bulk writes reject the item with one key, as a server
    validator would: the other requests of the unordered bulk are applied."""

    def __init__(self, inner: Any, key: str) -> None:
        self._inner = inner
        self._key = key

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "bulk_write":
            return attr

        def bulk_write(models: list[Any], **kw: Any) -> Any:
            bad = [i for i, m in enumerate(models) if str(getattr(m, "_filter", {}).get("_id", "")).endswith(self._key)]
            keep = [m for i, m in enumerate(models) if i not in bad]
            err = BulkWriteError(
                {"writeErrors": [{"index": i, "code": 121, "errmsg": "Document failed validation"} for i in bad]}
            )
            res = attr(keep, **kw)
            return _then(res, lambda r: _raise(err) if bad else r, True)

        return bulk_write


async def async_store(make_store: MakeStore, wrap: Callable[[Any], Any] | None = None) -> AsyncMongoStore:
    base = await make_store()
    if not base.is_async:
        pytest.skip("coalescing is AsyncMongoStore's")
    if _is_real(base):
        pytest.skip("the rejection is injected into the mongomock backends")
    if wrap is None:
        return base.store  # type: ignore[return-value]
    api = await make_store(collection=wrap(base.store.collection), setup=False)
    return api.store  # type: ignore[return-value]


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_a_server_rejection_fails_only_its_caller(make_store: MakeStore) -> None:
    store = await async_store(make_store, lambda c: RejectKey(c, "bad"))
    puts = [store.aput(("t",), f"k{i}", {"v": i}) for i in range(49)] + [store.aput(("t",), "bad", {"v": -1})]
    results = await asyncio.gather(*puts, store.aget(("t",), "k0"), return_exceptions=True)
    assert results[:49] == [None] * 49
    err = results[49]
    assert isinstance(err, WriteError) and [(ns, k) for ns, k, _ in err.failures] == [(("t",), "bad")]
    assert err.stored == frozenset() and "not stored" in str(err)
    assert results[50] is None  # the read of the same tick is answered (state before the batch)
    assert sorted([i.key for i in await store.asearch(("t",), limit=100)]) == sorted(f"k{i}" for i in range(49))


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_collapsed_callers_share_their_write_outcome(make_store: MakeStore) -> None:
    """Two aputs of one key in one tick collapse to the last; if that write is rejected,
    neither caller is told its value was written (the first's never was)."""
    store = await async_store(make_store, lambda c: RejectKey(c, "same"))
    results = await asyncio.gather(
        store.aput(("t",), "same", {"v": 1}),
        store.aput(("t",), "same", {"v": 2}),
        store.aput(("t",), "other", {"v": 3}),
        return_exceptions=True,
    )
    assert isinstance(results[0], WriteError) and isinstance(results[1], WriteError)
    assert results[2] is None


BAD_CALLS: list[Any] = [
    pytest.param(lambda s: s.aput(("t",), "k", {"v": 1}, ttl=float("inf")), ValueError, id="ttl-inf"),
    pytest.param(lambda s: s.aput(("t",), "k", {"v": 1}, ttl=float("nan")), ValueError, id="ttl-nan"),
    pytest.param(lambda s: s.aput(("t",), "k", {"v": 1}, ttl=1e10), ValueError, id="ttl-huge"),
    pytest.param(lambda s: s.aput(("t", "\ud800"), "k", {"v": 1}), InvalidNamespaceError, id="surrogate-label"),
    pytest.param(lambda s: s.aput(("t",), "\ud800", {"v": 1}), InvalidValueError, id="surrogate-key"),
    pytest.param(lambda s: s.aput(("t",), "k", {"v": "\udfff"}), InvalidValueError, id="surrogate-value"),
    pytest.param(lambda s: s.aget(("t", "\ud800"), "k"), InvalidNamespaceError, id="surrogate-get"),
    pytest.param(lambda s: s.asearch(("t",), filter={"n": {"$lt": {1, 2}}}), ValueError, id="set-filter"),
    pytest.param(lambda s: s.alist_namespaces(prefix=("a", "\ud800")), InvalidNamespaceError, id="surrogate-list"),
    pytest.param(lambda s: s.aput(("langgraph",), "k", {"v": 1}), InvalidNamespaceError, id="put-langgraph"),
    pytest.param(lambda s: s.aput((), "k", {"v": 1}), InvalidNamespaceError, id="put-empty"),
]


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
@pytest.mark.parametrize(("bad", "error"), BAD_CALLS)
async def test_a_bad_call_fails_before_queueing_and_alone(
    make_store: MakeStore, bad: Callable[[AsyncMongoStore], Any], error: type[Exception]
) -> None:
    store = await async_store(make_store)
    good = [store.aput(("t",), f"k{i}", {"v": i}) for i in range(49)]
    results = await asyncio.gather(*good[:25], bad(store), *good[25:], return_exceptions=True)
    assert isinstance(results[25], error), results[25]
    assert [r for i, r in enumerate(results) if i != 25] == [None] * 49
    assert len(await store.asearch(("t",), limit=100)) == 49


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_calls_langgraph_allows_succeed_among_many(make_store: MakeStore) -> None:
    """adelete((), k), adelete(("langgraph",), k) and list namespaces are valid calls:
    they neither fail nor spoil the 49 puts coalesced with them."""
    store = await async_store(make_store)
    good = [store.aput(("t",), f"k{i}", {"v": i}) for i in range(49)]
    extra = [
        store.adelete((), "k"),
        store.adelete(("langgraph",), "k"),
        store.aput(["t", "list"], "k", {"v": "list"}),  # type: ignore[arg-type]
        store.aget(["t"], "k0"),  # type: ignore[arg-type]
        store.asearch(["t"], limit=100),  # type: ignore[arg-type]
        store.alist_namespaces(prefix=["t"]),  # type: ignore[arg-type]
    ]
    results = await asyncio.gather(*good, *extra)
    assert results[:52] == [None] * 52
    assert results[52] is None and results[53] == [] and results[54] == []  # reads see the state before
    assert len(await store.asearch(("t",), limit=100)) == 50
    assert (await store.aget(("t", "list"), "k")).value == {"v": "list"}  # type: ignore[union-attr]


# --------------------------------------------------------------------------- hashes listed, vectors missing


async def _remove_vectors(api: StoreAPI) -> None:
    """What the server's TTL monitor (or a racing delete) leaves: the item, no vectors."""
    coll = api.store.vectors_collection
    if api.is_async:
        await coll.delete_many({})
    else:
        coll.delete_many({})


async def test_items_whose_vectors_vanished_are_unscored_counted_and_repaired(make_semantic_store: MakeStore) -> None:
    """refresh_on_read can revive an item whose vectors the TTL monitor already removed, and a
    delete or sweep can land between a re-put's hash read and its write: either way the item
    lists hashes with no vectors. It is returned unscored, counted, and its next put re-embeds."""
    emb = HashingEmbeddings(384)
    api = await make_semantic_store(index=text_index(emb, ["text"]))
    if _is_real(api):
        pytest.skip("the vectors are removed behind the store's back on the fakes")
    await api.put(("u",), "k", {"text": "pizza with cheese"})
    await api.put(("u",), "other", {"text": "sushi rolls"})
    await _remove_vectors(api)
    found = await api.search(("u",), query="pizza")
    assert sorted((i.key, i.score) for i in found) == [("k", None), ("other", None)]
    assert (await api.status())["items_missing_vectors"] == 2
    emb.reset_counters()
    await api.put(("u",), "k", {"text": "pizza with cheese"})  # same text: re-embedded all the same
    assert emb.calls == 1
    top = (await api.search(("u",), query="pizza"))[0]
    assert top.key == "k" and top.score is not None and top.score > 0.5
    assert (await api.status())["items_missing_vectors"] == 1


def test_a_delete_racing_a_re_put_leaves_the_item_with_its_vector() -> None:
    """The interleaving itself: the re-put reads the stored hashes, a delete lands, the re-put writes
    (issue 34: it rewrites the unchanged text's whole vector document, so the item it lists is backed)."""
    from mongostore.drivers.mongomock_compat import in_memory_collection

    emb = HashingEmbeddings(64)
    items = in_memory_collection(collection_name="race")
    vectors = items.database["race_vectors"]
    store = MongoStore(items, index=text_index(emb, ["text"]))
    store.setup()
    store.put(("u",), "k", {"text": "pizza"})

    class ReadCursor(list[Any]):
        def batch_size(self, n: int) -> ReadCursor:
            return self

    class DeleteAfterHashRead:
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self.armed = True

        def __getattr__(self, name: str) -> Any:
            attr = getattr(self._inner, name)
            if name != "find":
                return attr

            def find(filter: Any, *a: Any, **kw: Any) -> Any:
                docs = list(attr(filter, *a, **kw))
                if self.armed and "item_id" in filter:  # the re-put's read of stored hashes
                    self.armed = False
                    MongoStore(items, index=text_index(emb, ["text"])).delete(("u",), "k")
                return ReadCursor(docs)

            return find

    racing = MongoStore(items, index=text_index(emb, ["text"]), vectors_collection=DeleteAfterHashRead(vectors))
    racing.put(("u",), "k", {"text": "pizza"})  # unchanged text: its stored vector, written again
    assert vectors.count_documents({}) == 1 and items.count_documents({}) == 1
    assert store.search(("u",), query="pizza")[0].score == pytest.approx(1.0)
    assert store.status()["items_missing_vectors"] == 0 and store.status()["stale_vectors"] == 0


async def test_a_refresh_that_was_not_acknowledged_is_reported(make_store: MakeStore) -> None:
    """A TTL refresh is a write: a write-concern error on it reaches the reader that caused
    it (sync: the batch's caller), while a read of the same batch without one is answered."""
    calls = Calls()
    api = await faulty_store(make_store, calls, indexed=False)
    await api.put(("t",), "ttl", {"v": 1}, ttl=60)
    await api.put(("t",), "plain", {"v": 2})
    calls.arm(1, "write-concern")  # call 0: the gets' find; call 1: the refresh's bulk write
    if api.is_async:
        store = api.store
        assert isinstance(store, AsyncMongoStore)
        refreshed, plain = await asyncio.gather(
            store.aget(("t",), "ttl"), store.aget(("t",), "plain"), return_exceptions=True
        )
        assert isinstance(refreshed, BulkWriteError)
        assert plain is not None and plain.value == {"v": 2}  # type: ignore[union-attr]
    else:
        with pytest.raises(BulkWriteError):
            await api.batch([GetOp(("t",), "ttl"), GetOp(("t",), "plain")])
    assert calls.injected


@pytest.mark.parametrize("make_store", ["sync-mongomock", "async-mock", "async-motor-mock"], indirect=True)
async def test_a_write_concern_error_on_an_unchanged_re_put_raises(make_store: MakeStore) -> None:
    """An unchanged re-put writes its item and retags its vectors (no re-embedding); a
    write-concern error on any of its writes reaches the caller (issue 26.5: the retag's
    was once read as "nothing matched" and the put returned normally)."""
    calls = Calls()
    api = await faulty_store(make_store, calls, indexed=True)
    await api.put(("wc",), "k", {"text": "unchanged text", "v": 1})
    calls.arm(-1, "")
    await api.put(("wc",), "k", {"text": "unchanged text", "v": 2})
    total = calls.n
    bulk_positions = []
    for at in range(total):
        calls.arm(at, "write-concern")
        try:
            await api.put(("wc",), "k", {"text": "unchanged text", "v": 3 + at})
        except BulkWriteError as exc:
            assert exc.details["writeConcernErrors"] == [WC_ERROR]
            bulk_positions.append(at)
        except AutoReconnect:
            continue  # the fault landed on a read: a network error, raised too
        else:
            assert not calls.injected, f"a write-concern error at call {at} returned normally"
    assert len(bulk_positions) >= 2  # the vectors' retag and the item's write each raised
