"""The async local store never blocks its event loop (issue 29 item 1).

The Agent Server (``langgraph dev``) runs every request on one loop and refuses blocking
calls on it (``blockbuster``: ``os.mkdir``, ``open``, file reads and writes, lock waits).
``AsyncMongoStore.local()`` runs its SQLite transactions (and waits for another process's write
lock) on the engine's own thread; these tests run it under blockbuster, and with another process
holding the lock while the loop must keep running.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.embedded import LocalCollection, LocalDB, open_local
from mongostore.tools.embeddings import HashingEmbeddings

blockbuster = pytest.importorskip("blockbuster", reason="blockbuster comes with langgraph-api (the test extra)")

SRC = str(Path(__file__).resolve().parents[2] / "src")
NS = ("users", "alice")


def index() -> dict[str, object]:
    return {"dims": 16, "embed": HashingEmbeddings(16), "fields": ["text"]}


async def test_every_call_of_the_async_local_store_runs_off_the_loop(tmp_path: Path) -> None:
    directory = tmp_path / "not-yet-made"  # the first call makes it: os.mkdir, off the loop
    with blockbuster.blockbuster_ctx(["mongostore"]):
        store = AsyncMongoStore.local(directory, index=index(), ttl={"default_ttl": 60})
        await store.setup()
        await store.aput(NS, "k1", {"text": "I like pizza", "n": 1})
        await store.aput(NS, "k2", {"text": "my sister lives in Lisbon", "n": 2})
        got = await store.aget(NS, "k1")
        assert got is not None and got.value["n"] == 1
        hits = await store.asearch(("users",), query="where does my sister live", limit=1)
        assert [h.key for h in hits] == ["k2"]
        assert [i.key for i in await store.asearch(NS, filter={"n": {"$gte": 2}})] == ["k2"]
        assert await store.alist_namespaces(prefix=("users",)) == [NS]
        results = await store.abatch([PutOp(NS, "k3", {"text": "three"}), GetOp(NS, "k2"), SearchOp(NS)])
        assert results[0] is None and results[1] is not None
        counts = await store.aaggregate(("users",), [{"$count": "n"}])
        assert counts == [{"n": 3}]
        assert (await store.status())["server_version"].startswith("the local store")
        assert await store.sweep_ttl() == 0
        await store.adelete(NS, "k1")
        assert await store.aget(NS, "k1") is None
        await asyncio.gather(*(store.aput(NS, f"c{i}", {"text": f"concurrent {i}"}) for i in range(10)))
    again = MongoStore.local(directory, index=index())
    assert sorted(i.key for i in again.search(NS, limit=50)) == sorted(["k2", "k3"] + [f"c{i}" for i in range(10)])


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {src!r})
    from mongostore.drivers.embedded import LocalDB
    engine = LocalDB({path!r}, "mongostore")
    with engine.unit(), engine.writing():
        print("locked", flush=True)
        time.sleep({seconds})
    """
)


