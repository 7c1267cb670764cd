"""The search path of a semantic search (``search_path``): the reads it joins the batch's
one ``Parallel`` with, and its page from their answers, filled as InMemoryStore does
(scored items best first, then the items with no valid vector, newest first).

- ``ATLAS``: pages of the index's Atlas pipeline (``retrieval.atlas_pipeline``: plain
  ``$vectorSearch``, automated embedding, ``$rerank``, hybrid ``$rankFusion``);
- ``LOCAL``: exact ranking in the client, for servers without ``$vectorSearch``;
- ``FUSION``: the hybrid mode's exact local fusion, where ``$rankFusion`` is not.

Adding a mode means its stages in ``retrieval.atlas_pipeline`` and its server checks in
``retrieval_plan``; the batch sees only this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol

from langgraph.store.base import SearchOp

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core import retrieval_plan as modes
from mongostore.core import vectors as _vectors
from mongostore.core.codec import ITEM_PROJECTION, namespace_path, vector_id
from mongostore.core.plan.context import LARGE_BATCH, Plan, PlanContext
from mongostore.core.plan.state import BatchState, PendingSearch
from mongostore.core.steps import Aggregate, Find, Parallel, Step

VECTOR_PROJECTION = {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1}
PAGE_PROJECTION = {**ITEM_PROJECTION, "_id": 1}


class SearchPath(Protocol):
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The reads this search joins the batch's reads with."""
        ...

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        """The page, ``[(item document, score or None)]``, from the answers of ``reads``."""
        ...


def search_path(state: BatchState) -> SearchPath:
    """The path of the batch's semantic searches now (``$vectorSearch`` may have been refused
    since: the reads are then built again); an Atlas-only mode on a server without it raises."""
    index = state.index
    if modes.uses_modes(index):
        assert index is not None and state.caps is not None
        if modes.path_for(index, state.caps, state.use_atlas) == "local":
            return FUSION
    return ATLAS if state.use_atlas else LOCAL


def initial_k(op: SearchOp, index: IndexSettings) -> int:
    """Vectors to ask Atlas for: enough for the page when items have a few vectors each."""
    return min(r.MAX_CANDIDATES, max((op.offset + op.limit) * max(2, len(index.fields)), 10))


def _atlas_page(s: PendingSearch, ctx: PlanContext, index: IndexSettings, k: int) -> Step:
    return Aggregate("vectors", r.atlas_pipeline(s.op, index, ctx.items_name, ctx.expiry_cutoff, s.query_vector, k))


class _Atlas:
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        assert state.index is not None
        return [_atlas_page(s, state.ctx, state.index, initial_k(s.op, state.index))]

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        """Page through Atlas's answers, each page entry with its item (``q.page_rows``).

        When a page comes back short while more candidates exist, ask again with four times
        more, unless the mode fixes the candidate set (fusion, reranking). Once every scored
        item was seen, the page is filled with the items that have no valid vector.
        """
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None
        fixed = index.hybrid is not None or index.rerank is not None
        k = initial_k(op, index)
        out = first[0]
        while True:
            facet, docs = q.page_rows(out)
            hits = facet["hits"][0]["n"] if facet["hits"] else 0
            scored = facet["scored"][0]["n"] if facet["scored"] else 0
            ranked = [(d["_id"], float(d["score"])) for d in facet["page"]]
            exhausted = fixed or hits < k
            if len(ranked) >= op.limit or exhausted or k >= r.MAX_CANDIDATES:
                break
            k = min(r.MAX_CANDIDATES, k * 4)
            out = yield _atlas_page(s, ctx, index, k)
        page: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score in ranked if iid in docs]
        if len(page) < op.limit and exhausted:
            skip, limit = max(0, op.offset - scored), op.limit - len(page)
            vectors, cutoff = ctx.vectors_collection, ctx.expiry_cutoff
            tail = q.unscored_pipeline(op.namespace_prefix, op.filter, vectors, cutoff, skip, limit, ctx.sharded)
            page.extend((d, None) for d in (yield Aggregate("items", tail)))
        return page


