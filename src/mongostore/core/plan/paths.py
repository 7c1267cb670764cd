"""The search path of a semantic search (``search_path``): the reads it joins the batch's one ``Parallel`` with, and
its page from their answers, filled as InMemoryStore does (scored items best first, then the items with no valid
vector, newest first).

- ``ATLAS``: pages of the index's Atlas pipeline (``retrieval.atlas_pipeline``: plain
  ``$vectorSearch``, automated embedding, ``$rerank``, hybrid ``$rankFusion``);
- ``LOCAL``: exact ranking in the client, for servers without ``$vectorSearch``;
- ``FUSION``: the hybrid mode's exact local fusion, where ``$rankFusion`` is not.

Automated embedding and reranking need Atlas: elsewhere ``setup()`` and every search raise a ``ConfigurationError``
naming the feature. Adding a mode means its stages in ``retrieval.atlas_pipeline``, which servers run it here
(``path_for``) and its index in ``plan.setup``; the batch sees only this protocol.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Literal, Protocol

from langgraph.store.base import SearchOp
from pymongo.errors import OperationFailure

from mongostore.config import MAX_CANDIDATES, IndexSettings
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core import scoring
from mongostore.core import vectors as _vectors
from mongostore.core.codec import ITEM_PROJECTION, namespace_path
from mongostore.core.plan.context import LARGE_BATCH, BatchState, PendingSearch, Plan, PlanContext
from mongostore.core.plan.probe import is_index_unavailable, no_search_reason
from mongostore.core.steps import Aggregate, Capabilities, DisableVectorSearch, Find, Parallel, Probe, Step
from mongostore.errors import ConfigurationError, VectorIndexError

logger = logging.getLogger("mongostore")

VECTOR_PROJECTION = {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1}
PAGE_PROJECTION = {**ITEM_PROJECTION, "_id": 1}
RANK_FUSION_VERSION = (8, 0)
# A stage the server does not know (40324), a stage behind a disabled feature flag (224
# QueryFeatureNotAllowed: $rankFusion on builds with featureFlagRankFusion off), or an
# uncoded refusal from a server that only speaks the protocol.
UNRECOGNIZED_STAGE = 40324
QUERY_FEATURE_NOT_ALLOWED = 224
_REFUSALS_LOGGED: set[str] = set()  # only for logging: each refusal is warned about once per process


# A search's page: each item document with its score (None: an item without a valid vector).
Page = list[tuple[dict[str, Any], float | None]]


class SearchPath(Protocol):
    def needs_vector(self, state: BatchState) -> bool:
        """Do its reads need the query's vector (then they wait for the batch's embedding call)?"""
        ...

    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The reads this search joins the batch's reads with."""
        ...

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan[Page]:
        """The page, ``[(item document, score or None)]``, from the answers of ``reads``."""
        ...


def search_path(state: BatchState) -> SearchPath:
    """The path of the batch's semantic searches now (``$vectorSearch`` may have been refused
    since: the reads are then built again); an Atlas-only mode on a server without it raises."""
    index, caps = state.index, state.caps
    assert index is not None and caps is not None
    if path_for(index, caps, state.use_atlas) == "atlas":
        return ATLAS
    return FUSION if index.hybrid is not None else LOCAL


def fall_back(state: BatchState, exc: Exception) -> Plan[None]:
    """``$vectorSearch`` failed the reads: rank locally (``DisableVectorSearch``) or raise ``exc``."""
    index = state.index
    assert index is not None
    if state.caps is not None:  # a refused $rerank raises here
        caps = refused_stage(exc, index, state.caps)
        if caps is not None:  # $rankFusion refused: fuse locally, $vectorSearch stays on
            state.caps = caps
            return
    if is_index_unavailable(exc):
        why = f"vector search index {index.index_name!r} cannot serve queries yet ({exc})"
        if index.vector_search == "atlas":
            raise VectorIndexError(
                f"{why}; it is building: wait for setup() or use vector_search='auto' to rank locally meanwhile"
            ) from exc
        logger.warning("%s; ranking locally until it can", why)
        yield DisableVectorSearch(why, temporary=True, index_status="BUILDING")
    elif no_search_reason(exc, state.caps.emulated if state.caps else False) is not None:
        logger.warning("$vectorSearch is not available (%s); ranking locally from now on", exc)
        yield DisableVectorSearch(str(exc))
    else:
        raise exc
    state.use_atlas = False
    if index.stores_text:
        state.caps = yield Probe()  # its detail now says why (a mode may need to name it)


