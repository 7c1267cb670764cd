"""The store on a sharded cluster: the workload of issue 27's "Done when", on the mongos double.

Items are sharded on ranged ``{_id: 1}``, vectors on ranged ``{item_id: 1}``, over three
shards whose chunks split the tenants (``users.alice``/``users.bob`` on shard0,
``users.carol``/``users.dave`` on shard1, ``users.erin``/``users.frank`` on shard2), for
MongoDB 7.0 and 8.0 behaviour (``tests/fakes/mongos.py``). The same workload runs on a
plain mongomock store; the answers must be equal, every single-item operation must reach
exactly one shard, no write may run "without shard key", and every read under a prefix
must reach only the shards that hold it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fakes.mongos import Cluster, OpRecord, key_bounds
from langgraph.store.base import Item

from mongostore import ConfigurationError, MongoStore
from mongostore.core import queries as q
from mongostore.tools.embeddings import HashingEmbeddings

SPLITS = ["users.c", "users.e"]
TENANTS = ["alice", "bob", "carol", "dave", "erin", "frank"]
INDEX = {"dims": 64, "embed": HashingEmbeddings(64), "fields": ["text"]}
TEXTS = ["pizza with olives", "hiking in the alps", "jazz records", "green tea", "chess openings", "sailing boats"]


def cluster_store(
    version: str,
    items_key: dict[str, Any] | None = None,
    vectors_key: dict[str, Any] | None = None,
    **store_kwargs: Any,
) -> tuple[Cluster, MongoStore]:
    cluster = Cluster(version)
    items_key = items_key or {"_id": 1}
    vectors_key = vectors_key or {"item_id": 1}
    cluster.shard_collection("app.memories", items_key, None if "hashed" in items_key.values() else SPLITS)
    cluster.shard_collection("app.memories_vectors", vectors_key, None if "hashed" in vectors_key.values() else SPLITS)
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX, **store_kwargs)
    return cluster, store


def plain_store(**store_kwargs: Any) -> MongoStore:
    return MongoStore.in_memory(index=INDEX, db_name="app", collection_name="memories", **store_kwargs)


def run(action: Callable[[MongoStore], Any], store: MongoStore) -> Any:
    """One step; then a pause, so every write of a run gets its own millisecond (newest-first
    order must not depend on which writes of a run happened to share one)."""
    try:
        return action(store)
    finally:
        time.sleep(0.003)


def shape(answer: Any) -> Any:
    """An answer without its timestamps (two runs write at different instants)."""
    if isinstance(answer, list):
        return [shape(a) for a in answer]
    if isinstance(answer, Item):
        score = getattr(answer, "score", None)
        return (answer.namespace, answer.key, answer.value, None if score is None else round(score, 6))
    return answer


def expire_behind_the_back(collection: Any, key: str) -> None:
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    collection.update_many({"key": key}, {"$set": {"expires_at": past}})


# One step of the workload: (name, kind, prefix, action). kind: "single" (one item: one shard),
# "prefix" (reads under ``prefix``: only the shards that hold it) or "other" (anything goes).
Step = tuple[str, str, tuple[str, ...], Callable[[MongoStore], Any]]


def workload() -> list[Step]:
    steps: list[Step] = []
    for i, tenant in enumerate(TENANTS):
        ns = ("users", tenant, "memories")
        steps.append((f"put new {tenant}", "single", (), lambda s, ns=ns, i=i: s.put(ns, "m1", {"text": TEXTS[i]})))
        steps.append(
            (
                f"put second {tenant}",
                "single",
                (),
                lambda s, ns=ns, i=i: s.put(ns, "m2", {"text": TEXTS[(i + 1) % 6], "n": i}),
            )
        )
    alice = ("users", "alice", "memories")
    carol = ("users", "carol", "memories")
    steps += [
        ("put unchanged", "single", (), lambda s: s.put(alice, "m1", {"text": TEXTS[0]})),
        ("put unchanged again", "single", (), lambda s: s.put(alice, "m1", {"text": TEXTS[0]})),
        ("put changed text", "single", (), lambda s: s.put(alice, "m2", {"text": "olive oil and bread", "n": 0})),
        ("put with ttl", "single", (), lambda s: s.put(carol, "t1", {"text": "short lived"}, ttl=60)),
        ("put index=False", "single", (), lambda s: s.put(carol, "plain", {"text": "not embedded"}, index=False)),
        ("get", "single", (), lambda s: s.get(alice, "m1")),
        ("get missing", "single", (), lambda s: s.get(alice, "nope")),
        ("get refreshes ttl", "single", (), lambda s: s.get(carol, "t1", refresh_ttl=True)),
        ("search alice", "prefix", ("users", "alice"), lambda s: s.search(("users", "alice"))),
        (
            "search carol filtered",
            "prefix",
            ("users", "carol"),
            lambda s: s.search(("users", "carol"), filter={"n": 2}),
        ),
        ("search carol limit", "prefix", ("users", "carol"), lambda s: s.search(("users", "carol"), limit=1, offset=1)),
        ("semantic alice", "prefix", ("users", "alice"), lambda s: s.search(("users", "alice"), query="olives")),
        (
            "semantic carol filtered",
            "prefix",
            ("users", "carol"),
            lambda s: s.search(("users", "carol"), query="tea", filter={"n": 2}),
        ),
        (
            "semantic erin",
            "prefix",
            ("users", "erin", "memories"),
            lambda s: s.search(("users", "erin", "memories"), query="boats", limit=1),
        ),
        ("semantic everyone", "other", (), lambda s: s.search((), query="music", limit=3)),
        ("list namespaces alice", "prefix", ("users", "alice"), lambda s: s.list_namespaces(prefix=("users", "alice"))),
        (
            "list namespaces wildcard",
            "prefix",
            ("users", "dave"),
            lambda s: s.list_namespaces(prefix=("users", "dave", "*")),
        ),
        ("list namespaces all", "other", (), lambda s: s.list_namespaces(max_depth=2)),
        (
            "analytics alice",
            "prefix",
            ("users", "alice"),
            lambda s: s.aggregate(("users", "alice"), [{"$group": {"_id": None, "n": {"$sum": 1}}}]),
        ),
        ("delete", "single", (), lambda s: s.delete(alice, "m2")),
        ("get deleted", "single", (), lambda s: s.get(alice, "m2")),
        (
            "semantic alice after delete",
            "prefix",
            ("users", "alice"),
            lambda s: s.search(("users", "alice"), query="olives"),
        ),
        ("expire", "other", (), lambda s: expire_behind_the_back(s.collection, "t1")),
        ("sweep", "other", (), lambda s: s.sweep_ttl()),
        ("get swept", "single", (), lambda s: s.get(carol, "t1")),
        ("search carol after sweep", "prefix", ("users", "carol"), lambda s: s.search(("users", "carol"))),
    ]
    return steps


def prefix_shards(cluster: Cluster, ns: str, prefix: tuple[str, ...]) -> set[str]:
    sns = cluster.sharded[ns]
    bounds = q.prefix_range(prefix)
    return sns.shards_for(key_bounds({sns.field: bounds}, sns.field))


def check_records(cluster: Cluster, name: str, kind: str, prefix: tuple[str, ...], recs: list[OpRecord]) -> None:
    data = [r for r in recs if not r.ns.startswith("config.")]
    for r in data:
        assert not r.without_shard_key, (name, r)
    if kind == "single":
        assert data, name
        for r in data:
            assert len(r.shards) == 1, (name, r)
    elif kind == "prefix":
        assert data, name
        for r in data:
            assert r.shards <= prefix_shards(cluster, r.ns, prefix), (name, r)


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_done_when_workload(version: str) -> None:
    cluster, sharded = cluster_store(version)
    plain = plain_store()
    sharded.setup()
    plain.setup()
    # setup(): path_key is not unique behind mongos (a unique one is refused, code 67)
    info = sharded.collection.index_information()
    assert "unique" not in info["path_key"] and plain.collection.index_information()["path_key"]["unique"]
    reached: dict[str, set[str]] = {}
    for name, kind, prefix, action in workload():
        mark = cluster.mark()
        got, want = run(action, sharded), run(action, plain)
        assert shape(got) == shape(want), name
        recs = cluster.since(mark)
        check_records(cluster, name, kind, prefix, recs)
        reached[name] = set().union(*(r.shards for r in recs if not r.ns.startswith("config.")))
    assert not any(r.without_shard_key for r in cluster.log)
    # the tenants are where the chunks put them, and single-tenant reads stayed there
    assert cluster.shard_counts("app.memories") == {"shard0": 3, "shard1": 5, "shard2": 4}
    assert reached["semantic alice"] == {"shard0"} and reached["semantic erin"] == {"shard2"}
    assert reached["list namespaces all"] == {"shard0", "shard1", "shard2"}
    assert reached["get"] == {"shard0"} and reached["delete"] == {"shard0"}
    # the status shows the cluster and says the keys are the recommended ones
    status = sharded.status()
    assert status["cluster"]["shard_keys"]["items"]["verdict"] == "recommended"
    assert status["cluster"]["shard_keys"]["vectors"]["verdict"] == "recommended"
    assert plain.status()["cluster"] is None


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_a_refined_vectors_key_is_accepted_and_stays_targeted(version: str) -> None:
    """``refineCollectionShardKey`` turns ``{item_id: 1}`` into ``{item_id: 1, _id: 1}``: every
    single-document vector write carries both fields, every prefix read bounds ``item_id``, so
    setup() accepts it and the workload stays targeted (issue 34: it was refused)."""
    cluster, sharded = cluster_store(version)
    cluster.refine_shard_key("app.memories_vectors", {"item_id": 1, "_id": 1})
    plain = plain_store()
    sharded.setup()
    plain.setup()
    for name, kind, prefix, action in workload():
        mark = cluster.mark()
        assert shape(run(action, sharded)) == shape(run(action, plain)), name
        check_records(cluster, name, kind, prefix, cluster.since(mark))
    verdict = sharded.status()["cluster"]["shard_keys"]["vectors"]
    assert verdict["verdict"] == "supported" and "refineCollectionShardKey" in verdict["advice"]


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_hashed_keys_keep_single_item_operations_on_one_shard(version: str) -> None:
    cluster, sharded = cluster_store(version, {"_id": "hashed"}, {"item_id": "hashed"})
    plain = plain_store()
    sharded.setup()
    plain.setup()
    for name, kind, _prefix, action in workload():
        mark = cluster.mark()
        assert shape(run(action, sharded)) == shape(run(action, plain)), name
        recs = [r for r in cluster.since(mark) if not r.ns.startswith("config.")]
        assert not any(r.without_shard_key for r in recs)
        if kind == "single":
            assert all(len(r.shards) == 1 for r in recs), name
        if name == "search alice":  # the cost of a hashed key: a prefix read reaches every shard
            assert [len(r.shards) for r in recs] == [3]
    assert all(n > 0 for n in cluster.shard_counts("app.memories").values())
    assert sharded.status()["cluster"]["shard_keys"]["items"]["verdict"] == "supported"


def test_setup_refuses_a_shard_key_the_store_cannot_target() -> None:
    cluster = Cluster("7.0.12")
    cluster.shard_collection("app.memories", {"path": 1}, ["m"])
    store = MongoStore(cluster.client()["app"]["memories"])
    with pytest.raises(ConfigurationError, match="reshardCollection"):
        store.setup()


def test_unsharded_collections_on_a_cluster_work_and_say_so() -> None:
    cluster = Cluster("8.0.4")
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    store.setup()
    store.put(("a",), "k", {"text": "hello"})
    assert [i.key for i in store.search(("a",), query="hello")] == ["k"]
    keys = store.status()["cluster"]["shard_keys"]
    assert keys["items"]["verdict"] == keys["vectors"]["verdict"] == "unsharded"
    assert not any(r.without_shard_key for r in cluster.log)


def test_the_issue_is_real_on_the_double_without_the_item_id() -> None:
    """What the store did before: a vector upsert keyed by ``_id`` alone, refused by 7.0 (code 61)."""
    cluster, store = cluster_store("7.0.12")
    store.setup()
    req = q.put_vector_request(("a",), "k", "text", "h", [0.0] * 64, {}, datetime.now(timezone.utc), None)
    vecs = cluster.client()["app"]["memories_vectors"]
    from pymongo import UpdateOne
    from pymongo.errors import BulkWriteError

    with pytest.raises(BulkWriteError) as err:
        vecs.bulk_write([UpdateOne(req.filter, req.update, upsert=True)], ordered=False)
    assert err.value.details["writeErrors"][0]["code"] == 61
    [fixed] = q.targeted_writes([req])
    vecs.bulk_write([UpdateOne(fixed.filter, fixed.update, upsert=True)], ordered=False)
    assert math.isclose(len(cluster.since(0)), len(cluster.log))


@pytest.mark.parametrize(("prefix", "limit", "hits"), [(("users", "alice"), 3, 5), ((), 10, 20)])
def test_semantic_pipeline_lookups_on_a_cluster(prefix: tuple[str, ...], limit: int, hits: int) -> None:
    """With Atlas Search on the cluster, the ``$vectorSearch`` pipeline reaches every shard
    (mongot on each), and its two ``$lookup`` s into the sharded items run once per input
    document, each targeted to one shard by ``_id``: one per vector hit (up to ``k``), then
    one per page entry. docs/scaling.md quotes these numbers."""
    from fakes.atlas import AtlasSearch

    cluster = Cluster("8.0.4", atlas=AtlasSearch())
    cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    cluster.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    store.setup()
    assert store.status()["search_path"] == "atlas"
    for i, tenant in enumerate(TENANTS):
        for j in range(5):
            store.put(("users", tenant), f"m{j}", {"text": f"{TEXTS[(i + j) % 6]} {j}"})
    mark = cluster.mark()
    assert len(store.search(prefix, query="olives", limit=limit)) == limit
    [rec] = [r for r in cluster.since(mark) if r.op == "aggregate"]
    assert rec.ns == "app.memories_vectors" and rec.shards == {"shard0", "shard1", "shard2"}
    joins = [(lk["inputs"], lk["remote_queries"], lk["shards_per_input"]) for lk in rec.lookups]
    assert joins == [(hits, hits, 1), (limit, limit, 1)]


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
async def test_async_store_on_a_cluster(version: str) -> None:
    """``AsyncMongoStore`` runs the same plans: single-item operations on one shard, prefix
    reads on the prefix's shards, no write without shard key, the sync store's answers."""
    from mongostore import AsyncMongoStore

    cluster = Cluster(version)
    cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    cluster.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
    store = AsyncMongoStore(cluster.async_client()["app"]["memories"], index=INDEX)
    plain = plain_store()
    await store.setup()
    plain.setup()
    alice, erin = ("users", "alice"), ("users", "erin")
    for i, (ns, key) in enumerate([(alice, "a"), (alice, "b"), (erin, "e")]):
        mark = cluster.mark()
        await store.aput(ns, key, {"text": TEXTS[i]})
        plain.put(ns, key, {"text": TEXTS[i]})
        time.sleep(0.003)
        check_records(cluster, "aput", "single", (), cluster.since(mark))
    checks: list[tuple[str, tuple[str, ...], Any, Any]] = [
        ("prefix", alice, store.asearch(alice, query="olives"), lambda: plain.search(alice, query="olives")),
        ("prefix", alice, store.asearch(alice), lambda: plain.search(alice)),
        ("prefix", alice, store.alist_namespaces(prefix=alice), lambda: plain.list_namespaces(prefix=alice)),
        ("single", (), store.aget(erin, "e"), lambda: plain.get(erin, "e")),
        ("single", (), store.adelete(alice, "b"), lambda: plain.delete(alice, "b")),
    ]
    for kind, prefix, coro, sync in checks:
        mark = cluster.mark()
        got = await coro
        check_records(cluster, kind, kind, prefix, cluster.since(mark))
        assert shape(got) == shape(sync())
    assert not any(r.without_shard_key for r in cluster.log)
    assert (await store.status())["cluster"]["shard_keys"]["vectors"]["verdict"] == "recommended"


def test_migrating_a_deployment_that_has_the_unique_index(caplog: pytest.LogCaptureFixture) -> None:
    """Before: an unsharded items collection with the unique path_key. setup() behind mongos
    keeps it (and says how to migrate); shardCollection refuses until it is dropped; after
    dropping it, setup() creates it non-unique and the collection can be sharded."""
    cluster = Cluster("7.0.12")
    items = cluster.client()["app"]["memories"]
    items.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    store = MongoStore(items)
    store.setup()
    assert items.index_information()["path_key"]["unique"]
    assert "dropIndex" in caplog.text
    with pytest.raises(Exception, match="Uniqueness can't be maintained"):
        cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    items.drop_index("path_key")
    store.setup()
    assert "unique" not in items.index_information()["path_key"]
    cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    store.put(("users", "alice"), "k", {"v": 1})
    assert store.get(("users", "alice"), "k").value == {"v": 1}


def test_doctor_shows_the_cluster_and_its_shard_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from mongostore.tools.cli import main

    cluster, store = cluster_store("8.0.4", vectors_key={"item_id": "hashed"})
    store.setup()
    assert main(["doctor"], store=store) == 0
    out = capsys.readouterr().out
    assert "cluster" in out and "sharded (mongos)" in out
    assert "items shard key" in out and "recommended" in out
    assert "note: the vectors collection's shard key {'item_id': 'hashed'}" in out
    cluster.sharded["app.memories"].field = "path"  # as if resharded on a key the store cannot target
    assert main(["doctor"], store=store) == 1
    assert "PROBLEM: the items collection's shard key" in capsys.readouterr().out


def test_a_user_who_cannot_read_config_collections(caplog: pytest.LogCaptureFixture) -> None:
    """Without privileges on ``config`` the shard keys are not checked (a warning), the store
    still targets its operations, and ``status()`` says why it shows no keys."""
    cluster, store = cluster_store("7.0.12")
    cluster.config_readable = False
    store.setup()
    assert "could not read the shard keys" in caplog.text
    store.put(("users", "alice"), "k", {"text": "hello"})
    assert not any(r.without_shard_key for r in cluster.log)
    status = store.status()["cluster"]
    assert status["shard_keys"] == {} and "config.collections" in status["detail"]


@pytest.mark.parametrize("hashed", [False, True])
def test_shard_collections_is_an_explicit_opt_in(hashed: bool) -> None:
    cluster = Cluster("8.0.4")
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    store.setup()
    assert cluster.sharded == {}  # setup() never shards
    kind: Any = "hashed" if hashed else 1
    assert store.shard_collections(hashed=hashed) == {"items": {"_id": kind}, "vectors": {"item_id": kind}}
    keys = store.status()["cluster"]["shard_keys"]
    assert keys["items"]["verdict"] == ("supported" if hashed else "recommended")
    assert store.shard_collections() == {}  # already sharded: left as they are
    mark = cluster.mark()
    store.put(("users", "alice"), "k", {"text": "hello"})
    assert all(len(r.shards) == 1 and not r.without_shard_key for r in cluster.since(mark))


def test_shard_collections_refuses_with_the_migration_when_the_unique_index_is_there() -> None:
    cluster = Cluster("7.0.12")
    items = cluster.client()["app"]["memories"]
    items.create_index([("path", 1), ("key", 1)], unique=True, name="path_key")
    store = MongoStore(items)
    store.setup()
    with pytest.raises(ConfigurationError, match="dropIndex"):
        store.shard_collections()
    assert plain_store().setup() is None
    with pytest.raises(ConfigurationError, match="not mongos"):
        plain_store().shard_collections()


def test_shard_collections_hashed_on_collections_that_hold_data() -> None:
    """mongod hashes a collection that holds documents only once the hashed index exists (code 72
    "Please create an index that starts with the proposed shard key"): shard_collections() creates
    it first (issue 34: it failed, and advised dropping path_key)."""
    cluster = Cluster("8.0.4")
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    store.setup()
    for i, tenant in enumerate(TENANTS):
        store.put(("users", tenant), "m", {"text": TEXTS[i]})
    assert store.shard_collections(hashed=True) == {"items": {"_id": "hashed"}, "vectors": {"item_id": "hashed"}}
    assert "_id_hashed" in store.collection.index_information()
    assert sum(cluster.shard_counts("app.memories").values()) == len(TENANTS)
    mark = cluster.mark()
    assert store.get(("users", "alice"), "m").value == {"text": TEXTS[0]}
    assert [len(r.shards) for r in cluster.since(mark)] == [1]


def test_shard_collections_says_what_is_missing_when_no_index_supports_the_key() -> None:
    cluster = Cluster("8.0.4")
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    store.setup()
    store.put(("users", "alice"), "m", {"text": "hello"})
    store.vectors_collection.drop_index("item_id")  # as if setup() had not run on this collection
    with pytest.raises(ConfigurationError) as err:
        store.shard_collections()
    assert "Please create an index" in str(err.value) and "run setup() first" in str(err.value)
    assert "path_key" not in str(err.value)


def test_a_short_vector_search_page_on_a_sharded_collection_asks_again() -> None:
    """Each shard's mongot answers its own top ``k``; ``idLookup`` then drops orphans (copies a
    migration left, here of since-deleted vectors that match the query best) without topping up,
    so a page with fewer hits than asked is not the end behind mongos (issue 34): the store asks
    again until asking for more brings no more, and finds the page the unsharded store finds."""
    from fakes.atlas import AtlasSearch

    atlas = AtlasSearch()
    cluster = Cluster("8.0.4", atlas=atlas)
    cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    cluster.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
    store = MongoStore(cluster.client()["app"]["memories"], index=INDEX)
    plain = plain_store()
    store.setup()
    plain.setup()
    alice = ("users", "alice")
    for s in (store, plain):
        for j in range(10):
            s.put(alice, f"m{j}", {"text": f"{TEXTS[j % 6]} {j}"})
    for j in range(15):  # the best matches, moved away and deleted: their copies stay on shard0
        store.put(alice, f"gone{j}", {"text": "green tea"})
    vectors = cluster.client()["app"]["memories_vectors"]
    stale = [doc for doc in vectors.find({"item_id": {"$gte": "users.alice.\x00gone", "$lt": "users.alice.\x00gonf"}})]
    for j in range(15):
        store.delete(alice, f"gone{j}")
    cluster.orphans["app.memories_vectors"] = [("shard0", doc) for doc in stale]
    mark = cluster.mark()
    got = [(i.key, i.score is not None) for i in store.search(alice, query="green tea", limit=10)]
    assert got == [(i.key, True) for i in plain.search(alice, query="green tea", limit=10)]
    asks = [r for r in cluster.since(mark) if r.op == "aggregate" and r.ns == "app.memories_vectors"]
    assert len(asks) == 2  # k = 20: 5 hits (the page short); k = 80: 10 hits (the page full)


@pytest.mark.parametrize("sharded", [False, True])
def test_a_short_page_costs_one_aggregate_on_atlas_and_one_more_behind_mongos(sharded: bool) -> None:
    """On Atlas (unsharded) a semantic page is one aggregate, short or not; behind mongos a short
    page costs one more, which finds no more hits."""
    from fakes.atlas import AtlasSearch, atlas_collection

    atlas = AtlasSearch(server_version="8.0.4")
    cluster = Cluster("8.0.4", atlas=atlas)
    if sharded:
        cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
        cluster.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
        collection: Any = cluster.client()["app"]["memories"]
    else:
        collection = atlas_collection()
    store = MongoStore(collection, index=INDEX)
    store.setup()
    for j in range(3):
        store.put(("users", "bob"), f"m{j}", {"text": TEXTS[j]})
    mark, calls = cluster.mark(), getattr(collection, "atlas", atlas).vector_search_calls
    assert len(store.search(("users", "bob"), query="tea", limit=10)) == 3
    if sharded:
        assert len([r for r in cluster.since(mark) if r.op == "aggregate" and r.ns.endswith("_vectors")]) == 2
    else:
        assert collection.atlas.vector_search_calls - calls == 1


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_purge_reaches_only_the_prefixs_shards(version: str) -> None:
    """Issue 36.1: a purge (and its dry run) reads and deletes by the prefix's ``_id`` / ``item_id``
    range and by ``$in`` of ids: only the shards holding the tenant, no write without shard key."""
    cluster, sharded = cluster_store(version)
    plain = plain_store()
    for store in (sharded, plain):
        store.setup()
        for i, tenant in enumerate(TENANTS):
            store.put(("users", tenant, "memories"), "m1", {"text": TEXTS[i]})
            store.put(("users", tenant, "notes"), "n1", {"text": TEXTS[(i + 1) % 6]})
    for prefix in (("users", "alice"), ("users", "erin", "notes")):
        for dry_run in (True, False):
            mark = cluster.mark()
            got, want = sharded.purge(prefix, dry_run=dry_run), plain.purge(prefix, dry_run=dry_run)
            assert got == want and got.items > 0, prefix
            check_records(cluster, f"purge {prefix}", "prefix", prefix, cluster.since(mark))
    assert sorted(sharded.list_namespaces()) == sorted(plain.list_namespaces())
    assert ("users", "alice", "memories") not in sharded.list_namespaces()
