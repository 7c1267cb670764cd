"""The Atlas fake (tests/fakes/atlas.py) runs the store's real ``$vectorSearch`` pipeline.

Most checks run twice, on the sync wrapper (mongomock) and on the async one
(pymongo_async_mock), through one small adapter; the data is seeded through the
shared mongomock database underneath.
"""

from __future__ import annotations

import inspect
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from bson.binary import Binary
from fakes.atlas import (
    AsyncAtlasCollection,
    AtlasCollection,
    AtlasSearch,
    async_atlas_collection,
    atlas_collection,
)
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.core.queries import page_rows, scored_page_stages, vector_prefilter, vector_search_stage
from mongostore.core.retrieval import vector_index_definition

ALICE = ("users", "alice")
BOB = ("users", "bob")
INDEX = "memory_vec"
ITEMS = "memories"
VECTORS = "memories_vectors"


def path(ns: tuple[str, ...]) -> str:
    return "".join(label + "." for label in ns)


def item_doc(ns: tuple[str, ...], key: str, value: dict[str, Any], hashes: list[str]) -> dict[str, Any]:
    return {
        "_id": path(ns) + "\x00" + key,
        "namespace": list(ns),
        "path": path(ns),
        "key": key,
        "value": value,
        "vectors": hashes,
        "created_at": None,
        "updated_at": None,
    }


def vector_doc(
    ns: tuple[str, ...], key: str, field: str, hash_: str, embedding: list[float], value: dict[str, Any]
) -> dict[str, Any]:
    iid = path(ns) + "\x00" + key
    return {
        "_id": iid + "\x00" + field,
        "item_id": iid,
        "field": field,
        "text_hash": hash_,
        "ns_prefixes": [path(ns[: i + 1]) for i in range(len(ns))],
        "embedding": embedding,
        "value": value,
    }


def seed(db: Any) -> None:
    """Alice: k1 = the query, k2 at cos 0.8 (plus a worse second vector), k3 orthogonal,
    k4 = the query but stale (its item lists another hash). Bob: the query again."""
    db[ITEMS].insert_many(
        [
            item_doc(ALICE, "k1", {"kind": "food", "text": "pizza"}, ["h1"]),
            item_doc(ALICE, "k2", {"kind": "food", "text": "sushi"}, ["h2", "h2b"]),
            item_doc(ALICE, "k3", {"kind": "work", "text": "meeting"}, ["h3"]),
            item_doc(ALICE, "k4", {"kind": "food", "text": "new text"}, ["h4-new"]),
            item_doc(BOB, "k1", {"kind": "food", "text": "pizza"}, ["hb"]),
        ]
    )
    db[VECTORS].insert_many(
        [
            vector_doc(ALICE, "k1", "text", "h1", [1.0, 0.0, 0.0], {"kind": "food"}),
            vector_doc(ALICE, "k2", "text", "h2", [0.8, 0.6, 0.0], {"kind": "food"}),
            vector_doc(ALICE, "k2", "note", "h2b", [0.0, 0.0, 1.0], {"kind": "food"}),
            vector_doc(ALICE, "k3", "text", "h3", [0.0, 1.0, 0.0], {"kind": "work"}),
            vector_doc(ALICE, "k4", "text", "h4-old", [1.0, 0.0, 0.0], {"kind": "food"}),
            vector_doc(BOB, "k1", "text", "hb", [1.0, 0.0, 0.0], {"kind": "food"}),
        ]
    )


