"""Semantic search plans: exact local ranking, and ``$vectorSearch`` pages on Atlas.

Both fill a page the way InMemoryStore does: scored items best first, then items that
have no valid vector, newest first. The batch reads the first answers (the local path's
candidates, the first Atlas page) with its other reads; these plans finish the page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langgraph.store.base import SearchOp

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core import vectors as _vectors
from mongostore.core.codec import ITEM_PROJECTION, namespace_path, vector_id
from mongostore.core.paging import atlas_paging_plan, initial_k, num_candidates
from mongostore.core.plan.context import LARGE_BATCH, Plan, PlanContext
from mongostore.core.plan.state import PendingSearch
from mongostore.core.queries import unscored_pipeline
from mongostore.core.steps import Aggregate, Find, Parallel, Step

VECTOR_PROJECTION = {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1}


def local_candidate_reads(
    op: SearchOp, cutoff: datetime | None, with_vectors: bool = True, sharded: bool = False
) -> list[Step]:
    """The items under the prefix that pass the filter (ids and listed hashes: the least a
    candidate needs, as each field costs decoding per item) and, unless the store's vector
    cache already holds the prefix, every vector under it. ``sharded``: both reads carry the prefix's shard-key range
    (``queries.sharding``)."""
    filt = q.search_filter(op.namespace_prefix, op.filter, cutoff, sharded)
    reads: list[Step] = [Find("items", filt, {"_id": 1, "vectors": 1}, batch_size=LARGE_BATCH)]
    if with_vectors:
        reads.append(
            Find(
                "vectors",
                q.vector_candidates_filter(op.namespace_prefix, cutoff, sharded),
                VECTOR_PROJECTION,
                batch_size=LARGE_BATCH,
            )
        )
    return reads


def local_search_plan(
    s: PendingSearch,
    index: IndexSettings,
    ctx: PlanContext,
    candidates: tuple[list[dict[str, Any]], list[dict[str, Any]] | None],
) -> Plan:
    """Exact ranking: every valid vector under the prefix, best per item, then unscored items.

    ``candidates``: the batch's read of the candidate items, and of every vector under the
    prefix when the store's ``VectorCache`` did not hold it yet. Vectors the cache lacks are
    fetched, then the page's items are read with (same trip) a check that each scored one's
    best vector is still stored under its hash: a held row outlives a vector document that a
    failed write or a delete racing a re-put removed.
    """
    cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
    items, vecs = candidates
    if vecs is not None:
        cache.add_documents(vecs)
        cache.mark_loaded(namespace_path(s.op.namespace_prefix))
    assert s.query_vector is not None
    end = s.op.offset + s.op.limit
    ranking = cache.rank(s.query_vector, items, index.similarity, end)
    if ranking.missing:
        filt: dict[str, Any] = {"item_id": {"$in": ranking.missing}}
        if ctx.expiry_cutoff is not None:
            filt = {"$and": [filt, q.not_expired(ctx.expiry_cutoff)]}
        cache.add_documents((yield Find("vectors", filt, VECTOR_PROJECTION, batch_size=LARGE_BATCH)))
        ranking = cache.rank(s.query_vector, items, index.similarity, end, frozenset())
    gone: frozenset[tuple[str, str]] = frozenset()
    offset, limit = s.op.offset, s.op.limit
    while True:
        page = ranking.scored[offset:end]
        held = {vector_id(iid, f): (iid, h) for iid, _, f, h in page}
        reads: list[Step] = []
        if page:
            reads.append(Find("items", {"_id": {"$in": [p[0] for p in page]}}, {**ITEM_PROJECTION, "_id": 1}))
            check: dict[str, Any] = q.held_vectors_filter(list(held), [p[0] for p in held.values()], ctx.sharded)
            if ctx.expiry_cutoff is not None:
                check = {"$and": [check, q.not_expired(ctx.expiry_cutoff)]}
            reads.append(Find("vectors", check, {"_id": 1, "text_hash": 1}))
        if len(page) < limit and ranking.n_unscored:
            reads.append(_unscored_read(s.op, ctx, ranking, max(0, offset - ranking.n_scored), limit - len(page)))
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
    out: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score, _, _ in page if iid in docs]
    if len(page) < limit and ranking.n_unscored:
        out.extend((d, None) for d in answers[-1])
    return out


def _unscored_read(op: SearchOp, ctx: PlanContext, ranking: _vectors.Ranking, skip: int, limit: int) -> Step:
    """The page's unscored candidates, newest first (as a plain search orders them, and the
    Atlas path's ``unscored_pipeline``): those listing no hash, and those whose listed hashes
    have no vector (``ranking.absent``: a failed vector write, a delete racing a re-put)."""
    none_listed: dict[str, Any] = {"vectors.0": {"$exists": False}}
    unscored = {"$or": [none_listed, {"_id": {"$in": ranking.absent}}]} if ranking.absent else none_listed
    base = q.search_filter(op.namespace_prefix, op.filter, ctx.expiry_cutoff, ctx.sharded)
    filt = {"$and": [base, unscored]} if base else unscored
    return Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, skip, limit)


def atlas_pipeline(s: PendingSearch, index: IndexSettings, ctx: PlanContext, k: int) -> list[dict[str, Any]]:
    assert s.query_vector is not None
    pre, post = q.vector_prefilter(s.op.namespace_prefix, s.op.filter, index.filter_fields)
    return q.vector_search_pipeline(
        index_name=index.index_name,
        query_vector=s.query_vector,
        num_candidates=num_candidates(k, index),
        k=k,
        pre_filter=pre,
        post_filter=post,
        items_collection=ctx.items_name,
        similarity=index.similarity,
        offset=s.op.offset,
        limit=s.op.limit,
        now=ctx.expiry_cutoff,
    )


def atlas_search_plan(s: PendingSearch, index: IndexSettings, ctx: PlanContext, first: list[dict[str, Any]]) -> Plan:
    """A ``$vectorSearch`` page (the first one came with the batch's reads): ``atlas_paging_plan``."""
    op = s.op

    def unscored(skip: int, limit: int) -> Step:
        pipeline = unscored_pipeline(
            op.namespace_prefix, op.filter, ctx.vectors_collection, ctx.expiry_cutoff, skip, limit, sharded=ctx.sharded
        )
        return Aggregate("items", pipeline)

    more = lambda k: Aggregate("vectors", atlas_pipeline(s, index, ctx, k))  # noqa: E731
    return (yield from atlas_paging_plan(op, first, initial_k(op, index), more, float, False, unscored))