def refuse_off_atlas(index: IndexSettings, detail: str) -> None:
    """Raise for a mode that cannot run off Atlas (``detail``: why not here), naming the feature."""
    if index.auto_embed is not None:
        raise ConfigurationError(
            f"automated embedding (index['embed']='atlas:{index.auto_embed.model}') needs MongoDB Atlas "
            f"(or MongoDB 8.3+ with mongot and Voyage AI keys); this server cannot run it ({detail})"
        )
    if index.rerank is not None:
        raise ConfigurationError(
            f"reranking (index['rerank'], $rerank with {index.rerank.model}) needs MongoDB Atlas 8.3+ with "
            f"Native Reranking enabled; this server cannot run it ({detail})"
        )


@dataclasses.dataclass(frozen=True)
class NoRankFusion(Capabilities):
    """The server has ``$vectorSearch`` but refused ``$rankFusion`` (``refused_stage``):
    hybrid searches of this batch fuse locally; plain vector search stays on."""


def path_for(index: IndexSettings, caps: Capabilities, use_atlas: bool) -> Literal["atlas", "local"]:
    """``atlas`` or ``local`` for a search of this index; raises for Atlas-only modes."""
    if use_atlas:
        rank_fusion = not isinstance(caps, NoRankFusion) and caps.at_least(RANK_FUSION_VERSION)
        if index.hybrid is not None and not rank_fusion:
            if index.auto_embed is not None or index.rerank is not None:
                raise ConfigurationError(
                    f"index['hybrid'] with automated embedding or reranking needs $rankFusion (MongoDB 8.0+); "
                    f"this server is {caps.server_version} ({caps.detail})"
                )
            return "local"
        return "atlas"
    refuse_off_atlas(index, caps.detail or caps.server_version)
    return "local"


