"""Atlas-native retrieval (issue 14): hybrid ``$rankFusion`` (and its exact local
fallback), ``$rerank``, and automated embedding (``autoEmbed``), through LangGraph's
``index=`` and ``search(query=...)``.

The Atlas path runs the store's real pipelines through ``tests/fakes/atlas.py`` and
``tests/fakes/atlas_native.py``; the local path runs on mongomock.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fakes.atlas import async_atlas_collection, atlas_collection
from fakes.atlas_native import native_state, rerank_score
from langgraph.store.base import PutOp

from mongostore import AsyncMongoStore, ConfigurationError, MongoStore, VectorIndexError
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core.plan import sweep_plan
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.drivers.sync import run_sync
from mongostore.tools.embeddings import HashingEmbeddings

DIMS = 64
MEMORIES = {
    "k1": ("alice likes pizza with olives", "food"),
    "k2": ("bob ordered product code XK-42", "order"),
    "k3": ("pizza night is friday", "food"),
    "k4": ("the cat sleeps on the sofa", "pet"),
    "k5": ("olives and cheese for the party", "food"),
    "k6": ("code review on friday", "work"),
}
QUERY = "pizza XK-42 friday"


def emb() -> HashingEmbeddings:
    return HashingEmbeddings(DIMS)


def cfg(embed: Any = None, **extra: Any) -> dict[str, Any]:
    return {"dims": DIMS, "embed": embed or emb(), "fields": ["text"], **extra}


def fill(store: MongoStore) -> None:
    store.batch([PutOp(("u", "a"), k, {"text": t, "kind": kind}) for k, (t, kind) in MEMORIES.items()])
    store.put(("u", "a"), "plain", {"text": "never indexed"}, index=False)
    store.put(("u", "b"), "other", {"text": "pizza XK-42 friday exactly"})  # out of scope for ("u", "a")


def keys_scores(found: list[Any]) -> list[tuple[str, float | None]]:
    return [(x.key, None if x.score is None else round(x.score, 9)) for x in found]


# --------------------------------------------------------------------------- hybrid


def test_hybrid_on_atlas_is_rank_fusion_of_both_rankings_on_the_vectors_collection() -> None:
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(hybrid={"weights": {"vector": 1.0, "text": 2.0}, "depth": 50}))
    store.setup()
    names = {i["name"]: i["type"] for i in store.vectors_collection.list_search_indexes()}
    assert names == {"mongostore_vectors": "vectorSearch", "mongostore_text": "search"}
    fill(store)
    found = store.search(("u", "a"), query=QUERY, limit=10)
    stages = native_state(coll.atlas).stages
    [fusion] = [s["$rankFusion"] for s in stages if "$rankFusion" in s]
    pipes = fusion["input"]["pipelines"]
    assert fusion["combination"]["weights"] == {"vector": 1.0, "text": 2.0}
    assert pipes["vector"][0]["$vectorSearch"]["filter"] == {"ns_prefixes": "u.a."}
    assert pipes["vector"][0]["$vectorSearch"]["limit"] == 50
    search = pipes["text"][0]["$search"]
    assert search["compound"]["filter"] == [{"equals": {"path": "ns_prefixes", "value": "u.a."}}]
    assert pipes["text"][-1] == {"$limit": 50}
    # every memory with a vector is ranked (the vector ranking sees all six), then the unindexed one
    assert [x.key for x in found][-1] == "plain" and found[-1].score is None
    assert {x.key for x in found} == set(MEMORIES) | {"plain"}
    scores = [x.score for x in found[:-1]]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    # the stated meaning: sum of weight / (60 + rank); the top text ranks first lexically (weight 2)
    assert found[0].key == "k2"


def test_hybrid_fused_score_is_the_documented_formula() -> None:
    e = emb()
    coll = atlas_collection()
    hybrid = {"weights": {"vector": 0.5, "text": 3.0}}
    store = MongoStore(coll, index=cfg(e, hybrid=hybrid))
    store.setup()
    fill(store)
    found = {x.key: x.score for x in store.search(("u", "a"), query=QUERY, limit=10)}
    # recompute both rankings by hand from the stored texts
    texts = {k: t for k, (t, _) in MEMORIES.items()}
    qv = e.embed_query(QUERY)
    from mongostore.core.vectors import similarities

    keys = sorted(texts)
    vec = similarities(qv, [e.embed_query(texts[k]) for k in keys], "cosine").tolist()
    vector_rank = {k: i for i, k in enumerate(sorted(keys, key=lambda k: (-vec[keys.index(k)], k)), start=1)}
    lex = dict(zip(keys, r.lexical_scores(QUERY, [texts[k] for k in keys]), strict=True))
    text_rank = {k: i for i, k in enumerate(sorted((k for k in keys if lex[k] > 0), key=lambda k: -lex[k]), start=1)}
    for k in keys:
        want = 0.5 / (60 + vector_rank[k]) + (3.0 / (60 + text_rank[k]) if k in text_rank else 0.0)
        assert found[k] == pytest.approx(want, rel=1e-12), k


def test_hybrid_local_fusion_matches_the_atlas_path_exactly() -> None:
    idx = cfg(hybrid={"weights": {"vector": 1, "text": 1}})
    atlas = MongoStore(atlas_collection(), index=idx)
    atlas.setup()
    local = MongoStore(in_memory_collection(), index=idx)
    local.setup()
    for store in (atlas, local):
        fill(store)
    for kwargs in ({}, {"offset": 2, "limit": 3}, {"filter": {"kind": "food"}}, {"limit": 1, "offset": 6}):
        a = keys_scores(atlas.search(("u", "a"), query=QUERY, **kwargs))
        b = keys_scores(local.search(("u", "a"), query=QUERY, **kwargs))
        assert a == b, kwargs
    assert atlas.status()["search_path"] == "atlas" and local.status()["search_path"] == "local"


def test_hybrid_pages_and_filters_are_exact() -> None:
    for coll in (atlas_collection(), in_memory_collection()):
        store = MongoStore(coll, index=cfg(hybrid={}))
        store.setup()
        fill(store)
        everything = keys_scores(store.search(("u", "a"), query=QUERY, limit=20))
        pages = [keys_scores(store.search(("u", "a"), query=QUERY, limit=2, offset=o)) for o in range(0, 8, 2)]
        assert [x for p in pages for x in p] == everything
        food = keys_scores(store.search(("u", "a"), query=QUERY, filter={"kind": "food"}, limit=20))
        # a filter removes items and never changes the others' fused scores (ranks are over the scope)
        assert food == [x for x in everything if x[0] in ("k1", "k3", "k5")]


def test_hybrid_local_orders_unscored_items_by_their_utc_instant_in_any_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that decodes dates naive (pymongo's default) gives UTC wall times: read
    as local time (``datetime.timestamp()``), 02:30 on the morning New York springs
    forward would sort after 03:10; newest first means by the UTC instant."""
    import time
    from datetime import datetime

    import mongomock

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        store = MongoStore(mongomock.MongoClient(tz_aware=False).db.hybrid_naive, index=cfg(hybrid={}))
        store.setup()
        for key in ("early", "late"):
            store.put(("u", "a"), key, {"text": key}, index=False)
        # Through the store's handle: the user's own would warn of mongomock's utcnow() on 3.12+.
        coll = store.collection
        coll.update_one({"key": "early"}, {"$set": {"updated_at": datetime(2026, 3, 8, 2, 30)}})
        coll.update_one({"key": "late"}, {"$set": {"updated_at": datetime(2026, 3, 8, 3, 10)}})
        found = store.search(("u", "a"), query=QUERY, limit=5)
        assert [(x.key, x.score) for x in found] == [("late", None), ("early", None)]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_hybrid_declared_filter_fields_scope_both_rankings() -> None:
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(hybrid={}, filter_fields=["kind"]))
    store.setup()
    fill(store)
    got = store.search(("u", "a"), query=QUERY, filter={"kind": "food"}, limit=10)
    assert {x.key for x in got} == {"k1", "k3", "k5"}
    [fusion] = [s["$rankFusion"] for s in native_state(coll.atlas).stages if "$rankFusion" in s]
    pipes = fusion["input"]["pipelines"]
    assert pipes["vector"][0]["$vectorSearch"]["filter"] == {
        "$and": [{"ns_prefixes": "u.a."}, {"value.kind": {"$eq": "food"}}]
    }
    assert {"$match": {"value.kind": {"$eq": "food"}}} in pipes["text"]
    local = MongoStore(in_memory_collection(), index=cfg(hybrid={}, filter_fields=["kind"]))
    fill(local)
    assert keys_scores(local.search(("u", "a"), query=QUERY, filter={"kind": "food"})) == keys_scores(got)


