"""The Atlas double's native stages (tests/fakes/atlas_native.py) answer as documented,
error cases included, so the store's tests against it mean something (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.atlas import atlas_collection
from fakes.atlas_native import native_state, rerank_score, stand_in_embedding
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.config import index_settings
from mongostore.core import retrieval as r
from mongostore.errors import ConfigurationError

TEXTS = ["red apple pie", "green apple", "blue sky", "apple apple apple tart"]


def seeded() -> Any:
    coll = atlas_collection()
    coll.insert_many([{"_id": i, "text": t, "tag": ["a."] if i % 2 else ["b."]} for i, t in enumerate(TEXTS)])
    coll.create_search_index(SearchIndexModel(definition=r.text_index_definition(), name="txt", type="search"))
    auto = {"fields": [{"type": "autoEmbed", "modality": "text", "path": "text", "model": "voyage-4"}]}
    coll.create_search_index(SearchIndexModel(definition=auto, name="auto", type="vectorSearch"))
    return coll


def search(query: str) -> dict[str, Any]:
    return {"$search": {"index": "txt", "text": {"query": query, "path": "text"}}}


def auto_vs(query: str, limit: int = 4) -> dict[str, Any]:
    return {
        "$vectorSearch": {
            "index": "auto",
            "path": "text",
            "query": {"text": query},
            "numCandidates": 10,
            "limit": limit,
        }
    }


def run(coll: Any, pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(coll.aggregate(pipeline))


def test_rank_fusion_sums_weight_over_60_plus_rank() -> None:
    coll = seeded()
    fusion = {
        "$rankFusion": {
            "input": {"pipelines": {"lex": [search("apple")], "vec": [auto_vs("apple pie")]}},
            "combination": {"weights": {"lex": 2}},  # an unnamed pipeline weighs 1
        }
    }
    out = run(coll, [fusion, {"$project": {"score": {"$meta": "score"}}}])
    lex = [d["_id"] for d in run(coll, [search("apple")])]
    vec = [d["_id"] for d in run(coll, [auto_vs("apple pie")])]
    want = {i: 0.0 for i in set(lex) | set(vec)}
    for rank, i in enumerate(lex, start=1):
        want[i] += 2 / (60 + rank)
    for rank, i in enumerate(vec, start=1):
        want[i] += 1 / (60 + rank)
    assert {d["_id"]: d["score"] for d in out} == pytest.approx(want)
    assert [d["score"] for d in out] == sorted((d["score"] for d in out), reverse=True)
    assert len(out) == len(want)  # de-duplicated


SORT = [{"$sort": {"_id": 1}}]


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        ({"input": {"pipelines": {}}}, 2, "at least one pipeline"),
        ({"input": {"pipelines": {"p": []}}}, 9834300, "cannot be empty"),
        ({"input": {"pipelines": {"$x": SORT}}}, 16410, "naming rules"),
        ({"input": {"pipelines": {"a.b": SORT}}}, 16410, "naming rules"),
        ({"input": {"pipelines": {"p": [{"$rankFusion": {}}]}}}, 10473002, "nested hybrid search"),
        ({"input": {"pipelines": {"p": [*SORT, {"$score": {}}]}}}, 10614800, r"\$score stage"),
        ({"input": {"pipelines": {"p": [{"$match": {}}]}}}, 9191100, "did not begin with a ranked stage"),
        ({"input": {"pipelines": {"p": [*SORT, {"$project": {"a": 1}}]}}}, 9191103, r"\$project is not a selection"),
        ({"input": {"pipelines": {"p": [*SORT, {"$rerank": {}}]}}}, 9191103, r"\$rerank is not a selection"),
        ({"input": {"pipelines": {"p": SORT}}, "combination": {"weights": {"p": -1}}}, 9460300, "non-negative"),
        ({"input": {"pipelines": {"p": SORT}}, "combination": {"weights": {"p": 1, "q": 1}}}, 9460301, "more weights"),
        ({"input": {"pipelines": {"p": SORT}}, "combination": {"weights": {"q": 1}}}, 9967500, "valid pipeline names"),
    ],
)
def test_rank_fusion_refuses_what_mongod_refuses_with_its_codes(spec: dict[str, Any], code: int, message: str) -> None:
    """mongod's codes (issue 28): document_source_rank_fusion.cpp, hybrid_scoring_util.cpp."""
    with pytest.raises(OperationFailure, match=message) as err:
        run(seeded(), [{"$rankFusion": spec}])
    assert err.value.code == code


