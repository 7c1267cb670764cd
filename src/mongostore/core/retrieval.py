"""Atlas-native retrieval modes: automated embedding, ``$rerank``, hybrid ``$rankFusion``.

Pure code, no I/O: the normalised settings of the three modes, the index
definitions ``setup()`` creates for them, their pipelines, the write requests of
automated embedding, and the exact local fusion that the hybrid mode falls back to
off Atlas. The plans that use these live in ``_retrieval_plan``.

Every mode runs on the vectors collection (``<items>_vectors``), one document per
(item, indexed text): ``$rankFusion`` runs every input pipeline on one collection and
its input pipelines may only select (``$match $search $vectorSearch $sample $geoNear
$sort $skip $limit``), so both rankings must run where the texts are; the item join,
the item-level filters and the per-item best score come after the fusion, exactly as
after ``$vectorSearch``. Vector documents carry the text itself (``text``) whenever
a mode needs it: ``$search`` indexes it, ``$rerank`` reads it, ``autoEmbed`` embeds it.

Scores (stated, and the same on every path):

- automated embedding: the similarity of the index (cosine in [-1, 1] by default),
  converted back from Atlas's normalised score as for client-side vectors;
- hybrid: reciprocal rank fusion, ``sum(weight / (60 + rank))`` over the two rankings
  of the texts in scope (namespace prefix and pre-filterable filters), each cut at
  ``depth``, ranks from 1; an item scores by its best text. The lexical ranking is BM25
  with statistics over every text of the vectors collection (Atlas Search's are index-wide);
  ties in the fused order go by vector document ``_id``, as ``$rankFusion``'s;
- reranked: the Voyage AI reranker's relevance score of the item's best text.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mongostore.core import queries as q

__all__ = [
    "AUTO_EMBED_DIMENSIONS",
    "AUTO_EMBED_MODELS",
    "RERANK_MODELS",
    "RRF_RANK_CONSTANT",
    "AutoEmbedSettings",
    "HybridSettings",
    "RerankSettings",
    "auto_vector_request",
    "hybrid_pipeline",
    "lexical_scores",
    "local_fusion",
    "text_index_definition",
    "tokens",
    "vector_index_definition",
    "with_text",
]

# The models of a vectorSearch index's autoEmbed field (the autoEmbed docs; mongot's
# VoyageClient and search-index-schema autoEmbed.json). voyage-code-4 exists only for
# $search's autoEmbed type, so a vectorSearch index refuses it (issue 28).
AUTO_EMBED_MODELS = ("voyage-4", "voyage-4-large", "voyage-4-lite", "voyage-code-3")
SEARCH_ONLY_MODELS = ("voyage-code-4",)
AUTO_EMBED_DIMENSIONS = (256, 512, 1024, 2048)
AUTO_EMBED_DEFAULT_DIMENSIONS = 1024
# The $rerank page lists these models; numDocsToRerank must be <= 1000.
RERANK_MODELS = ("rerank-2.5", "rerank-2.5-lite", "rerank-2", "rerank-2-lite")
MAX_DOCS_TO_RERANK = 1000
# The $rankFusion page: "60 is a sensitivity parameter that MongoDB determined".
RRF_RANK_CONSTANT = 60
# $vectorSearch numCandidates is at most 10,000, and limit <= numCandidates.
MAX_DEPTH = 10_000
TEXT_PATH = "text"
DEFAULT_TEXT_INDEX_NAME = "mongostore_text"
VECTOR_PIPELINE = "vector"
TEXT_PIPELINE = "text"
# Lucene's BM25 defaults (the standard analyzer's scoring on Atlas Search).
BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class AutoEmbedSettings:
    """``embed="atlas:<model>"``: Atlas embeds the stored text and the query text."""

    model: str
    dims: int = AUTO_EMBED_DEFAULT_DIMENSIONS


@dataclass(frozen=True)
class RerankSettings:
    """``rerank={"model": ..., "candidates": N}``: ``$rerank`` the first N vector hits."""

    model: str
    candidates: int = 100


@dataclass(frozen=True)
class HybridSettings:
    """``hybrid={"weights": {"vector": w, "text": w}, "depth": N}``: RRF of two rankings."""

    vector_weight: float = 1.0
    text_weight: float = 1.0
    depth: int = 100
    index_name: str = DEFAULT_TEXT_INDEX_NAME


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _int_in(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer from {low} to {high}, got {value!r}")
    return value


def _only_keys(spec: Mapping[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown} (allowed: {sorted(allowed)})")


def auto_embed_settings(model: str, dims: int | None) -> AutoEmbedSettings:
    """``embed="atlas:<model>"`` (ValueError with what was wrong)."""
    if model not in AUTO_EMBED_MODELS:
        why = " (it is for $search indexes only)" if model in SEARCH_ONLY_MODELS else ""
        raise ValueError(
            f"automated embedding model {model!r} cannot embed for a vectorSearch index{why}; "
            f"use one of {', '.join(AUTO_EMBED_MODELS)}"
        )
    if dims is None:
        return AutoEmbedSettings(model)
    if dims not in AUTO_EMBED_DIMENSIONS:
        raise ValueError(f"dims with automated embedding must be one of {list(AUTO_EMBED_DIMENSIONS)}, got {dims!r}")
    return AutoEmbedSettings(model, dims)


def rerank_settings(spec: Any) -> RerankSettings:
    """``rerank={"model": ..., "candidates": N}`` (ValueError with what was wrong)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"rerank must be a dict like {{'model': 'rerank-2.5'}}, got {type(spec).__name__}")
    _only_keys(spec, {"model", "candidates"}, "rerank")
    model = spec.get("model")
    if model not in RERANK_MODELS:
        raise ValueError(f"rerank['model'] must be one of {list(RERANK_MODELS)}, got {model!r}")
    candidates = _int_in(spec.get("candidates", 100), "rerank['candidates']", 1, MAX_DOCS_TO_RERANK)
    return RerankSettings(str(model), candidates)