def test_hybrid_without_rank_fusion_on_the_server_fuses_locally(caplog: pytest.LogCaptureFixture) -> None:
    coll = atlas_collection()
    native_state(coll.atlas).rank_fusion_enabled = False  # a 7.x server: no $rankFusion (40324)
    store = MongoStore(coll, index=cfg(hybrid={}))
    store.setup()
    fill(store)
    reference = MongoStore(in_memory_collection(), index=cfg(hybrid={}))
    fill(reference)
    assert keys_scores(store.search(("u", "a"), query=QUERY)) == keys_scores(reference.search(("u", "a"), query=QUERY))


def test_hybrid_text_index_waits_like_the_vector_index_and_says_how_to_recover() -> None:
    """The $search index follows the vector index's rule: READY on the wanted definition,
    FAILED checked first, with the advice to drop and recreate it."""
    coll = atlas_collection()
    coll.atlas.build_fails = True
    store = MongoStore(coll, index=cfg(hybrid={"index_name": "memtext"}))
    recover = r"search index 'memtext' failed to build.*drop_search_index\('memtext'\)"
    with pytest.raises(VectorIndexError, match=recover):
        store.setup()

    held = atlas_collection()
    slow = MongoStore(held, index=cfg(hybrid={"index_name": "memtext"}, setup_timeout=0.5))
    held.atlas.queryable_after = 10**6  # builds never finish within the timeout
    with pytest.raises(VectorIndexError, match="search index 'memtext' not ready on the wanted definition"):
        slow.setup()