def test_rank_fusion_must_come_first_and_can_be_missing() -> None:
    coll = seeded()
    fusion = {"$rankFusion": {"input": {"pipelines": {"p": SORT}}}}
    with pytest.raises(OperationFailure, match="first stage") as first:
        run(coll, [search("apple"), fusion])
    assert first.value.code == 10170100
    native_state(coll.atlas).rank_fusion_flag_off = True  # built with the feature flag off
    with pytest.raises(OperationFailure, match="feature flag") as flag:
        run(coll, [fusion])
    assert flag.value.code == 224
    native_state(coll.atlas).rank_fusion_enabled = False
    with pytest.raises(OperationFailure, match="Unrecognized pipeline stage name: '\\$rankFusion'") as err:
        run(coll, [fusion])
    assert err.value.code == 40324


def test_rank_fusion_breaks_ties_by_id_ascending() -> None:
    """mongod sorts the fused documents by {score: {$meta: "score"}, _id: 1}."""
    coll = atlas_collection()
    coll.insert_many([{"_id": i} for i in ("c", "a", "d", "b")])
    # two pipelines in opposite orders: every document gets 1/(60+r) + 1/(60+5-r), pairs tie
    pipelines = {"down": [{"$sort": {"_id": -1}}], "up": [{"$sort": {"_id": 1}}]}
    fusion = {"$rankFusion": {"input": {"pipelines": pipelines}}}
    got = run(coll, [fusion, {"$project": {"s": {"$meta": "score"}}}])
    assert [d["_id"] for d in got] == ["a", "d", "b", "c"]  # a/d tie (ranks 1+4), b/c tie (2+3)
    assert got[0]["s"] == pytest.approx(got[1]["s"]) and got[2]["s"] == pytest.approx(got[3]["s"])


def test_auto_embed_fields_default_to_dot_product_refuse_voyage_code_4_and_cannot_change() -> None:
    coll = seeded()  # index "auto": voyage-4, no similarity given
    got = run(coll, [auto_vs("apple tart"), {"$project": {"s": {"$meta": "vectorSearchScore"}}}])
    texts = dict(enumerate(TEXTS))
    q = stand_in_embedding("voyage-4", "apple tart", 1024)
    for d in got:  # dotProduct's (1 + dot) / 2, on the stand-in vectors
        v = stand_in_embedding("voyage-4", texts[d["_id"]], 1024)
        assert d["s"] == pytest.approx(max((1 + sum(a * b for a, b in zip(q, v, strict=True))) / 2, 0.0))
    code4 = {"fields": [{"type": "autoEmbed", "modality": "text", "path": "text", "model": "voyage-code-4"}]}
    with pytest.raises(OperationFailure, match="voyage-code-4"):
        coll.create_search_index(SearchIndexModel(definition=code4, name="code4", type="vectorSearch"))
    lite = {"fields": [{"type": "autoEmbed", "modality": "text", "path": "text", "model": "voyage-4-lite"}]}
    with pytest.raises(OperationFailure, match="cannot update type:autoEmbed fields"):
        coll.update_search_index("auto", lite)
    plain = {"fields": [{"type": "vector", "path": "embedding", "numDimensions": 8, "similarity": "cosine"}]}
    with pytest.raises(OperationFailure, match="cannot convert a type:autoEmbed to a type:vector"):
        coll.update_search_index("auto", plain)
    with_filter = {"fields": [*seeded_auto_fields(), {"type": "filter", "path": "tag"}]}
    coll.update_search_index("auto", with_filter)  # filter fields may change


def seeded_auto_fields() -> list[dict[str, Any]]:
    return [{"type": "autoEmbed", "modality": "text", "path": "text", "model": "voyage-4"}]


def test_search_scores_bm25_scopes_by_token_equals_and_checks_mappings() -> None:
    coll = seeded()
    got = run(coll, [search("apple"), {"$project": {"s": {"$meta": "searchScore"}}}])
    assert [d["_id"] for d in got] == [3, 1, 0]  # tf 3 beats shorter texts; "blue sky" does not match
    scoped = {
        "compound": {
            "must": [{"text": {"query": "apple", "path": "text"}}],
            "filter": [{"equals": {"path": "tag", "value": "a."}}],
        }
    }
    coll.create_search_index(
        SearchIndexModel(
            definition={
                "mappings": {"dynamic": False, "fields": {"text": {"type": "string"}, "tag": {"type": "token"}}}
            },
            name="t2",
            type="search",
        )
    )
    assert [d["_id"] for d in run(coll, [{"$search": {"index": "t2", **scoped}}])] == [3, 1]
    with pytest.raises(OperationFailure, match="needs to be indexed as token"):
        run(coll, [{"$search": {"index": "txt", "equals": {"path": "tag", "value": "a."}}}])
    assert run(coll, [{"$search": {"index": "missing", "text": {"query": "apple", "path": "text"}}}]) == []


