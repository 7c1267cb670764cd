"""Search without a query: order, paging, filters (and what never reaches the server)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import mongomock
import pytest
from conftest import NO_TYPE_BRACKETING, Counting, MakeStore, StoreAPI
from langgraph.store.base import GetOp, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from mongostore import InvalidFilterError, MongoStore


async def keys(api: StoreAPI, prefix: tuple[str, ...] = ("f",), **kw: Any) -> list[str]:
    return sorted(i.key for i in await api.search(prefix, limit=100, **kw))


# --------------------------------------------------------------------------- order and paging


async def test_newest_first(make_store: MakeStore) -> None:
    api = await make_store()
    for key in ["z", "a", "m"]:
        await api.put(("o",), key, {"k": key})
        await asyncio.sleep(0.005)  # BSON dates have millisecond precision
    assert [i.key for i in await api.search(("o",))] == ["m", "a", "z"]
    await api.put(("o",), "z", {"k": "z2"})  # an update moves the item to the front
    assert [i.key for i in await api.search(("o",))] == ["z", "m", "a"]


async def test_a_batch_of_puts_lists_newest_first_in_op_order(make_store: MakeStore) -> None:
    """Each put of a batch gets its own millisecond, the last op the latest: newest first
    is the reverse of op order, not a fall-back to path order (BSON keeps milliseconds)."""
    api = await make_store()
    ops = [
        PutOp(("o", "b"), "k1", {}),
        PutOp(("o",), "k2", {}),
        PutOp(("o", "a"), "k2", {}),
        PutOp(("o", "a"), "k1", {}),
        PutOp(("o",), "k1", {}),
    ]
    await api.batch(ops)
    got = [(i.namespace, i.key) for i in await api.search(("o",))]
    assert got == [(op.namespace, op.key) for op in reversed(ops)]
    stamps = [i.updated_at for i in await api.search(("o",))]
    assert stamps == sorted(stamps, reverse=True) and len(set(stamps)) == len(stamps)
    assert [(i.namespace, i.key) for i in await api.search(("o",))] == got  # stable


async def test_ties_are_broken_by_path_then_key(make_store: MakeStore) -> None:
    api = await make_store()
    for ns, key in [(("o", "b"), "k1"), (("o",), "k2"), (("o", "a"), "k2"), (("o", "a"), "k1"), (("o",), "k1")]:
        await api.put(ns, key, {})
    # Same updated_at for all (as two writers in one millisecond would leave them).
    coll = api.store.collection
    same = {"$set": {"updated_at": datetime(2026, 1, 1, tzinfo=timezone.utc)}}
    if api.is_async:
        await coll.update_many({}, same)
    else:
        coll.update_many({}, same)
    got = [(i.namespace, i.key) for i in await api.search(("o",))]
    assert got == [
        (("o",), "k1"),
        (("o",), "k2"),
        (("o", "a"), "k1"),
        (("o", "a"), "k2"),
        (("o", "b"), "k1"),
    ]


async def test_limit_and_offset_page_through_every_match_exactly_once(make_store: MakeStore) -> None:
    api = await make_store()
    # Two batches (so plenty of ties on updated_at) under several namespaces.
    await api.batch([PutOp(("p", f"n{i % 3}"), f"k{i:02d}", {"i": i}) for i in range(15)])
    await asyncio.sleep(0.005)
    await api.batch([PutOp(("p", f"n{i % 2}"), f"k{i:02d}", {"i": i}) for i in range(15, 23)])
    pages = [await api.search(("p",), limit=5, offset=off) for off in range(0, 30, 5)]
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3, 0]
    seen = [(i.namespace, i.key) for page in pages for i in page]
    assert len(seen) == len(set(seen)) == 23
    assert {k for _, k in seen} == {f"k{i:02d}" for i in range(23)}
    # The second batch is newer, so its items come first.
    assert {i.key for page in pages[:1] for i in page} <= {f"k{i:02d}" for i in range(15, 23)}
    everything = [(i.namespace, i.key) for i in await api.search(("p",), limit=100)]
    assert everything == seen


async def test_default_limit_is_ten(make_store: MakeStore) -> None:
    api = await make_store()
    await api.batch([PutOp(("d",), f"k{i}", {}) for i in range(12)])
    assert len(await api.search(("d",))) == 10


async def test_limit_zero_and_offset_past_the_end(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    assert await api.search(("a",), limit=0) == []
    assert await api.search(("a",), offset=5) == []


async def test_results_are_search_items_without_score(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a", "b"), "k", {"v": 1})
    (item,) = await api.search(("a",))
    assert isinstance(item, SearchItem)
    assert (item.namespace, item.key, item.value, item.score) == (("a", "b"), "k", {"v": 1}, None)


async def test_query_without_an_index_is_ignored(make_store: MakeStore) -> None:
    """As InMemoryStore and PostgresStore: no index configured -> a plain filtered search."""
    api = await make_store()
    await api.put(("q",), "k", {"text": "hello"})
    (item,) = await api.search(("q",), query="something else")
    assert (item.key, item.score) == ("k", None)
    assert [i.key for i in await api.search(("q",), query="")] == ["k"]


async def test_whole_store_search(make_store: MakeStore) -> None:
    api = await make_store()
    for ns in [("a",), ("b", "c"), ("d",)]:
        await api.put(ns, "k", {})
    assert {i.namespace for i in await api.search(())} == {("a",), ("b", "c"), ("d",)}


# --------------------------------------------------------------------------- filters

DATA: dict[str, dict[str, Any]] = {
    "1": {"n": 1, "c": "red", "meta": {"a": 1, "b": 2}, "tags": ["x", "y"], "s": "10", "f": 1.5},
    "2": {"n": 5, "c": "blue", "meta": {"a": 1}, "tags": ["x"], "s": "9", "nul": None},
    "3": {"c": "red", "n": 10},
    "4": {"n": 9, "meta": {"a": 2, "deep": {"x": 1}}, "tags": []},
    "5": {"n": "10", "c": "green"},
}


async def filter_store(make_store: MakeStore) -> StoreAPI:
    api = await make_store()
    await api.batch([PutOp(("f",), k, v) for k, v in DATA.items()])
    await api.put(("elsewhere",), "1", DATA["1"])  # outside the prefix: never returned
    return api


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"c": "red"}, ["1", "3"]),
        ({"c": {"$eq": "red"}}, ["1", "3"]),
        ({"c": {"$ne": "red"}}, ["2", "4", "5"]),
        pytest.param({"n": {"$gt": 5}}, ["3", "4"], marks=NO_TYPE_BRACKETING),
        pytest.param({"n": {"$gte": 5}}, ["2", "3", "4"], marks=NO_TYPE_BRACKETING),
        ({"n": {"$lt": 5}}, ["1"]),
        ({"n": {"$lte": 5}}, ["1", "2"]),
        ({"n": {"$gte": 1, "$lt": 10}}, ["1", "2", "4"]),
        ({"f": {"$gt": 1}}, ["1"]),
        pytest.param({"n": {"$gt": 4.5}}, ["2", "3", "4"], marks=NO_TYPE_BRACKETING),
        ({"c": "red", "n": {"$gt": 1}}, ["3"]),
    ],
)
async def test_comparison_operators(make_store: MakeStore, flt: dict[str, Any], expected: list[str]) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter=flt) == expected


async def test_numbers_compare_as_numbers(make_store: MakeStore) -> None:
    """10 > 9 (PostgresStore compares text, so '10' < '9': langgraph#7684), across int32,
    int64 and double; strings against numbers are the next test's."""
    api = await make_store()
    await api.batch([PutOp(("f",), k, {"n": n}) for k, n in {"a": 9, "b": 10, "c": 1.5, "d": 2**40}.items()])
    assert await keys(api, filter={"n": {"$gt": 9}}) == ["b", "d"]
    assert await keys(api, filter={"n": {"$lt": 10}}) == ["a", "c"]
    assert await keys(api, filter={"n": {"$gte": 2**40}}) == ["d"]


@NO_TYPE_BRACKETING
async def test_a_string_is_never_compared_with_a_number(make_store: MakeStore) -> None:
    """Item 5's ``n`` is the string "10": a comparison with a number never matches it."""
    api = await filter_store(make_store)
    assert "5" not in await keys(api, filter={"n": {"$gte": 0}})
    assert "5" not in await keys(api, filter={"$or": [{"c": "blue"}, {"n": {"$gte": 10}}]})
    assert await keys(api, filter={"n": {"$lt": "5"}}) == ["5"]  # and a string only with strings


async def test_ne_matches_items_missing_the_field(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"c": {"$ne": "blue"}}) == ["1", "3", "4", "5"]


