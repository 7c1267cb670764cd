"""The workloads, the data they run on, and how a run is recorded and replayed.

Both stores get the same data, written in each store's own document format (each
store writes it, through a capture double, then it is bulk-inserted), and run the
same LangGraph calls. A *recording* runs a workload once against mongomock with the
fake Atlas (``tests/fakes/atlas.py``) behind a counting proxy: that gives the round
trips, documents, bytes and embedding calls, and a tape of the server's answers.
A *replay* runs the same workload against a double that gives those answers
instantly (decoded from BSON), optionally after a fixed delay per round trip.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from _common import (
    THEIRS_INDEX_TIMEOUT,
    AsyncProxy,
    CallLog,
    CaptureCollection,
    MemoEmbeddings,
    SyncProxy,
    Tape,
    Wiring,
    async_backend,
    fake_backend,
    ours_index,
    real_server,
    sync_backend,
    sync_db,
    theirs_index,
)
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.backend import backend_for

TOPICS = ["pizza", "hiking", "jazz", "python", "coffee", "chess", "sailing", "sushi", "tennis", "poetry"]
USER = ("bench", "u0000")
PUTS_NS = ("bench", "puts")
COLL = "memories"
AGENT_ITEMS = 10
SEARCH_SETTLE_SECONDS = 5.0


def memory(i: int, salt: str = "") -> dict[str, Any]:
    a, b = TOPICS[i % 10], TOPICS[(i * 3 + 1) % 10]
    return {"text": f"memory {salt}{i}: likes {a} and {b}, tried {TOPICS[(i * 7 + 2) % 10]} once", "n": i}


def agent_ns(j: int) -> tuple[str, ...]:
    return ("agents", f"a{j:02d}")


def default_layout(indexed: bool) -> list[PutOp]:
    """The data of the main workloads: 100 items in one user's namespace and 50 agent
    namespaces of 10 items; without an index (the list_namespaces and unindexed-put
    workloads), also 999 more users with 1 item each: 1,000 namespaces under ``("bench",)``.
    """
    ops = [PutOp(USER, f"k{i}", memory(i)) for i in range(100)]
    ops += [PutOp(agent_ns(j), f"k{i}", memory(i, f"a{j}-")) for j in range(50) for i in range(AGENT_ITEMS)]
    if not indexed:
        ops += [PutOp(("bench", f"u{u:04d}"), "k0", memory(u, "u")) for u in range(1, 1000)]
    return ops


def grid_layout(namespaces: int, per_namespace: int) -> list[PutOp]:
    """``namespaces`` namespaces ``("bench", "u0000")``... with ``per_namespace`` items each."""
    return [
        PutOp(("bench", f"u{u:04d}"), f"k{i}", memory(u * per_namespace + i))
        for u in range(namespaces)
        for i in range(per_namespace)
    ]


# --------------------------------------------------------------------------- workloads

SyncFn = Callable[[BaseStore], Any]
AsyncFn = Callable[[Any], Awaitable[Any]]


def _agent_ops(j: int, tag: str) -> tuple[SearchOp, list[PutOp], list[GetOp]]:
    ns = agent_ns(j)
    search = SearchOp(ns, query=f"does agent {j} like {TOPICS[j % 10]} or {TOPICS[(j + 3) % 10]}", limit=5)
    # "step:update" puts the keys "step" wrote, with new texts (an agent revising its memories).
    key_tag, _, text_tag = tag.partition(":")
    puts = [PutOp(ns, f"{key_tag}-{i}", memory(5000 + i, f"{text_tag or key_tag}-a{j}-")) for i in range(3)]
    gets = [GetOp(ns, f"k{i}") for i in (j % AGENT_ITEMS, (j + 7) % AGENT_ITEMS)]
    return search, puts, gets


def agent_step_sync(store: BaseStore, j: int = 0, tag: str = "step") -> None:
    """What an agent does per step, as six calls: recall, remember three things, read two."""
    search, puts, gets = _agent_ops(j, tag)
    store.search(search.namespace_prefix, query=search.query, limit=search.limit)
    for p in puts:
        assert p.value is not None
        store.put(p.namespace, p.key, p.value)
    for g in gets:
        store.get(g.namespace, g.key)


async def agent_step_async(store: Any, j: int = 0, tag: str = "step") -> None:
    """The same six calls issued together with ``asyncio.gather``."""
    search, puts, gets = _agent_ops(j, tag)
    await asyncio.gather(
        store.asearch(search.namespace_prefix, query=search.query, limit=search.limit),
        *(store.aput(p.namespace, p.key, p.value) for p in puts),
        *(store.aget(g.namespace, g.key) for g in gets),
    )


def agent_step_batch_ops(j: int = 0, tag: str = "stepb") -> list[Any]:
    search, puts, gets = _agent_ops(j, tag)
    return [search, *puts, *gets]


async def agents_async(store: Any, n: int, tag: str) -> None:
    await asyncio.gather(*(agent_step_async(store, j, tag) for j in range(n)))


def _batch(ops: Sequence[Any]) -> tuple[SyncFn, AsyncFn]:
    ops = list(ops)
    return (lambda s: s.batch(ops)), (lambda s: s.abatch(ops))


@dataclass(frozen=True)
class Workload:
    name: str
    label: str
    indexed: bool
    ops: int
    sync: SyncFn | None
    aio: AsyncFn | None
    writes: bool = False


def _wl(
    name: str, label: str, indexed: bool, ops: int, fns: tuple[SyncFn | None, AsyncFn | None], **kw: Any
) -> Workload:
    return Workload(name, label, indexed, ops, fns[0], fns[1], **kw)


GET100 = [GetOp(USER, f"k{i}") for i in range(100)]
PUT1 = PutOp(PUTS_NS, "one", memory(1, "single-"))
PUT100 = [PutOp(PUTS_NS, f"p{i}", memory(i, "put-")) for i in range(100)]
SEMANTIC_QUERY = "who likes jazz and coffee"


def _put1(value: dict[str, Any] | None = None) -> tuple[SyncFn, AsyncFn]:
    ns, key, value = PUT1.namespace, PUT1.key, value or PUT1.value
    return (lambda s: s.put(ns, key, value)), (lambda s: s.aput(ns, key, value))


def workloads() -> list[Workload]:
    """In recording order: reads first, then writes (re-puts after puts)."""
    return [
        _wl("get1", "get", True, 1, (lambda s: s.get(USER, "k1"), lambda s: s.aget(USER, "k1"))),
        _wl("get100", "100 gets, one batch", True, 100, _batch(GET100)),
        _wl(
            "search_page",
            "search page (10 of 100, no query)",
            True,
            1,
            (lambda s: s.search(USER, limit=10), lambda s: s.asearch(USER, limit=10)),
        ),
        _wl(
            "list_ns",
            "list_namespaces over 1,000 (limit 100)",
            False,
            1,
            (
                lambda s: s.list_namespaces(prefix=("bench",), limit=100),
                lambda s: s.alist_namespaces(prefix=("bench",), limit=100),
            ),
        ),
        _wl(
            "semantic",
            "semantic search (10 of 100)",
            True,
            1,
            (
                lambda s: s.search(USER, query=SEMANTIC_QUERY, limit=10),
                lambda s: s.asearch(USER, query=SEMANTIC_QUERY, limit=10),
            ),
        ),
        _wl("put1", "put, no index", False, 1, _put1(), writes=True),
        _wl("put1_idx", "put, indexed", True, 1, _put1(), writes=True),
        # Recorded right after put1_idx, on the same store: a new text under the key it wrote.
        _wl("reput1_idx", "put, indexed, new text of a stored key", True, 1, _put1(memory(2, "s-")), writes=True),
        _wl("put100", "100 puts, one batch, no index", False, 100, _batch(PUT100), writes=True),
        _wl("put100_idx", "100 puts, one batch, indexed", True, 100, _batch(PUT100), writes=True),
        _wl("reput100_idx", "100 re-puts, unchanged, indexed", True, 100, _batch(PUT100), writes=True),
        _wl(
            "agent_step",
            "agent step (1 search + 3 puts + 2 gets)",
            True,
            6,
            (agent_step_sync, agent_step_async),
            writes=True,
        ),
        # Recorded right after agent_step, on the same store: its 3 puts revise the memories that step wrote.
        _wl(
            "agent_step_update",
            "agent step revising 3 stored memories",
            True,
            6,
            (lambda s: agent_step_sync(s, 0, "step:update"), lambda s: agent_step_async(s, 0, "step:update")),
            writes=True,
        ),
        _wl("agent_step_batch", "agent step as one batch", True, 6, _batch(agent_step_batch_ops()), writes=True),
        _wl("agents20", "20 concurrent agents, one step each", True, 120, (None, lambda s: agents_async(s, 20, "c20"))),
        _wl("agents50", "50 concurrent agents, one step each", True, 300, (None, lambda s: agents_async(s, 50, "c50"))),
    ]


# --------------------------------------------------------------------------- loading


def _chunks(ops: list[PutOp], n: int = 1000) -> list[list[PutOp]]:
    return [ops[i : i + n] for i in range(0, len(ops), n)]


def load_ours(backend: Any, puts: list[PutOp], indexed: bool) -> None:
    """Write ``puts`` in our document format into ``backend`` (a fresh collection), fast.

    On mongomock the store writes into a capture double and the documents are inserted
    in one go (mongomock applies each upsert with a full scan). A real server takes
    the store's own writes.
    """
    db = sync_db(backend)
    index = ours_index(MemoEmbeddings()) if indexed else None
    if real_server():
        store = MongoStore(db[COLL], index=index)
        store.setup()
        for chunk in _chunks(puts):
            store.batch(chunk)
        return
    items = CaptureCollection(COLL, db)
    vectors = CaptureCollection(f"{COLL}_vectors", db)
    loader = MongoStore(items, index=index, vectors_collection=vectors)  # type: ignore[arg-type]
    for chunk in _chunks(puts):
        loader.batch(chunk)
    if docs := items.documents():
        db[COLL].insert_many(docs)
    if docs := vectors.documents():
        db[f"{COLL}_vectors"].insert_many(docs)


def load_theirs(backend: Any, puts: list[PutOp], indexed: bool) -> None:
    """Write ``puts`` in langgraph-store-mongodb's document format into ``backend``, fast."""
    from langgraph.store.mongodb import MongoDBStore

    db = sync_db(backend)
    config = theirs_index(MemoEmbeddings()) if indexed else None
    if real_server():
        store = MongoDBStore(db[COLL], index_config=config, auto_index_timeout=THEIRS_INDEX_TIMEOUT)
        for chunk in _chunks(puts):
            store.batch(chunk)
        return
    store = MongoDBStore(fake_backend("scratch"), index_config=config)
    capture = CaptureCollection(COLL, db)
    store.collection = capture  # type: ignore[assignment]
    for chunk in _chunks(puts):
        store.batch(chunk)
    if docs := capture.documents():
        db[COLL].insert_many(docs)


