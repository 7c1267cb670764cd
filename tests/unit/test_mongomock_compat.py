"""The store's mongomock changes (``mongomock_compat.lookups``, whose docstring lists them).

Each change has a guard here: unpatched mongomock differs from MongoDB (or pymongo) and
the store's handle matches it. And the store changes nothing of a user's: their own
mongomock (sync, mongomock_motor, pymongo-async-mock) behaves as mongomock does after a
store has used its data.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import mongomock
import pytest
from pymongo import ReplaceOne, UpdateOne

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.backend import backend_for
from mongostore.drivers.embedded import adapt_collection
from mongostore.drivers.mongomock_compat import in_memory_collection, new_client
from mongostore.drivers.mongomock_compat.lookups import EngineCollection

WHEN = datetime(2026, 3, 1, 9, 30, 15, 123000)


def user_collection(name: str = "c", tz_aware: bool = True) -> Any:
    return mongomock.MongoClient(tz_aware=tz_aware)["app"][name]


# --------------------------------------------------------------------------- 1. bulk_write sort=


def test_bulk_updates_take_pymongo_sort() -> None:
    """pymongo >= 4.11 passes ``sort=`` to the bulk builder for every UpdateOne/ReplaceOne.

    (``ReplaceOne`` shows mongomock's refusal here: pymongo-async-mock, used by other tests in
    this process, replaces ``BulkOperationBuilder.add_update`` class-wide itself; the fresh
    process of ``test_a_users_mongomock_in_a_fresh_process_is_unpatched`` shows ``UpdateOne``'s.)
    """
    plain = user_collection()
    with pytest.raises(TypeError, match="sort"):
        plain.bulk_write([ReplaceOne({"_id": 1}, {"a": 1}, upsert=True)])
    ours = adapt_collection(user_collection())
    result = ours.bulk_write(
        [UpdateOne({"_id": 1}, {"$set": {"a": 1}}, upsert=True), ReplaceOne({"_id": 2}, {"b": 2}, upsert=True)]
    )
    assert result.upserted_count == 2 and list(ours.find({}, {"_id": 1})) == [{"_id": 1}, {"_id": 2}]
    with pytest.raises(NotImplementedError):  # a sort mongomock cannot apply is refused, not dropped
        ours.bulk_write([UpdateOne({}, {"$set": {"a": 2}}, sort={"a": 1})])


# --------------------------------------------------------------------------- 2. $add of a date


def test_add_of_a_date_in_an_update_pipeline_adds_milliseconds() -> None:
    """MongoDB: "If one of the arguments is a date, $add treats the other arguments as
    milliseconds to add to the date"."""
    pipeline = [{"$set": {"d": {"$add": ["$d", 1, 2]}, "n": {"$add": ["$n", 1]}, "z": {"$add": ["$none", 1]}}}]
    plain = user_collection(tz_aware=False)
    plain.insert_one({"_id": 1, "d": WHEN, "n": 5})
    with pytest.raises(AssertionError, match="only uses numbers"):
        plain.update_one({"_id": 1}, pipeline)
    ours = adapt_collection(user_collection(tz_aware=False))
    ours.insert_one({"_id": 1, "d": WHEN, "n": 5})
    ours.update_one({"_id": 1}, pipeline)
    assert ours.find_one({"_id": 1}) == {"_id": 1, "d": WHEN + timedelta(milliseconds=3), "n": 6, "z": None}
    # a $literal is data, never an expression
    ours.update_one({"_id": 1}, [{"$set": {"v": {"$literal": {"$add": ["$d", 1]}}}}])
    assert ours.find_one({"_id": 1})["v"] == {"$add": ["$d", 1]}


# --------------------------------------------------------------------------- 3. the TTL clock


def _ttl_collection(coll: Any) -> Any:
    coll.create_index([("expires_at", 1)], expireAfterSeconds=0)
    coll.insert_many(
        [{"_id": "old", "expires_at": datetime(2000, 1, 1)}, {"_id": "new", "expires_at": datetime(2999, 1, 1)}]
    )
    return coll


@pytest.mark.parametrize("make", [lambda: adapt_collection(user_collection()), lambda: in_memory_collection()])
def test_ttl_expiry_reads_an_undeprecated_clock(make: Any) -> None:
    """mongomock reads ``datetime.utcnow()`` (deprecated since Python 3.12) on every access to a
    collection with a TTL index; the store's handles expire the same documents, warning nothing."""
    if sys.version_info >= (3, 12):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            list(_ttl_collection(user_collection()).find({}))
        assert any(issubclass(w.category, DeprecationWarning) and "utcnow" in str(w.message) for w in caught)
    ours = _ttl_collection(make())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [d["_id"] for d in ours.find({})] == ["new"]
    # A test that moves mongomock's clock, as mongomock's README says, moves ours.
    with mock.patch("mongomock.utcnow", return_value=datetime(3000, 1, 1)):
        assert list(ours.find({})) == []


# --------------------------------------------------------------------------- the user's objects


def _mongomock_state() -> dict[str, Any]:
    """Every attribute of mongomock's modules and classes the store could have replaced."""
    import mongomock.aggregate
    import mongomock.collection
    import mongomock.database
    import mongomock.filtering
    import mongomock.helpers
    import mongomock.mongo_client
    import mongomock.store

    state: dict[str, Any] = {}
    for module in (
        mongomock,
        mongomock.aggregate,
        mongomock.collection,
        mongomock.database,
        mongomock.filtering,
        mongomock.helpers,
        mongomock.mongo_client,
        mongomock.store,
    ):
        for name, value in vars(module).items():
            state[f"{module.__name__}.{name}"] = value
            if isinstance(value, type) and value.__module__.startswith("mongomock"):
                for attr, member in vars(value).items():
                    state[f"{module.__name__}.{name}.{attr}"] = member
    return state


async def test_the_store_changes_nothing_of_mongomock() -> None:
    """After the stores used a user's sync, mongomock_motor and pymongo-async-mock collections,
    every attribute of mongomock's modules and classes is the one mongomock defined."""
    from mongomock_motor import AsyncMongoMockClient as MotorClient
    from pymongo_async_mock import AsyncMongoMockClient as AsyncClient

    sync_coll = user_collection("sync")
    motor_coll = MotorClient(tz_aware=True)["app"]["motor"]
    async_coll = AsyncClient(tz_aware=True)["app"]["async"]  # this library's own patch happens here
    before = _mongomock_state()
    store = MongoStore(sync_coll, ttl={"default_ttl": 5})
    store.setup()
    store.put(("u",), "k", {"v": 1})
    store.put(("u",), "k", {"v": 2})
    assert store.get(("u",), "k").value == {"v": 2}  # type: ignore[union-attr]
    for coll in (motor_coll, async_coll):
        astore = AsyncMongoStore(coll, ttl={"default_ttl": 5})
        await astore.setup()
        await astore.aput(("u",), "k", {"v": 1})
        await astore.aput(("u",), "k", {"v": 2})
        assert (await astore.aget(("u",), "k")).value == {"v": 2}  # type: ignore[union-attr]
        with warnings.catch_warnings():  # the user's own read: mongomock's own warning on 3.12+
            warnings.simplefilter("ignore", DeprecationWarning)
            assert (await coll.find_one({"key": "k"}))["value"] == {"v": 2}  # the user's handle sees the data
    assert _mongomock_state() == before
    # The user's own objects are mongomock's: same class, same data (and, read directly, the
    # TTL index the store made, mongomock's own utcnow() deprecation warning on 3.12+).
    assert type(sync_coll) is mongomock.Collection
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert sync_coll.find_one({"key": "k"})["value"] == {"v": 2}
    assert type(store.collection) is EngineCollection and store.collection is not sync_coll


def test_a_users_mongomock_in_a_fresh_process_is_unpatched() -> None:
    """The same from outside, in a process where nothing else touched mongomock: the store
    works on a user's client, and their own bulk builder still refuses ``sort=``."""
    script = textwrap.dedent(
        """
        import datetime
        import warnings
        warnings.simplefilter("error")
        import mongomock
        from pymongo import UpdateOne
        from mongostore import MongoStore

        coll = mongomock.MongoClient()["app"]["mem"]
        store = MongoStore(coll)
        store.setup()
        store.put(("users", "a"), "k", {"v": 1})
        store.put(("users", "a"), "k", {"v": 2})
        assert store.get(("users", "a"), "k").value == {"v": 2}
        # The user's own calls from here: mongomock's own utcnow() warning (3.12+) is theirs.
        warnings.simplefilter("ignore", DeprecationWarning)
        other = mongomock.MongoClient()["x"]["y"]
        try:
            other.bulk_write([UpdateOne({"_id": 1}, {"$set": {"a": 1}}, upsert=True)])
        except TypeError as exc:
            assert "sort" in str(exc), exc
        else:
            raise SystemExit("a user's mongomock took sort=: it was patched")
        coll.insert_one({"_id": "x", "d": datetime.datetime(2026, 1, 1)})
        try:
            coll.update_one({"_id": "x"}, [{"$set": {"d": {"$add": ["$d", 1]}}}])
        except AssertionError:
            pass
        else:
            raise SystemExit("a user's mongomock took $add of a date: it was patched")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr + out.stdout


# --------------------------------------------------------------------------- recognition


def test_mongomock_is_recognised_by_class_not_by_module_name() -> None:
    class Lookalike:  # a class from a module named like mongomock's, but not mongomock's
        pass

    Lookalike.__module__ = "mongomock.collection"
    assert not backend_for(Lookalike()).emulated
    assert adapt_collection(Lookalike()).__class__ is Lookalike
    assert backend_for(user_collection()).emulated and backend_for(in_memory_collection()).emulated
    assert adapt_collection(None) is None
    engine = new_client()["d"]["c"]
    assert adapt_collection(engine) is engine  # the engine's own needs nothing
    ours = adapt_collection(user_collection())
    assert isinstance(ours.database["other"], EngineCollection)  # derived collections (vectors) too


# --------------------------------------------------------------------------- 8. cursors in linear time


@pytest.mark.parametrize(
    "kwargs", [{}, {"skip": 3}, {"limit": 4}, {"skip": 2, "limit": 5}, {"sort": [("n", -1)], "skip": 1, "limit": 3}]
)
def test_engine_cursors_give_mongomocks_documents_taking_the_page_once(kwargs: dict[str, Any]) -> None:
    """mongomock slices its whole result list again for every document a cursor yields
    (O(n^2) for n documents); the engine's cursors take the page once, same documents."""
    docs = [{"_id": i, "n": i % 7} for i in range(30)]
    plain = user_collection("linear")
    plain.insert_many([dict(d) for d in docs])
    ours = new_client()["app"]["linear"]
    ours.insert_many([dict(d) for d in docs])
    want = list(plain.find({}, **kwargs))
    cursor = ours.find({}, **kwargs)
    first = next(cursor)
    page = cursor._linear[1]
    rest = list(cursor)
    assert [first, *rest] == want
    assert cursor._linear[1] is page  # taken once, not per document
    assert type(plain.find({})).__name__ == "Cursor" and not hasattr(plain.find({}), "_linear")  # a user's: as is