def test_mode_pages_carry_ids_and_scores_never_whole_items_through_facet() -> None:
    """As on the plain vector path (issue 10): the $facet page holds ids and scores; the
    items are fetched by _id afterwards, so big values cannot overflow the $facet caps."""
    stages = q.scored_page_stages(
        similarity=None, post_filter={"kind": "food"}, items_collection="m", offset=0, limit=5, now=None
    )
    [facet_at] = [i for i, stage in enumerate(stages) if "$facet" in stage]
    facet = stages[facet_at]["$facet"]
    assert facet["page"][-1] == {"$project": {"_id": 1, "score": 1}}
    assert all("item" not in stage.get("$group", {}) for stage in facet["page"])
    # After it, one row per page entry, each joining its own item (no row holds two).
    unwind, lookup = stages[facet_at + 1 : facet_at + 3]
    assert unwind == {"$unwind": {"path": "$page", "preserveNullAndEmptyArrays": True}}
    assert lookup["$lookup"]["localField"] == "page._id"
    assert stages[2] == {
        "$project": {"_id": 0, "item_id": 1, "text_hash": 1, "score": 1, "item.vectors": 1, "item.value.kind": 1}
    }
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(hybrid={}))
    store.setup()
    fill(store)
    found = store.search(("u", "a"), query=QUERY, filter={"kind": "food"})
    assert {x.key for x in found} == {"k1", "k3", "k5"} and all(x.value["kind"] == "food" for x in found)


def test_mode_pages_return_items_whose_vectors_vanished_unscored() -> None:
    """An item listing a text hash whose vector document is gone (a race, issue 11) is
    returned after the scored items, unscored, by the retrieval modes too."""
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(hybrid={}))
    store.setup()
    fill(store)
    local_coll = in_memory_collection(collection_name="vanished")
    local = MongoStore(local_coll, index=cfg(hybrid={}))
    fill(local)
    for c in (coll, local_coll):
        c.database[c.name + "_vectors"].delete_many({"item_id": "u.a.\x00k4"})
    found = store.search(("u", "a"), query=QUERY, limit=50)
    scores = {x.key: x.score for x in found}
    assert scores["k4"] is None and scores["plain"] is None
    assert [x.score is None for x in found] == sorted(x.score is None for x in found)  # unscored last
    assert keys_scores(local.search(("u", "a"), query=QUERY, limit=50)) == keys_scores(found)  # the local fusion too


def test_hybrid_lexical_ranking_finds_exact_terms_the_embedding_blurs() -> None:
    store = MongoStore.in_memory(index=cfg(hybrid={"weights": {"vector": 0.0, "text": 1.0}}))
    fill(store)
    got = store.search(("u", "a"), query="XK-42", limit=1)
    assert got[0].key == "k2"


async def test_hybrid_async_store_matches_the_sync_store() -> None:
    idx = cfg(hybrid={"weights": {"text": 2}})
    sync_store = MongoStore(atlas_collection(), index=idx)
    sync_store.setup()
    fill(sync_store)
    astore = AsyncMongoStore(async_atlas_collection(), index=idx)
    await astore.setup()
    await astore.abatch([PutOp(("u", "a"), k, {"text": t, "kind": kind}) for k, (t, kind) in MEMORIES.items()])
    await astore.aput(("u", "a"), "plain", {"text": "never indexed"}, index=False)
    await astore.aput(("u", "b"), "other", {"text": "pizza XK-42 friday exactly"})
    a = keys_scores(await astore.asearch(("u", "a"), query=QUERY, limit=4, offset=1))
    assert a == keys_scores(sync_store.search(("u", "a"), query=QUERY, limit=4, offset=1))