# --------------------------------------------------------------------------- stores under test


@dataclass
class Subject:
    """One store under test on a recorded backend: its proxy wiring and embedder."""

    side: str  # "ours" | "theirs"
    mode: str  # "sync" | "async"
    indexed: bool
    store: Any
    wiring: Wiring
    embed: MemoEmbeddings

    def start(self) -> None:
        self.wiring.log.reset()
        self.wiring.tape = Tape()
        self.embed.reset_counters()


def sync_subject(side: str, puts: list[PutOp], indexed: bool) -> Subject:
    backend = sync_backend(COLL)
    embed = MemoEmbeddings()
    wiring = Wiring(CallLog())
    proxy = SyncProxy(backend, wiring)
    store: Any
    if side == "ours":
        load_ours(backend, puts, indexed)
        # The backend of the collection under the proxy, stated: the store cannot tell it through the proxy.
        store = MongoStore(
            proxy,  # type: ignore[arg-type]
            index=ours_index(embed) if indexed else None,
            backend=backend_for(backend),
        )
        store.setup()
    else:
        from langgraph.store.mongodb import MongoDBStore

        load_theirs(backend, puts, indexed)
        store = MongoDBStore(
            proxy,  # type: ignore[arg-type]
            index_config=theirs_index(embed) if indexed else None,
            auto_index_timeout=THEIRS_INDEX_TIMEOUT,
        )
    if real_server() and indexed:
        time.sleep(SEARCH_SETTLE_SECONDS)  # Atlas Search indexes new documents asynchronously
    return Subject(side, "sync", indexed, store, wiring, embed)


