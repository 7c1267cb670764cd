"""Batches: op order, reads before writes, last-wins puts, round trips, async coalescing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import ASYNC_BACKENDS, Counting, MakeStore, StoreAPI
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from mongostore import AsyncMongoStore


async def counted(make_store: MakeStore, **kwargs: Any) -> tuple[StoreAPI, Counting]:
    """A store whose collection counts the calls reaching it (works on every backend)."""
    base = await make_store(**kwargs)
    counting = Counting(base.store.collection)
    return await make_store(collection=counting, setup=False, **kwargs), counting


async def test_results_in_op_order(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    results = await api.batch(
        [
            ListNamespacesOp(),
            GetOp(("a",), "missing"),
            PutOp(("b",), "new", {"v": 2}),
            SearchOp(("a",)),
            GetOp(("a",), "k"),
            PutOp(("a",), "k", None),
        ]
    )
    assert len(results) == 6
    assert results[0] == [("a",)]
    assert results[1] is None
    assert results[2] is None
    assert [i.key for i in results[3]] == ["k"]
    assert isinstance(results[4], Item) and results[4].value == {"v": 1}
    assert results[5] is None
    assert await api.get(("a",), "k") is None
    assert (await api.get(("b",), "new")).value == {"v": 2}


async def test_reads_see_the_state_before_the_batch(make_store: MakeStore) -> None:
    """The contract's section 1.9 example, on ours and on InMemoryStore."""
    api = await make_store()
    ref = InMemoryStore()
    ops = [
        PutOp(("b",), "k", {"v": 1}),
        GetOp(("b",), "k"),
        PutOp(("b",), "k", {"v": 2}),
        SearchOp(("b",)),
        ListNamespacesOp(),
        PutOp(("c",), "c", {"v": 3}),
    ]
    await api.put(("b",), "k", {"v": 0})
    ref.put(("b",), "k", {"v": 0})
    ours = await api.batch(ops)
    theirs = ref.batch(ops)
    assert ours[1].value == theirs[1].value == {"v": 0}
    assert [i.value for i in ours[3]] == [i.value for i in theirs[3]] == [{"v": 0}]
    assert ours[4] == theirs[4] == [("b",)]
    assert (await api.get(("b",), "k")).value == {"v": 2}
    assert (await api.get(("c",), "c")).value == {"v": 3}


async def test_a_new_item_is_not_visible_to_reads_of_its_own_batch(make_store: MakeStore) -> None:
    api = await make_store()
    results = await api.batch([PutOp(("n",), "k", {"v": 1}), GetOp(("n",), "k"), SearchOp(("n",)), ListNamespacesOp()])
    assert results[1:] == [None, [], []]
    assert (await api.get(("n",), "k")).value == {"v": 1}


@pytest.mark.parametrize(
    ("values", "final"),
    [
        pytest.param([{"v": 1}, {"v": 2}], {"v": 2}, id="put-put"),
        pytest.param([{"v": 1}, None], None, id="put-delete"),
        pytest.param([None, {"v": 1}], {"v": 1}, id="delete-put"),
        pytest.param([{"v": 1}, None, {"v": 3}], {"v": 3}, id="put-delete-put"),
        pytest.param([None, {"v": 1}, None], None, id="delete-put-delete"),
    ],
)
async def test_puts_to_one_key_last_wins(make_store: MakeStore, values: list[Any], final: Any) -> None:
    api = await make_store()
    await api.put(("d",), "k", {"v": 0})
    ops = [PutOp(("d",), "k", v) for v in values]
    assert await api.batch(ops) == [None] * len(values)
    item = await api.get(("d",), "k")
    assert (item.value if item else None) == final
    ref = InMemoryStore()
    ref.put(("d",), "k", {"v": 0})
    ref.batch(ops)
    ref_item = ref.get(("d",), "k")
    assert (ref_item.value if ref_item else None) == final


async def test_empty_batch(make_store: MakeStore) -> None:
    api, counting = await counted(make_store)
    assert await api.batch([]) == []
    assert counting.calls == []


# --------------------------------------------------------------------------- round trips


async def test_n_gets_are_one_query(make_store: MakeStore) -> None:
    api, counting = await counted(make_store)
    await api.batch([PutOp(("g", f"n{i % 2}"), f"k{i}", {"v": i}) for i in range(10)])
    counting.calls.clear()
    ops = [GetOp(("g", f"n{i % 2}"), f"k{i}") for i in range(10)] + [GetOp(("g",), "missing")]
    results = await api.batch(ops)
    assert [r.value["v"] for r in results[:10]] == list(range(10))
    assert results[10] is None
    assert counting.calls == ["find"]