# --------------------------------------------------------------------------- rerank


def test_rerank_reorders_the_vector_candidates_server_side() -> None:
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(rerank={"model": "rerank-2.5-lite", "candidates": 20}))
    store.setup()
    fill(store)
    found = store.search(("u", "a"), query=QUERY, limit=10)
    [stage] = [s["$rerank"] for s in native_state(coll.atlas).stages if "$rerank" in s]
    assert stage == {"query": {"text": QUERY}, "path": "text", "numDocsToRerank": 20, "model": "rerank-2.5-lite"}
    [req] = coll.atlas.requests
    assert req.limit == 20 and req.filter == {"ns_prefixes": "u.a."}
    scored = [(x.key, x.score) for x in found if x.score is not None]
    assert scored == sorted(scored, key=lambda kv: -kv[1])  # type: ignore[arg-type,operator]
    for key, score in scored:  # the reranker's relevance, not a cosine
        assert score == pytest.approx(rerank_score(QUERY, MEMORIES[key][0]))
    assert found[-1].key == "plain" and found[-1].score is None
    # paging and filters stay exact over the reranked candidates
    every = keys_scores(found)
    pages = [keys_scores(store.search(("u", "a"), query=QUERY, limit=3, offset=o)) for o in (0, 3, 6)]
    assert [x for p in pages for x in p] == every
    food = keys_scores(store.search(("u", "a"), query=QUERY, filter={"kind": "food"}))
    assert food == [x for x in every if x[0] in ("k1", "k3", "k5")]


def test_rerank_after_rank_fusion() -> None:
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(hybrid={}, rerank={"model": "rerank-2.5", "candidates": 5}))
    store.setup()
    fill(store)
    found = store.search(("u", "a"), query=QUERY, limit=10)
    names = [next(iter(s)) for s in native_state(coll.atlas).stages]
    assert names[0] == "$rankFusion" and names[-1] == "$rerank"
    scored = [x for x in found if x.score is not None]
    assert len(scored) == 5  # numDocsToRerank documents come back
    assert all(x.score == pytest.approx(rerank_score(QUERY, MEMORIES[x.key][0])) for x in scored)


def test_rerank_needs_atlas_and_says_so() -> None:
    store = MongoStore.in_memory(index=cfg(rerank={"model": "rerank-2.5"}))
    with pytest.raises(ConfigurationError, match=r"reranking .*\$rerank.*Atlas"):
        store.setup()
    store.put(("u",), "k", {"text": "pizza"})  # writes still work (and keep the text)
    with pytest.raises(ConfigurationError, match=r"reranking .*Atlas"):
        store.search(("u",), query="pizza")
    assert store.search(("u",)) != []  # a search without a query needs no reranker


def test_rerank_on_a_server_without_it_names_the_feature() -> None:
    coll = atlas_collection()
    native_state(coll.atlas).rerank_enabled = False  # 8.0 answers "Unrecognized pipeline stage name"
    store = MongoStore(coll, index=cfg(rerank={"model": "rerank-2"}))
    store.setup()
    fill(store)
    with pytest.raises(ConfigurationError, match=r"reranking .*Unrecognized pipeline stage name: '\$rerank'"):
        store.search(("u", "a"), query=QUERY)


# --------------------------------------------------------------------------- automated embedding