def pipeline(
    query: Sequence[float] = (1.0, 0.0, 0.0),
    *,
    namespace: tuple[str, ...] = ALICE,
    filter: Mapping[str, Any] | None = None,
    filter_fields: Sequence[str] = ("kind",),
    index_name: str = INDEX,
    similarity: str = "cosine",
    k: int = 10,
    num_candidates: int = 100,
    limit: int = 10,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    pre, post = vector_prefilter(namespace, filter, filter_fields)
    page = scored_page_stages(
        similarity=similarity, post_filter=post, items_collection=ITEMS, offset=0, limit=limit, now=now
    )
    return [vector_search_stage(index_name, list(query), num_candidates, k, pre), *page]


class Fake:
    """One adapter over the sync and async wrappers: every call is awaited if it must be."""

    def __init__(self, vectors: AtlasCollection | AsyncAtlasCollection) -> None:
        self.vectors = vectors
        self.atlas: AtlasSearch = vectors.atlas
        self.db = vectors.database.mongomock_db

    @staticmethod
    async def _resolve(value: Any) -> Any:
        return await value if inspect.isawaitable(value) else value

    @classmethod
    async def _to_list(cls, cursor: Any) -> list[Any]:
        return list(await cls._resolve(cursor.to_list()))

    async def call(self, method: str, *args: Any) -> Any:
        return await self._resolve(getattr(self.vectors, method)(*args))

    async def aggregate(self, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._to_list(await self.call("aggregate", stages))

    async def list_indexes(self, name: str | None = None) -> list[dict[str, Any]]:
        return await self._to_list(await self.call("list_search_indexes", name))

    async def create_index(self, similarity: str = "cosine", name: str = INDEX) -> str:
        model = SearchIndexModel(
            definition=vector_index_definition(3, similarity, ["kind"]), name=name, type="vectorSearch"
        )
        return str(await self.call("create_search_index", model))

    async def page(self, stages: list[dict[str, Any]]) -> tuple[int, list[tuple[str, float]]]:
        """(raw hits, [(item key, score), ...]) of one pipeline run."""
        facet, items = page_rows(await self.aggregate(stages))
        hits = facet["hits"][0]["n"] if facet["hits"] else 0
        # one row per page entry (id and score), each with its item
        assert set(items) == {doc["_id"] for doc in facet["page"]}
        return hits, [(doc["_id"].rsplit("\x00", 1)[1], doc["score"]) for doc in facet["page"]]


@pytest.fixture(params=["sync", "async"])
def fake(request: pytest.FixtureRequest) -> Fake:
    make = atlas_collection if request.param == "sync" else async_atlas_collection
    items = make(coll_name=ITEMS)
    vectors = items.database[VECTORS]
    seed(items.database.mongomock_db)
    return Fake(vectors)


@pytest.fixture
async def indexed(fake: Fake) -> Fake:
    assert await fake.create_index() == INDEX
    return fake


# --------------------------------------------------------------------------- $vectorSearch


async def test_ranks_by_similarity_and_reports_cosine(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline())
    assert [key for key, _ in page] == ["k1", "k2", "k3"]
    scores = [score for _, score in page]
    assert scores == pytest.approx([1.0, 0.8, 0.0])
    assert all(-1.0 <= s <= 1.0 for s in scores)


async def test_hits_count_the_raw_vectors_before_the_join(indexed: Fake) -> None:
    # Alice has 5 vectors (k2 has two; k4's is stale): all are hits, 3 items make the page.
    hits, page = await indexed.page(pipeline())
    assert hits == 5
    assert len(page) == 3


async def test_limit_caps_the_hits(indexed: Fake) -> None:
    hits, page = await indexed.page(pipeline(k=2, num_candidates=2))
    # The two best vectors are k1's and k4's (stale): only k1 survives the join.
    assert hits == 2
    assert [key for key, _ in page] == ["k1"]
    assert indexed.atlas.limits_asked == [2]
    assert indexed.atlas.num_candidates_asked == [2]


async def test_namespace_prefilter_excludes_other_users(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline(namespace=BOB))
    assert page == [("k1", pytest.approx(1.0))]
    _, everyone = await indexed.page(pipeline(namespace=("users",)))
    assert sorted(key for key, _ in everyone) == ["k1", "k1", "k2", "k3"]


async def test_stale_vector_is_dropped(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline())
    assert "k4" not in [key for key, _ in page]


async def test_expired_items_are_dropped(indexed: Fake) -> None:
    now = datetime.now(timezone.utc)
    indexed.db[ITEMS].update_one({"key": "k2"}, {"$set": {"expires_at": now - timedelta(minutes=1)}})
    indexed.db[ITEMS].update_one({"key": "k3"}, {"$set": {"expires_at": now + timedelta(minutes=1)}})
    _, page = await indexed.page(pipeline(now=now))
    assert [key for key, _ in page] == ["k1", "k3"]


async def test_prefilter_on_declared_field(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline(filter={"kind": {"$in": ["work"]}}))
    assert [key for key, _ in page] == ["k3"]
    assert indexed.atlas.requests[-1].filter == {
        "$and": [{"ns_prefixes": "users.alice."}, {"value.kind": {"$in": ["work"]}}]
    }


async def test_postfilter_on_undeclared_field(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline(filter={"text": "sushi"}, filter_fields=()))
    assert [key for key, _ in page] == ["k2"]


async def test_scalar_equality_prefilter_is_accepted_by_atlas(indexed: Fake) -> None:
    _, page = await indexed.page(pipeline(filter={"kind": "work"}))
    assert [key for key, _ in page] == ["k3"]


async def test_filter_on_undeclared_field_fails(indexed: Fake) -> None:
    with pytest.raises(OperationFailure, match="needs to be indexed as filter"):
        await indexed.aggregate(pipeline(filter={"text": {"$in": ["sushi"]}}, filter_fields=("text",)))


@pytest.mark.parametrize(
    "bad",
    [
        {"ns_prefixes": {"$regex": "^users"}},
        {"ns_prefixes": {"$elemMatch": {"$eq": "users."}}},
        {"$expr": {"$eq": ["$ns_prefixes", "users."]}},
        {"value.kind": {"$not": {"$type": "array"}}},
        {"value.kind": {"a": 1}},
    ],
)
async def test_filter_rejects_what_atlas_does_not_support(indexed: Fake, bad: dict[str, Any]) -> None:
    stages = pipeline()
    stages[0]["$vectorSearch"]["filter"] = bad
    with pytest.raises(OperationFailure):
        await indexed.aggregate(stages)


async def test_filter_accepts_atlas_operators(indexed: Fake) -> None:
    stages = pipeline()
    stages[0]["$vectorSearch"]["filter"] = {
        "$and": [
            {"ns_prefixes": {"$eq": "users.alice."}},
            {"$or": [{"value.kind": {"$ne": "work"}}, {"value.kind": {"$exists": False}}]},
            {"$nor": [{"value.kind": {"$nin": ["food", "work"]}}]},
            {"value.kind": {"$not": {"$gt": "zzz"}}},
        ]
    }
    _, page = await indexed.page(stages)
    assert [key for key, _ in page] == ["k1", "k2"]


async def test_wrong_dimensions_fail(indexed: Fake) -> None:
    with pytest.raises(OperationFailure, match="3 dimensions but queried with 2"):
        await indexed.aggregate(pipeline(query=[1.0, 0.0]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"numCandidates": 10_001}, "numCandidates"),
        ({"limit": 101}, "limit"),
        ({"limit": 2.0}, "limit"),
        ({"numCandidates": None}, "numCandidates"),
        ({"path": "value"}, "indexed as vector"),
        ({"numCandidate": 100}, "unrecognized"),
    ],
)
async def test_stage_validation(indexed: Fake, change: dict[str, Any], message: str) -> None:
    stages = pipeline()
    spec = stages[0]["$vectorSearch"]
    for key, value in change.items():
        if value is None:
            del spec[key]
        else:
            spec[key] = value
    with pytest.raises(OperationFailure, match=message):
        await indexed.aggregate(stages)


