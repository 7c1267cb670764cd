"""Values MongoDB cannot store, and other bad input: a clear error, and nothing lost or half-applied."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from conftest import ASYNC_BACKENDS, Counting, MakeStore
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from mongostore import AsyncMongoStore, InvalidFilterError, InvalidValueError, MongoStoreError


class Custom:
    pass


BAD_VALUES: list[Any] = [
    pytest.param(["not", "a", "dict"], id="list"),
    pytest.param("a string", id="str"),
    pytest.param(42, id="int"),
    pytest.param({"ok": {"inner": {"a\x00": "1"}}}, id="nested-nul-field"),
    pytest.param({"ok": [1, {2: 1}]}, id="non-str-field-in-list"),
    pytest.param({"bad\x00name": 1}, id="nul-field"),
    pytest.param({1: "int field name"}, id="non-str-field"),
    pytest.param({"tags": {"a", "b"}}, id="set"),
    pytest.param({"obj": Custom()}, id="custom-object"),
    pytest.param({"n": 2**64}, id="int-overflow"),
    pytest.param({"d": Decimal("1.5")}, id="decimal"),
    pytest.param({"blob": "x" * (16 * 1024 * 1024)}, id="over-16MiB"),
]


def assert_names_item(err: InvalidValueError, namespace: tuple[str, ...], key: str) -> None:
    assert isinstance(err, ValueError) and isinstance(err, MongoStoreError)
    assert err.namespace == namespace and err.key == key
    assert repr(namespace) in str(err) and repr(key) in str(err)
    assert "Nothing of this batch was written" in str(err)


@pytest.mark.parametrize("value", BAD_VALUES)
async def test_bad_value_gets_a_clear_error(make_store: MakeStore, value: Any) -> None:
    api = await make_store()
    with pytest.raises(InvalidValueError) as info:
        await api.put(("users", "alice"), "bad-key", value)
    assert_names_item(info.value, ("users", "alice"), "bad-key")
    assert len(str(info.value)) < 1000  # the message does not dump a 16 MiB value
    assert await api.docs() == []


async def test_the_reason_is_specific(make_store: MakeStore) -> None:
    api = await make_store()
    cases: list[tuple[Any, str]] = [
        (["x"], "must be a dict"),
        ({"a": {"b\x00": 1}}, "'b\\x00'"),
        ({"a": {"b\x00": 1}}, "value.a"),
        ({"blob": "x" * (16 * 1024 * 1024)}, "16 MiB"),
        ({"s": {1}}, "BSON"),
    ]
    for value, fragment in cases:
        with pytest.raises(InvalidValueError) as info:
            await api.put(("a",), "k", value)
        assert fragment in info.value.reason, (fragment, info.value.reason)


async def test_a_bad_put_spoils_the_whole_batch_and_says_so(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "existing", {"v": 0})
    before = await api.docs()
    ops = [
        PutOp(("a",), "good1", {"v": 1}),
        PutOp(("a",), "existing", None),
        PutOp(("a", "b"), "bad", {"in\x00c": 1}),
        PutOp(("a",), "good2", {"v": 2}),
        GetOp(("a",), "existing"),
    ]
    with pytest.raises(InvalidValueError) as info:
        await api.batch(ops)
    assert_names_item(info.value, ("a", "b"), "bad")
    assert await api.docs() == before


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
async def test_a_bad_aput_fails_only_its_own_caller(make_store: MakeStore) -> None:
    api = await make_store()
    store = api.store
    assert isinstance(store, AsyncMongoStore)
    results = await asyncio.gather(
        store.aput(("a",), "good1", {"v": 1}),
        store.aput(("a",), "bad", {"s\x00et": 1}),
        store.aput(("a",), "good2", {"v": 2}),
        store.aput(("a",), "bad2", {"s": {1, 2}}),
        store.aget(("a",), "good1"),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], InvalidValueError) and results[1].key == "bad"
    assert isinstance(results[3], InvalidValueError) and results[3].key == "bad2"
    assert results[4] is None  # read-before-write, not an error
    assert sorted(d["key"] for d in await api.docs()) == ["good1", "good2"]


BAD_ASYNC_CALLS: list[Any] = [
    pytest.param(lambda s: s.asearch(("a",), filter={"$where": "1"}), InvalidFilterError, id="asearch-bad-filter"),
    pytest.param(lambda s: s.asearch(("a",), limit=-1), ValueError, id="asearch-negative-limit"),
    pytest.param(lambda s: s.aput(("a",), "bad", {"v": 1}, ttl=-1), ValueError, id="aput-negative-ttl"),
]


@pytest.mark.parametrize("make_store", ASYNC_BACKENDS, indirect=True)
@pytest.mark.parametrize(("bad_call", "error"), BAD_ASYNC_CALLS)
async def test_a_bad_async_call_fails_only_its_own_caller(
    make_store: MakeStore, bad_call: Any, error: type[Exception]
) -> None:
    api = await make_store()
    store = api.store
    assert isinstance(store, AsyncMongoStore)
    results = await asyncio.gather(
        store.aput(("a",), "good", {"v": 1}),
        bad_call(store),
        return_exceptions=True,
    )
    assert isinstance(results[1], error)
    assert results[0] is None
    assert [d["key"] for d in await api.docs()] == ["good"]


async def test_bad_filter_in_a_batch_writes_nothing(make_store: MakeStore) -> None:
    base = await make_store()
    counting = Counting(base.store.collection)
    api = await make_store(collection=counting, setup=False)
    with pytest.raises(InvalidFilterError):
        await api.batch([PutOp(("a",), "k", {"v": 1}), SearchOp(("a",), filter={"v": {"$regex": ".*"}})])
    assert counting.calls == []
    assert await base.docs() == []


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(SearchOp(("a",), limit=-1), id="negative-limit"),
        pytest.param(SearchOp(("a",), offset=-3), id="negative-offset"),
        pytest.param(SearchOp(("a",), limit="10"), id="str-limit"),  # type: ignore[arg-type]
        pytest.param(ListNamespacesOp(limit=-1), id="list-negative-limit"),
        pytest.param(ListNamespacesOp(max_depth=-1), id="negative-max-depth"),
        pytest.param(ListNamespacesOp(match_conditions=(MatchCondition("infix", ("a",)),)), id="match-type"),  # type: ignore[arg-type]
        pytest.param(PutOp(("a",), "k", {"v": 1}, ttl=-5), id="negative-ttl"),
        pytest.param(PutOp(("a",), "k", {"v": 1}, ttl="5"), id="str-ttl"),  # type: ignore[arg-type]
        pytest.param(PutOp(("a",), "k", {"v": 1}, index="v"), id="str-index"),  # type: ignore[arg-type]
        pytest.param("not an op", id="unknown-op"),
    ],
)
async def test_other_bad_ops_are_value_errors_and_write_nothing(make_store: MakeStore, op: Any) -> None:
    api = await make_store()
    with pytest.raises(ValueError):
        await api.batch([PutOp(("a",), "first", {"v": 1}), op])
    assert await api.docs() == []


async def test_a_negative_ttl_through_put(make_store: MakeStore) -> None:
    api = await make_store()
    with pytest.raises(ValueError):
        await api.put(("a",), "k", {"v": 1}, ttl=-1)
    assert await api.docs() == []