class Refuse(HashingEmbeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the client embedder was called")


def test_auto_embed_writes_texts_never_embeds_and_queries_with_text() -> None:
    coll = atlas_collection()
    store = MongoStore(coll, index={"embed": "atlas:voyage-4-lite", "fields": ["text", "notes[*]"]})
    store.setup()
    [idx] = list(store.vectors_collection.list_search_indexes())
    assert idx["latestDefinition"]["fields"][0] == {
        "type": "autoEmbed",
        "modality": "text",
        "path": "text",
        "model": "voyage-4-lite",
        "numDimensions": 1024,
        "similarity": "cosine",
    }
    store.put(("u",), "k1", {"text": "pizza with olives", "notes": ["likes cheese"]})
    store.put(("u",), "k2", {"text": "the cat sleeps", "title": "pizza"}, index=["title"])  # per-put override
    store.put(("u",), "k3", {"text": "pizza again"}, index=False)
    vdocs = list(store.vectors_collection.find({}, {"_id": 0, "item_id": 1, "field": 1, "text": 1, "embedding": 1}))
    assert sorted(d["text"] for d in vdocs) == ["likes cheese", "pizza", "pizza with olives"]
    assert all("embedding" not in d for d in vdocs)
    found = store.search(("u",), query="pizza olives", limit=10)
    [stage] = [s["$vectorSearch"] for s in native_state(coll.atlas).stages if "$vectorSearch" in s]
    assert stage["query"] == {"text": "pizza olives"} and stage["path"] == "text" and "queryVector" not in stage
    assert [x.key for x in found][:2] == ["k1", "k2"] and found[-1].key == "k3" and found[-1].score is None
    assert all(-1.0 <= x.score <= 1.0 for x in found if x.score is not None)  # cosine, converted back
    store.put(("u",), "k1", {"text": "pizza with olives"}, index=False)  # index=False removes its texts
    assert store.status()["stale_vectors"] == 2  # written within VECTOR_GRACE: unlisted until the sweep
    later = datetime.now(timezone.utc) + q.VECTOR_GRACE + timedelta(seconds=1)
    run_sync(sweep_plan(later, True, store.collection.name), store._io)
    assert store.vectors_collection.count_documents({"item_id": {"$regex": "k1$"}}) == 0


def test_auto_embed_accepts_langchain_mongodb_auto_embeddings_and_calls_no_embedder() -> None:
    class AutoEmbeddings(Refuse):  # the shape of langchain_mongodb.embeddings.AutoEmbeddings
        def __init__(self, model: str) -> None:
            super().__init__(8)
            self.model = model

    store = MongoStore(atlas_collection(), index={"embed": AutoEmbeddings("voyage-4"), "dims": 512})
    store.setup()
    store.put(("u",), "k", {"text": "pizza"})
    assert store.search(("u",), query="pizza")[0].key == "k"
    assert store._index is not None and store._index.auto_embed == r.AutoEmbedSettings("voyage-4", 512)


def test_auto_embed_needs_atlas_and_fails_at_setup() -> None:
    local = MongoStore.in_memory(index={"embed": "atlas:voyage-4"})
    with pytest.raises(ConfigurationError, match=r"automated embedding .*voyage-4.*Atlas"):
        local.setup()
    with pytest.raises(ConfigurationError, match=r"automated embedding"):
        local.search(("u",), query="pizza")
    no_search = MongoStore(atlas_collection(search_enabled=False), index={"embed": "atlas:voyage-4"})
    with pytest.raises(ConfigurationError, match=r"automated embedding .*code 31082"):
        no_search.setup()
    coll = atlas_collection()
    native_state(coll.atlas).auto_embed_enabled = False  # e.g. a deployment with no Voyage AI models
    with pytest.raises(VectorIndexError, match=r"automated embedding \(autoEmbed, model voyage-4\) is not available"):
        MongoStore(coll, index={"embed": "atlas:voyage-4"}).setup()


def test_auto_embed_with_rerank_and_hybrid_on_atlas() -> None:
    coll = atlas_collection()
    store = MongoStore(
        coll, index={"embed": "atlas:voyage-4", "fields": ["text"], "hybrid": {}, "rerank": {"model": "rerank-2.5"}}
    )
    store.setup()
    fill(store)
    found = store.search(("u", "a"), query=QUERY, limit=3)
    [fusion] = [s["$rankFusion"] for s in native_state(coll.atlas).stages if "$rankFusion" in s]
    assert fusion["input"]["pipelines"]["vector"][0]["$vectorSearch"]["query"] == {"text": QUERY}
    assert [x.score for x in found] == sorted((x.score for x in found), reverse=True)  # type: ignore[type-var]


# --------------------------------------------------------------------------- definitions


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("atlas-index.json", {"dims": 384, "embed": HashingEmbeddings(384)}),
        ("atlas-index.autoembed.json", {"embed": "atlas:voyage-4-lite"}),
        ("atlas-index.hybrid.json", {"dims": 384, "embed": HashingEmbeddings(384), "hybrid": {}}),
    ],
)
def test_index_files_are_what_setup_creates(name: str, index: dict[str, Any]) -> None:
    coll = atlas_collection(coll_name="memories")
    store = MongoStore(coll, index=index)
    store.setup()
    doc = json.loads((Path(__file__).parents[2] / name).read_text())
    created = {i["name"]: (i["type"], i["latestDefinition"]) for i in store.vectors_collection.list_search_indexes()}
    assert created[doc["name"]] == (doc["type"], doc["definition"])
    assert doc["collection"] == store.vectors_collection.name


