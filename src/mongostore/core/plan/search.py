"""Semantic search plans: exact local ranking, and ``$vectorSearch`` pages on Atlas.

Both fill a page the way InMemoryStore does: scored items best first, then items that
have no valid vector, newest first. The batch reads the first answers (the local path's
candidates, the first Atlas page) with its other reads; these plans finish the page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from langgraph.store.base import SearchOp

from mongostore.config import IndexSettings
from mongostore.core import kept
from mongostore.core import queries as q
from mongostore.core import vectors as _vectors
from mongostore.core.codec import ITEM_PROJECTION, namespace_path, stored_instant, vector_id
from mongostore.core.plan.context import LARGE_BATCH, Plan, PlanContext
from mongostore.core.plan.state import PendingSearch
from mongostore.core.queries import unscored_pipeline
from mongostore.core.steps import Aggregate, Find, Parallel, Step

MAX_CANDIDATES = 10_000


VECTOR_PROJECTION = {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1}


def candidates_key(op: SearchOp) -> str:
    """What a local search's candidates depend on besides the data: its prefix and filter."""
    return repr(q.search_filter(op.namespace_prefix, op.filter, None))


def local_candidate_reads(
    op: SearchOp,
    cutoff: datetime | None,
    with_vectors: bool = True,
    only: list[str] | None = None,
    compact: bool = False,
    sharded: bool = False,
) -> list[Step]:
    """The items under the prefix that pass the filter (ids, listed hashes, and the dates that
    order unscored items and end their life) and, unless the store's vector cache already
    holds the prefix, every vector under it. ``only``: just those of these items.

    ``compact`` (the candidates cross the wire: a server, or a recording double): the server
    projects each item to what pymongo decodes fastest, its one listed hash as a string
    rather than a one-element array and its dates as milliseconds (``$toLong``); ~3x less
    decoding per item, which is most of a warm local search at 100k vectors
    (``COMPACT_ITEM``). The embedded engine evaluates expressions in Python and decodes
    nothing, so it reads the stored fields as they are. ``sharded``: both reads carry the
    prefix's shard-key range (``queries.sharding``).
    """
    filt = q.search_filter(op.namespace_prefix, op.filter, cutoff, sharded)
    if only is not None:
        filt = {"$and": [{"_id": {"$in": only}}, filt]} if filt else {"_id": {"$in": only}}
    reads: list[Step]
    if compact:
        shape = {**COMPACT_ITEM, "expires_at": {"$toLong": "$expires_at"}} if cutoff is not None else COMPACT_ITEM
        reads = [Aggregate("items", [{"$match": filt}, {"$project": shape}], batch_size=LARGE_BATCH)]
    else:
        projection = {"_id": 1, "vectors": 1, "updated_at": 1}
        if cutoff is not None:
            projection["expires_at"] = 1
        reads = [Find("items", filt, projection, batch_size=LARGE_BATCH)]
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


# A candidate item as a server sends it (``local_candidate_reads(compact=True)``): ``vectors``
# is the one listed hash when there is one (the usual case), else the stored value; dates are
# milliseconds since the epoch (null when absent). ``VectorCache.candidates``,
# ``kept.newest_first`` and ``_earliest_expiry`` take either shape.
COMPACT_ITEM: dict[str, Any] = {
    "_id": 1,
    "vectors": {
        "$cond": [
            {"$isArray": "$vectors"},
            {"$cond": [{"$eq": [{"$size": "$vectors"}, 1]}, {"$arrayElemAt": ["$vectors", 0]}, "$vectors"]},
            "$vectors",
        ]
    },
    "updated_at": {"$toLong": "$updated_at"},
}