async def test_range_on_a_missing_field_excludes_the_item(make_store: MakeStore) -> None:
    """InMemoryStore raises TypeError here; the item is simply not a match."""
    api = await filter_store(make_store)
    assert await keys(api, filter={"f": {"$gt": 0}}) == ["1"]
    assert await keys(api, filter={"f": {"$lte": 100}}) == ["1"]


async def test_nested_dicts_match_by_containment(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"meta": {"a": 1}}) == ["1", "2"]
    assert await keys(api, filter={"meta": {"a": 1, "b": 2}}) == ["1"]
    assert await keys(api, filter={"meta": {"deep": {"x": 1}}}) == ["4"]
    assert await keys(api, filter={"meta": {"a": 3}}) == []


async def test_scalar_equality_does_not_match_arrays_containing_it(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"tags": "x"}) == []


async def test_list_equality_is_exact(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"tags": ["x"]}) == ["2"]
    assert await keys(api, filter={"tags": ["x", "y"]}) == ["1"]
    assert await keys(api, filter={"tags": ["y", "x"]}) == []
    assert await keys(api, filter={"tags": []}) == ["4"]


async def test_none_matches_missing_and_null(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"missing": None}) == ["1", "2", "3", "4", "5"]
    assert await keys(api, filter={"nul": None}) == ["1", "2", "3", "4", "5"]
    assert await keys(api, filter={"c": None}) == ["4"]