async def test_async_store_runs_auto_embed_and_rerank_like_the_sync_store() -> None:
    idx = {"embed": "atlas:voyage-4", "fields": ["text"], "rerank": {"model": "rerank-2.5", "candidates": 4}}
    sync_store = MongoStore(atlas_collection(), index=idx)
    sync_store.setup()
    fill(sync_store)
    astore = AsyncMongoStore(async_atlas_collection(), index=idx)
    await astore.setup()
    await astore.abatch([PutOp(("u", "a"), k, {"text": t, "kind": kind}) for k, (t, kind) in MEMORIES.items()])
    await astore.aput(("u", "a"), "plain", {"text": "never indexed"}, index=False)
    got = keys_scores(await astore.asearch(("u", "a"), query=QUERY, limit=10, offset=1))
    assert got == keys_scores(sync_store.search(("u", "a"), query=QUERY, limit=10, offset=1))
    assert len([s for s in got if s[1] is not None]) == 3  # 4 reranked, minus the one skipped by offset


# --------------------------------------------------------------------------- issue 28


def test_auto_embed_refuses_models_a_vector_index_cannot_use_before_any_io() -> None:
    """voyage-code-4 is for $search's autoEmbed type only: refused at construction, naming the valid models."""
    coll = atlas_collection()
    for model in ("voyage-code-4", "voyage-3"):
        with pytest.raises(ConfigurationError, match=model) as err:
            MongoStore(coll, index={"embed": f"atlas:{model}"})
        for valid in ("voyage-4", "voyage-4-large", "voyage-4-lite", "voyage-code-3"):
            assert valid in str(err.value)
    assert coll.atlas.aggregate_calls == 0 and coll.atlas.list_search_indexes_calls == 0
    with pytest.raises(ConfigurationError, match=r"\$search indexes only"):
        MongoStore(coll, index={"embed": "atlas:voyage-code-4"})


def test_auto_embed_field_change_says_it_is_never_updated_and_how_to_recover() -> None:
    """mongot refuses autoEmbed field updates everywhere (AutoEmbeddingIndexValidator): no update
    is sent, and the error says to drop and recreate, or to use a new index name."""
    coll = atlas_collection()
    MongoStore(coll, index={"embed": "atlas:voyage-4"}).setup()
    changed = MongoStore(coll, index={"embed": "atlas:voyage-4-lite"})
    with pytest.raises(VectorIndexError) as err:
        changed.setup()
    message = str(err.value)
    assert "never updates autoEmbed fields" in message and "Atlas Local" not in message
    assert "drop_search_index('mongostore_vectors')" in message and "index_name" in message
    assert coll.atlas.update_calls == 0
    # filter fields of an automated-embedding index may change: that update is sent
    MongoStore(coll, index={"embed": "atlas:voyage-4", "filter_fields": ["kind"]}).setup()
    assert coll.atlas.update_calls == 1


@pytest.mark.parametrize("answer", ["unrecognized stage (40324)", "feature flag off (224)"])
def test_refused_rank_fusion_fuses_locally_and_keeps_vector_search_on(answer: str) -> None:
    """A server that refuses $rankFusion (no such stage, or 224 QueryFeatureNotAllowed behind a
    disabled feature flag) gets the local fusion, as below 8.0; $vectorSearch stays on."""
    coll = atlas_collection()
    state = native_state(coll.atlas)
    if answer.endswith("(224)"):
        state.rank_fusion_flag_off = True
    else:
        state.rank_fusion_enabled = False
    store = MongoStore(coll, index=cfg(hybrid={}))
    store.setup()
    fill(store)
    reference = MongoStore(in_memory_collection(), index=cfg(hybrid={}))
    fill(reference)
    want = keys_scores(reference.search(("u", "a"), query=QUERY))
    for _ in range(2):
        assert keys_scores(store.search(("u", "a"), query=QUERY)) == want
    assert store.status()["search_path"] == "atlas"  # plain vector search was not switched off


def test_refused_rerank_raises_naming_rerank_and_keeps_vector_search_on() -> None:
    coll = atlas_collection()
    native_state(coll.atlas).rerank_enabled = False  # e.g. Native Reranking not enabled in the project
    store = MongoStore(coll, index=cfg(rerank={"model": "rerank-2"}))
    store.setup()  # setup() cannot see the project setting: the first search says it
    fill(store)
    for _ in range(2):
        with pytest.raises(ConfigurationError, match=r"refused \$rerank.*Native Reranking enabled"):
            store.search(("u", "a"), query=QUERY)
    assert store.status()["search_path"] == "atlas"
    assert len(store.search(("u", "a"))) == 7  # a search without a query needs no reranker