async def test_exact_needs_no_candidates(indexed: Fake) -> None:
    stages = pipeline()
    spec = stages[0]["$vectorSearch"]
    del spec["numCandidates"]
    spec["exact"] = True
    _, page = await indexed.page(stages)
    assert [key for key, _ in page] == ["k1", "k2", "k3"]
    assert indexed.atlas.requests[-1].exact is True


async def test_unknown_index_gives_no_results(indexed: Fake) -> None:
    # One row (an empty page keeps one, for the counts), with no page entry and no item.
    (out,) = await indexed.aggregate(pipeline(index_name="no_such_index"))
    # As on MongoDB, $count over nothing outputs nothing (mongomock alone says {n: 0}).
    assert out == {"hits": [], "scored": [], "item": []}
    assert page_rows([out]) == ({"hits": [], "scored": [], "page": [], "floor": []}, {})


async def test_vector_search_must_be_first(indexed: Fake) -> None:
    stages = pipeline()
    with pytest.raises(OperationFailure) as exc:
        await indexed.aggregate([{"$match": {}}, *stages])
    assert exc.value.code == 40602
    with pytest.raises(OperationFailure):
        await indexed.aggregate([{"$facet": {"a": stages[:1]}}])


async def test_raw_scores_are_normalised_like_atlas(fake: Fake) -> None:
    for similarity in ("cosine", "dotProduct", "euclidean"):
        await fake.create_index(similarity, name=similarity)
    for similarity, expected in [
        ("cosine", {"k1": 1.0, "k2": 0.9, "k3": 0.5}),  # (1 + cos) / 2
        ("dotProduct", {"k1": 1.0, "k2": 0.9, "k3": 0.5}),  # (1 + dot) / 2
        ("euclidean", {"k1": 1.0, "k2": 1 / (1 + 0.4), "k3": 1 / 3}),  # 1 / (1 + d^2)
    ]:
        docs = await fake.aggregate(
            [
                {
                    "$vectorSearch": {
                        "index": similarity,
                        "path": "embedding",
                        "queryVector": [1.0, 0.0, 0.0],
                        "filter": {"ns_prefixes": "users.alice.", "value.kind": {"$in": ["food", "work"]}},
                        "exact": True,
                        "limit": 10,
                    }
                },
                {"$match": {"field": "text", "text_hash": {"$ne": "h4-old"}}},
                {"$project": {"_id": 0, "item_id": 1, "s": {"$meta": "vectorSearchScore"}}},
            ]
        )
        got = {d["item_id"].rsplit("\x00", 1)[1]: d["s"] for d in docs}
        assert got == pytest.approx(expected), similarity
        assert "__vs_score" not in docs[0]


