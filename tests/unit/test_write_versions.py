"""Write versions of the mongomock family (``mongomock_compat.versions``), issue 13.

Local semantic search keeps its candidates while both collections' versions stay the
same, so a version must change on every kind of write, from this process or (for the
persistent local store) another, and must not change on reads.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pymongo import DeleteOne, InsertOne, ReplaceOne, UpdateOne

from mongostore.drivers.embedded import LocalCollection, LocalFile
from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.drivers.mongomock_compat.versions import write_state, write_version

WRITES: list[tuple[str, Any]] = [
    ("insert_one", lambda c: c.insert_one({"_id": "new", "a": 1})),
    ("insert_many", lambda c: c.insert_many([{"_id": "n1"}, {"_id": "n2"}])),
    ("update_one $set", lambda c: c.update_one({"_id": "d0"}, {"$set": {"a": 9}})),
    ("update_one pipeline", lambda c: c.update_one({"_id": "d0"}, [{"$set": {"a": 10}}])),
    ("update_many", lambda c: c.update_many({}, {"$inc": {"a": 1}})),
    ("upsert", lambda c: c.update_one({"_id": "u"}, {"$set": {"a": 1}}, upsert=True)),
    ("replace_one", lambda c: c.replace_one({"_id": "d1"}, {"a": 5})),
    ("delete_one", lambda c: c.delete_one({"_id": "d1"})),
    ("delete_many", lambda c: c.delete_many({})),
    ("find_one_and_update", lambda c: c.find_one_and_update({"_id": "d0"}, {"$set": {"b": 1}})),
    ("find_one_and_delete", lambda c: c.find_one_and_delete({"_id": "d0"})),
    ("drop", lambda c: c.drop()),
    (
        "bulk_write",
        lambda c: c.bulk_write(
            [InsertOne({"_id": "b"}), UpdateOne({"_id": "d0"}, {"$set": {"z": 1}}), ReplaceOne({"_id": "d1"}, {}),
             DeleteOne({"_id": "d2"})]
        ),
    ),
]


def seeded(name: str) -> Any:
    coll = in_memory_collection(collection_name=name)
    coll.insert_many([{"_id": f"d{i}", "a": i} for i in range(3)])
    return coll


@pytest.mark.parametrize("write", [w for _, w in WRITES], ids=[n for n, _ in WRITES])
def test_every_kind_of_write_gives_a_new_version(write: Any) -> None:
    coll = seeded("w")
    before = write_version(coll)
    assert isinstance(before, int)
    write(coll)
    after = write_version(coll)
    assert isinstance(after, int) and after != before


def test_reads_keep_the_version() -> None:
    coll = seeded("r")
    before = write_version(coll)
    list(coll.find({"a": {"$gt": 0}}))
    coll.find_one({"_id": "d0"})
    list(coll.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}]))
    coll.count_documents({})
    coll.update_one({"_id": "nothing"}, {"$set": {"a": 1}})  # matches nothing: no document changed
    assert write_version(coll) == before == write_version(coll)


def test_versions_are_never_reused_across_collections() -> None:
    seen = {write_version(seeded(f"c{i}")) for i in range(5)}
    assert len(seen) == 5


def test_ttl_expiry_gives_a_new_version() -> None:
    coll = in_memory_collection(collection_name="ttl")
    coll.create_index("expires_at", expireAfterSeconds=0)
    coll.insert_one({"_id": "x", "expires_at": datetime.now(timezone.utc) + timedelta(milliseconds=50)})
    before = write_version(coll)
    time.sleep(0.1)
    assert coll.find_one({"_id": "x"}) is None  # mongomock expires it on access
    assert write_version(coll) != before


def test_wrappers_and_unknown_collections() -> None:
    coll = seeded("wrap")
    assert write_version(AsyncCollection(coll)) == write_version(coll)

    class Recording:  # a double that answers reads itself: its version is unknown
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    assert write_version(Recording(coll)) is None
    assert write_version(object()) is None


async def test_the_async_doubles_report_their_mongomock_version() -> None:
    """The store's handle on a user's async double (``adapt_collection``): another handle may
    write the same documents, so no two reads of its version are equal."""
    from mongomock_motor import AsyncMongoMockClient

    from mongostore.drivers.mongomock_compat import adapt_collection

    coll = adapt_collection(AsyncMongoMockClient()["db"]["c"])
    before = write_version(coll)
    assert isinstance(before, int)
    await coll.insert_one({"_id": 1})
    assert write_version(coll) not in (None, before)


def test_the_local_file_changes_version_when_another_process_saves(tmp_path: Path) -> None:
    a = LocalCollection(LocalFile(tmp_path, "mongostore"), "memories")
    b = LocalCollection(LocalFile(tmp_path, "mongostore"), "memories")  # as another process would have
    a.insert_one({"_id": 1})
    va = write_version(a)
    assert va is not None and write_version(a) == va  # reading the file again changes nothing
    b.insert_one({"_id": 2})  # saved by the other engine
    assert write_version(a) not in (None, va)
    assert write_version(AsyncCollection(a)) == write_version(a)
    assert write_state(a, va) == (write_version(a), None)  # a reloaded store has no history


def test_the_changes_since_a_version_name_each_changed_document() -> None:
    coll = seeded("log")
    v0 = write_version(coll)
    assert v0 is not None
    coll.update_one({"_id": "d1"}, {"$set": {"a": 7}})
    coll.delete_one({"_id": "d2"})
    coll.insert_one({"_id": "d9"})
    coll.update_one({"_id": "d1"}, [{"$set": {"a": 8}}])
    state = write_state(coll, v0)
    assert state is not None
    version, changes = state
    assert changes is not None and [k for _, k in changes] == ["d1", "d2", "d9", "d1"]
    assert version == changes[-1][0] and all(v > v0 for v, _ in changes)
    assert write_state(coll, version) == (version, [])
    coll.drop()  # every document may have changed: no history before it
    assert write_state(coll, version)[1] is None  # type: ignore[index]


def test_a_history_longer_than_the_log_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    from mongostore.drivers.mongomock_compat import versions

    monkeypatch.setattr(versions, "LOG_SIZE", 4)
    coll = in_memory_collection(collection_name="long")
    v0 = write_version(coll)
    assert v0 is not None
    for i in range(3):
        coll.insert_one({"_id": i})
    v3 = write_version(coll)
    assert [k for _, k in write_state(coll, v0)[1]] == [0, 1, 2]  # type: ignore[index, union-attr]
    for i in range(3, 6):
        coll.insert_one({"_id": i})
    assert write_state(coll, v0)[1] is None  # type: ignore[index]  # 0 and 1 fell out of the log
    assert [k for _, k in write_state(coll, v3)[1]] == [3, 4, 5]  # type: ignore[index, union-attr]
