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
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import SearchOp

from mongostore.config import (
    MAX_CANDIDATES,
    TEXT_PIPELINE,
    VECTOR_PIPELINE,
    AutoEmbedSettings,
    HybridSettings,
    IndexSettings,
)
from mongostore.core import queries as q
from mongostore.core.codec import namespace_path

TEXT_PATH = "text"
# The $rankFusion page: "60 is a sensitivity parameter that MongoDB determined".
RRF_RANK_CONSTANT = 60
# Lucene's BM25 defaults (the standard analyzer's scoring on Atlas Search).
BM25_K1 = 1.2
BM25_B = 0.75


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
    read_time: datetime | None = None,
) -> list[dict[str, Any]]:
    """One Atlas page in this index's mode: ``$vectorSearch`` (by vector, or by the query's text with automated
    embedding); hybrid fuses it in ``$rankFusion`` with ``$search`` (both selection pipelines, ``depth`` each);
    reranking ``$rerank``s the first ``candidates`` hits. Then ``queries.scored_page_stages`` (with ``recency``,
    the scores blended with the items' ages at ``read_time``)."""
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
    recency = (index.recency, read_time) if index.recency is not None and read_time is not None else None
    page = q.scored_page_stages(similarity, post, items_name, op.offset, op.limit, cutoff, recency)
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