async def test_euclidean_pipeline_reports_minus_distance(fake: Fake) -> None:
    await fake.create_index("euclidean")
    _, page = await fake.page(pipeline(similarity="euclidean"))
    assert [key for key, _ in page] == ["k1", "k2", "k3"]
    assert [s for _, s in page] == pytest.approx([0.0, -math.sqrt(0.4), -math.sqrt(2.0)])


async def test_other_pipelines_run_on_mongomock(indexed: Fake) -> None:
    docs = await indexed.aggregate([{"$match": {"item_id": {"$regex": "^users\\.bob\\."}}}, {"$count": "n"}])
    assert docs == [{"n": 1}]
    assert await indexed.aggregate([{"$match": {"item_id": "none"}}, {"$count": "n"}]) == []
    assert indexed.atlas.aggregate_calls == 2
    assert indexed.atlas.vector_search_calls == 0


async def test_counters_record_each_search(indexed: Fake) -> None:
    await indexed.aggregate(pipeline(k=2, num_candidates=40))
    await indexed.aggregate(pipeline(k=2, num_candidates=80))
    assert indexed.atlas.vector_search_calls == 2
    assert indexed.atlas.num_candidates_asked == [40, 80]
    assert indexed.atlas.limits_asked == [2, 2]


# --------------------------------------------------------------------------- index lifecycle


async def test_index_lifecycle(fake: Fake) -> None:
    definition = vector_index_definition(3, "cosine", ["kind"])
    assert await fake.call("create_search_index", {"name": "idx", "type": "vectorSearch", "definition": definition})
    (doc,) = await fake.list_indexes("idx")
    assert doc["name"] == "idx"
    assert doc["type"] == "vectorSearch"
    assert doc["status"] == "READY"
    assert doc["queryable"] is True
    assert doc["latestDefinition"] == definition
    assert await fake.list_indexes("other") == []

    updated = vector_index_definition(3, "cosine", ["kind", "text"])
    await fake.call("update_search_index", "idx", updated)
    (doc,) = await fake.list_indexes()
    assert doc["latestDefinition"] == updated
    assert doc["latestDefinitionVersion"]["version"] == 1

    await fake.call("drop_search_index", "idx")
    assert await fake.list_indexes() == []
    with pytest.raises(OperationFailure) as exc:
        await fake.call("drop_search_index", "idx")
    assert exc.value.code == 27