async def async_subject(side: str, puts: list[PutOp], indexed: bool) -> Subject:
    """Ours: ``AsyncMongoStore`` on the async fake. Theirs: its sync store (its async API is a thread pool)."""
    if side == "theirs":
        sub = sync_subject(side, puts, indexed)
        sub.mode = "async"
        return sub
    backend = async_backend(COLL)
    embed = MemoEmbeddings()
    wiring = Wiring(CallLog())
    load_ours(backend, puts, indexed)
    # As in sync_subject: the proxy hides the client's class, by which the store tells an
    # emulated engine (no server commands) from a server, so the store is told.
    store = AsyncMongoStore(
        AsyncProxy(backend, wiring),
        index=ours_index(embed) if indexed else None,
        backend=backend_for(backend),
    )
    await store.setup()
    if real_server() and indexed:
        await asyncio.sleep(SEARCH_SETTLE_SECONDS)
    return Subject("ours", "async", indexed, store, wiring, embed)


@dataclass
class Recording:
    side: str
    mode: str
    workload: Workload
    tape: Tape
    log: CallLog
    embed_calls: int
    embed_empty: int
    embed_texts: int
    result: Any = None
    wall_ms: float | None = None  # median wall time of direct runs (real-server mode), if asked


def _finish(sub: Subject, w: Workload, result: Any) -> Recording:
    assert sub.wiring.tape is not None
    log = CallLog()
    log.calls.update(sub.wiring.log.calls)
    log.round_trips = sub.wiring.log.round_trips
    log.docs_in, log.bytes_in, log.bytes_out = sub.wiring.log.docs_in, sub.wiring.log.bytes_in, sub.wiring.log.bytes_out
    log.backend_seconds = sub.wiring.log.backend_seconds
    e = sub.embed
    return Recording(sub.side, sub.mode, w, sub.wiring.tape, log, e.calls, e.empty_calls, e.texts_embedded, result)


