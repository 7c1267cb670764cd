"""The mongos double itself, against the rules it claims (``tests/fakes/mongos.py``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from bson.regex import Regex
from fakes.mongos import (
    CANNOT_CREATE_INDEX,
    HASHED_UNIQUE,
    INVALID_OPTIONS,
    SHARD_KEY_NOT_FOUND,
    SHARD_KEY_UPDATE_FORBIDDEN,
    Cluster,
    MongosCollection,
    exact_shard_key,
    key_bounds,
    regex_prefix,
)
from pymongo import DeleteMany, DeleteOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException, OperationFailure, WriteError

SPLITS = ["c", "m"]  # chunks: [MinKey, "c") shard0, ["c", "m") shard1, ["m", MaxKey) shard2


def sharded(version: str = "7.0.12", key: dict[str, Any] | None = None) -> tuple[Cluster, MongosCollection]:
    cluster = Cluster(version)
    coll = cluster.client()["db"]["items"]
    key = key or {"_id": 1}
    cluster.shard_collection("db.items", key, None if "hashed" in key.values() else SPLITS)
    return cluster, coll


def test_hello_says_mongos() -> None:
    cluster = Cluster("8.0.4")
    db = cluster.client()["db"]
    hello = db.command("hello")
    assert hello["msg"] == "isdbgrid" and hello["maxWireVersion"] == 25
    assert db.command("buildInfo")["version"] == "8.0.4"
    assert Cluster("7.0.12").client()["db"].command("hello")["maxWireVersion"] == 21


def test_config_collections_lists_shard_keys() -> None:
    cluster, _ = sharded()
    docs = list(cluster.client()["config"]["collections"].find({"_id": "db.items"}))
    assert docs == [{"_id": "db.items", "key": {"_id": 1}, "unique": False, "dropped": False}]


def test_documents_spread_over_three_shards() -> None:
    cluster, coll = sharded()
    coll.insert_many([{"_id": k} for k in ("a", "b", "d", "k", "n", "z")])
    assert cluster.shard_counts("db.items") == {"shard0": 2, "shard1": 2, "shard2": 2}


@pytest.mark.parametrize(
    ("filt", "shards"),
    [
        ({"_id": "a"}, {"shard0"}),
        ({"_id": {"$eq": "n"}}, {"shard2"}),
        ({"_id": {"$in": ["a", "n"]}}, {"shard0", "shard2"}),
        ({"_id": {"$gte": "d", "$lt": "e"}}, {"shard1"}),
        ({"_id": {"$gte": "b", "$lt": "d"}}, {"shard0", "shard1"}),
        ({"_id": {"$regex": "^d\\.x"}}, {"shard1", "shard2"}),  # and the regex's own point, after every string
        ({"_id": Regex("^q", 0)}, {"shard2"}),
        ({"$and": [{"_id": {"$gte": "a"}}, {"_id": {"$lt": "b"}}, {"x": 1}]}, {"shard0"}),
        ({"$or": [{"_id": "a"}, {"_id": "z"}]}, {"shard0", "shard2"}),
        ({"x": 1}, {"shard0", "shard1", "shard2"}),
        ({"_id": {"$ne": "a"}}, {"shard0", "shard1", "shard2"}),
        ({"_id": {"$regex": "^d", "$options": "i"}}, {"shard0", "shard1", "shard2"}),
        ({"_id": {"$regex": "^(d|e)"}}, {"shard0", "shard1", "shard2"}),
        ({"_id": {"$regex": "d"}}, {"shard0", "shard1", "shard2"}),
        ({"_id": re.compile("^d")}, {"shard0", "shard1", "shard2"}),  # a Python pattern carries the u flag
        ({"$or": [{"_id": "a"}, {"x": 1}]}, {"shard0", "shard1", "shard2"}),
    ],
)
def test_read_routing(filt: dict[str, Any], shards: set[str]) -> None:
    cluster, coll = sharded()
    mark = cluster.mark()
    list(coll.find(filt))
    [rec] = cluster.since(mark)
    assert rec.op == "find" and rec.shards == shards


def test_aggregate_routes_by_first_match_only() -> None:
    cluster, coll = sharded()
    coll.insert_many([{"_id": "a", "v": 1}, {"_id": "n", "v": 2}])
    mark = cluster.mark()
    assert [d["_id"] for d in coll.aggregate([{"$match": {"_id": {"$gte": "a", "$lt": "b"}}}])] == ["a"]
    list(coll.aggregate([{"$sort": {"v": 1}}, {"$match": {"_id": "a"}}]))
    first, second = cluster.since(mark)
    assert first.shards == {"shard0"} and first.targeted
    assert second.shards == {"shard0", "shard1", "shard2"} and not second.targeted


def test_regex_prefix_rules() -> None:
    # IndexBoundsBuilder::simpleRegex: anchored, literal up to the first special character.
    assert regex_prefix("^users\\.alice\\.") == "users.alice."
    assert regex_prefix("\\Ausers") == "users"
    assert regex_prefix("^ab*") == "a"  # the starred literal is optional
    assert regex_prefix("^a.b") == "a"
    assert regex_prefix("^a", "i") is None
    assert regex_prefix("^a", "m") is None and regex_prefix("\\Aa", "m") == "a"
    assert regex_prefix("^a|b") is None and regex_prefix("a") is None
    # analyze_regex.cpp, getRegexPrefixMatch:
    assert regex_prefix("^a{2}") == "a"  # `{` ends the prefix; it does not drop the last literal
    assert regex_prefix("^ab?") == "a" and regex_prefix("^a]b}c") == "a]b}c"  # `]` and `}` are literal
    assert regex_prefix("^a\\|b") == "a|b"  # an escaped pipe is a literal
    assert regex_prefix("^a\\\\|b") is None  # a pipe after an escaped backslash is not escaped
    assert regex_prefix("^\\Qa.b|c\\E.d") is None  # the pipe check runs first, even inside \\Q..\\E
    assert regex_prefix("^\\Qa.b\\Ec") == "a.bc" and regex_prefix("^\\Qa.b") == "a.b"
    assert regex_prefix("^ab\\d") == "ab" and regex_prefix("^a\\.b") == "a.b"
    assert regex_prefix("^a", "s") == "a" and regex_prefix("^a b#c", "x") == "ab"


def test_bounds_and_exact_key_extraction() -> None:
    assert key_bounds({"x": 1}, "_id") is None
    assert exact_shard_key({"_id": "a"}, "_id") == "a"
    assert exact_shard_key({"$and": [{"x": 1}, {"item_id": {"$eq": "i"}}]}, "item_id") == "i"
    assert exact_shard_key({"item_id": {"$in": ["i"]}}, "item_id") == "i"
    assert exact_shard_key({"item_id": {"$in": ["i", "j"]}}, "item_id") is not None  # the no-key marker
    assert exact_shard_key({"item_id": {"$in": ["i", "j"]}}, "item_id") == exact_shard_key({}, "item_id")


def test_unique_index_must_be_prefixed_by_the_shard_key() -> None:
    _, coll = sharded()
    with pytest.raises(OperationFailure) as err:
        coll.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    assert err.value.code == CANNOT_CREATE_INDEX
    assert str(err.value) == "cannot create unique index over { path: 1, key: 1 } with shard key pattern { _id: 1 }"
    coll.create_index([("path", 1), ("key", 1)], name="path_key")  # non-unique: fine
    coll.create_index([("_id", 1), ("x", 1)], unique=True, name="id_x")  # _id first: always compatible

    _, vecs = sharded(key={"item_id": 1})
    vecs.create_index([("item_id", 1), ("field", 1)], unique=True, name="ok")
    with pytest.raises(OperationFailure):
        vecs.create_index([("field", 1), ("item_id", 1)], unique=True, name="no")


def test_shard_collection_refuses_an_existing_incompatible_unique_index() -> None:
    cluster = Cluster()
    coll = cluster.client()["db"]["items"]
    coll.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    with pytest.raises(OperationFailure) as err:
        cluster.shard_collection("db.items", {"_id": 1}, SPLITS)
    assert err.value.code == INVALID_OPTIONS and "Uniqueness can't be maintained" in str(err.value)


def test_upsert_without_the_exact_shard_key_on_7_0_and_8_0() -> None:
    cluster, vecs = sharded("7.0.12", {"item_id": 1})
    with pytest.raises(WriteError) as err:
        vecs.update_one({"_id": "a\x00f"}, {"$set": {"item_id": "a"}}, upsert=True)
    assert err.value.code == SHARD_KEY_NOT_FOUND
    assert err.value.details["errmsg"] == "Failed to target upsert by query :: could not extract exact shard key"
    with pytest.raises(BulkWriteError) as bulk:
        vecs.bulk_write([UpdateOne({"_id": "a\x00f"}, {"$set": {"item_id": "a"}}, upsert=True)], ordered=False)
    assert bulk.value.details["writeErrors"][0]["code"] == SHARD_KEY_NOT_FOUND
    mark = cluster.mark()
    vecs.update_one({"_id": "a\x00f", "item_id": "a"}, {"$set": {"x": 1}}, upsert=True)
    [rec] = cluster.since(mark)
    assert rec.shards == {"shard0"} and not rec.without_shard_key

    cluster8, vecs8 = sharded("8.0.4", {"item_id": 1})
    mark = cluster8.mark()
    vecs8.update_one({"_id": "n\x00f"}, {"$set": {"item_id": "n"}}, upsert=True)
    [rec] = cluster8.since(mark)
    assert rec.without_shard_key and rec.shards == {"shard0", "shard1", "shard2"}
    assert vecs8.find_one({"_id": "n\x00f"}) == {"_id": "n\x00f", "item_id": "n"}


def test_single_writes_without_shard_key() -> None:
    cluster, vecs = sharded("7.0.12", {"item_id": 1})
    vecs.insert_one({"_id": "a\x00f", "item_id": "a", "t": 1})
    mark = cluster.mark()
    vecs.update_one({"_id": "a\x00f"}, {"$set": {"t": 2}})  # exact _id: broadcast before 7.1
    [rec] = cluster.since(mark)
    assert rec.shards == {"shard0", "shard1", "shard2"} and not rec.without_shard_key
    with pytest.raises(WriteError) as err:
        vecs.delete_one({"t": 2})
    assert err.value.code == SHARD_KEY_NOT_FOUND  # targetDelete: 61, where targetUpdate says 72
    mark = cluster.mark()
    vecs.delete_many({"item_id": "a"})  # multi: routed, never refused
    [rec] = cluster.since(mark)
    assert rec.shards == {"shard0"} and rec.op == "delete" and not rec.single


def test_changing_the_shard_key_value() -> None:
    cluster, vecs = sharded("7.0.12", {"item_id": 1})
    vecs.insert_one({"_id": 1, "item_id": "a"})
    with pytest.raises(WriteError) as err:
        vecs.update_one({"_id": 1}, {"$set": {"item_id": "z"}})
    assert err.value.code == SHARD_KEY_UPDATE_FORBIDDEN
    assert vecs.find_one({"_id": 1})["item_id"] == "a"  # undone
    with pytest.raises(WriteError) as err:
        vecs.update_many({"item_id": "a"}, {"$set": {"item_id": "b"}})
    assert err.value.code == INVALID_OPTIONS  # the full key is there, but a multi-update may not change it
    mark = cluster.mark()
    vecs.update_one({"_id": 1, "item_id": "a"}, {"$set": {"item_id": "z"}})
    [rec] = cluster.since(mark)
    assert rec.moved_shard_key and vecs.find_one({"_id": 1})["item_id"] == "z"


def test_hashed_keys_target_equality_only() -> None:
    cluster, coll = sharded(key={"_id": "hashed"})
    coll.insert_many([{"_id": f"u{i}"} for i in range(60)])
    assert all(n > 0 for n in cluster.shard_counts("db.items").values())
    mark = cluster.mark()
    list(coll.find({"_id": "u1"}))
    list(coll.find({"_id": {"$gte": "u1", "$lt": "u2"}}))
    eq, rng = cluster.since(mark)
    assert len(eq.shards) == 1 and eq.targeted
    assert len(rng.shards) == 3 and not rng.targeted


def test_client_bulk_write_on_8_0() -> None:
    cluster, vecs = sharded("8.0.4", {"item_id": 1})
    client = cluster.client()
    assert not hasattr(Cluster("7.0.12").client(), "bulk_write")
    res = client.bulk_write(
        [
            UpdateOne({"_id": "a\x00f", "item_id": "a"}, {"$set": {"x": 1}}, upsert=True, namespace="db.items"),
            DeleteMany({"item_id": "zz"}, namespace="db.items"),
        ],
        verbose_results=True,
    )
    assert res.delete_results[1].deleted_count == 0
    cluster7, _ = sharded("7.0.12", {"item_id": 1})
    with pytest.raises(BulkWriteError):
        cluster7.client()["db"]["items"].bulk_write([UpdateMany({"x": 1}, {"$set": {"y": 1}}, upsert=True)])
    vecs.insert_one({"_id": 1, "item_id": "a"})
    with pytest.raises(ClientBulkWriteException) as err:
        client.bulk_write(
            [
                DeleteOne({"nope": 1}, namespace="db.items"),
                UpdateMany({"_id": 1}, {"$set": {"item_id": "q"}}, namespace="db.items"),
            ]
        )
    assert [e["idx"] for e in err.value.write_errors] == [1]


def test_lookups_into_a_sharded_collection_are_counted() -> None:
    cluster, vecs = sharded("8.0.4", {"item_id": 1})
    items = cluster.client()["db"]["things"]
    cluster.shard_collection("db.things", {"_id": 1}, SPLITS)
    items.insert_many([{"_id": "a"}, {"_id": "n"}])
    vecs.insert_many([{"_id": "a\x00f", "item_id": "a"}, {"_id": "n\x00f", "item_id": "n"}])
    mark = cluster.mark()
    list(
        vecs.aggregate(
            [
                {"$match": {}},
                {"$lookup": {"from": "things", "localField": "item_id", "foreignField": "_id", "as": "item"}},
            ]
        )
    )
    [rec] = cluster.since(mark)
    assert rec.lookups == [{"stage": 1, "from": "things", "inputs": 2, "remote_queries": 2, "shards_per_input": 1}]


# --------------------------------------------------------------------------- issue 34: rules from mongod


def test_bounds_follow_the_planner() -> None:
    """``getIndexBoundsForQuery`` / ``IndexBoundsBuilder`` (``index_bounds_builder.cpp``)."""
    cluster, coll = sharded()

    def reached(filt: dict[str, Any], **kw: Any) -> set[str]:
        mark = cluster.mark()
        list(coll.find(filt, **kw))
        [rec] = cluster.since(mark)
        return set(rec.shards)

    # no value can match: mongos still sends it to one shard, the first chunk's (SERVER-4914)
    assert reached({"_id": {"$in": []}}) == {"shard0"}
    assert reached({"_id": {"$gt": "n", "$lt": "b"}}) == {"shard0"}
    # a regex without a prefix: every string, and the regex's point (after the strings)
    assert reached({"_id": {"$regex": "d"}}) == {"shard0", "shard1", "shard2"}
    assert reached({"_id": {"$in": [Regex("^d"), "a"]}}) == {"shard0", "shard1", "shard2"}
    # equality to an array: the array itself (after every string) and its first element
    assert reached({"_id": ["d", "x"]}) == {"shard1", "shard2"}
    assert reached({"_id": []}) == {"shard0", "shard2"}  # undefined (below strings) and [] (after them)
    # a non-simple collation: a string comparison gives no bound; a regex keeps its prefix
    assert reached({"_id": "d"}, collation={"locale": "fr"}) == {"shard0", "shard1", "shard2"}
    assert reached({"_id": {"$regex": "^d"}}, collation={"locale": "fr"}) == {"shard1", "shard2"}
    assert reached({"_id": "d"}, collation={"locale": "simple"}) == {"shard1"}


def test_comparisons_stay_within_their_type() -> None:
    """``$lt: "b"`` is ``[MinString, "b")``: numbers (below strings) are not in it."""
    cluster = Cluster()
    coll = cluster.client()["db"]["items"]
    cluster.shard_collection("db.items", {"_id": 1}, [0, "c"])  # (-inf, 0) | [0, "c") | ["c", +inf)
    mark = cluster.mark()
    list(coll.find({"_id": {"$lt": "b"}}))
    list(coll.find({"_id": {"$gte": 5}}))
    strings, numbers = cluster.since(mark)
    assert strings.shards == {"shard1"} and numbers.shards == {"shard1"}


def test_arrays_are_never_shard_key_values() -> None:
    """``isValidShardKeyElementForStorage``; ``targetInsert`` refuses an array (61)."""
    _, vecs = sharded("7.0.12", {"item_id": 1})
    assert exact_shard_key({"item_id": ["a"]}, "item_id") == exact_shard_key({}, "item_id")
    with pytest.raises(WriteError) as err:
        vecs.insert_one({"_id": 1, "item_id": ["a"]})
    assert err.value.code == SHARD_KEY_NOT_FOUND
    with pytest.raises(WriteError) as err:
        vecs.update_one({"_id": 1, "item_id": ["a"]}, {"$set": {"x": 1}}, upsert=True)
    assert err.value.code == SHARD_KEY_NOT_FOUND


def test_a_collation_makes_string_keys_untargetable() -> None:
    """``ChunkManager::findIntersectingChunk``: "Cannot target single shard due to collation"."""
    _, vecs = sharded("7.0.12", {"item_id": 1})
    fr = {"locale": "fr"}
    with pytest.raises(BulkWriteError) as err:
        vecs.bulk_write([UpdateOne({"_id": "a", "item_id": "a"}, {"$set": {"x": 1}}, upsert=True, collation=fr)])
    assert err.value.details["writeErrors"][0]["code"] == SHARD_KEY_NOT_FOUND
    vecs.bulk_write([UpdateOne({"_id": "a", "item_id": "a"}, {"$set": {"x": 1}}, upsert=True)])  # simple: fine


def test_7_0_single_writes_reaching_one_shard_are_allowed() -> None:
    """7.0 ``targetUpdate``/``targetDelete``: a single write whose query reaches one shard goes
    there, shard key or not; reaching several, an update needs an exact ``_id`` (else 72), a
    delete too (else 61); a multi-write reaching several shards goes to every shard."""
    cluster, vecs = sharded("7.0.12", {"item_id": 1})
    vecs.insert_many([{"_id": "a1", "item_id": "a", "t": 1}, {"_id": "n1", "item_id": "n", "t": 1}])
    one_shard = {"item_id": {"$gte": "a", "$lt": "b"}, "t": 1}
    mark = cluster.mark()
    vecs.update_one(one_shard, {"$set": {"t": 2}})
    vecs.delete_one({"item_id": {"$gte": "n"}, "t": 1})
    vecs.delete_many({"item_id": {"$in": ["a", "n"]}, "t": 0})
    upd, dele, many = cluster.since(mark)
    assert upd.shards == {"shard0"} and upd.targeted and not upd.without_shard_key
    assert dele.shards == {"shard2"} and not dele.without_shard_key
    assert many.shards == {"shard0", "shard1", "shard2"}  # two shards reached: every shard (write_op.cpp)
    with pytest.raises(WriteError) as err:
        vecs.update_one({"t": 2}, {"$set": {"t": 3}})
    assert err.value.code == INVALID_OPTIONS
    with pytest.raises(WriteError) as err:
        vecs.update_one(one_shard, {"$set": {"t": 3}}, upsert=True)
    assert err.value.code == SHARD_KEY_NOT_FOUND  # an upsert always needs the exact key before 7.1


def test_8_0_writes_without_shard_key() -> None:
    """8.0 ``targetUpdate``/``targetDelete`` + ``targetWriteOps``: which single writes run in two
    phases, which are broadcast, and where the read phase goes (``_clusterQueryWithoutShardKey``
    targets by the query: ``cluster_query_without_shard_key_cmd.cpp``)."""
    cluster, vecs = sharded("8.0.4", {"item_id": 1})
    vecs.insert_many([{"_id": "a1", "item_id": "a", "t": 1}, {"_id": "n1", "item_id": "n", "t": 1}])
    mark = cluster.mark()
    vecs.update_one({"item_id": {"$gte": "a", "$lt": "b"}, "t": 1}, {"$set": {"t": 2}})  # one shard, no key
    vecs.delete_one({"item_id": {"$gte": "n"}, "t": 1})  # one shard: a delete does not need two phases
    vecs.update_one({"_id": "a1"}, {"$set": {"t": 3}})  # exact _id, no upsert: broadcast, not two phases
    vecs.update_one({"_id": "zz"}, {"$set": {"item_id": "z"}}, upsert=True)  # exact _id upsert: two phases
    vecs.update_one({"item_id": {"$lt": "d"}, "t": 9}, {"$set": {"t": 4}})  # read phase: shard0 and shard1
    vecs.delete_one({"t": 9})  # unbounded: read phase on every shard
    one, dele, by_id, upsert, bounded, anywhere = cluster.since(mark)
    assert one.without_shard_key and one.shards == {"shard0"}
    assert not dele.without_shard_key and dele.shards == {"shard2"}
    assert not by_id.without_shard_key and by_id.shards == {"shard0", "shard1", "shard2"}
    assert upsert.without_shard_key
    assert bounded.without_shard_key and bounded.shards == {"shard0", "shard1"}
    assert anywhere.without_shard_key and anywhere.shards == {"shard0", "shard1", "shard2"}
    with pytest.raises(WriteError) as err:  # a multi upsert still needs the exact key
        vecs.update_many({"t": 1}, {"$set": {"x": 1}}, upsert=True)
    assert err.value.code == SHARD_KEY_NOT_FOUND


def test_8_0_two_phase_writes_may_change_the_shard_key() -> None:
    """The write phase carries ``$_allowShardKeyUpdatesWithoutFullShardKeyInQuery``; a broadcast
    by ``_id`` does not (31025)."""
    _, vecs = sharded("8.0.4", {"item_id": 1})
    vecs.insert_one({"_id": 1, "item_id": "a", "t": 1})
    vecs.update_one({"t": 1}, {"$set": {"item_id": "z"}})
    assert vecs.find_one({"_id": 1})["item_id"] == "z"
    with pytest.raises(WriteError) as err:
        vecs.update_one({"_id": 1}, {"$set": {"item_id": "b"}})
    assert err.value.code == SHARD_KEY_UPDATE_FORBIDDEN


def test_hashed_indexes_and_sharding_a_populated_collection() -> None:
    cluster = Cluster()
    coll = cluster.client()["db"]["items"]
    with pytest.raises(OperationFailure) as err:
        coll.create_index([("x", "hashed")], unique=True)
    assert err.value.code == HASHED_UNIQUE
    coll.insert_many([{"_id": f"u{i}"} for i in range(10)])
    with pytest.raises(OperationFailure) as err:  # shard_key_util.cpp: the index first, hashed too
        cluster.shard_collection("db.items", {"_id": "hashed"})
    assert err.value.code == INVALID_OPTIONS and "Please create an index" in str(err.value)
    coll.create_index([("_id", "hashed")])
    cluster.shard_collection("db.items", {"_id": "hashed"})
    assert sum(cluster.shard_counts("db.items").values()) == 10


def test_a_refined_key_needs_every_field_for_an_exact_key() -> None:
    cluster, vecs = sharded("7.0.12", {"item_id": 1})
    sns = cluster.refine_shard_key("db.items", {"item_id": 1, "_id": 1})
    assert sns.pattern == {"item_id": 1, "_id": 1}
    mark = cluster.mark()
    vecs.update_one({"_id": "a\x00f", "item_id": "a"}, {"$set": {"x": 1}}, upsert=True)
    list(vecs.find({"item_id": {"$gte": "n"}}))
    upsert, rng = cluster.since(mark)
    assert upsert.shards == {"shard0"} and rng.shards == {"shard2"}
    with pytest.raises(WriteError) as err:
        vecs.update_one({"item_id": "a"}, {"$set": {"x": 1}}, upsert=True)
    assert err.value.code == SHARD_KEY_NOT_FOUND