async def test_duplicate_and_invalid_indexes_fail(indexed: Fake) -> None:
    with pytest.raises(OperationFailure) as exc:
        await indexed.create_index()
    assert exc.value.code == 68
    bad = {"name": "bad", "type": "vectorSearch", "definition": {"fields": [{"type": "vector", "path": "e"}]}}
    with pytest.raises(OperationFailure):
        await indexed.call("create_search_index", bad)


async def test_create_needs_the_collection(fake: Fake) -> None:
    missing = fake.vectors.database["not_created_yet"]
    model = SearchIndexModel(definition=vector_index_definition(3, "cosine", []), name="i", type="vectorSearch")
    with pytest.raises(OperationFailure) as exc:
        await Fake._resolve(missing.create_search_index(model))
    assert exc.value.code == 26
    await Fake._resolve(missing.database.create_collection("not_created_yet"))
    assert await Fake._resolve(missing.create_search_index(model)) == "i"


@pytest.mark.parametrize("make", [atlas_collection, async_atlas_collection])
async def test_build_takes_some_polls(make: Any) -> None:
    items = make(coll_name=ITEMS, queryable_after=2)
    seed(items.database.mongomock_db)
    fake = Fake(items.database[VECTORS])
    await fake.create_index()

    # mongot refuses queries before the first build is done (code 8, as mongod reports it)
    with pytest.raises(OperationFailure, match=r"cannot query vector index .* while in state NOT_STARTED") as exc:
        await fake.page(pipeline())
    assert exc.value.code == 8
    states = [(d["status"], d["queryable"]) for _ in range(3) for d in await fake.list_indexes(INDEX)]
    assert states == [("PENDING", False), ("BUILDING", False), ("READY", True)]
    _, page = await fake.page(pipeline())
    assert len(page) == 3

    # An update rebuilds: BUILDING, queryable, the NEW latestDefinition; the old one answers.
    await fake.call("update_search_index", INDEX, vector_index_definition(3, "euclidean", ["kind"]))
    (doc,) = await fake.list_indexes(INDEX)
    assert (doc["status"], doc["queryable"]) == ("BUILDING", True)
    assert doc["latestDefinition"]["fields"][0]["similarity"] == "euclidean"
    assert doc["latestDefinitionVersion"]["version"] == 1
    _, page = await fake.page(pipeline())
    assert page[0][1] == pytest.approx(1.0)
    fake.atlas.finish_builds()
    _, page = await fake.page(pipeline(similarity="euclidean"))
    assert [s for _, s in page] == pytest.approx([0.0, -math.sqrt(0.4), -math.sqrt(2.0)])


def test_search_disabled_fails_like_plain_mongod() -> None:
    coll = atlas_collection(search_enabled=False)
    with pytest.raises(OperationFailure) as exc:
        coll.list_search_indexes()
    assert exc.value.code == 31082
    with pytest.raises(OperationFailure, match=r"\$vectorSearch aggregation stages") as exc:
        coll.aggregate(pipeline())
    assert exc.value.code == 31082


async def test_dropping_the_collection_drops_its_indexes(indexed: Fake) -> None:
    await indexed.call("drop")
    assert await indexed.list_indexes() == []


# --------------------------------------------------------------------------- wrappers


def test_sync_wrapper_delegates_to_mongomock() -> None:
    coll = atlas_collection()
    coll.insert_one({"_id": 1, "a": 1})
    coll.create_index([("a", 1)], name="a_1")
    assert coll.find_one({"a": 1}) == {"_id": 1, "a": 1}
    assert coll.name == "memories"
    other = coll.database["other"]
    assert isinstance(other, AtlasCollection)
    assert other.atlas is coll.atlas
    assert isinstance(coll.database.get_collection("x"), AtlasCollection)
    assert list(coll.aggregate([{"$match": {"a": 1}}])) == [{"_id": 1, "a": 1}]