def hold_the_lock(directory: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(src=SRC, path=str(directory), seconds=seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


async def ticks_while(awaitable: asyncio.Future[object] | asyncio.Task[object]) -> int:
    """How often a 20 ms ticker ran on the loop until ``awaitable`` was done."""
    ticks = 0
    while not awaitable.done():
        await asyncio.sleep(0.02)
        ticks += 1
    return ticks


async def test_the_loop_keeps_running_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    store = AsyncMongoStore.local(tmp_path)
    await store.setup()
    holder = hold_the_lock(tmp_path, 1.5)
    try:
        started = time.monotonic()
        put = asyncio.ensure_future(store.abatch([PutOp(NS, "k", {"v": 1})]))
        ticks = await ticks_while(put)
        await put
        waited = time.monotonic() - started
    finally:
        assert holder.wait(timeout=30) == 0
        assert holder.stdout is not None
        holder.stdout.close()
    assert waited > 0.5 and ticks >= 10  # the loop ran all along (a blocked loop ticks once)
    got = await store.aget(NS, "k")
    assert got is not None and got.value == {"v": 1}


async def test_a_call_cancelled_while_waiting_for_the_lock_leaves_it_free(tmp_path: Path) -> None:
    store = AsyncMongoStore.local(tmp_path)
    await store.setup()
    holder = hold_the_lock(tmp_path, 1.0)
    try:
        put = asyncio.ensure_future(store.abatch([PutOp(NS, "cancelled", {"v": 1})]))
        await asyncio.sleep(0.2)
        put.cancel()
        with pytest.raises(asyncio.CancelledError):
            await put
    finally:
        assert holder.wait(timeout=30) == 0
        assert holder.stdout is not None
        holder.stdout.close()
    await asyncio.wait_for(store.abatch([PutOp(NS, "after", {"v": 2})]), 30)
    # Another engine (as another process would) takes the lock: it was released.
    other = LocalDB(tmp_path, "mongostore")

    def take() -> bool:
        with other.unit(), other.writing():
            return True

    assert await asyncio.wait_for(asyncio.to_thread(take), 10)
    assert MongoStore.local(tmp_path).get(NS, "after") is not None


def count_write_transactions(engine: LocalDB, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one per write transaction the engine begins."""
    begun: list[int] = []
    real = engine._begin_write

    def counting(state: object) -> None:
        begun.append(1)
        real(state)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_begin_write", counting)
    return begun


async def test_concurrent_batches_are_one_transaction_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = AsyncMongoStore.local(tmp_path)
    b = AsyncMongoStore.local(tmp_path)  # another store on the same engine
    await a.setup()
    begun = count_write_transactions(open_local(tmp_path, "mongostore"), monkeypatch)
    n = 20
    await asyncio.gather(
        *(s.abatch([PutOp(NS, f"{name}{i}", {"i": i})]) for i in range(n) for name, s in (("a", a), ("b", b)))
    )
    assert len(begun) == 2 * n  # one transaction per batch: none joined another's
    assert len(await a.asearch(NS, limit=100)) == 2 * n


async def test_a_nested_transaction_joins_the_outer_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AsyncMongoStore.local(tmp_path)
    engine = open_local(tmp_path, "mongostore")
    await store.setup()
    begun = count_write_transactions(engine, monkeypatch)
    outside = MongoStore(LocalCollection(LocalDB(tmp_path, "mongostore"), "memories"))  # another engine
    async with engine.atransaction():
        await store.abatch([PutOp(NS, "a", {"v": 1})])
        await asyncio.gather(store.abatch([PutOp(NS, "b", {"v": 2})]), store.setup())
        assert engine.in_atransaction() and len(begun) == 1
        assert await asyncio.to_thread(outside.search, NS) == []  # not committed yet
    assert len(begun) == 1 and not engine.in_atransaction()
    assert len(await asyncio.to_thread(outside.search, NS)) == 2


async def test_the_in_memory_async_store_is_unchanged(tmp_path: Path) -> None:
    with blockbuster.blockbuster_ctx(["mongostore"]):
        store = AsyncMongoStore.in_memory(index=index())
        await store.setup()
        await store.aput(NS, "k", {"text": "hi"})
        assert [h.key for h in await store.asearch(NS, query="hi")] == ["k"]


async def test_a_sync_call_on_the_loop_during_an_async_one_fails_clearly_instead_of_hanging(tmp_path: Path) -> None:
    store = AsyncMongoStore.local(tmp_path)
    await store.setup()
    engine = open_local(tmp_path, "mongostore")
    sync = MongoStore.local(tmp_path)
    async with engine.atransaction():
        await store.abatch([PutOp(NS, "mine", {"v": 0})])  # (in this task: it joins) the write lock is held now
        assert sync.get(NS, "k") is None  # a read on the loop does not wait (WAL)
        with pytest.raises(RuntimeError, match=r"on the event loop would wait forever.*asyncio\.to_thread"):
            sync.put(NS, "k", {"v": 1})
        # From a thread it waits its turn, and gets it once the async transaction ends.
        pending = asyncio.ensure_future(asyncio.to_thread(sync.put, NS, "k", {"v": 1}))
        await asyncio.sleep(0.1)
        assert not pending.done()
    await asyncio.wait_for(pending, 10)
    got = await store.aget(NS, "k")
    assert got is not None and got.value == {"v": 1}