async def test_safe_extensions(make_store: MakeStore) -> None:
    api = await filter_store(make_store)
    assert await keys(api, filter={"c": {"$in": ["red", "green"]}}) == ["1", "3", "5"]
    assert await keys(api, filter={"c": {"$nin": ["red", "green"]}}) == ["2", "4"]
    assert await keys(api, filter={"f": {"$exists": True}}) == ["1"]
    assert await keys(api, filter={"c": {"$exists": False}}) == ["4"]
    assert await keys(api, filter={"$or": [{"c": "blue"}, {"n": 10}]}) == ["2", "3"]
    assert await keys(api, filter={"$and": [{"c": "red"}, {"n": {"$lt": 5}}]}) == ["1"]
    assert await keys(api, filter={"$or": [{"c": "green"}, {"$and": [{"c": "red"}, {"n": 10}]}]}) == ["3", "5"]


async def test_filter_and_paging(make_store: MakeStore) -> None:
    api = await make_store()
    await api.batch([PutOp(("g",), f"k{i:02d}", {"even": i % 2 == 0}) for i in range(20)])
    pages = [await api.search(("g",), filter={"even": True}, limit=3, offset=o) for o in range(0, 12, 3)]
    got = [i.key for page in pages for i in page]
    assert sorted(got) == [f"k{i:02d}" for i in range(0, 20, 2)]
    assert len(got) == len(set(got))


BAD_FILTERS: list[Any] = [
    pytest.param({"$where": "sleep(1000) || true"}, id="$where"),
    pytest.param({"$expr": {"$gt": ["$value.n", 1]}}, id="$expr"),
    pytest.param({"a": {"$function": {"body": "function() {return true}", "args": [], "lang": "js"}}}, id="$function"),
    pytest.param({"a": {"$regex": "x"}}, id="$regex"),
    pytest.param({"a": {"$eq": {"$where": "x"}}}, id="operator-inside-value"),
    pytest.param({"a": {"$in": [{"$gt": ""}]}}, id="operator-inside-$in"),
    pytest.param({"meta": {"a": {"$where": "x"}}}, id="operator-inside-containment"),
    pytest.param({"meta.a": 1}, id="dotted-field"),
    pytest.param({"$nor": [{"a": 1}]}, id="$nor"),
    pytest.param({"a": {"$elemMatch": {"b": 1}}}, id="$elemMatch"),
    pytest.param({"a": {"$gt": 1, "b": 2}}, id="mixed-operator-and-field"),
    # Not storable as BSON: pymongo's encoder would refuse them, mongomock match nothing.
    # (Ints beyond int64 are not here: they compare as the doubles beside them, see test_dropin.)
    pytest.param({"a": Decimal("1.5")}, id="decimal"),
    pytest.param({"a": {1, 2}}, id="set"),
]


@pytest.mark.parametrize("bad", BAD_FILTERS)
async def test_bad_filters_are_rejected_before_any_call(make_store: MakeStore, bad: dict[str, Any]) -> None:
    base = await make_store()
    await base.put(("f",), "k", {"a": 1})
    counting = Counting(base.store.collection)
    api = await make_store(collection=counting, setup=False)
    with pytest.raises(InvalidFilterError) as info:
        await api.search(("f",), filter=bad)
    assert isinstance(info.value, ValueError)
    assert counting.calls == []


def test_bad_filters_never_reach_mongomock() -> None:
    """The same proof on a plain sync store, with a batch that also holds good ops."""
    counting = Counting(mongomock.MongoClient(tz_aware=True)["t"]["c"])
    store = MongoStore(counting)  # type: ignore[arg-type]
    for param in BAD_FILTERS:
        (bad,) = param.values
        with pytest.raises(ValueError):
            store.search(("f",), filter=bad)
        with pytest.raises(ValueError):
            store.batch([PutOp(("f",), "k", {"a": 1}), SearchOp(("f",), filter=bad), GetOp(("f",), "k")])
    assert counting.calls == []


# --------------------------------------------------------------------------- parity with InMemoryStore

PARITY_NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("x", "y"), ("日本", "ü"), ("(", "[")]
PARITY_FILTERS: list[dict[str, Any] | None] = [
    None,
    {"c": "red"},
    {"c": {"$ne": "red"}},
    {"n": {"$eq": 5}},
    {"meta": {"a": 1}},
    {"meta": {"a": 1, "b": 2}},
    {"tags": ["x"]},
    {"tags": "x"},
    {"missing": None},
    {"c": "red", "meta": {"a": 1}},
]