def refused_stage(exc: BaseException, index: IndexSettings, caps: Capabilities) -> Capabilities | None:
    """A search read failed: was it the server refusing ``$rerank`` or ``$rankFusion``?

    Read narrowly (issue 28): an unknown stage (40324), a feature-flagged one (224) or an uncoded refusal, naming the
    stage. ``$rankFusion``: the capabilities for this batch, hybrid searches fusing locally. ``$rerank``: raises.
    Neither switches off ``$vectorSearch``. None: not such a refusal (read as for any search).
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
        return NoRankFusion(**{**vars(caps), "detail": f"$rankFusion refused: {message}"})
    return None


def initial_k(op: SearchOp, index: IndexSettings) -> int:
    """Vectors to ask Atlas for: enough for the page when items have a few vectors each."""
    return min(MAX_CANDIDATES, max((op.offset + op.limit) * max(2, len(index.fields)), 10))


def _atlas_page(s: PendingSearch, ctx: PlanContext, index: IndexSettings, k: int) -> Step:
    pipeline = r.atlas_pipeline(s.op, index, ctx.items_name, ctx.expiry_cutoff, s.query_vector, k, ctx.now)
    return Aggregate("vectors", pipeline)


def _recency_may_reach(index: IndexSettings, facet: dict[str, Any], ranked: list[tuple[Any, float]]) -> bool:
    """With recency, could an item not among the hits still enter the page? Its similarity is at most the
    lowest hit's, its age part at most 1: ``(1 - W) * floor + W`` against the page's last blended score."""
    if index.recency is None or not facet["floor"] or not ranked:
        return False
    similarity = index.similarity if index.hybrid is None and index.rerank is None else None
    floor = q.similarity_of(float(facet["floor"][0]["s"]), similarity)
    ceiling = (1 - index.recency.weight) * floor + index.recency.weight
    return ranked[-1][1] < ceiling


class _Atlas:
    def needs_vector(self, state: BatchState) -> bool:
        return state.index is not None and state.index.auto_embed is None  # else Atlas embeds the query

    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        assert state.index is not None
        return [_atlas_page(s, state.ctx, state.index, initial_k(s.op, state.index))]

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan[Page]:
        """Page through Atlas's answers, each page entry with its item (``q.page_rows``).

        When a page comes back short while more candidates exist, ask again with four times
        more, unless the mode fixes the candidate set (fusion, reranking); with recency, also
        while an item beyond the hits could still blend into the page. Once every scored item
        was seen, the page is filled with the items that have no valid vector.

        Fewer hits than asked means every candidate was seen, except behind ``mongos``: there each
        shard's mongot answers its own top ``k`` and the shard's ``idLookup`` drops orphans (copies
        a chunk migration left behind) without topping up, so a short answer may hide more. There a
        short page asks again (four times more) until asking for more brings no more hits, or up to
        ``MAX_CANDIDATES``: one more aggregate when the candidates really are exhausted.
        """
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None
        fixed = index.hybrid is not None or index.rerank is not None
        sharded = state.caps is not None and state.caps.sharded
        k = initial_k(op, index)
        out = first[0]
        before = -1  # hits of the previous, smaller ask (behind mongos)
        while True:
            facet, docs = q.page_rows(out)
            hits = facet["hits"][0]["n"] if facet["hits"] else 0
            scored = facet["scored"][0]["n"] if facet["scored"] else 0
            ranked = [(d["_id"], float(d["score"])) for d in facet["page"]]
            exhausted = fixed or (hits < k and (not sharded or hits <= before or k >= MAX_CANDIDATES))
            full = len(ranked) >= op.limit and not _recency_may_reach(index, facet, ranked)
            if full or exhausted or k >= MAX_CANDIDATES:
                break
            before = hits
            k = min(MAX_CANDIDATES, k * 4)
            out = yield _atlas_page(s, ctx, index, k)
        page: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score in ranked if iid in docs]
        if len(page) < op.limit and exhausted:
            skip, limit = max(0, op.offset - scored), op.limit - len(page)
            vectors, cutoff = ctx.vectors_collection, ctx.expiry_cutoff
            tail = q.unscored_pipeline(op.namespace_prefix, op.filter, vectors, cutoff, skip, limit, ctx.ranges)
            page.extend((d, None) for d in (yield Aggregate("items", tail)))
        return page


class _Local:
    def needs_vector(self, state: BatchState) -> bool:
        return False  # the candidates are read as they are, ranked after the embedding call

    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The candidate items (ids and listed hashes only: each field costs decoding per item)
        and, unless the store's vector cache holds the prefix, every vector under it."""
        op, ctx = s.op, state.ctx
        filt = q.search_filter(op.namespace_prefix, op.filter, ctx.expiry_cutoff, ctx.ranges)
        fields = {"_id": 1, "vectors": 1}
        if state.index is not None and state.index.recency is not None:
            fields["updated_at"] = 1  # every candidate's age: the blend may raise any of them
        reads: list[Step] = [Find("items", filt, fields, batch_size=LARGE_BATCH)]
        if ctx.vector_cache is None or not ctx.vector_cache.covers(namespace_path(op.namespace_prefix)):
            under = q.vector_candidates_filter(op.namespace_prefix, ctx.expiry_cutoff, ctx.ranges)
            reads.append(Find("vectors", under, VECTOR_PROJECTION, batch_size=LARGE_BATCH))
        return reads

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan[Page]:
        """Exact ranking: every valid vector under the prefix, best per item, then unscored items.

        Vectors the cache lacks are fetched; the page's items are read with (same trip) a check
        that each scored one's best vector is still stored under its hash: a held row outlives
        a vector document removed behind the rule (a reindex racing a put, a delete by hand).
        """
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None and s.query_vector is not None
        cutoff = ctx.expiry_cutoff

        cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
        items = first[0]
        if len(first) > 1:
            cache.add_documents(first[1])
            cache.mark_loaded(namespace_path(op.namespace_prefix))
        offset, limit = op.offset, op.limit
        end = offset + limit

        def rank(gone: frozenset[tuple[str, str]] = frozenset()) -> _vectors.Ranking:
            """The best ``end`` items; with recency every scored item, blended with its age and sorted again."""
            recency = index.recency
            assert s.query_vector is not None and index is not None
            if recency is None:
                return cache.rank(s.query_vector, items, index.similarity, end, gone)
            ranking = cache.rank(s.query_vector, items, index.similarity, len(items), gone)
            rows = {row[0]: row for row in ranking.scored}
            updated = {d["_id"]: d.get("updated_at") for d in items}
            blended = scoring.by_recency(((iid, row[1]) for iid, row in rows.items()), updated, ctx.now, recency)
            scored = [(iid, score, rows[iid][2], rows[iid][3]) for iid, score in blended[:end]]
            return dataclasses.replace(ranking, scored=scored)

        ranking = rank()
        if ranking.missing:
            missing = q.all_of([{"item_id": {"$in": ranking.missing}}, q.not_expired(cutoff)])
            cache.add_documents((yield Find("vectors", missing, VECTOR_PROJECTION, batch_size=LARGE_BATCH)))
            ranking = rank()
        gone: frozenset[tuple[str, str]] = frozenset()
        while True:
            page = ranking.scored[offset:end]
            held = [(iid, h) for iid, _, _, h in page]
            reads: list[Step] = []
            if page:
                ids = [iid for iid, _ in held]
                reads.append(Find("items", {"_id": {"$in": ids}}, PAGE_PROJECTION))
                held_filter = {"item_id": {"$in": ids}, "text_hash": {"$in": [h for _, h in held]}}
                check = q.all_of([held_filter, q.not_expired(cutoff)])
                reads.append(Find("vectors", check, {"_id": 0, "item_id": 1, "text_hash": 1}))
            if len(page) < limit and ranking.n_unscored:
                # Newest first, as the Atlas path's: items listing no hash, and those whose hashes
                # have no vector (``ranking.absent``: a failed vector write, a vector removed by hand).
                unscored: dict[str, Any] = {"vectors.0": {"$exists": False}}
                if ranking.absent:
                    unscored = {"$or": [unscored, {"_id": {"$in": ranking.absent}}]}
                filt = q.all_of([q.search_filter(op.namespace_prefix, op.filter, cutoff, ctx.ranges), unscored])
                skip = max(0, offset - ranking.n_scored)
                reads.append(Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, skip, limit - len(page)))
            if not reads:
                return []
            answers = list((yield Parallel(tuple(reads))))
            stored = {(d["item_id"], d["text_hash"]) for d in (answers[1] if page else [])}
            lost = [pair for pair in held if pair not in stored]
            if not lost:
                break
            # Held rows outlived their vector documents: drop them; their items rank again without them.
            cache.drop(lost)
            gone = gone | frozenset(lost)
            ranking = rank(gone)
        docs = {d["_id"]: d for d in answers[0]} if page else {}
        out: list[tuple[dict[str, Any], float | None]] = [(docs[i], score) for i, score, _, _ in page if i in docs]
        if len(page) < limit and ranking.n_unscored:
            out.extend((d, None) for d in answers[-1])
        return out


