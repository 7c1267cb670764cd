"""The embedded engine's lookups without a scan (``mongomock_compat.lookups``, change 5).

Each test checks the engine's collections against mongomock's own full scan
(``mongomock.collection.Collection._iter_documents``, which the engine's class overrides):
same documents in the same order, after every kind of write, with values of every type in
the indexed fields.
"""

from __future__ import annotations

import contextlib
import random
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import mongomock
import pytest
from bson import ObjectId
from mongomock.collection import Collection
from mongomock.filtering import filter_applies

from mongostore.drivers.mongomock_compat import in_memory_collection

SCAN = Collection._iter_documents  # mongomock's own: the engine's class overrides it

OID = ObjectId()
WHEN = datetime(2024, 1, 2, 3, 4, 5)
POOL: list[Any] = [
    1,
    1.0,
    2,
    True,
    False,
    0,
    "x",
    "y",
    "",
    None,
    OID,
    WHEN,
    [1, "x"],
    ["y"],
    [],
    {"k": 1},
    [[1]],
    [None],
    float("nan"),
]
QUERY_VALUES: list[Any] = [1, 2, True, False, 0, "x", "y", "", None, OID, 1.0]


def ids(docs: Any) -> list[Any]:
    return [d["_id"] for d in docs]


def scanned(coll: Any, filt: dict[str, Any]) -> list[Any]:
    return ids(SCAN(coll, filt))


def fast(coll: Any, filt: dict[str, Any]) -> list[Any]:
    return ids(coll._iter_documents(filt))


def queries(rng: random.Random, known_ids: list[Any]) -> list[dict[str, Any]]:
    v, w = rng.choice(QUERY_VALUES), rng.choice(QUERY_VALUES)
    some = [*rng.sample(known_ids, min(3, len(known_ids))), "missing"]
    return [
        {"a": v},
        {"b": w},
        {"a": {"$in": [v, w]}},
        {"a": {"$in": []}},
        {"a": {"$eq": v, "$ne": w}},
        {"a": v, "b": w},
        {"a": v, "c": w},
        {"$and": [{"a": v}, {"b": {"$in": [w, None]}}]},
        {"a": None},
        {"_id": some[0]},
        {"_id": {"$in": some}},
        {"_id": {"$in": some}, "a": v},
        {"$and": [{"_id": {"$in": some}}, {"$or": [{"a": v}, {"b": w}]}]},
        {"a": [1, "x"]},  # whole-array equality: scanned
        {"a": {"$gt": 0}},  # a range: scanned
    ]


def random_value(rng: random.Random) -> Any:
    return rng.choice(POOL)


@pytest.mark.parametrize("seed", range(6))
def test_every_write_keeps_lookups_identical_to_a_scan(seed: int) -> None:
    rng = random.Random(seed)
    coll = in_memory_collection(collection_name=f"model{seed}")
    coll.create_index([("a", 1)], name="a")
    coll.create_index([("b", 1), ("a", 1)], name="b_a")
    known: list[Any] = []
    for step in range(300):
        kind = rng.randrange(9)
        _id: Any = rng.choice([f"id{rng.randrange(40)}", rng.randrange(40), ObjectId()])
        if kind == 0:
            doc = {"_id": _id, "a": random_value(rng), "b": random_value(rng), "c": random_value(rng)}
            if rng.random() < 0.3:
                del doc["a"]
            with contextlib.suppress(mongomock.DuplicateKeyError):
                coll.insert_one(doc)
        elif kind == 1:
            coll.update_one({"_id": _id}, {"$set": {"a": random_value(rng)}}, upsert=rng.random() < 0.5)
        elif kind == 2:
            coll.update_one({"_id": _id}, {"$unset": {"a": ""}})
        elif kind == 3:
            coll.update_many({"a": rng.choice(QUERY_VALUES)}, {"$set": {"b": random_value(rng)}})
        elif kind == 4:
            coll.delete_one({"_id": _id})
        elif kind == 5:
            coll.delete_many({"b": rng.choice(QUERY_VALUES)})
        elif kind == 6:
            coll.replace_one({"_id": _id}, {"a": random_value(rng), "c": 1}, upsert=True)
        elif kind == 7:
            coll.update_one({"_id": _id}, [{"$set": {"b": random_value(rng)}}])
        elif kind == 8 and step % 97 == 0:
            coll.drop()
            coll.create_index([("a", 1)], name="a")
        known = [d["_id"] for d in coll._store._documents.values()]
        for q in queries(rng, known or ["none"]):
            assert fast(coll, q) == scanned(coll, q), (step, q)