async def test_parity_with_inmemorystore(make_store: MakeStore) -> None:
    """The same puts and searches on InMemoryStore and on ours give the same items (order aside:
    InMemoryStore returns insertion order, we return newest first)."""
    api = await make_store()
    ref = InMemoryStore()
    ops = [
        PutOp(ns, f"{i}", value)
        for ns in PARITY_NAMESPACES
        for i, value in enumerate(DATA.values())
        if "n" in value and isinstance(value["n"], int)
    ]
    await api.batch(ops)
    ref.batch(ops)
    for prefix in [(), ("a",), ("a", "b"), ("ab",), ("日本",), ("(",), ("nothing",)]:
        for flt in PARITY_FILTERS:
            ours = await api.search(prefix, filter=flt, limit=1000)
            theirs = ref.search(prefix, filter=flt, limit=1000)
            assert sorted((i.namespace, i.key, str(i.value)) for i in ours) == sorted(
                (i.namespace, i.key, str(i.value)) for i in theirs
            ), (prefix, flt)
    # Range operators: InMemoryStore raises on items missing the field, so compare on items that have it.
    for flt in [{"n": {"$gt": 5}}, {"n": {"$gte": 5}}, {"n": {"$lt": 10}}, {"n": {"$lte": 9}}]:
        ours_keys = {(i.namespace, i.key) for i in await api.search((), filter=flt, limit=1000)}
        theirs_keys = {(i.namespace, i.key) for i in ref.search((), filter=flt, limit=1000)}
        assert ours_keys == theirs_keys, flt


# --------------------------------------------------------------------------- known bugs

ARRAY_DATA: dict[str, dict[str, Any]] = {
    "list": {"tags": ["x", "y"], "meta": [{"a": 1}], "maybe": [None, 1], "nested": [["x"], "y"]},
    "scalar": {"tags": "x", "meta": {"a": 1}, "maybe": None, "nested": ["x"]},
}


async def array_keys(make_store: MakeStore, flt: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Our keys and InMemoryStore's keys for one filter over ARRAY_DATA."""
    api = await make_store()
    ref = InMemoryStore()
    ops = [PutOp(("arr",), k, v) for k, v in ARRAY_DATA.items()]
    await api.batch(ops)
    ref.batch(ops)
    ours = sorted(i.key for i in await api.search(("arr",), filter=flt))
    theirs = sorted(i.key for i in ref.search(("arr",), filter=flt))
    return ours, theirs


async def test_bare_scalar_equality_is_not_array_membership(make_store: MakeStore) -> None:
    ours, theirs = await array_keys(make_store, {"tags": "x"})
    assert ours == theirs == ["scalar"]


async def test_eq_operator_is_not_array_membership(make_store: MakeStore) -> None:
    ours, theirs = await array_keys(make_store, {"tags": {"$eq": "x"}})
    assert theirs == ["scalar"]
    assert ours == theirs


async def test_ne_operator_keeps_arrays_containing_the_value(make_store: MakeStore) -> None:
    ours, theirs = await array_keys(make_store, {"tags": {"$ne": "x"}})
    assert theirs == ["list"]
    assert ours == theirs


async def test_containment_does_not_reach_into_arrays(make_store: MakeStore) -> None:
    ours, theirs = await array_keys(make_store, {"meta": {"a": 1}})
    assert theirs == ["scalar"]
    assert ours == theirs


async def test_none_does_not_match_arrays_holding_null(make_store: MakeStore) -> None:
    ours, theirs = await array_keys(make_store, {"maybe": None})
    assert theirs == ["scalar"]
    assert ours == theirs


async def test_list_equality_is_not_membership_of_a_nested_list(
    make_store: MakeStore, request: pytest.FixtureRequest
) -> None:
    """MongoDB's documented $eq with an array operand also matches arrays that *contain* that array."""
    ours, theirs = await array_keys(make_store, {"nested": ["x"]})
    assert theirs == ["scalar"]
    assert ours == theirs


async def test_comparison_with_a_dict_operand_is_refused(make_store: MakeStore) -> None:
    """MongoDB's embedded-document equality depends on field order, InMemoryStore's == does not:
    rather than answer differently, such operands are refused and containment is the way."""
    api = await make_store()
    await api.put(("o",), "k", {"d": {"b": 2, "a": 1}})
    with pytest.raises(InvalidFilterError, match="nested dict"):
        await api.search(("o",), filter={"d": {"$eq": {"a": 1, "b": 2}}})
    assert [i.key for i in await api.search(("o",), filter={"d": {"a": 1, "b": 2}})] == ["k"]
