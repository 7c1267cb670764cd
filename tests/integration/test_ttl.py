"""TTL: minutes per put, default_ttl, refresh on read, omit_expired, the TTL index, sweeping.

Expiry is tested by moving a stored ``expires_at`` into the past by hand, never by
waiting. Stores whose expired items must stay visible are made with ``setup=False``:
mongomock hides expired documents itself once a TTL index exists (a real server's
TTL monitor deletes them about once a minute).
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import datetime, timedelta, timezone
from typing import Any

import mongomock
import pytest
from conftest import Counting, MakeStore, StoreAPI
from langgraph.store.base import GetOp, PutOp, SearchOp

from mongostore import AsyncMongoStore, ConfigurationError, MongoStore

WRITES = ("bulk_write", "update_one", "update_many", "find_one_and_update", "insert_one", "insert_many")


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def raw_doc(api: StoreAPI, key: str) -> dict[str, Any]:
    (doc,) = await api.docs(filter={"key": key})
    return doc


async def expire(api: StoreAPI, *keys: str) -> None:
    """Move the items' expires_at an hour into the past, behind the store's back."""
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    res = await maybe_await(
        api.store.collection.update_many({"key": {"$in": list(keys)}}, {"$set": {"expires_at": past}})
    )
    assert res.modified_count == len(keys)


def utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt


async def counted(make_store: MakeStore, **kwargs: Any) -> tuple[StoreAPI, Counting]:
    base = await make_store(**kwargs)
    counting = Counting(base.store.collection)
    return await make_store(collection=counting, setup=False, **kwargs), counting


# --------------------------------------------------------------------------- writing expiries


async def test_supports_ttl(make_store: MakeStore) -> None:
    api = await make_store()
    assert api.store.supports_ttl is True
    await api.put(("t",), "k", {"v": 1}, ttl=5)  # InMemoryStore raises NotImplementedError here
    assert (await api.get(("t",), "k")).value == {"v": 1}


async def test_ttl_per_put_in_minutes_fractions_kept(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("t",), "k", {"v": 1}, ttl=1.5)
    doc = await raw_doc(api, "k")
    assert doc["ttl_minutes"] == 1.5 and isinstance(doc["ttl_minutes"], float)
    assert utc(doc["expires_at"]) - utc(doc["updated_at"]) == timedelta(seconds=90)
    await api.put(("t",), "int", {"v": 1}, ttl=2)
    doc = await raw_doc(api, "int")
    assert doc["ttl_minutes"] == 2.0 and isinstance(doc["ttl_minutes"], float)
    assert utc(doc["expires_at"]) - utc(doc["updated_at"]) == timedelta(minutes=2)


async def test_no_ttl_means_no_expiry_fields(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("t",), "k", {"v": 1})
    doc = await raw_doc(api, "k")
    assert "expires_at" not in doc and "ttl_minutes" not in doc


async def test_default_ttl_and_explicit_none(make_store: MakeStore) -> None:
    api = await make_store(ttl={"default_ttl": 10})
    await api.put(("t",), "default", {"v": 1})
    await api.put(("t",), "own", {"v": 1}, ttl=0.25)
    await api.put(("t",), "never", {"v": 1}, ttl=None)
    default = await raw_doc(api, "default")
    assert default["ttl_minutes"] == 10.0
    assert utc(default["expires_at"]) - utc(default["updated_at"]) == timedelta(minutes=10)
    own = await raw_doc(api, "own")
    assert utc(own["expires_at"]) - utc(own["updated_at"]) == timedelta(seconds=15)
    never = await raw_doc(api, "never")
    assert "expires_at" not in never and "ttl_minutes" not in never


async def test_reput_without_ttl_clears_the_expiry(make_store: MakeStore) -> None:
    api = await make_store(ttl={"default_ttl": 10})
    await api.put(("t",), "k", {"v": 1})
    assert "expires_at" in await raw_doc(api, "k")
    await api.put(("t",), "k", {"v": 2}, ttl=None)
    doc = await raw_doc(api, "k")
    assert "expires_at" not in doc and "ttl_minutes" not in doc
    await api.put(("t",), "k", {"v": 3}, ttl=1)
    assert (await raw_doc(api, "k"))["ttl_minutes"] == 1.0


async def test_ops_given_to_batch_use_their_own_ttl(make_store: MakeStore) -> None:
    """PutOp.ttl is already resolved: default_ttl applies through put(), not to raw ops."""
    api = await make_store(ttl={"default_ttl": 10})
    await api.batch([PutOp(("t",), "raw", {"v": 1}), PutOp(("t",), "own", {"v": 1}, ttl=3)])
    assert "expires_at" not in await raw_doc(api, "raw")
    assert (await raw_doc(api, "own"))["ttl_minutes"] == 3.0


async def test_default_for_none_gives_the_default_to_puts_that_say_nothing(make_store: MakeStore) -> None:
    """``default_for_none`` (the Agent Server factory's rule): ``ttl=None`` and a ``PutOp`` without a
    ttl get ``default_ttl``, as a put that leaves ``ttl`` out does; an explicit ttl and deletes are kept."""
    api = await make_store(ttl={"default_ttl": 10, "default_for_none": True})
    await api.put(("t",), "none", {"v": 1}, ttl=None)  # what the Agent Server's /store API passes
    await api.put(("t",), "unsaid", {"v": 1})
    await api.put(("t",), "own", {"v": 1}, ttl=3)
    await api.batch([PutOp(("t",), "raw", {"v": 1}), PutOp(("t",), "gone", {"v": 1})])  # a graph's ops
    await api.batch([PutOp(("t",), "gone", None)])
    for key in ("none", "unsaid", "raw"):
        doc = await raw_doc(api, key)
        assert doc["ttl_minutes"] == 10.0, key
        assert utc(doc["expires_at"]) - utc(doc["updated_at"]) == timedelta(minutes=10)
    assert (await raw_doc(api, "own"))["ttl_minutes"] == 3.0
    assert await api.docs(filter={"key": "gone"}) == []
    # Without a default there is nothing to give; and the rule is read live, as default_ttl is.
    api.store.ttl_config = {"default_ttl": 10}
    await api.put(("t",), "never", {"v": 1}, ttl=None)
    assert "expires_at" not in await raw_doc(api, "never")


async def test_ttl_index(make_store: MakeStore) -> None:
    api = await make_store()
    info = await maybe_await(api.store.collection.index_information())
    ttl_indexes = [spec for spec in info.values() if list(spec["key"]) == [("expires_at", 1)]]
    assert len(ttl_indexes) == 1
    assert ttl_indexes[0]["expireAfterSeconds"] == 0
    await api.setup()  # idempotent
    assert await maybe_await(api.store.collection.index_information()) == info


# --------------------------------------------------------------------------- refresh on read


async def test_get_refreshes_from_the_items_own_ttl(make_store: MakeStore) -> None:
    api = await make_store(ttl={"default_ttl": 10, "refresh_on_read": True})
    await api.put(("t",), "k", {"v": 1}, ttl=1.5)
    before = await raw_doc(api, "k")
    await asyncio.sleep(0.005)  # BSON dates have millisecond precision
    item = await api.get(("t",), "k")
    after = await raw_doc(api, "k")
    assert utc(after["expires_at"]) > utc(before["expires_at"])
    # Refreshed from the item's 1.5 minutes, not the 10-minute default; not a modification.
    assert timedelta(seconds=90) < utc(after["expires_at"]) - utc(before["updated_at"]) < timedelta(minutes=10)
    assert after["updated_at"] == before["updated_at"] and item.updated_at == utc(before["updated_at"])
    assert after["ttl_minutes"] == 1.5


async def test_search_refreshes_what_it_returns(make_store: MakeStore) -> None:
    api = await make_store(ttl={"refresh_on_read": True})
    await api.put(("t",), "a", {"v": 1}, ttl=1)
    await api.put(("t",), "b", {"v": 2}, ttl=1)
    before = {k: await raw_doc(api, k) for k in "ab"}
    await asyncio.sleep(0.005)
    assert [i.key for i in await api.search(("t",), filter={"v": 1})] == ["a"]
    assert utc((await raw_doc(api, "a"))["expires_at"]) > utc(before["a"]["expires_at"])
    assert (await raw_doc(api, "b"))["expires_at"] == before["b"]["expires_at"]


async def test_refresh_ttl_false_does_not_refresh(make_store: MakeStore) -> None:
    api, counting = await counted(make_store, ttl={"refresh_on_read": True})
    await api.put(("t",), "k", {"v": 1}, ttl=1)
    before = await raw_doc(api, "k")
    await asyncio.sleep(0.005)
    counting.calls.clear()
    assert (await api.get(("t",), "k", refresh_ttl=False)) is not None
    assert len(await api.search(("t",), refresh_ttl=False)) == 1
    assert counting.count(*WRITES) == 0
    assert (await raw_doc(api, "k"))["expires_at"] == before["expires_at"]


async def test_refresh_on_read_false_and_per_call_override(make_store: MakeStore) -> None:
    api = await make_store(ttl={"refresh_on_read": False})
    await api.put(("t",), "k", {"v": 1}, ttl=1)
    before = await raw_doc(api, "k")
    await asyncio.sleep(0.005)
    await api.get(("t",), "k")
    await api.search(("t",))
    assert (await raw_doc(api, "k"))["expires_at"] == before["expires_at"]
    await api.get(("t",), "k", refresh_ttl=True)
    assert utc((await raw_doc(api, "k"))["expires_at"]) > utc(before["expires_at"])


async def test_batch_ops_carry_their_own_refresh_flag(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("t",), "k", {"v": 1}, ttl=1)
    before = await raw_doc(api, "k")
    await asyncio.sleep(0.005)
    await api.batch([GetOp(("t",), "k", refresh_ttl=False), SearchOp(("t",), refresh_ttl=False)])
    assert (await raw_doc(api, "k"))["expires_at"] == before["expires_at"]
    await api.batch([SearchOp(("t",), refresh_ttl=True)])
    assert utc((await raw_doc(api, "k"))["expires_at"]) > utc(before["expires_at"])


async def test_reads_without_ttl_never_write(make_store: MakeStore) -> None:
    """Neither a store without TTL config nor items stored without a TTL ever turn a read into a write."""
    for ttl in (None, {"refresh_on_read": True}):
        api, counting = await counted(make_store, ttl=ttl)
        await api.put(("t",), "k", {"v": 1}, ttl=None)
        await api.batch([PutOp(("t", "u"), f"k{i}", {"v": i}) for i in range(3)])
        before = await api.docs()
        counting.calls.clear()
        await api.get(("t",), "k")
        await api.get(("t",), "k", refresh_ttl=True)
        await api.search(("t",))
        await api.search(("t",), refresh_ttl=True)
        await api.list_namespaces()
        await api.batch([GetOp(("t", "u"), "k1"), SearchOp(("t",), filter={"v": 1})])
        assert counting.count(*WRITES) == 0, (ttl, counting.calls)
        assert await api.docs() == before


# --------------------------------------------------------------------------- expired items


async def test_omit_expired_hides_expired_items(make_store: MakeStore) -> None:
    api = await make_store(ttl={"omit_expired": True}, setup=False)
    await api.put(("gone",), "old", {"v": 1}, ttl=1)
    await api.put(("kept",), "fresh", {"v": 2}, ttl=1)
    await api.put(("kept",), "forever", {"v": 3})
    await expire(api, "old")
    assert await api.get(("gone",), "old") is None
    assert sorted(i.key for i in await api.search(())) == ["forever", "fresh"]
    assert await api.list_namespaces() == [("kept",)]
    (got,) = await api.batch([GetOp(("gone",), "old")])
    assert got is None
    assert len(await api.docs()) == 3  # hidden, not deleted


async def test_without_omit_expired_unswept_items_stay_visible(make_store: MakeStore) -> None:
    """As PostgresStore: expired but unswept items are returned unless omit_expired is set."""
    api = await make_store(ttl={"refresh_on_read": False}, setup=False)
    await api.put(("t",), "old", {"v": 1}, ttl=1)
    await expire(api, "old")
    assert (await api.get(("t",), "old")).value == {"v": 1}
    assert [i.key for i in await api.search(("t",))] == ["old"]


async def test_sweep_ttl_deletes_expired_items(make_store: MakeStore) -> None:
    api = await make_store(setup=False)
    await api.put(("t",), "a", {"v": 1}, ttl=1)
    await api.put(("t",), "b", {"v": 1}, ttl=1)
    await api.put(("t",), "c", {"v": 1}, ttl=1)
    await api.put(("t",), "d", {"v": 1})
    await expire(api, "a", "b")
    assert await api.sweep_ttl() == 2
    assert sorted(d["key"] for d in await api.docs()) == ["c", "d"]
    assert await api.sweep_ttl() == 0


async def test_ttl_sweeper(make_store: MakeStore) -> None:
    api = await make_store(setup=False)
    store = api.store
    await api.put(("t",), "old", {"v": 1}, ttl=1)
    await api.put(("t",), "kept", {"v": 1})
    await expire(api, "old")
    handle = await maybe_await(store.start_ttl_sweeper(0.001))  # every 60 ms
    assert await maybe_await(store.start_ttl_sweeper(0.001)) is handle  # already running
    try:
        for _ in range(200):  # up to ~10 s; normally a few rounds
            if [d["key"] for d in await api.docs()] == ["kept"]:
                break
            await asyncio.sleep(0.05)
        assert [d["key"] for d in await api.docs()] == ["kept"]
    finally:
        assert await maybe_await(store.stop_ttl_sweeper(5)) is True
    assert handle.done()
    assert await maybe_await(store.stop_ttl_sweeper()) is True  # stopping twice is fine


@pytest.mark.parametrize("cls", [MongoStore, AsyncMongoStore])
async def test_ttl_config_is_in_minutes_and_validated(cls: type[Any]) -> None:
    coll = mongomock.MongoClient(tz_aware=True)["t"]["c"]
    store = cls(coll, ttl={"default_ttl": 1.5, "sweep_interval_minutes": 2})
    assert store.ttl_config == {"default_ttl": 1.5, "sweep_interval_minutes": 2}
    for bad in (
        {"default_ttl": -1},
        {"default_ttl": 0},
        {"unknown": 1},
        {"sweep_interval_minutes": 0},
        {"default_for_none": "sometimes"},
    ):
        with pytest.raises(ConfigurationError):
            cls(coll, ttl=bad)