def hybrid_settings(spec: Any) -> HybridSettings:
    """``hybrid={"weights": {...}, "depth": N, "index_name": ...}`` (ValueError)."""
    if spec is True:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"hybrid must be a dict like {{'weights': {{'vector': 1, 'text': 1}}}}, got {spec!r}")
    _only_keys(spec, {"weights", "depth", "index_name"}, "hybrid")
    weights = spec.get("weights", {})
    if not isinstance(weights, Mapping):
        raise ValueError(f"hybrid['weights'] must be a dict with 'vector' and/or 'text', got {weights!r}")
    _only_keys(weights, {VECTOR_PIPELINE, TEXT_PIPELINE}, "hybrid['weights']")
    vw = _number(weights.get(VECTOR_PIPELINE, 1.0), "hybrid['weights']['vector']")
    tw = _number(weights.get(TEXT_PIPELINE, 1.0), "hybrid['weights']['text']")
    if vw < 0 or tw < 0 or vw + tw == 0:
        raise ValueError("hybrid weights must be non-negative and not both zero ($rankFusion's rule)")
    depth = _int_in(spec.get("depth", 100), "hybrid['depth']", 1, MAX_DEPTH)
    name = spec.get("index_name", DEFAULT_TEXT_INDEX_NAME)
    if not isinstance(name, str) or not name:
        raise ValueError(f"hybrid['index_name'] must be a non-empty string, got {name!r}")
    return HybridSettings(vw, tw, depth, name)


# --------------------------------------------------------------------------- index definitions


def vector_index_definition(
    dims: int, similarity: str, filter_fields: Sequence[str], auto_embed: AutoEmbedSettings | None
) -> dict[str, Any]:
    """The ``vectorSearch`` index of the vectors collection, for either embedding mode.

    Client-side embeddings index ``embedding`` (``type: vector``); automated embedding
    indexes the stored ``text`` (``type: autoEmbed``, ``modality: text``), and Atlas
    embeds it with ``model``. The filter fields are the same in both.
    """
    base = q.vector_index_definition(dims, similarity, filter_fields)
    if auto_embed is None:
        return base
    field = {
        "type": "autoEmbed",
        "modality": "text",
        "path": TEXT_PATH,
        "model": auto_embed.model,
        "numDimensions": auto_embed.dims,
        "similarity": similarity,
    }
    return {"fields": [field, *(f for f in base["fields"] if f["type"] != "vector")]}