def test_rerank_over_vectors_written_before_reranking_was_on() -> None:
    """Vector documents from before reranking have no `text`, which fails $rerank (the $rerank
    page); the stage is guarded, and setup() gives them their text from the items."""
    coll = atlas_collection()
    plain = MongoStore(coll, index=cfg())
    plain.setup()
    fill(plain)
    assert plain.vectors_collection.count_documents({"text": {"$exists": True}}) == 0
    idx = cfg(rerank={"model": "rerank-2.5", "candidates": 20})
    reranked = MongoStore(coll, index=idx)
    reranked.search(("u", "a"), query=QUERY)  # no raw OperationFailure before setup()
    reranked.setup()
    assert reranked.vectors_collection.count_documents({"text": {"$exists": False}}) == 0
    fresh = MongoStore(atlas_collection(), index=idx)
    fresh.setup()
    fill(fresh)
    got = keys_scores(reranked.search(("u", "a"), query=QUERY, limit=10))
    assert got == keys_scores(fresh.search(("u", "a"), query=QUERY, limit=10))
    assert [k for k, s in got if s is not None] and got[-1] == ("plain", None)


def test_auto_embed_over_vectors_written_with_client_embeddings() -> None:
    """Switching to automated embedding (a new index name): setup() gives the old vector
    documents their text, so their items are embedded by Atlas instead of dropping out."""
    coll = atlas_collection()
    plain = MongoStore(coll, index=cfg())
    plain.setup()
    fill(plain)
    auto = MongoStore(coll, index={"embed": "atlas:voyage-4", "fields": ["text"], "index_name": "auto"})
    auto.setup()
    found = auto.search(("u", "a"), query=QUERY, limit=10)
    assert {x.key for x in found if x.score is not None} == set(MEMORIES)
    assert auto.vectors_collection.count_documents({"embedding": {"$exists": True}}) == 0


@pytest.mark.parametrize("fields", [["text", "notes[*]"], ["$"], ["{text,title}"]])
def test_setup_backfills_the_texts_a_put_would_store_for_any_path(fields: list[str]) -> None:
    """The backfilled text is the one a put stores (same extraction, hash checked), on the local
    path too (hybrid's local fusion reads it); a vector whose item changed gets none."""
    value = {"text": "pizza", "title": "food", "notes": ["olives", "cheese"]}
    old = MongoStore(
        in_memory_collection(collection_name="old"), index={"dims": DIMS, "embed": emb(), "fields": fields}
    )
    old.put(("u",), "k", value)
    old.vectors_collection.update_one({}, {"$set": {"text_hash": "stale"}})  # one stale vector
    hybrid = MongoStore(old.collection, index={"dims": DIMS, "embed": emb(), "fields": fields, "hybrid": {}})
    hybrid.setup()
    fresh = MongoStore(in_memory_collection(collection_name="fresh"), index=hybrid_cfg(fields))
    fresh.put(("u",), "k", value)
    texts = {d["field"]: d.get("text") for d in hybrid.vectors_collection.find()}
    want = {d["field"]: d["text"] for d in fresh.vectors_collection.find()}
    stale = [f for f, t in texts.items() if t is None]
    assert len(stale) == 1 and {f: t for f, t in texts.items() if t is not None} == {
        f: t for f, t in want.items() if f not in stale
    }


def hybrid_cfg(fields: list[str]) -> dict[str, Any]:
    return {"dims": DIMS, "embed": emb(), "fields": fields, "hybrid": {}}


def test_hybrid_local_counts_bm25_statistics_over_the_scope_not_the_whole_collection() -> None:
    """Atlas Search's BM25 takes N, document frequencies and the average length over the whole
    index (issue 28 item 1); the local fusion takes them over the texts in scope, so that a search
    under a prefix reads only that prefix (issue 34): equal to Atlas over the whole store, and under
    a prefix the documented formula over the prefix's texts (other namespaces no longer count)."""
    idx = cfg(hybrid={"weights": {"vector": 1, "text": 3}})
    atlas = MongoStore(atlas_collection(), index=idx)
    atlas.setup()
    local = MongoStore(in_memory_collection(), index=idx)
    ops = [
        PutOp(("u", "a"), "many", {"text": "pizza pizza pizza"}),
        PutOp(("u", "a"), "rare", {"text": "friday night"}),
    ]
    ops += [PutOp(("u", f"n{i}"), "k", {"text": f"pizza party {i}"}) for i in range(8)]
    for store in (atlas, local):
        store.batch(ops)
    query = "pizza friday"
    assert [k for k, _ in keys_scores(atlas.search(("u", "a"), query=query))] == ["rare", "many"]
    # in scope, "pizza" and "friday" are each in one text of two: "many" holds its term three times
    assert [k for k, _ in keys_scores(local.search(("u", "a"), query=query))] == ["many", "rare"]
    assert keys_scores(local.search(("u",), query=query, limit=20)) == keys_scores(
        atlas.search(("u",), query=query, limit=20)
    )