def local_search_plan(
    s: PendingSearch,
    index: IndexSettings,
    ctx: PlanContext,
    candidates: tuple[list[dict[str, Any]], list[dict[str, Any]] | None] | None,
) -> Plan:
    """Exact ranking: every valid vector under the prefix, best per item, then unscored items.

    A vector counts only while its item (filtered, unexpired) still lists its text hash.
    The store's ``VectorCache`` holds the embeddings; vectors it lacks are fetched first.
    ``candidates`` is None when the search recalled them (``s.recalled``) instead of reading,
    and only the changed items when it recalled them from before a write.
    """
    cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
    items: list[dict[str, Any]] | None = None
    kept = None
    if s.recalled is not None and s.recalled.cands is not None:
        kept = (s.recalled.cands, s.recalled.leftover)
    elif s.recalled is not None:  # kept, but some items changed since: map those, patch the rest
        kept = yield from _patch_candidates(cache, s, ctx, s.recalled, candidates)
    if kept is not None:
        cands, leftover = kept
    else:
        if s.recalled is not None:  # what was kept no longer holds: read every candidate
            [first] = yield Parallel(tuple(_item_reads(s, ctx)))
            candidates = (first, None)
        assert candidates is not None
        items = candidates[0]
        cands, leftover = yield from _map_candidates(cache, s, ctx, candidates)
    assert s.query_vector is not None
    while True:
        page = _local_page(cache, cands, leftover, s.query_vector, s.op, index.similarity)
        reads, held = _page_reads(page, cache, ctx.expiry_cutoff, ctx.sharded)
        answers = (yield Parallel(tuple(reads))) if page else [[], []]
        stored = {d["_id"]: d["text_hash"] for d in (answers[1] if held else [])}
        gone = {r for vid, r in held.items() if stored.get(vid) != cache.vector_of(r)[2]}
        if not gone:
            break
        # Held rows outlived their vector documents: drop them; their items count as unscored.
        cands = cache.drop_rows(cands, gone)
        if items is None:  # recalled candidates keep no items: read them after all
            [items] = yield Parallel(tuple(_item_reads(s, ctx)))
            cands = cache.candidates(items)
        leftover = _leftover(items, cands)
    docs = {d["_id"]: d for d in answers[0]}
    return [(docs[iid], score) for iid, score, _ in page if iid in docs]


def _item_reads(s: PendingSearch, ctx: PlanContext) -> list[Step]:
    """Every candidate item of ``s`` again, without the vectors."""
    return local_candidate_reads(s.op, ctx.expiry_cutoff, False, compact=s.compact_reads, sharded=ctx.sharded)


def _map_candidates(
    cache: _vectors.VectorCache,
    s: PendingSearch,
    ctx: PlanContext,
    candidates: tuple[list[dict[str, Any]], list[dict[str, Any]] | None],
) -> Plan:
    """The candidates read by the batch mapped onto the cache's rows (fetching the vectors it
    lacks), and the items without a row, newest first; kept for the next search (``remember``)
    when the driver gave the items' write version."""
    items, vecs = candidates
    if vecs is not None:
        cache.add_documents(vecs)
        cache.mark_loaded(namespace_path(s.op.namespace_prefix))
    cands = yield from _mapped(cache, ctx, items, fetch=vecs is None)
    leftover = _leftover(items, cands)
    if s.version is not None:
        cache.remember(candidates_key(s.op), s.version, cands, leftover, _earliest_expiry(items))
    return cands, leftover


def _mapped(cache: _vectors.VectorCache, ctx: PlanContext, items: list[dict[str, Any]], fetch: bool) -> Plan:
    """``items`` mapped onto the cache's rows, after fetching the vectors it lacks (``fetch``)."""
    cands = cache.candidates(items)
    if cands.missing and fetch:
        filt: dict[str, Any] = {"item_id": {"$in": cands.missing}}
        if ctx.expiry_cutoff is not None:
            filt = {"$and": [filt, q.not_expired(ctx.expiry_cutoff)]}
        cache.add_documents((yield Find("vectors", filt, VECTOR_PROJECTION, batch_size=LARGE_BATCH)))
        cands = cache.candidates(items)
    return cands


def _earliest_expiry(items: list[dict[str, Any]]) -> datetime | None:
    ends = [stored_instant(e) for d in items if isinstance(e := d.get("expires_at"), (datetime, int))]
    return min(ends) if ends else None


def _patch_candidates(
    cache: _vectors.VectorCache,
    s: PendingSearch,
    ctx: PlanContext,
    recalled: kept.Recall,
    candidates: Any,
) -> Plan:
    """Kept candidates brought up to date from the changed items the batch read (``candidates``:
    those of them that are candidates now); None when what was kept no longer holds."""
    changed_docs: list[dict[str, Any]] = candidates[0]
    fresh = yield from _mapped(cache, ctx, changed_docs, fetch=True)
    assert s.version is not None
    return cache.patch(
        candidates_key(s.op), recalled.since, s.version, recalled.changed, fresh, _earliest_expiry(changed_docs)
    )