def test_results_come_in_store_order_after_deletes_and_reinserts() -> None:
    coll = in_memory_collection(collection_name="order")
    coll.create_index([("a", 1)], name="a")
    coll.insert_many([{"_id": f"d{i}", "a": i % 3} for i in range(30)])
    coll.delete_one({"_id": "d4"})
    coll.insert_one({"_id": "d4", "a": 1})
    coll.update_one({"_id": "d7"}, {"$set": {"a": 1}})
    wanted = [f"d{i}" for i in (25, 4, 7, 1, 13)]
    for q in ({"_id": {"$in": wanted}}, {"a": 1}, {"a": {"$in": [1, 2]}}):
        assert fast(coll, q) == scanned(coll, q)
    assert [d["_id"] for d in coll.find({"_id": {"$in": wanted}})] == ["d1", "d7", "d13", "d25", "d4"]


def test_an_id_lookup_and_an_upsert_look_at_one_document_however_large_the_collection() -> None:
    coll = in_memory_collection(collection_name="big")
    coll.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    coll.create_index([("expires_at", 1)], expireAfterSeconds=0, name="ttl")
    coll.insert_many([{"_id": f"p.\x00k{i}", "path": "p.", "key": f"k{i}"} for i in range(2000)])
    evaluated: list[Any] = []

    def counting(filt: Any, doc: Any) -> bool:
        evaluated.append(doc)
        return filter_applies(filt, doc)

    with mock.patch("mongostore.drivers.mongomock_compat.lookups._filter_applies", counting):
        assert coll.find_one({"_id": "p.\x00k1500"})["key"] == "k1500"
        coll.update_one({"_id": "p.\x00k1500"}, {"$set": {"v": 1}}, upsert=True)
        coll.update_one({"_id": "p.\x00new"}, {"$set": {"path": "p.", "key": "new"}}, upsert=True)
        assert len(list(coll.find({"_id": {"$in": ["p.\x00k3", "p.\x00k1999"]}}))) == 2
    # find_one, the update and the unique check, the upsert and its unique check, the $in
    assert len(evaluated) <= 8


def test_unique_indexes_still_reject_duplicates() -> None:
    coll = in_memory_collection(collection_name="uniq")
    coll.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    coll.insert_one({"_id": 1, "path": "a.", "key": "k"})
    coll.insert_one({"_id": 2, "path": "a.", "key": "j"})
    with pytest.raises(mongomock.DuplicateKeyError):
        coll.insert_one({"_id": 3, "path": "a.", "key": "k"})
    with pytest.raises(mongomock.DuplicateKeyError):
        coll.update_one({"_id": 2}, {"$set": {"key": "k"}})
    assert coll.find_one({"_id": 2})["key"] == "j"  # rolled back, and found by its old key
    assert [d["_id"] for d in coll.find({"path": "a.", "key": "j"})] == [2]
    assert list(coll.find({"key": "k"}, {"_id": 1})) == [{"_id": 1}]


def test_ttl_expiry_removes_the_same_documents_at_the_same_moments() -> None:
    coll = in_memory_collection(collection_name="ttl")
    coll.create_index([("expires_at", 1)], expireAfterSeconds=0, name="ttl")
    coll.create_index([("a", 1)], name="a")
    base = datetime(2030, 1, 1)
    coll.insert_many([{"_id": i, "a": i % 2, "expires_at": base + timedelta(minutes=i)} for i in range(10)])
    coll.insert_one({"_id": "never", "a": 0})
    coll.insert_one({"_id": "listed", "a": 1, "expires_at": [base + timedelta(minutes=20), base]})
    with mock.patch("mongomock.utcnow", return_value=base - timedelta(seconds=1)):
        assert len(list(coll.find({"a": {"$in": [0, 1]}}))) == 12
    with mock.patch("mongomock.utcnow", return_value=base + timedelta(minutes=3, seconds=30)):
        assert sorted(map(str, ids(coll.find({"a": {"$in": [0, 1]}})))) == ["4", "5", "6", "7", "8", "9", "never"]
        # A write that brings an expiry forward is seen at once.
        coll.update_one({"_id": 9}, {"$set": {"expires_at": base}})
        assert fast(coll, {"_id": 9}) == []
        coll.insert_one({"_id": "old", "a": 0, "expires_at": base})
        assert fast(coll, {"_id": "old"}) == [] and coll.count_documents({}) == 6
    with mock.patch("mongomock.utcnow", return_value=base + timedelta(hours=1)):
        assert ids(coll.find({})) == ["never"]
