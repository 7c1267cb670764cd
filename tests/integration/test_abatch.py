"""``AsyncMongoStore``'s ``a*`` methods go through ``abatch``, as LangGraph's
``AsyncBatchedBaseStore`` does (issue 26.3): whatever wraps or overrides ``abatch``
sees every op, and the local store saves its file once per operation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from langgraph.store.base import GetOp, PutOp

from mongostore import AsyncMongoStore
from mongostore.drivers.embedded.sqlite import LocalDB


async def test_concurrent_gets_are_deduplicated_into_one_abatch() -> None:
    """langgraph-checkpoint's ``test_async_batch_store_deduplication``, on our store."""
    store = AsyncMongoStore.in_memory()
    same_doc, diff_doc = {"value": "same"}, {"value": "different"}
    await asyncio.gather(
        store.aput(namespace=("test",), key="same", value=same_doc),
        store.aput(namespace=("test",), key="different", value=diff_doc),
    )
    with mock.patch.object(AsyncMongoStore, "abatch", autospec=True, side_effect=AsyncMongoStore.abatch) as spy:
        results = await asyncio.gather(
            store.aget(namespace=("test",), key="same"),
            store.aget(namespace=("test",), key="same"),
            store.aget(namespace=("test",), key="different"),
        )
    assert results[0] == results[1] and results[0] != results[2]
    assert results[0] is not None and results[0].value == same_doc
    assert results[2] is not None and results[2].value == diff_doc
    assert len(spy.call_args_list) == 1
    ops = list(spy.call_args_list[0].args[1])
    assert len(ops) == 2
    assert GetOp(("test",), "same", refresh_ttl=True) in ops
    assert GetOp(("test",), "different", refresh_ttl=True) in ops


async def test_a_subclass_overriding_abatch_sees_every_op() -> None:
    seen: list[str] = []

    class Traced(AsyncMongoStore):
        async def abatch(self, ops: Any) -> Any:
            ops = list(ops)
            seen.extend(type(op).__name__ for op in ops)
            return await super().abatch(ops)

    store = Traced.in_memory(collection_name="traced")
    await store.aput(("a",), "k", {"v": 1})
    assert (await store.aget(("a",), "k")) is not None
    assert [i.key for i in await store.asearch(("a",))] == ["k"]
    await store.adelete(("a",), "k")
    assert seen == ["SizedPut", "GetOp", "SearchOp", "PutOp"]


async def test_a_wrapped_abatch_still_fails_only_the_rejected_put() -> None:
    """The outcome travels with the task, so a wrapper that calls the real abatch keeps
    per-caller errors: the put the server refused fails, the get beside it is answered."""
    from mongostore import WriteError

    store = AsyncMongoStore.in_memory(collection_name="wrapped")
    coll = store.collection.sync
    await store.setup()
    await store.aput(("a",), "ok", {"v": 1})
    coll.create_index("value.u", unique=True, sparse=True)
    await store.aput(("a",), "first", {"u": 1})
    real = store.abatch

    async def wrapper(ops: Any) -> Any:
        return await real(ops)

    store.abatch = wrapper  # type: ignore[method-assign]
    got, dup = await asyncio.gather(
        store.aget(("a",), "ok"), store.aput(("a",), "dup", {"u": 1}), return_exceptions=True
    )
    assert got is not None and not isinstance(got, BaseException) and got.value == {"v": 1}
    assert isinstance(dup, WriteError)


async def test_the_async_local_store_writes_one_transaction_per_operation(tmp_path: Path) -> None:
    store = AsyncMongoStore.local(tmp_path)
    await store.setup()
    saves = 0
    real = LocalDB._begin_write

    def counting(self: LocalDB, state: Any) -> None:
        nonlocal saves
        saves += 1
        real(self, state)

    with mock.patch.object(LocalDB, "_begin_write", counting):
        await store.aput(("a",), "k", {"v": 1})
        assert saves == 1
        await store.aget(("a",), "k")
        await store.asearch(("a",))
        assert saves == 1  # reads save nothing
        await store.abatch([PutOp(("a",), f"k{i}", {"v": i}) for i in range(5)])
        assert saves == 2


async def test_a_queued_put_is_not_hashed_again_by_its_batch() -> None:
    """``aput`` finds and checks the put's texts before queueing; the batch takes them as
    they are (the same texts, hashes and stored vector) instead of extracting them again."""
    from mongostore.core.plan import batch as batch_module
    from mongostore.tools.embeddings import HashingEmbeddings

    store = AsyncMongoStore.in_memory(index={"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"]})
    with mock.patch.object(batch_module, "indexed_texts", wraps=batch_module.indexed_texts) as again:
        await store.aput(("a",), "k", {"text": "hello"})
        await store.abatch([PutOp(("a",), "b", {"text": "there"})])  # not queued through aput: found here
    assert [c.args[1] for c in again.call_args_list] == ["b"]
    assert (await store.asearch(("a",), query="hello"))[0].key == "k"


async def test_sync_calls_from_another_thread_run_on_the_stores_loop_and_are_refused_on_it() -> None:
    """What LangGraph's batched stores give sync callers: from a worker thread (a sync node run in a
    thread by an async graph) ``get``/``put``/``search``/``delete`` run on the store's loop; on the
    loop's own thread they would deadlock, so they are refused with the async method to use."""
    store = AsyncMongoStore.in_memory(collection_name="sync_calls")

    def sync_work() -> list[Any]:
        store.put(("a",), "k", {"v": 1})
        got = store.get(("a",), "k")
        found = [i.key for i in store.search(("a",))]
        store.delete(("a",), "k")
        return [got.value if got else None, found, store.get(("a",), "k")]

    assert await asyncio.to_thread(sync_work) == [{"v": 1}, ["k"], None]
    with pytest.raises(asyncio.InvalidStateError, match="aget"):
        store.get(("a",), "k")


def test_coalesced_ops_are_deduplicated_as_langgraph_does() -> None:
    """``dedupe_ops`` (ours, LangGraph's rules): equal reads run once, even holding an unhashable
    filter; the last put or delete of an item wins; ops of different types never merge."""
    from langgraph.store.base import ListNamespacesOp, SearchOp
    from langgraph.store.base.batch import _dedupe_ops  # the reference we must agree with (a test only)

    from mongostore.core.plan import dedupe_ops

    ops: list[Any] = [
        GetOp(("a",), "k"),
        PutOp(("a",), "k", {"v": 1}),
        GetOp(("a",), "k"),
        SearchOp(("a",), {"tags": ["x"]}),
        PutOp(("a",), "k", None),
        SearchOp(("a",), {"tags": ["x"]}),
        ListNamespacesOp((), None, 10, 0),
        PutOp(("b",), "k", {"v": 2}),
    ]
    answer, run = dedupe_ops(ops)
    assert run == [GetOp(("a",), "k"), PutOp(("a",), "k", None), SearchOp(("a",), {"tags": ["x"]}),
                   ListNamespacesOp((), None, 10, 0), PutOp(("b",), "k", {"v": 2})]  # fmt: skip
    assert answer == [0, 1, 0, 2, 1, 2, 3, 4]
    theirs = _dedupe_ops(ops)
    assert (theirs[0], theirs[1]) == (answer, run)