def _leftover(items: list[dict[str, Any]], cands: kept.Candidates) -> list[dict[str, Any]]:
    """The candidates without a row, newest first (ties by id)."""
    without = np.ones(len(items), dtype=bool)
    without[cands.item_index] = False
    return kept.newest_first([items[i] for i in np.flatnonzero(without).tolist()])


Ranked = list[tuple[str, float | None, int | None]]  # (item id, score, row of its best vector)


def _local_page(
    cache: _vectors.VectorCache,
    cands: kept.Candidates,
    leftover: list[dict[str, Any]],
    query_vector: list[float],
    op: SearchOp,
    similarity: str,
) -> Ranked:
    """The page of a local search: the best-scored items, then the unscored ones.

    Items with no valid vector (``leftover``) come after every scored item, newest first:
    those with no vectors at all, and those whose listed hashes have no vector (a failed
    vector write, or a delete or sweep racing a re-put): unscored until their next put
    re-embeds them, as on the Atlas path (unscored_pipeline).
    """
    end = op.offset + op.limit
    ranked: Ranked = list(cache.rank(query_vector, cands, similarity, end))
    if len(ranked) < end:
        ranked.extend((d["_id"], None, None) for d in leftover)
    return ranked[op.offset : end]


def _page_reads(
    page: Ranked, cache: _vectors.VectorCache, cutoff: datetime | None, sharded: bool = False
) -> tuple[list[Step], dict[str, int]]:
    """The page's items, and (same trip) a check that each scored one's best vector is
    still stored under the hash its item lists: held rows outlive a failed write.

    Returns the reads and ``{vector id: row}`` of the vectors checked.
    """
    held = {vector_id(iid, cache.vector_of(r)[1]): r for iid, _, r in page if r is not None}
    page_ids = [iid for iid, _, _ in page]
    reads: list[Step] = [Find("items", {"_id": {"$in": page_ids}}, {**ITEM_PROJECTION, "_id": 1})]
    if held:
        scored = [iid for iid, _, r in page if r is not None]
        check: dict[str, Any] = q.held_vectors_filter(list(held), scored, sharded)
        if cutoff is not None:
            check = {"$and": [check, q.not_expired(cutoff)]}
        reads.append(Find("vectors", check, {"_id": 1, "text_hash": 1}))
    return reads, held


def initial_k(op: SearchOp, index: IndexSettings) -> int:
    """Vectors to ask for: enough for the page when items have a few vectors each."""
    return min(MAX_CANDIDATES, max((op.offset + op.limit) * max(2, len(index.fields)), 10))


def atlas_pipeline(s: PendingSearch, index: IndexSettings, ctx: PlanContext, k: int) -> list[dict[str, Any]]:
    assert s.query_vector is not None
    pre, post = q.vector_prefilter(s.op.namespace_prefix, s.op.filter, index.filter_fields)
    return q.vector_search_pipeline(
        index_name=index.index_name,
        query_vector=s.query_vector,
        num_candidates=min(MAX_CANDIDATES, max(k * index.candidate_factor, 100)),
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
    """Read a ``$vectorSearch`` page (the first one came with the batch's reads); when a
    page comes back short while more candidates exist, ask again with four times more."""
    op = s.op
    k = initial_k(op, index)
    out = first
    while True:
        # One row per page entry, each with its item (q.page_rows): no second trip for the items.
        facet, docs = q.page_rows(out)
        hits = facet["hits"][0]["n"] if facet["hits"] else 0
        scored = facet["scored"][0]["n"] if facet["scored"] else 0
        ranked = [(d["_id"], float(d["score"])) for d in facet["page"]]
        exhausted = hits < k
        if len(ranked) >= op.limit or exhausted or k >= MAX_CANDIDATES:
            break
        k = min(MAX_CANDIDATES, k * 4)
        out = yield Aggregate("vectors", atlas_pipeline(s, index, ctx, k))
    page: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score in ranked if iid in docs]
    if len(page) < op.limit and exhausted:
        # Every scored item was seen: fill the page with items that have no vectors
        # (index=False, no indexed field), newest first, as InMemoryStore does.
        skip = max(0, op.offset - scored)
        docs = yield Aggregate(
            "items",
            unscored_pipeline(
                op.namespace_prefix,
                op.filter,
                ctx.vectors_collection,
                ctx.expiry_cutoff,
                skip,
                op.limit - len(page),
                sharded=ctx.sharded,
            ),
        )
        page.extend((d, None) for d in docs)
    return page
