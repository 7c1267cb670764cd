"""get / put / delete of single items: values, timestamps, keys."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conftest import MakeStore
from langgraph.store.base import GetOp, Item, PutOp

from mongostore import InvalidValueError

NESTED: dict[str, Any] = {
    "text": "I like pizza",
    "unicode": "ünïcødé 日本 🦜",
    "int": 42,
    "negative": -7,
    "big": 2**62,
    "float": 3.25,
    "zero": 0.0,
    "true": True,
    "false": False,
    "none": None,
    "empty_dict": {},
    "empty_list": [],
    "list": [1, "two", 3.0, None, True, {"k": "v"}, [1, [2, [3]]]],
    "nested": {"a": {"b": {"c": [{"d": 1}, {"e": None}]}}, "ключ": "значение", "🔑": "emoji key"},
}


def assert_utc(dt: datetime) -> None:
    assert dt.tzinfo is not None
    assert dt.utcoffset() == timedelta(0)


async def test_nested_values_round_trip(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("users", "alice"), "k", NESTED)
    item = await api.get(("users", "alice"), "k")
    assert isinstance(item, Item)
    assert item.namespace == ("users", "alice")
    assert item.key == "k"
    assert item.value == NESTED
    assert list(item.value) == list(NESTED)  # field order is kept
    # Types survive, not only values that compare equal (True == 1, 3.0 == 3).
    for field in ("int", "big", "float", "true", "false"):
        assert type(item.value[field]) is type(NESTED[field]), field
    assert [type(x) for x in item.value["list"]] == [type(x) for x in NESTED["list"]]
    (found,) = await api.search(("users",))
    assert found.value == NESTED


def types_of(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: types_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [types_of(v) for v in value]
    return type(value)


async def test_ints_outside_int32_come_back_as_int(make_store: MakeStore) -> None:
    """BSON stores them as int64, which pymongo decodes as ``bson.Int64`` on any real server."""
    value = {"big": 2**31, "neg": -(2**31) - 1, "max": 2**63 - 1, "list": [2**40, [2**41]], "deep": {"n": 2**42}}
    api = await make_store()
    await api.put(("users",), "k", value)
    item = await api.get(("users",), "k")
    (found,) = await api.search(("users",), filter={"big": 2**31})
    rows = await api.aggregate(("users",), [{"$project": {"_id": 0, "value": 1}}])
    for got in (item.value, found.value, rows[0]["value"]):
        assert got == value
        assert types_of(got) == types_of(value)


async def test_empty_value(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {})
    assert (await api.get(("a",), "k")).value == {}


async def test_put_replaces_the_whole_value(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"x": 1, "y": 2})
    await api.put(("a",), "k", {"x": 3})
    assert (await api.get(("a",), "k")).value == {"x": 3}


async def test_created_at_is_kept_and_updated_at_bumped_on_overwrite(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    first = await api.get(("a",), "k")
    assert first.created_at == first.updated_at
    await asyncio.sleep(0.005)  # BSON dates have millisecond precision
    await api.put(("a",), "k", {"v": 2})
    second = await api.get(("a",), "k")
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


async def test_reading_does_not_touch_updated_at(make_store: MakeStore) -> None:
    """The existing MongoDB store rewrites updated_at on every get (contract M5)."""
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    before = await api.get(("a",), "k")
    await asyncio.sleep(0.005)
    await api.search(("a",))
    after = await api.get(("a",), "k")
    assert after.updated_at == before.updated_at


async def test_datetimes_are_timezone_aware_utc(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    item = await api.get(("a",), "k")
    (found,) = await api.search(("a",))
    for dt in (item.created_at, item.updated_at, found.created_at, found.updated_at):
        assert_utc(dt)
    # UTC and not local time mislabelled as UTC: close to the real clock.
    assert abs(item.updated_at - datetime.now(timezone.utc)) < timedelta(minutes=5)
    assert item.dict()["created_at"].endswith("+00:00")


async def test_get_of_a_missing_key_or_namespace_is_none(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    assert await api.get(("a",), "nope") is None
    assert await api.get(("b",), "k") is None
    assert await api.get(("a", "k"), "k") is None


async def test_delete(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    await api.put(("a",), "other", {"v": 2})
    await api.delete(("a",), "k")
    assert await api.get(("a",), "k") is None
    assert (await api.get(("a",), "other")).value == {"v": 2}
    await api.delete(("a",), "k")  # again: a no-op
    await api.delete(("nowhere",), "never")  # never existed: a no-op
    assert [d["key"] for d in await api.docs()] == ["other"]


async def test_same_key_in_different_namespaces(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": "a"})
    await api.put(("a", "b"), "k", {"v": "ab"})
    await api.put(("b",), "k", {"v": "b"})
    assert (await api.get(("a",), "k")).value == {"v": "a"}
    assert (await api.get(("a", "b"), "k")).value == {"v": "ab"}
    await api.delete(("a",), "k")
    assert (await api.get(("a", "b"), "k")).value == {"v": "ab"}
    assert len(await api.docs()) == 2


@pytest.mark.parametrize("key", ["a.b", "$dollar", "with space", "ключ", "🔑", "x\x00y", "b.\x00k", "/slash"])
async def test_keys_may_hold_any_character(make_store: MakeStore, key: str) -> None:
    api = await make_store()
    await api.put(("a",), key, {"v": key})
    # A key holding NUL and a path tail must not collide with an item of a deeper namespace.
    await api.put(("a", "b"), "k", {"v": "deeper"})
    item = await api.get(("a",), key)
    assert item.key == key and item.value == {"v": key}
    assert (await api.get(("a", "b"), "k")).value == {"v": "deeper"}
    assert {i.key for i in await api.search(("a",))} == {key, "k"}


async def test_keys_are_strings(make_store: MakeStore) -> None:
    """LangGraph types keys as ``str``: get/put/delete str() them (BaseStore does, and so does
    AsyncMongoStore), while an op given straight to batch with another type is refused
    rather than silently aliasing its str() (``5`` overwriting ``"5"``)."""
    api = await make_store()
    await api.put(("a",), 123, {"v": 1})
    (doc,) = await api.docs()
    assert doc["key"] == "123"
    by_int = await api.get(("a",), 123)
    assert by_int is not None and by_int.key == "123"
    await api.put(("a",), "123", {"v": 2})
    assert len(await api.docs()) == 1
    assert (await api.get(("a",), 123)).value == {"v": 2}
    for op in (PutOp(("a",), 123, {"v": 3}), GetOp(("a",), 123), PutOp(("a",), 123, None)):
        with pytest.raises(InvalidValueError, match="the key must be a str"):
            await api.batch([op])  # type: ignore[list-item]
    assert (await api.get(("a",), "123")).value == {"v": 2}
    await api.delete(("a",), 123)
    assert await api.docs() == []


async def test_index_argument_is_accepted_without_an_index_config(make_store: MakeStore) -> None:
    """As in LangGraph: with no index configured, ``index=`` changes nothing."""
    api = await make_store()
    await api.put(("a",), "off", {"v": 1}, index=False)
    await api.put(("a",), "fields", {"v": 2}, index=["v"])
    assert (await api.get(("a",), "off")).value == {"v": 1}
    assert (await api.get(("a",), "fields")).value == {"v": 2}
    assert all("vectors" not in d for d in await api.docs())


async def test_field_names_with_periods_round_trip(make_store: MakeStore) -> None:
    """JSON allows them and InMemoryStore keeps them; MongoDB 5.0+ stores them too."""
    api = await make_store()
    value = {"a.b": 1, "nested": {"x.y": [{"p.q": True}]}}
    await api.put(("a",), "k", value)
    assert (await api.get(("a",), "k")).value == value


async def test_the_store_keeps_its_own_copy(make_store: MakeStore) -> None:
    """Mutating the dict given to put, or the value get returned, changes nothing stored."""
    api = await make_store()
    value: dict[str, Any] = {"a": [1, {"b": 2}]}
    await api.put(("a",), "k", value)
    value["a"][1]["b"] = 99
    value["a"].append(5)
    got = await api.get(("a",), "k")
    assert got.value == {"a": [1, {"b": 2}]}
    got.value["a"].append(7)
    assert (await api.get(("a",), "k")).value == {"a": [1, {"b": 2}]}
