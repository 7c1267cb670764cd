"""A batch's reads: the steps of ``read_phase`` and, in ``answer_phase``, what their answers mean.

``batch_reads`` lists the reads in a fixed order (gets, searches, listings, the puts'
stored vectors); ``answer_phase`` pops the answers in that same order.
"""

from __future__ import annotations

from typing import Any

from mongostore.core import queries as q
from mongostore.core.codec import ITEM_PROJECTION, doc_to_item, doc_to_search_item, item_id
from mongostore.core.plan.context import LARGE_BATCH
from mongostore.core.plan.paths import search_path
from mongostore.core.plan.state import BatchState
from mongostore.core.steps import Aggregate, Find, Step


def batch_reads(state: BatchState) -> list[Step]:
    """Every read of a batch, in the order ``answer_phase`` consumes the answers."""
    ctx = state.ctx
    cutoff = ctx.expiry_cutoff
    reads: list[Step] = []
    if state.gets:
        ids = list(dict.fromkeys(item_id(op.namespace, str(op.key)) for _, op in state.gets))
        filt: dict[str, Any] = {"_id": {"$in": ids}}
        if cutoff is not None:
            filt = {"$and": [filt, q.not_expired(cutoff)]}
        reads.append(Find("items", filt, {**ITEM_PROJECTION, "_id": 1}, batch_size=len(ids)))
    for s in state.searches:
        if s.op.limit == 0:
            continue
        if not s.semantic:
            filt = q.search_filter(s.op.namespace_prefix, s.op.filter, cutoff, ctx.sharded)
            reads.append(Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, s.op.offset, s.op.limit))
        else:  # semantic: its path, chosen once for the batch's reads (``plan.paths``)
            s.path = search_path(state)
            first = s.path.reads(s, state)
            s.n_reads = len(first)
            reads.extend(first)
    for _, lop in state.listings:
        if lop.limit == 0:
            continue
        pipeline = q.list_namespaces_pipeline(
            lop.match_conditions, lop.max_depth, cutoff, lop.offset, lop.limit, sharded=ctx.sharded
        )
        reads.append(Aggregate("items", pipeline))
    if ctx.index is not None and state.puts:
        reads.append(
            Find(
                "vectors",
                {"item_id": {"$in": [p.id for p in state.put_list]}},
                {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1},
                batch_size=LARGE_BATCH,
            )
        )
    return reads


def answer_phase(state: BatchState, answers: list[Any]) -> None:
    """The reads' answers (last read first, from ``read_phase``) as results, first pages and stored hashes."""
    _answer_gets(state, answers)
    _answer_searches(state, answers)
    _answer_listings(state, answers)
    if state.index is not None and state.puts:
        for doc in answers.pop():
            state.stored.setdefault(doc["item_id"], {})[doc["field"]] = doc["text_hash"]


def _answer_gets(state: BatchState, answers: list[Any]) -> None:
    if not state.gets:
        return
    by_id = {doc["_id"]: doc for doc in answers.pop()}
    for pos, gop in state.gets:
        found = by_id.get(item_id(gop.namespace, gop.key))
        state.results[pos] = doc_to_item(found) if found else None
        if found:
            state.note_refresh([found], gop.refresh_ttl, lambda d: d["_id"], pos)


def _answer_searches(state: BatchState, answers: list[Any]) -> None:
    """Plain searches get their results; semantic ones their first answers, for ``rank_phase``."""
    for s in state.searches:
        if s.op.limit == 0:
            state.results[s.pos] = []
        elif not s.semantic:
            docs = answers.pop()
            state.results[s.pos] = [doc_to_search_item(d) for d in docs]
            state.note_refresh(docs, s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]), s.pos)
        else:
            s.first = [answers.pop() for _ in range(s.n_reads)]


def _answer_listings(state: BatchState, answers: list[Any]) -> None:
    for pos, lop in state.listings:
        state.results[pos] = [] if lop.limit == 0 else [tuple(d["_id"]) for d in answers.pop()]
