"""The Atlas search pipeline (plain vectors, automated embedding, ``$rerank``, hybrid ``$rankFusion``) and what the
modes need besides: their settings and index definitions, and the exact local fusion the hybrid mode falls back to off
Atlas. Pure code, no I/O: the search paths (``plan.paths``) and ``plan.setup`` use it.

Every mode runs on the vectors collection, whose documents carry their text (``text``) while a mode is on:
``$rankFusion`` runs its input pipelines on one collection, and they may only select (docs/decisions.md, "The sidecar
layout"). What each mode's score means is stated there too ("Stated meaning of the hybrid score", "Reranked score").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import SearchOp

from mongostore.core import queries as q
from mongostore.core.codec import namespace_path

if TYPE_CHECKING:
    from mongostore.config import IndexSettings

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
# $vectorSearch: numCandidates is at most 10,000, and limit <= numCandidates.
MAX_CANDIDATES = 10_000
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
    if dims is not None and dims not in AUTO_EMBED_DIMENSIONS:
        raise ValueError(f"dims with automated embedding must be one of {list(AUTO_EMBED_DIMENSIONS)}, got {dims!r}")
    return AutoEmbedSettings(model) if dims is None else AutoEmbedSettings(model, dims)


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
    depth = _int_in(spec.get("depth", 100), "hybrid['depth']", 1, MAX_CANDIDATES)
    name = spec.get("index_name", DEFAULT_TEXT_INDEX_NAME)
    if not isinstance(name, str) or not name:
        raise ValueError(f"hybrid['index_name'] must be a non-empty string, got {name!r}")
    return HybridSettings(vw, tw, depth, name)


# --------------------------------------------------------------------------- index definitions


def vector_index_definition(
    dims: int, similarity: str, filter_fields: Sequence[str], auto_embed: AutoEmbedSettings | None = None
) -> dict[str, Any]:
    """The vectors collection's ``vectorSearch`` index (what ``atlas-index.json`` holds): ``embedding``
    (``type: vector``), or with automated embedding the stored ``text`` (``type: autoEmbed``); the filters."""
    field: dict[str, Any] = {"type": "vector", "path": "embedding", "numDimensions": dims, "similarity": similarity}
    if auto_embed is not None:
        field = {"type": "autoEmbed", "modality": "text", "path": TEXT_PATH, "model": auto_embed.model}
        field.update(numDimensions=auto_embed.dims, similarity=similarity)
    filters = [{"type": "filter", "path": path} for path in ("ns_prefixes", *(f"value.{f}" for f in filter_fields))]
    return {"fields": [field, *filters]}


def text_index_definition() -> dict[str, Any]:
    """The hybrid mode's ``$search`` index: ``text`` with the standard analyzer, and
    ``ns_prefixes`` as ``token`` so ``equals`` scopes a query to a namespace prefix."""
    return {
        "mappings": {
            "dynamic": False,
            "fields": {
                TEXT_PATH: {"type": "string", "analyzer": "lucene.standard"},
                "ns_prefixes": {"type": "token"},
            },
        }
    }


# --------------------------------------------------------------------------- the Atlas pipeline


def atlas_pipeline(
    op: SearchOp,
    index: IndexSettings,
    items_name: str,
    cutoff: datetime | None,
    query_vector: Sequence[float] | None,
    k: int,
) -> list[dict[str, Any]]:
    """One Atlas page in this index's mode: ``$vectorSearch`` (by vector, or by the query's text with automated
    embedding); hybrid fuses it in ``$rankFusion`` with ``$search`` (both selection pipelines, ``depth`` each);
    reranking ``$rerank``s the first ``candidates`` hits. Then ``queries.scored_page_stages``."""
    query = str(op.query)
    hybrid, rerank = index.hybrid, index.rerank
    if hybrid is not None:
        k = hybrid.depth
    elif rerank is not None:
        k = rerank.candidates
    candidates = min(MAX_CANDIDATES, max(k * index.candidate_factor, 100, k))
    pre, post = q.vector_prefilter(op.namespace_prefix, op.filter, index.filter_fields)
    text = query if index.auto_embed is not None else None
    stages = [q.vector_search_stage(index.index_name, query_vector, candidates, k, pre, text)]
    if hybrid is not None:
        compound: dict[str, Any] = {"must": [{"text": {"query": query, "path": TEXT_PATH}}]}
        if op.namespace_prefix:
            compound["filter"] = [{"equals": {"path": "ns_prefixes", "value": namespace_path(op.namespace_prefix)}}]
        lexical: list[dict[str, Any]] = [{"$search": {"index": hybrid.index_name, "compound": compound}}]
        rest, _ = q.vector_prefilter((), op.filter, index.filter_fields)  # the pre-filter but the namespace
        if rest:
            lexical.append({"$match": rest})
        lexical.append({"$limit": k})
        pipelines = {VECTOR_PIPELINE: stages, TEXT_PIPELINE: lexical}
        weights = {VECTOR_PIPELINE: hybrid.vector_weight, TEXT_PIPELINE: hybrid.text_weight}
        stages = [{"$rankFusion": {"input": {"pipelines": pipelines}, "combination": {"weights": weights}}}]
    if rerank is not None:
        # The $rerank page: "the query fails if a path field does not exist": a vector document
        # written before a mode stored text has none until setup() gives it (``plan.setup.backfill_texts``).
        spec = {"query": {"text": query}, "path": TEXT_PATH, "numDocsToRerank": rerank.candidates}
        stages += [{"$match": {TEXT_PATH: {"$type": "string"}}}, {"$rerank": {**spec, "model": rerank.model}}]
    similarity = index.similarity if hybrid is None and rerank is None else None
    page = q.scored_page_stages(similarity, post, items_name, op.offset, op.limit, cutoff)
    return stages + page


# --------------------------------------------------------------------------- the local fusion

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (what the standard analyzer keeps, near enough)."""
    return _TOKEN.findall(text.lower())


def lexical_scores(query: str, texts: Sequence[str], corpus: Iterable[str] | None = None) -> list[float]:
    """BM25 (Lucene's k1 = 1.2, b = 0.75) of each text (those in scope) for the query's
    terms; 0 = no match. The statistics come from ``corpus`` (default: the texts), every text
    of the index in scope or not, as Atlas Search's do ("Return the Score Details" page).
    """
    docs = [tokens(t) for t in texts]
    terms = set(tokens(query))
    if not docs or not terms:
        return [0.0] * len(docs)
    n = total = 0
    df = dict.fromkeys(terms, 0)
    for doc in docs if corpus is None else (tokens(t) for t in corpus):
        n += 1
        total += len(doc)
        for t in terms.intersection(doc):
            df[t] += 1
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
    """Each ranked text's (``keys``: vector document ids) reciprocal rank fusion, as ``$rankFusion``: each ranking cut
    at ``depth`` (the lexical one holds only texts that match a query term), ranks from 1, ties by key."""
    fused: dict[str, float] = {}
    rankings = (
        (hybrid.vector_weight, _ranking(keys, vector_scores, hybrid.depth, positive_only=False)),
        (hybrid.text_weight, _ranking(keys, text_scores, hybrid.depth, positive_only=True)),
    )
    for weight, ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (RRF_RANK_CONSTANT + rank)
    return fused
