"""Plans of the Atlas-native retrieval modes (automated embedding, ``$rerank``, hybrid).

``plan.batch_plan`` (its ``rank_phase``) hands a semantic search here when its index config names one
of the modes (``IndexSettings.auto_embed``, ``.rerank``, ``.hybrid``); ``setup_plan``
asks here for the indexes and server checks of those modes. The builders are in
``_retrieval``; nothing here does I/O itself, it yields steps like every plan.

Which path runs:

- automated embedding and reranking need Atlas (``$vectorSearch`` with ``autoEmbed``;
  ``$rerank`` on MongoDB 8.3+): elsewhere ``setup()`` and every search raise a
  ``ConfigurationError`` naming the feature;
- hybrid runs ``$rankFusion`` when the server has ``$vectorSearch`` and is MongoDB
  8.0+, and the exact local fusion of ``_retrieval.local_fusion`` otherwise, over the
  same texts, so the same query works on every backend.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Generator
from typing import Any, Literal

import numpy as np
from pymongo.errors import OperationFailure

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core import vectors as _vectors
from mongostore.core.codec import ITEM_PROJECTION, vectors_name
from mongostore.core.paging import atlas_paging_plan, initial_k, num_candidates
from mongostore.core.steps import (
    Aggregate,
    Capabilities,
    CreateSearchIndex,
    EnsureCollection,
    Find,
    ListSearchIndexes,
    Step,
    UpdateSearchIndex,
)
from mongostore.core.vectors import newest_first
from mongostore.errors import ConfigurationError, VectorIndexError

logger = logging.getLogger("mongostore")

Plan = Generator[Step, Any, Any]
Path = Literal["atlas", "local"]
RANK_FUSION_VERSION = (8, 0)
RERANK_VERSION = (8, 3)

# A stage the server does not know (40324), a stage behind a disabled feature flag (224
# QueryFeatureNotAllowed: $rankFusion on builds with featureFlagRankFusion off), or an
# uncoded refusal from a server that only speaks the protocol.
UNRECOGNIZED_STAGE = 40324
QUERY_FEATURE_NOT_ALLOWED = 224
_REFUSALS_LOGGED: set[str] = set()  # only for logging: each refusal is warned about once per process

__all__ = [
    "NoRankFusion",
    "first_reads",
    "needs_atlas",
    "path_for",
    "refused_stage",
    "search_plan",
    "setup_checks",
    "uses_modes",
]


def uses_modes(index: IndexSettings | None) -> bool:
    """Whether a semantic search of this index runs here rather than in ``plan.search``."""
    return index is not None and index.stores_text


def _at_least(caps: Capabilities, wanted: tuple[int, int]) -> bool:
    """Emulated engines report no version: they say what they support by answering."""
    found = caps.version
    return caps.emulated or found is None or found >= wanted


def needs_atlas(index: IndexSettings, detail: str) -> ConfigurationError | None:
    """The error for a mode that cannot run off Atlas, naming the feature (None: it can)."""
    if index.auto_embed is not None:
        return ConfigurationError(
            f"automated embedding (index['embed']='atlas:{index.auto_embed.model}') needs MongoDB Atlas "
            f"(or MongoDB 8.3+ with mongot and Voyage AI keys); this server cannot run it ({detail})"
        )
    if index.rerank is not None:
        return ConfigurationError(
            f"reranking (index['rerank'], $rerank with {index.rerank.model}) needs MongoDB Atlas 8.3+ with "
            f"Native Reranking enabled; this server cannot run it ({detail})"
        )
    return None


@dataclasses.dataclass(frozen=True)
class NoRankFusion(Capabilities):
    """The server has ``$vectorSearch`` but refused ``$rankFusion`` (``refused_stage``):
    hybrid searches of this batch fuse locally; plain vector search stays on."""


def _has_rank_fusion(caps: Capabilities) -> bool:
    return not isinstance(caps, NoRankFusion) and _at_least(caps, RANK_FUSION_VERSION)


def path_for(index: IndexSettings, caps: Capabilities, use_atlas: bool) -> Path:
    """``atlas`` or ``local`` for a search of this index; raises for Atlas-only modes."""
    if use_atlas:
        if index.hybrid is not None and not _has_rank_fusion(caps):
            if index.auto_embed is not None or index.rerank is not None:
                raise ConfigurationError(
                    f"index['hybrid'] with automated embedding or reranking needs $rankFusion (MongoDB 8.0+); "
                    f"this server is {caps.server_version} ({caps.detail})"
                )
            return "local"
        return "atlas"
    err = needs_atlas(index, caps.detail or caps.server_version)
    if err is not None:
        raise err
    return "local"


def refused_stage(exc: BaseException, index: IndexSettings, caps: Capabilities) -> Capabilities | None:
    """A search read failed: was it the server refusing ``$rerank`` or ``$rankFusion``?

    Read narrowly (issue 28): only an unknown stage (40324), a feature-flagged one (224) or an
    uncoded refusal, naming the stage (224 is ``$rankFusion``'s answer on builds with the flag
    off). ``$rankFusion`` refused: returns the capabilities for this batch, hybrid searches
    fusing locally as below 8.0. ``$rerank`` refused: raises the ``ConfigurationError`` that
    names ``$rerank``. Neither switches off ``$vectorSearch``. None: not such a refusal (the
    caller reads it as for any search, e.g. "no search at all" -> rank locally).
    """
    if not isinstance(exc, OperationFailure) or exc.code not in (UNRECOGNIZED_STAGE, QUERY_FEATURE_NOT_ALLOWED, None):
        return None
    message = str((exc.details or {}).get("errmsg") or exc)
    if index.rerank is not None and "$rerank" in message:
        raise ConfigurationError(
            f"reranking (index['rerank'], $rerank with {index.rerank.model}): the server refused $rerank "
            f"({message}). $rerank needs MongoDB Atlas 8.3+ with Native Reranking enabled in the Atlas project "
            "(setup() cannot see that setting); remove index['rerank'] to search without reranking"
        ) from exc
    if index.hybrid is not None and ("$rankFusion" in message or exc.code == QUERY_FEATURE_NOT_ALLOWED):
        # Not remembered between batches (each hybrid search asks once): say it once per answer.
        log = logger.debug if message in _REFUSALS_LOGGED else logger.warning
        _REFUSALS_LOGGED.add(message)
        log("the server refused $rankFusion (%s): hybrid searches fuse locally, with the same formula", message)
        fields = {f.name: getattr(caps, f.name) for f in dataclasses.fields(caps)}
        fields["detail"] = f"$rankFusion refused: {message}"
        return NoRankFusion(**fields)
    return None


# --------------------------------------------------------------------------- reads


def atlas_pipeline(op: Any, index: IndexSettings, items_name: str, cutoff: Any, query_vector: Any, k: int) -> list[Any]:
    """The whole Atlas pipeline of one search page in this index's mode."""
    query = str(op.query)
    pre, post = q.vector_prefilter(op.namespace_prefix, op.filter, index.filter_fields)
    query_text = query if index.auto_embed is not None else None
    stages: list[dict[str, Any]]
    if index.hybrid is not None:
        depth = index.hybrid.depth
        vector = r.vector_stage(
            index_name=index.index_name,
            query_vector=query_vector,
            query_text=query_text,
            num_candidates=num_candidates(depth, index),
            k=depth,
            pre_filter=pre,
        )
        ns, rest = r.split_namespace(pre)
        text = r.text_stages(
            index_name=index.hybrid.index_name, query=query, namespace_path=ns, pre_match=rest, depth=depth
        )
        stages = [r.hybrid_pipeline(vector=vector, text=text, hybrid=index.hybrid)]
    else:
        if index.rerank is not None:
            k = index.rerank.candidates
        stages = [
            r.vector_stage(
                index_name=index.index_name,
                query_vector=query_vector,
                query_text=query_text,
                num_candidates=num_candidates(k, index),
                k=k,
                pre_filter=pre,
            )
        ]
    if index.rerank is not None:
        # $rerank fails the query when a candidate lacks `path` (the $rerank page): a vector
        # document written before reranking was on has no text until setup() backfills it.
        stages.append(r.rerank_guard())
        stages.append(r.rerank_stage(query, index.rerank.model, index.rerank.candidates))
    score = {"$meta": "vectorSearchScore"} if index.hybrid is None and index.rerank is None else {"$meta": "score"}
    return stages + r.after_search(
        score=score, post_filter=post, items_collection=items_name, offset=op.offset, limit=op.limit, now=cutoff
    )