async def test_async_wrapper_looks_like_pymongo_async() -> None:
    coll = async_atlas_collection()
    assert isinstance(coll, AsyncCollection)
    assert isinstance(coll, AsyncAtlasCollection)
    await coll.insert_one({"_id": 1, "a": 1})
    assert await coll.find_one({"a": 1}) == {"_id": 1, "a": 1}
    assert [d async for d in coll.find({})] == [{"_id": 1, "a": 1}]
    cursor = await coll.aggregate([{"$match": {"a": 1}}])
    assert [d async for d in cursor] == [{"_id": 1, "a": 1}]
    assert coll.database["other"].atlas is coll.atlas
    assert inspect.iscoroutinefunction(coll.list_search_indexes)
    assert await (await coll.list_search_indexes()).to_list() == []


# --------------------------------------------------------------------------- mongot's rules (issue 10)


async def test_exact_refuses_num_candidates(indexed: Fake) -> None:
    stages = pipeline()
    stages[0]["$vectorSearch"]["exact"] = True
    with pytest.raises(OperationFailure, match='"numCandidates" must be omitted when "exact" is set to true'):
        await indexed.aggregate(stages)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"value.kind": {"$eq": ["food"]}}, "cannot be filtered on"),  # arrays are not operands
        ({"value.kind": ["food"]}, "cannot be filtered on"),
        ({"value.kind": Binary(b"x", 0)}, "UUID subtype 4"),
        ({"value.kind": {"$in": ["food", 1]}}, "must have elements of the same type"),
        ({"value.kind": {"$in": [True, 1]}}, "must have elements of the same type"),  # bool is not a number
        ({"value.kind": {"$in": ["food", None]}}, "cannot be null"),
        ({"value.kind": {"$in": []}}, "non-empty array"),
    ],
)
async def test_operands_follow_mongot(indexed: Fake, bad: dict[str, Any], message: str) -> None:
    stages = pipeline()
    stages[0]["$vectorSearch"]["filter"] = bad
    with pytest.raises(OperationFailure, match=message):
        await indexed.aggregate(stages)


async def test_operands_mongot_accepts(indexed: Fake) -> None:
    for ok in (
        {"value.kind": {"$eq": None}},
        {"value.kind": {"$in": [1, 2.5]}},  # int and double are one type: number
        {"value.kind": {"$ne": uuid.uuid4()}},
        {"value.kind": Binary(uuid.uuid4().bytes, 4)},
        {"value.kind": {"$gt": datetime(2024, 1, 1, tzinfo=timezone.utc)}},
    ):
        stages = pipeline()
        stages[0]["$vectorSearch"]["filter"] = ok
        await indexed.aggregate(stages)


async def test_dot_product_scores_clip_at_zero(fake: Fake) -> None:
    await fake.create_index("dotProduct")
    docs = await fake.aggregate(
        [
            {"$vectorSearch": {"index": INDEX, "path": "embedding", "queryVector": [-3.0, 0.0, 0.0],
                               "exact": True, "limit": 10}},
            {"$project": {"_id": 0, "item_id": 1, "s": {"$meta": "vectorSearchScore"}}},
        ]
    )
    scores = {d["item_id"].rsplit("\x00", 1)[1]: d["s"] for d in docs}
    assert scores["k1"] == 0.0  # (1 + -3) / 2 = -1, clipped (Lucene DOT_PRODUCT scaling)
    assert scores["k3"] == pytest.approx(0.5)