def test_auto_embed_index_scores_with_a_stand_in_model_per_name() -> None:
    coll = seeded()
    got = run(coll, [auto_vs("green apple", 2), {"$project": {"s": {"$meta": "vectorSearchScore"}}}])
    assert got[0]["_id"] == 1 and got[0]["s"] == pytest.approx(1.0)  # same text, same stand-in vector
    assert stand_in_embedding("voyage-4", "x y", 16) != stand_in_embedding("voyage-4-lite", "x y", 16)
    with pytest.raises(OperationFailure, match="exclusive"):
        run(coll, [{"$vectorSearch": {**auto_vs("a")["$vectorSearch"], "queryVector": [0.1]}}])
    with pytest.raises(OperationFailure, match="needs to be indexed as autoEmbed"):
        run(coll, [{"$vectorSearch": {**auto_vs("a")["$vectorSearch"], "path": "tag"}}])
    bad = {"fields": [{"type": "autoEmbed", "modality": "text", "path": "text", "model": "voyage-3"}]}
    with pytest.raises(OperationFailure, match="voyage-3"):
        coll.create_search_index(SearchIndexModel(definition=bad, name="bad", type="vectorSearch"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"query": {"text": "apple"}, "path": "text", "numDocsToRerank": 1001, "model": "rerank-2.5"}, "1 to 1000"),
        ({"query": {"text": "apple"}, "path": "text", "numDocsToRerank": 5, "model": "rerank-9"}, "rerank-9"),
        ({"query": {}, "path": "text", "numDocsToRerank": 5, "model": "rerank-2.5"}, "query.text"),
        ({"query": {"text": "apple"}, "path": "nope", "numDocsToRerank": 5, "model": "rerank-2.5"}, "do not exist"),
    ],
)
def test_rerank_refuses_bad_specs(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(OperationFailure, match=message):
        run(seeded(), [search("apple"), {"$rerank": spec}])


def test_rerank_keeps_the_first_n_and_orders_by_relevance() -> None:
    coll = seeded()
    spec = {"query": {"text": "apple tart"}, "path": "text", "numDocsToRerank": 2, "model": "rerank-2.5"}
    got = run(coll, [{"$sort": {"_id": 1}}, {"$rerank": spec}, {"$project": {"s": {"$meta": "score"}}}])
    assert [d["_id"] for d in got] == [0, 1]  # only the first two documents, reordered (a tie keeps order)
    assert [d["s"] for d in got] == [rerank_score("apple tart", TEXTS[0]), rerank_score("apple tart", TEXTS[1])]


# --------------------------------------------------------------------------- pure builders


def test_local_fusion_is_the_rrf_formula_with_depth_and_lexical_matches_only() -> None:
    h = r.HybridSettings(vector_weight=1.0, text_weight=2.0, depth=2)
    fused = r.local_fusion(["a", "b", "c"], [0.9, 0.5, 0.1], [0.0, 1.0, 3.0], h)
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 2 / 62, "c": 2 / 61})


def test_lexical_scores_match_terms_and_rank_by_bm25() -> None:
    s = r.lexical_scores("Apple", TEXTS)
    assert s[2] == 0.0 and s[3] > s[1] > s[0] > 0


def test_hybrid_config_errors_name_the_key() -> None:
    from mongostore.tools.embeddings import HashingEmbeddings

    base = {"dims": 8, "embed": HashingEmbeddings(8)}
    for bad, message in [
        ({"hybrid": {"weights": {"vector": 0, "text": 0}}}, "not both zero"),
        ({"hybrid": {"weights": {"bm25": 1}}}, "unknown key"),
        ({"hybrid": {"depth": 0}}, "depth"),
        ({"rerank": {"model": "rerank-2.5", "candidates": 1001}}, "candidates"),
        ({"rerank": "rerank-2.5"}, "must be a dict"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            index_settings({**base, **bad})