def first_reads(
    op: Any, index: IndexSettings, items_name: str, cutoff: Any, query_vector: Any, path: Path
) -> list[Step]:
    """The reads a search of this mode joins the batch with (in the order they are consumed)."""
    if path == "atlas":
        k = initial_k(op, index)
        return [Aggregate("vectors", atlas_pipeline(op, index, items_name, cutoff, query_vector, k))]
    pre, _ = q.vector_prefilter(op.namespace_prefix, op.filter, index.filter_fields)
    # The texts in scope are those the Atlas rankings see: the prefix and the
    # pre-filterable conditions, expired or stale ones included (they are dropped after).
    scope = dict(pre)
    return [
        Find(
            "items", q.search_filter(op.namespace_prefix, op.filter, cutoff), {"_id": 1, "vectors": 1, "updated_at": 1}
        ),
        Find("vectors", scope, {"_id": 1, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1, "text": 1}),
    ]


# --------------------------------------------------------------------------- searches


def _convert(similarity: str) -> Callable[[float], float]:
    """Atlas's normalised vectorSearchScore back to the similarity (as ``atlas_score_to_similarity``)."""
    if similarity == "euclidean":
        return lambda s: -float(np.sqrt(max(1.0 / s - 1.0, 0.0))) if s > 0 else float("-inf")
    return lambda s: 2.0 * s - 1.0