@pytest.mark.parametrize("state", ["PENDING", "BUILDING", "FAILED"])
async def test_hold_a_first_build_in_each_unqueryable_state(fake: Fake, state: str) -> None:
    fake.atlas.queryable_after = 10**6
    await fake.create_index()
    fake.atlas.hold(state)
    (doc,) = await fake.list_indexes(INDEX)
    assert (doc["status"], doc["queryable"]) == (state, False)
    internal = {"PENDING": "NOT_STARTED", "BUILDING": "INITIAL_SYNC", "FAILED": "FAILED"}[state]
    with pytest.raises(OperationFailure, match=f"while in state {internal}") as exc:
        await fake.aggregate(pipeline())
    assert exc.value.code == 8
    fake.atlas.hold("READY")
    (doc,) = await fake.list_indexes(INDEX)
    assert (doc["status"], doc["queryable"]) == ("READY", True)
    assert len((await fake.page(pipeline()))[1]) == 3


async def test_a_held_rebuild_serves_the_old_definition_until_released(indexed: Fake) -> None:
    indexed.atlas.queryable_after = 10**6
    await indexed.call("update_search_index", INDEX, vector_index_definition(3, "cosine", ["kind", "text"]))
    indexed.atlas.hold("BUILDING")
    (doc,) = await indexed.list_indexes(INDEX)
    assert (doc["status"], doc["queryable"]) == ("BUILDING", True)
    with pytest.raises(OperationFailure, match="needs to be indexed as filter"):  # the new field is not served yet
        await indexed.aggregate(pipeline(filter={"text": {"$in": ["sushi"]}}, filter_fields=("text",)))
    indexed.atlas.release()
    (doc,) = await indexed.list_indexes(INDEX)
    assert doc["status"] == "READY"
    _, page = await indexed.page(pipeline(filter={"text": {"$in": ["x"]}}, filter_fields=("text",)))
    assert page == []  # accepted now (no vector document has value.text)


async def test_a_failed_rebuild_keeps_serving(indexed: Fake) -> None:
    indexed.atlas.build_fails = True
    await indexed.call("update_search_index", INDEX, vector_index_definition(3, "euclidean", ["kind"]))
    (doc,) = await indexed.list_indexes(INDEX)
    assert (doc["status"], doc["queryable"]) == ("FAILED", True)
    assert "fake failure" in doc["statusDetail"][0]["message"]
    _, page = await indexed.page(pipeline())
    assert page[0][1] == pytest.approx(1.0)  # still cosine


async def test_updates_can_fail_as_on_atlas_local(indexed: Fake) -> None:
    indexed.atlas.updates_fail = True
    with pytest.raises(OperationFailure, match="updates fail"):
        await indexed.call("update_search_index", INDEX, vector_index_definition(3, "euclidean", ["kind"]))


@pytest.mark.parametrize("make", [atlas_collection, async_atlas_collection])
async def test_server_mode_answers_server_commands(make: Any) -> None:
    from pymongo import DeleteMany, UpdateOne

    coll = make(server_version="8.0.4")
    db = coll.database
    info = db.command("buildInfo")
    hello = db.command("hello")
    if inspect.isawaitable(info):
        info, hello = await info, await hello
    assert info["version"] == "8.0.4" and hello["maxWireVersion"] == 25
    models = [
        UpdateOne({"_id": 1}, {"$set": {"a": 1}}, upsert=True, namespace="test.memories"),
        UpdateOne({"_id": 1}, {"$set": {"a": 1}}, upsert=True, namespace="test.other"),
        DeleteMany({"_id": 1}, namespace="test.other"),
    ]
    res = await Fake._resolve(db.client.bulk_write(models, verbose_results=True))
    assert res.deleted_count == 1 and res.delete_results[2].deleted_count == 1
    assert db.mongomock_db["memories"].count_documents({}) == 1


async def test_an_old_server_without_search_lists_nothing() -> None:
    coll = atlas_collection(search_enabled=False, server_version="7.0.1")
    assert list(coll.list_search_indexes()) == []  # SERVER-78831: no error before 7.1
    coll.database.create_collection("memories")
    with pytest.raises(OperationFailure) as exc:
        coll.create_search_index({"name": "i", "type": "vectorSearch",
                                  "definition": vector_index_definition(3, "cosine", [])})
    assert exc.value.code == 115
    with pytest.raises(OperationFailure) as exc:
        coll.aggregate(pipeline())
    assert exc.value.code == 6047401