def record_sync(sub: Subject, w: Workload, repeats: int = 0) -> Recording:
    """Record one run; then, if ``repeats``, time that many more direct runs (wall time)."""
    assert w.sync is not None
    sub.start()
    result = w.sync(sub.store)
    rec = _finish(sub, w, result)
    if repeats:
        sub.wiring.tape, sub.wiring.measure = None, False
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            w.sync(sub.store)
            times.append(time.perf_counter() - t0)
        sub.wiring.measure = True
        rec.wall_ms = statistics.median(times) * 1000
    return rec


async def record_async(sub: Subject, w: Workload, repeats: int = 0) -> Recording:
    assert w.aio is not None
    sub.start()
    result = await w.aio(sub.store)
    rec = _finish(sub, w, result)
    if repeats:
        sub.wiring.tape, sub.wiring.measure = None, False
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            await w.aio(sub.store)
            times.append(time.perf_counter() - t0)
        sub.wiring.measure = True
        rec.wall_ms = statistics.median(times) * 1000
    return rec


def _cannot_run(side: str, mode: str, indexed: bool, exc: Exception) -> None:
    """A store that cannot be built: skipped on a real server (which may lack Atlas Search);
    on the fake Atlas both stores always can, so there it is a bench bug and raises here,
    not later as a recording missing from the results."""
    if not real_server():
        raise RuntimeError(f"{side} {mode} (indexed={indexed}) cannot be built on the fake Atlas") from exc
    print(f"  ! {side} {mode} (indexed={indexed}) cannot run here: {type(exc).__name__}: {exc}"[:300])


def record_all(
    layout: Callable[[bool], list[PutOp]],
    wls: Sequence[Workload],
    modes: Sequence[str] = ("sync", "async"),
    repeats: int = 0,
) -> list[Recording]:
    """Record every workload for both stores, sync and async, each on its own backend
    loaded with ``layout(indexed)``.

    With ``repeats``, each recording is followed by that many timed direct runs
    (``Recording.wall_ms``): the real-server mode of the latency benchmark.

    A store that cannot be built on a real server (e.g. langgraph-store-mongodb with an
    index on a server without Atlas Search) is reported and its workloads skipped; on the
    fake Atlas that is an error (``_cannot_run``).
    """
    recs: list[Recording] = []
    for side in ("ours", "theirs"):
        if "sync" in modes:
            for ix in sorted({w.indexed for w in wls if w.sync}):
                try:
                    sub = sync_subject(side, layout(ix), ix)
                except Exception as exc:
                    _cannot_run(side, "sync", ix, exc)
                    continue
                recs += [record_sync(sub, w, repeats) for w in wls if w.sync is not None and w.indexed == ix]
        if "async" in modes:

            async def run_async_side(side: str = side) -> list[Recording]:
                out: list[Recording] = []
                for ix in sorted({w.indexed for w in wls if w.aio}):
                    try:
                        sub = await async_subject(side, layout(ix), ix)
                    except Exception as exc:
                        _cannot_run(side, "async", ix, exc)
                        continue
                    for w in wls:
                        if w.aio is not None and w.indexed == ix:
                            out.append(await record_async(sub, w, repeats))
                return out

            recs.extend(asyncio.run(run_async_side()))
    return recs


def find(recs: Sequence[Recording], side: str, mode: str, name: str) -> Recording | None:
    for r in recs:
        if r.side == side and r.mode == mode and r.workload.name == name:
            return r
    return None