def search_plan(
    op: Any,
    index: IndexSettings,
    items_name: str,
    cutoff: Any,
    query_vector: Any,
    path: Path,
    first: list[Any],
    vectors_collection: str = "",
    cache: _vectors.VectorCache | None = None,
) -> Plan:
    """One search page in this mode -> ``[(item document, score)]``; ``cache``: the store's
    client-side matrix, which scores the local fusion's vectors as it ranks the plain path's."""
    if path == "local":
        return (yield from _local_hybrid(op, index, cutoff, query_vector, first, cache))
    fixed = index.hybrid is not None or index.rerank is not None  # one fixed candidate set
    convert = (lambda s: float(s)) if fixed else _convert(index.similarity)
    vectors = vectors_collection or vectors_name(items_name)

    def more(k: int) -> Step:
        return Aggregate("vectors", atlas_pipeline(op, index, items_name, cutoff, query_vector, k))

    def unscored(skip: int, limit: int) -> Step:
        return Aggregate("items", q.unscored_pipeline(op.namespace_prefix, op.filter, vectors, cutoff, skip, limit))

    return (yield from atlas_paging_plan(op, first[0], initial_k(op, index), more, convert, fixed, unscored))


CORPUS_BATCH = 100_000


def first_scope_is_narrow(op: Any, index: IndexSettings) -> bool:
    """Whether a local hybrid search's texts in scope may be fewer than the whole corpus."""
    pre, _ = q.vector_prefilter(op.namespace_prefix, op.filter, index.filter_fields)
    return bool(pre)