def test_setup_says_what_it_cannot_check_about_rerank(caplog: pytest.LogCaptureFixture) -> None:
    """setup() cannot see Native Reranking's project setting or tell Atlas from a self-managed
    8.3: it says so, and the first search reports a refusal (issue 28 item 5)."""
    coll = atlas_collection()
    native_state(coll.atlas).rerank_enabled = False
    store = MongoStore(coll, index=cfg(rerank={"model": "rerank-2.5"}))
    with caplog.at_level("INFO", logger="mongostore"):
        store.setup()  # does not raise: it cannot know
    assert "not visible to setup(): the first reranked search reports it" in caplog.text
    with pytest.raises(ConfigurationError, match=r"Native Reranking enabled in the Atlas project"):
        store.search(("u",), query="pizza")


async def test_async_store_backfills_and_reads_refusals_like_the_sync_store() -> None:
    """The async driver runs the same plans: setup()'s backfill and a refused $rankFusion."""
    acoll = async_atlas_collection()
    aplain = AsyncMongoStore(acoll, index=cfg())
    await aplain.setup()
    await aplain.abatch([PutOp(("u", "a"), k, {"text": t, "kind": kind}) for k, (t, kind) in MEMORIES.items()])
    native_state(acoll.atlas).rank_fusion_flag_off = True
    astore = AsyncMongoStore(acoll, index=cfg(hybrid={}))
    await astore.setup()
    assert await astore.vectors_collection.count_documents({"text": {"$exists": False}}) == 0
    reference = MongoStore(in_memory_collection(), index=cfg(hybrid={}))
    reference.batch([PutOp(("u", "a"), k, {"text": t, "kind": kind}) for k, (t, kind) in MEMORIES.items()])
    got = keys_scores(await astore.asearch(("u", "a"), query=QUERY, limit=10))
    assert got == keys_scores(reference.search(("u", "a"), query=QUERY, limit=10))
    assert (await astore.status())["search_path"] == "atlas"


# --------------------------------------------------------------------------- recency (issue 36.4)

RECENCY = {"half_life_days": 10, "weight": 0.4}


def aged(store: MongoStore, days: dict[str, float]) -> None:
    """Set items' ``updated_at`` this many days back (what the blend reads)."""
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    for key, age in days.items():
        store.collection.update_many({"key": key}, {"$set": {"updated_at": now - timedelta(days=age)}})


def test_hybrid_with_recency_orders_the_same_on_atlas_and_locally() -> None:
    """The fused score is blended with each item's age: ``$rankFusion`` then the pipeline's blend on Atlas,
    the exact local fusion then ``scoring.by_recency`` elsewhere, the same order and scores."""
    ages = {"k1": 0, "k2": 90, "k3": 3, "k4": 0, "k5": 30, "k6": 1, "other": 0}
    runs = []
    for recency in (None, RECENCY):
        extra = {} if recency is None else {"recency": recency}
        stores = [
            MongoStore(atlas_collection(), index=cfg(hybrid={}, **extra)),
            MongoStore(in_memory_collection(), index=cfg(hybrid={}, **extra)),
        ]
        for store in stores:
            store.setup()
            fill(store)
            aged(store, ages)
        a, b = (keys_scores(s.search(("u", "a"), query=QUERY, limit=10)) for s in stores)
        assert [k for k, _ in a] == [k for k, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-6)  # ages read a few ms apart
        runs.append(a)
    plain, blended = runs
    assert [k for k, _ in plain] != [k for k, _ in blended]  # k2, 90 days old, is no longer first
    assert plain[0][0] == "k2" and [k for k, _ in blended].index("k2") > 0


def test_rerank_with_recency_blends_the_reranked_score() -> None:
    from datetime import datetime, timedelta, timezone

    from mongostore.config import RecencySettings
    from mongostore.core.scoring import blend

    store = MongoStore(atlas_collection(), index=cfg(rerank={"model": "rerank-2.5", "candidates": 20}, recency=RECENCY))
    store.setup()
    fill(store)
    ages = {"k1": 20, "k2": 0, "k3": 5, "k4": 0, "k5": 40, "k6": 2}
    aged(store, ages)
    found = [x for x in store.search(("u", "a"), query=QUERY, limit=10) if x.score is not None]
    now, rec = datetime.now(timezone.utc), RecencySettings(10, 0.4)
    want = {k: blend(rerank_score(QUERY, MEMORIES[k][0]), now - timedelta(days=ages[k]), now, rec) for k in MEMORIES}
    assert [x.key for x in found] == sorted(want, key=lambda k: (-want[k], k))
    for x in found:
        assert x.score == pytest.approx(want[x.key], abs=1e-6)