class _Fusion:
    def needs_vector(self, state: BatchState) -> bool:
        return False

    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The candidate items, and the texts in scope: those the Atlas rankings see (the prefix and the pre-filterable
        conditions), expired or stale ones included (they are dropped after)."""
        op, ctx = s.op, state.ctx
        assert state.index is not None
        scope, _ = q.vector_prefilter(op.namespace_prefix, op.filter, state.index.filter_fields)
        if ctx.ranges:  # behind mongos: only the prefix's shards
            scope = q.all_of([q.shard_range_filter(op.namespace_prefix, "vectors"), scope])
        items = q.search_filter(op.namespace_prefix, op.filter, ctx.expiry_cutoff, ctx.ranges)
        return [
            Find("items", items, {"_id": 1, "vectors": 1, "updated_at": 1}),
            Find("vectors", scope, {**VECTOR_PROJECTION, "_id": 1, r.TEXT_PATH: 1}),
        ]

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan[Page]:
        """Both rankings over the texts in scope, fused (``retrieval.local_fusion``), best per
        item; the vectors are scored by the store's ``VectorCache``, as on the local path."""
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None and index.hybrid is not None and s.query_vector is not None
        items, vecs = first
        keys = [str(v["_id"]) for v in vecs]
        cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
        vector_scores = cache.score_documents(s.query_vector, vecs, index.similarity)
        # BM25's statistics come from the texts in scope (documents without a text are not in a
        # $search index): Atlas Search counts them over its whole index, which would cost a read of
        # every text of the store per search (issue 34); docs/decisions.md says where rankings differ.
        corpus = [v[r.TEXT_PATH] for v in vecs if isinstance(v.get(r.TEXT_PATH), str)]
        text_scores = r.lexical_scores(str(op.query), [str(v.get(r.TEXT_PATH) or "") for v in vecs], corpus)
        fused = r.local_fusion(keys, vector_scores, text_scores, index.hybrid)
        valid = {d["_id"]: set(d.get("vectors") or ()) for d in items}
        best: dict[str, float] = {}
        for key, v in zip(keys, vecs, strict=True):
            if key in fused and v["text_hash"] in valid.get(v["item_id"], ()):
                best[v["item_id"]] = max(best.get(v["item_id"], float("-inf")), fused[key])
        # No valid vector at all (none listed, or none of the listed hashes has a vector
        # document): unscored, newest first, as on the Atlas path (queries.unscored_pipeline).
        backed = {v["item_id"] for v in vecs if v["text_hash"] in valid.get(v["item_id"], ())}
        unscored = _vectors.newest_first([d for d in items if d["_id"] not in backed])
        if index.recency is not None:
            updated = {d["_id"]: d.get("updated_at") for d in items}
            fused_order = scoring.by_recency(best.items(), updated, ctx.now, index.recency)
        else:
            fused_order = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
        ranked = [*fused_order, *((d["_id"], None) for d in unscored)]
        page = ranked[op.offset : op.offset + op.limit]
        if not page:
            return []
        docs = yield Find("items", {"_id": {"$in": [iid for iid, _ in page]}}, PAGE_PROJECTION)
        by_id = {d["_id"]: d for d in docs}
        return [(by_id[iid], score) for iid, score in page if iid in by_id]


ATLAS: SearchPath = _Atlas()
LOCAL: SearchPath = _Local()
FUSION: SearchPath = _Fusion()