class _Local:
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The candidate items (ids and listed hashes only: each field costs decoding per item)
        and, unless the store's vector cache holds the prefix, every vector under it."""
        op, ctx = s.op, state.ctx
        filt = q.search_filter(op.namespace_prefix, op.filter, ctx.expiry_cutoff, ctx.sharded)
        reads: list[Step] = [Find("items", filt, {"_id": 1, "vectors": 1}, batch_size=LARGE_BATCH)]
        if ctx.vector_cache is None or not ctx.vector_cache.covers(namespace_path(op.namespace_prefix)):
            under = q.vector_candidates_filter(op.namespace_prefix, ctx.expiry_cutoff, ctx.sharded)
            reads.append(Find("vectors", under, VECTOR_PROJECTION, batch_size=LARGE_BATCH))
        return reads

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        """Exact ranking: every valid vector under the prefix, best per item, then unscored items.

        Vectors the cache lacks are fetched; the page's items are read with (same trip) a check
        that each scored one's best vector is still stored under its hash: a held row outlives
        a vector document that a failed write or a delete racing a re-put removed.
        """
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None and s.query_vector is not None
        cutoff = ctx.expiry_cutoff

        def live(filt: dict[str, Any]) -> dict[str, Any]:
            return filt if cutoff is None else {"$and": [filt, q.not_expired(cutoff)]}

        cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
        items = first[0]
        if len(first) > 1:
            cache.add_documents(first[1])
            cache.mark_loaded(namespace_path(op.namespace_prefix))
        offset, limit = op.offset, op.limit
        end = offset + limit
        ranking = cache.rank(s.query_vector, items, index.similarity, end)
        if ranking.missing:
            missing = live({"item_id": {"$in": ranking.missing}})
            cache.add_documents((yield Find("vectors", missing, VECTOR_PROJECTION, batch_size=LARGE_BATCH)))
            ranking = cache.rank(s.query_vector, items, index.similarity, end)
        gone: frozenset[tuple[str, str]] = frozenset()
        while True:
            page = ranking.scored[offset:end]
            held = {vector_id(iid, f): (iid, h) for iid, _, f, h in page}
            reads: list[Step] = []
            if page:
                reads.append(Find("items", {"_id": {"$in": [p[0] for p in page]}}, PAGE_PROJECTION))
                check = live(q.held_vectors_filter(list(held), [p[0] for p in held.values()], ctx.sharded))
                reads.append(Find("vectors", check, {"_id": 1, "text_hash": 1}))
            if len(page) < limit and ranking.n_unscored:
                # Newest first, as the Atlas path's: items listing no hash, and those whose hashes
                # have no vector (``ranking.absent``: a failed vector write, a delete racing a re-put).
                unscored: dict[str, Any] = {"vectors.0": {"$exists": False}}
                if ranking.absent:
                    unscored = {"$or": [unscored, {"_id": {"$in": ranking.absent}}]}
                base = q.search_filter(op.namespace_prefix, op.filter, cutoff, ctx.sharded)
                filt = {"$and": [base, unscored]} if base else unscored
                skip = max(0, offset - ranking.n_scored)
                reads.append(Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, skip, limit - len(page)))
            if not reads:
                return []
            answers = list((yield Parallel(tuple(reads))))
            stored = {d["_id"]: d["text_hash"] for d in (answers[1] if page else [])}
            lost = [pair for vid, pair in held.items() if stored.get(vid) != pair[1]]
            if not lost:
                break
            # Held rows outlived their vector documents: drop them; their items rank again without them.
            cache.drop(lost)
            gone = gone | frozenset(lost)
            ranking = cache.rank(s.query_vector, items, index.similarity, end, gone)
        docs = {d["_id"]: d for d in answers[0]} if page else {}
        out: list[tuple[dict[str, Any], float | None]] = [(docs[i], score) for i, score, _, _ in page if i in docs]
        if len(page) < limit and ranking.n_unscored:
            out.extend((d, None) for d in answers[-1])
        return out


class _Fusion:
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The candidate items, and the texts in scope: those the Atlas rankings see (the
        prefix and the pre-filterable conditions), expired or stale ones included (they are
        dropped after)."""
        op, cutoff = s.op, state.ctx.expiry_cutoff
        assert state.index is not None
        scope, _ = q.vector_prefilter(op.namespace_prefix, op.filter, state.index.filter_fields)
        items = q.search_filter(op.namespace_prefix, op.filter, cutoff)
        return [
            Find("items", items, {"_id": 1, "vectors": 1, "updated_at": 1}),
            Find("vectors", scope, {**VECTOR_PROJECTION, "_id": 1, r.TEXT_PATH: 1}),
        ]

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        """Both rankings over the texts in scope, fused (``retrieval.local_fusion``), best per
        item; the vectors are scored by the store's ``VectorCache``, as on the local path."""
        op, ctx, index = s.op, state.ctx, state.index
        assert index is not None and index.hybrid is not None and s.query_vector is not None
        items, vecs = first
        keys = [str(v["_id"]) for v in vecs]
        cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
        vector_scores = cache.score_documents(s.query_vector, vecs, index.similarity)
        # The texts in scope are the whole corpus when the scope is everything (documents
        # without a text are not in a $search index).
        corpus = [v[r.TEXT_PATH] for v in vecs if isinstance(v.get(r.TEXT_PATH), str)]
        if q.vector_prefilter(op.namespace_prefix, op.filter, index.filter_fields)[0]:
            # Atlas Search counts BM25's statistics over its whole index (every text of the
            # vectors collection), not over the scope: read them all, score only those in scope.
            everything = {r.TEXT_PATH: {"$exists": True}}
            docs = yield Find("vectors", everything, {"_id": 0, r.TEXT_PATH: 1}, batch_size=LARGE_BATCH)
            corpus = [d[r.TEXT_PATH] for d in docs if isinstance(d.get(r.TEXT_PATH), str)]
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
        ranked = [*sorted(best.items(), key=lambda kv: (-kv[1], kv[0])), *((d["_id"], None) for d in unscored)]
        page = ranked[op.offset : op.offset + op.limit]
        if not page:
            return []
        docs = yield Find("items", {"_id": {"$in": [iid for iid, _ in page]}}, PAGE_PROJECTION)
        by_id = {d["_id"]: d for d in docs}
        return [(by_id[iid], score) for iid, score in page if iid in by_id]


ATLAS: SearchPath = _Atlas()
LOCAL: SearchPath = _Local()
FUSION: SearchPath = _Fusion()