async def test_n_puts_are_one_bulk_write(make_store: MakeStore) -> None:
    api, counting = await counted(make_store)
    ops: list[Any] = [PutOp(("p", f"n{i % 3}"), f"k{i}", {"v": i}) for i in range(25)]
    ops += [PutOp(("p", "n0"), "k0", None), PutOp(("p", "n1"), "k1", {"v": "again"})]
    await api.batch(ops)
    assert counting.calls == ["bulk_write"]
    assert len(await api.docs()) == 24


async def test_mixed_batch_round_trips(make_store: MakeStore) -> None:
    """N gets -> one find; each search one find; each listing one aggregate; all puts one bulk_write."""
    api, counting = await counted(make_store)
    await api.batch([PutOp(("m",), f"k{i}", {"v": i}) for i in range(5)])
    counting.calls.clear()
    ops: list[Any] = [GetOp(("m",), f"k{i}") for i in range(5)]
    ops += [SearchOp(("m",)), SearchOp(("m",), filter={"v": 1}), ListNamespacesOp()]
    ops += [PutOp(("m",), f"new{i}", {"v": i}) for i in range(5)]
    await api.batch(ops)
    assert sorted(counting.calls) == sorted(["find", "find", "find", _listing(api), "bulk_write"])


async def test_public_methods_go_through_one_call_each(make_store: MakeStore) -> None:
    api, counting = await counted(make_store)
    await api.put(("x",), "k", {"v": 1})
    await api.get(("x",), "k")
    await api.search(("x",))
    await api.list_namespaces()
    await api.delete(("x",), "k")
    assert counting.calls == ["bulk_write", "find", "find", _listing(api), "bulk_write"]


def _listing(api: Any) -> str:
    """The one call of a listing: the distinct paths where the engine skips through its index (the local
    store), else the grouping pipeline."""
    return "distinct" if api.store._io.backend.local_file else "aggregate"


# --------------------------------------------------------------------------- async coalescing


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_concurrent_calls_in_one_tick_are_one_abatch(make_store: MakeStore) -> None:
    api, counting = await counted(make_store)
    store = api.store
    assert isinstance(store, AsyncMongoStore)
    await store.aput(("c",), "k0", {"v": "old"})
    batches: list[list[str]] = []
    real_abatch = store.abatch  # what the coalescing loop calls, as LangGraph's does

    async def spy(ops: Any) -> Any:
        ops = list(ops)
        kinds = (GetOp, PutOp, SearchOp, ListNamespacesOp)  # (a checked put is a PutOp subclass)
        batches.append([next(k.__name__ for k in kinds if isinstance(op, k)) for op in ops])
        return await real_abatch(ops)

    store.abatch = spy  # type: ignore[method-assign]
    counting.calls.clear()
    results = await asyncio.gather(
        *(store.aget(("c",), f"k{i}") for i in range(10)),
        *(store.aput(("c",), f"k{i}", {"v": i}) for i in range(5)),
        store.asearch(("c",)),
    )
    assert len(batches) == 1
    assert sorted(batches[0]) == sorted(["GetOp"] * 10 + ["PutOp"] * 5 + ["SearchOp"])
    # Reads saw the state before the batch.
    assert results[0] is not None and results[0].value == {"v": "old"}
    assert results[1:10] == [None] * 9
    assert [i.key for i in results[15]] == ["k0"]
    assert counting.calls.count("find") == 2 and counting.calls.count("bulk_write") == 1
    assert sorted(d["key"] for d in await api.docs()) == [f"k{i}" for i in range(5)]


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_concurrent_puts_to_one_key_last_wins(make_store: MakeStore) -> None:
    api = await make_store()
    store = api.store
    assert isinstance(store, AsyncMongoStore)
    await asyncio.gather(*(store.aput(("c",), "k", {"v": i}) for i in range(5)))
    assert (await store.aget(("c",), "k")).value == {"v": 4}  # type: ignore[union-attr]


async def test_a_rejected_write_names_its_item_and_the_rest_lands(make_store: MakeStore) -> None:
    """The server's own refusal (E11000 from a unique index the application added) comes back
    as one ``WriteError`` naming the item; the batch's other writes are applied (unordered)."""
    from mongostore import WriteError

    api = await make_store()
    made = api.store.collection.create_index("value.email", unique=True, sparse=True)
    if hasattr(made, "__await__"):
        await made
    ops = [PutOp(("u",), "a", {"email": "x@example.com"}), PutOp(("u",), "b", {"email": "x@example.com"}),
           PutOp(("u",), "c", {"email": "y@example.com"})]
    with pytest.raises(WriteError) as caught:
        await api.batch(ops)
    ((ns, key, message),) = caught.value.failures
    assert ns == ("u",) and key in {"a", "b"} and "E11000" in message
    landed = sorted(i.key for i in await api.search(("u",)))
    assert landed == sorted({"a", "b"} - {key} | {"c"})