def text_index_definition() -> dict[str, Any]:
    """The Atlas Search (``type: search``) index of the hybrid mode's lexical ranking.

    Static mappings: ``text`` (the indexed text of each vector document) as ``string``
    with the standard analyzer, ``ns_prefixes`` as ``token`` so the ``equals``
    operator can scope a query to a namespace prefix inside ``$search``.
    """
    return {
        "mappings": {
            "dynamic": False,
            "fields": {
                TEXT_PATH: {"type": "string", "analyzer": "lucene.standard"},
                "ns_prefixes": {"type": "token"},
            },
        }
    }


# --------------------------------------------------------------------------- writes


def with_text(req: q.WriteRequest, text: str) -> q.WriteRequest:
    """A vector upsert that also stores its text (for ``$search`` and ``$rerank``)."""
    assert isinstance(req.update, dict)  # vector writes are plain updates, never pipelines
    update = {k: dict(v) if isinstance(v, Mapping) else v for k, v in req.update.items()}
    update["$set"][TEXT_PATH] = text
    return dataclasses.replace(req, update=update)


def auto_vector_request(req: q.WriteRequest, text: str) -> q.WriteRequest:
    """A vector document for automated embedding: the text, no client-side embedding."""
    out = with_text(req, text)
    assert isinstance(out.update, dict)
    out.update["$set"].pop("embedding", None)
    out.update.setdefault("$unset", {})["embedding"] = ""
    return out


# --------------------------------------------------------------------------- pipelines


def vector_stage(
    *,
    index_name: str,
    query_vector: Sequence[float] | None,
    query_text: str | None,
    num_candidates: int,
    k: int,
    pre_filter: Mapping[str, Any],
) -> dict[str, Any]:
    """``$vectorSearch`` by vector (``path: embedding``) or by text (``path: text``, autoEmbed)."""
    return {
        "$vectorSearch": q.vector_search_stage(
            index_name, query_vector, num_candidates, k, pre_filter, query_text, TEXT_PATH
        )
    }


def text_stages(
    *, index_name: str, query: str, namespace_path: str | None, pre_match: Mapping[str, Any], depth: int
) -> list[dict[str, Any]]:
    """The lexical input pipeline: ``$search`` (scoped by ``equals`` on ``ns_prefixes``),
    the other pre-filterable conditions as ``$match``, then the first ``depth`` texts.

    ``$match``, ``$search`` and ``$limit`` are all selection stages, and ``$search``
    orders its output, so this is both a selection and a ranked pipeline.
    """
    must = [{"text": {"query": query, "path": TEXT_PATH}}]
    compound: dict[str, Any] = {"must": must}
    if namespace_path is not None:
        compound["filter"] = [{"equals": {"path": "ns_prefixes", "value": namespace_path}}]
    stages: list[dict[str, Any]] = [{"$search": {"index": index_name, "compound": compound}}]
    if pre_match:
        stages.append({"$match": dict(pre_match)})
    stages.append({"$limit": depth})
    return stages