def _local_hybrid(
    op: Any, index: IndexSettings, cutoff: Any, query_vector: Any, first: list[Any], cache: _vectors.VectorCache | None
) -> Plan:
    """The exact local fusion: both rankings over the texts in scope, RRF, best per item."""
    assert index.hybrid is not None and query_vector is not None
    items, vecs = first
    keys = [str(v["_id"]) for v in vecs]
    cache = cache if cache is not None else _vectors.VectorCache(index.dims)
    vector_scores = cache.score_documents(query_vector, vecs, index.similarity)
    # The texts in scope are the whole corpus when the scope is everything (documents
    # without a text are not in a $search index).
    corpus = [v[r.TEXT_PATH] for v in vecs if isinstance(v.get(r.TEXT_PATH), str)]
    if first_scope_is_narrow(op, index):
        # Atlas Search counts BM25's statistics over its whole index (every text of the
        # vectors collection), not over the scope: read them all, score only those in scope.
        docs = yield Find(
            "vectors", {r.TEXT_PATH: {"$exists": True}}, {"_id": 0, r.TEXT_PATH: 1}, batch_size=CORPUS_BATCH
        )
        corpus = [d[r.TEXT_PATH] for d in docs if isinstance(d.get(r.TEXT_PATH), str)]
    text_scores = r.lexical_scores(str(op.query), [str(v.get("text") or "") for v in vecs], corpus)
    fused = r.local_fusion(keys, vector_scores, text_scores, index.hybrid)
    valid = {d["_id"]: set(d.get("vectors") or ()) for d in items}
    best: dict[str, float] = {}
    for key, v in zip(keys, vecs, strict=True):
        if key in fused and v["text_hash"] in valid.get(v["item_id"], ()):
            iid = v["item_id"]
            best[iid] = max(best.get(iid, float("-inf")), fused[key])
    ranked: list[tuple[str, float | None]] = [
        (iid, score) for iid, score in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    # No valid vector at all (none listed, or none of the listed hashes has a vector
    # document): unscored, newest first, as on the Atlas path (queries.unscored_pipeline).
    backed = {v["item_id"] for v in vecs if v["text_hash"] in valid.get(v["item_id"], ())}
    unscored = newest_first([d for d in items if d["_id"] not in backed])
    ranked.extend((d["_id"], None) for d in unscored)
    page = ranked[op.offset : op.offset + op.limit]
    if not page:
        return []
    docs = yield Find("items", {"_id": {"$in": [iid for iid, _ in page]}}, {**ITEM_PROJECTION, "_id": 1})
    by_id = {d["_id"]: d for d in docs}
    return [(by_id[iid], score) for iid, score in page if iid in by_id]


# --------------------------------------------------------------------------- setup


def setup_checks(index: IndexSettings, caps: Capabilities) -> None:
    """Refuse, at ``setup()``, a mode this server cannot run (before any index is made)."""
    if not caps.vector_search:
        err = needs_atlas(index, caps.detail or caps.server_version)
        if err is not None:
            raise err
        return
    if index.rerank is not None and not _at_least(caps, RERANK_VERSION):
        raise ConfigurationError(
            f"reranking (index['rerank'], $rerank) needs MongoDB 8.3+ on Atlas; this server is {caps.server_version}"
        )
    if index.rerank is not None:
        # What setup() can check is above (search commands, the version when it is known); it
        # cannot see the Atlas project's Native Reranking setting, nor tell Atlas from a
        # self-managed 8.3 (which has no $rerank): the first reranked search reports either.
        logger.info(
            "reranking with %s: this server has search (MongoDB %s); whether $rerank runs (Atlas with Native "
            "Reranking enabled in the project) is not visible to setup(): the first reranked search reports it",
            index.rerank.model,
            caps.server_version,
        )


def create_vector_index(name: str, definition: dict[str, Any], index: IndexSettings) -> Plan:
    """``createSearchIndexes`` for the vector index, naming automated embedding when it fails."""
    try:
        yield CreateSearchIndex("vectors", name, definition)
    except OperationFailure as exc:
        if index.auto_embed is None:
            raise
        raise VectorIndexError(
            f"automated embedding (autoEmbed, model {index.auto_embed.model}) is not available on this server: "
            f"{exc}. It needs MongoDB Atlas, or MongoDB 8.3+ with mongot and Voyage AI keys"
        ) from exc


def auto_embed_change(name: str, existing: dict[str, Any], wanted: dict[str, Any]) -> VectorIndexError | None:
    """The error for an update that would change an automated-embedding field (None: it may run).

    mongot refuses, on Atlas and everywhere else, to update ``autoEmbed`` fields or to turn
    them into ``vector`` fields (``AutoEmbeddingIndexValidator``); filter fields may change.
    So say so before asking, and how to get the wanted definition.
    """

    def auto(defn: dict[str, Any]) -> list[Any]:
        return [f for f in defn.get("fields") or () if isinstance(f, dict) and f.get("type") == "autoEmbed"]

    before, after = auto(existing), auto(wanted)
    if not before:
        return None  # a vector index may become an automated-embedding one: the server says if not
    same = [(f.get("path"), f.get("model"), f.get("numDimensions")) for f in before] == [
        (f.get("path"), f.get("model"), f.get("numDimensions")) for f in after
    ]
    if same:
        return None
    return VectorIndexError(
        f"vector search index {name!r} would have to change its automated embedding (autoEmbed) field "
        f"({before or 'none'} -> {after or 'none'}); MongoDB never updates autoEmbed fields in place, on Atlas "
        f"or anywhere else: drop the index and let setup() create it again "
        f"(vectors_collection.drop_search_index({name!r}), then store.setup(); searches fail until it is built), "
        "or set index_name to a new name to build the new index next to the old one"
    )


def text_index_plan(index: IndexSettings, caps: Capabilities) -> Plan:
    """Create (or update) the hybrid mode's ``$search`` index.

    Returns ``(name, definition)`` for the caller to wait on (``setup_plan`` waits for
    ``READY`` on that definition, as for the vector index), or None when there is none.
    """
    hybrid = index.hybrid
    if hybrid is None:
        return None
    if not _at_least(caps, RANK_FUSION_VERSION):
        logger.info("no $rankFusion before MongoDB 8.0 (%s): hybrid searches fuse locally", caps.server_version)
        return None
    wanted = r.text_index_definition()
    yield EnsureCollection("vectors")
    existing = yield ListSearchIndexes("vectors", hybrid.index_name)
    if not existing:
        logger.info("creating search index %r for hybrid search", hybrid.index_name)
        yield CreateSearchIndex("vectors", hybrid.index_name, wanted, type="search")
    elif (existing[0].get("latestDefinition") or {}) != wanted:
        logger.info("updating search index %r (its mappings changed)", hybrid.index_name)
        yield UpdateSearchIndex("vectors", hybrid.index_name, wanted)
    return hybrid.index_name, wanted