def split_namespace(pre_filter: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``vector_prefilter``'s filter -> (namespace path, the other conditions)."""
    clauses = list(pre_filter.get("$and", [pre_filter] if pre_filter else []))
    ns = None
    rest = []
    for clause in clauses:
        if set(clause) == {"ns_prefixes"} and isinstance(clause["ns_prefixes"], str):
            ns = clause["ns_prefixes"]
        else:
            rest.append(clause)
    return ns, ({} if not rest else rest[0] if len(rest) == 1 else {"$and": rest})


def after_search(
    *,
    score: Any,
    post_filter: Mapping[str, Any],
    items_collection: str,
    offset: int,
    limit: int,
    now: datetime | None,
) -> list[dict[str, Any]]:
    """Everything after the search stage(s): the same join, validity check, filters, best
    score per item, page and ``$facet`` counts as ``vector_search_pipeline`` (ids and scores,
    never whole items). ``score`` reads the stage's score; the caller converts it (or not).
    """
    return q.scored_page_stages(
        score=score,
        final_score=1,
        post_filter=post_filter,
        items_collection=items_collection,
        offset=offset,
        limit=limit,
        now=now,
    )


def rerank_guard() -> dict[str, Any]:
    """What goes before ``$rerank``: only documents that have a ``text`` string.

    The ``$rerank`` page: "the query fails if a path field does not exist"; ``$match`` such
    documents out or ``$set`` the field first. Vector documents written before a mode that
    stores text was turned on have none until ``setup()`` gives them theirs (``plan.backfill``).
    """
    return {"$match": {TEXT_PATH: {"$type": "string"}}}


def rerank_stage(query: str, model: str, num_docs: int) -> dict[str, Any]:
    """``$rerank`` on the vector documents' ``text`` (after ``rerank_guard``)."""
    return {"$rerank": {"query": {"text": query}, "path": TEXT_PATH, "numDocsToRerank": num_docs, "model": model}}


def hybrid_pipeline(*, vector: dict[str, Any], text: list[dict[str, Any]], hybrid: HybridSettings) -> dict[str, Any]:
    """``$rankFusion`` of the vector ranking and the lexical ranking, with their weights."""
    return {
        "$rankFusion": {
            "input": {"pipelines": {VECTOR_PIPELINE: [vector], TEXT_PIPELINE: text}},
            "combination": {"weights": {VECTOR_PIPELINE: hybrid.vector_weight, TEXT_PIPELINE: hybrid.text_weight}},
        }
    }


# --------------------------------------------------------------------------- the local fusion

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (what the standard analyzer keeps, near enough)."""
    return _TOKEN.findall(text.lower())


def lexical_scores(query: str, texts: Sequence[str], corpus: Iterable[str] | None = None) -> list[float]:
    """BM25 (Lucene's k1 = 1.2, b = 0.75) of each text for the query's terms; 0 = no match.

    As Atlas Search scores (the "Return the Score Details" page), the statistics (N, the
    document frequencies, the average length) come from the whole index: ``corpus``, every
    text of the vectors collection, in scope or not. Only ``texts`` (those in scope) are
    scored. Without ``corpus`` the texts are the corpus (a search whose scope is everything).
    """
    docs = [tokens(t) for t in texts]
    terms = set(tokens(query))
    if not docs or not terms:
        return [0.0] * len(docs)
    n, total, df = _statistics(docs if corpus is None else (tokens(t) for t in corpus), terms)
    if n == 0:
        return [0.0] * len(docs)
    avg = total / n or 1.0
    out = []
    for d in docs:
        score = 0.0
        for t in terms:
            tf = d.count(t)
            if tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * len(d) / avg))
        out.append(score)
    return out


def _statistics(corpus: Iterable[list[str]], terms: set[str]) -> tuple[int, int, dict[str, int]]:
    """(documents, total length, document frequency of each term) of a tokenized corpus."""
    n = total = 0
    df = dict.fromkeys(terms, 0)
    for doc in corpus:
        n += 1
        total += len(doc)
        for t in terms.intersection(doc):
            df[t] += 1
    return n, total, df


def _ranking(keys: Sequence[str], scores: Sequence[float], depth: int, positive_only: bool) -> list[str]:
    order = sorted(range(len(keys)), key=lambda i: (-scores[i], keys[i]))
    if positive_only:
        order = [i for i in order if scores[i] > 0]
    return [keys[i] for i in order[:depth]]


def local_fusion(
    keys: Sequence[str],
    vector_scores: Sequence[float],
    text_scores: Sequence[float],
    hybrid: HybridSettings,
) -> dict[str, float]:
    """Reciprocal rank fusion of the two rankings, as ``$rankFusion`` computes it.

    ``keys`` identify the texts in scope (vector document ids); each ranking is cut at
    ``hybrid.depth`` (the lexical one holds only texts that match a query term), ranks
    start at 1, ties go by key. Returns each ranked text's fused score.
    """
    fused: dict[str, float] = {}
    rankings = (
        (hybrid.vector_weight, _ranking(keys, vector_scores, hybrid.depth, positive_only=False)),
        (hybrid.text_weight, _ranking(keys, text_scores, hybrid.depth, positive_only=True)),
    )
    for weight, ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (RRF_RANK_CONSTANT + rank)
    return fused
