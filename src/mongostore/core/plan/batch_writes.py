"""A batch's one write (``write_phase``): TTL refreshes, then vectors, then items, and what failed."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from mongostore.core import queries as q
from mongostore.core import retrieval as _retrieval
from mongostore.core.plan.context import Plan
from mongostore.core.plan.state import BatchOutcome, BatchState, PendingPut
from mongostore.core.steps import Write, WriteOutcome

logger = logging.getLogger("mongostore")

# (request index, item id, field, text hash, vector): what the vector cache learns once written.
Cached = list[tuple[int, str, str, str, Any]]


def write_phase(state: BatchState) -> Plan:
    """One ``Write`` for the whole batch; returns its ``BatchOutcome`` (a failed write is reported, not raised).

    The write time is read now, after the reads and the embedding call. Each put gets
    its own millisecond, the last put "now", so newest-first lists a batch in op order.
    """
    write_now = state.ctx.clock()
    requests = refresh_requests(state, write_now)
    cached = put_requests(state, write_now, requests)
    if state.ctx.sharded:  # vector writes carry their shard key, item_id (same order, same length)
        requests = q.targeted_writes(requests)
    outcome = BatchOutcome(state.results, refreshing={p for iid in state.refresh for p in state.refreshers[iid]})
    if not requests:
        return outcome
    try:
        written: WriteOutcome = yield Write(tuple(requests))
    except Exception as exc:
        outcome.write_error = exc
        return outcome
    record(state, outcome, requests, written, cached)
    return outcome


def refresh_requests(state: BatchState, write_now: datetime) -> list[q.WriteRequest]:
    """The TTL refreshes the reads asked for, minus the items this batch puts (``state.refresh`` is cut to them)."""
    put_ids = {p.id for p in state.put_list}
    state.refresh = {iid: ttl for iid, ttl in state.refresh.items() if iid not in put_ids}
    requests: list[q.WriteRequest] = []
    if state.refresh:
        by_ttl: dict[float, list[str]] = {}
        for iid, ttl in state.refresh.items():
            by_ttl.setdefault(ttl, []).append(iid)
        requests.extend(q.refresh_ttl_requests("items", by_ttl, write_now))
        if state.index is not None:
            requests.extend(q.refresh_ttl_requests("vectors", by_ttl, write_now, id_field="item_id"))
    return requests


def put_requests(state: BatchState, write_now: datetime, requests: list[q.WriteRequest]) -> Cached:
    """Append the puts' and deletes' vector writes, then their item writes, to ``requests``.

    Returns the new vectors to add to the store's vector cache once their writes land.
    """
    index, ctx = state.index, state.ctx
    put_list = state.put_list
    item_requests: list[q.WriteRequest] = []
    cached: Cached = []
    ms = timedelta(milliseconds=1)
    now = write_now - ms * len(put_list)
    for p in put_list:
        now += ms
        if p.value is None:
            if ctx.vector_cache is not None:
                ctx.vector_cache.forget(p.id)
            reqs = q.delete_item_requests(p.namespace, p.key, with_vectors=index is not None)
            requests.extend(r for r in reqs if r.role == "vectors")
            item_requests.extend(r for r in reqs if r.role == "items")
            continue
        hashes = _vector_requests(state, p, now, requests, cached) if index is not None else None
        item_requests.append(q.put_item_request(p.namespace, p.key, p.value, now, p.ttl, hashes, p.id))
    requests.extend(item_requests)
    return cached


def _vector_requests(
    state: BatchState,
    p: PendingPut,
    now: datetime,
    requests: list[q.WriteRequest],
    cached: Cached,
) -> list[str]:
    """Append one put's vector writes (new texts, pruned fields, retagged unchanged ones); return its hashes."""
    index = state.index
    assert index is not None and p.value is not None
    texts = state.put_texts.get(p.id, {})
    old = state.stored.get(p.id, {})
    filter_values = q.filter_field_values(p.value, index.filter_fields)
    hashes: list[str] = []
    unchanged = False
    for fname, (text, h) in texts.items():
        hashes.append(h)
        if old.get(fname) == h:
            unchanged = True
            continue
        if index.auto_embed is not None:
            req = q.put_vector_request(p.namespace, p.key, fname, h, [], filter_values, now, p.ttl, p.id)
            req = _retrieval.auto_vector_request(req, text)
        else:
            vec = state.packed[text]
            cached.append((len(requests), p.id, fname, h, vec))
            req = q.put_vector_request(p.namespace, p.key, fname, h, vec, filter_values, now, p.ttl, p.id)
            if index.stores_text:
                req = _retrieval.with_text(req, text)
        requests.append(req)
    if old and not texts.keys() >= old.keys():
        requests.append(q.prune_vectors_request(p.namespace, p.key, list(texts)))
    if unchanged:
        requests.append(q.retag_vectors_request(p.namespace, p.key, filter_values, now, p.ttl))
    return hashes


def record(
    state: BatchState, outcome: BatchOutcome, requests: list[q.WriteRequest], written: WriteOutcome, cached: Cached
) -> None:
    """What the write's answer means: the vector cache learns what landed, failures are noted per item."""
    cache = state.ctx.vector_cache
    if cache is not None and cache.in_use and cached:  # (Atlas-only stores: no)
        failed = {idx for idx, _ in written.errors}
        cache.add_many([(iid, f, h, vec) for idx, iid, f, h, vec in cached if idx not in failed])
    item_failed: set[tuple[tuple[str, ...], str]] = set()
    for idx, msg in sorted(written.errors):
        req = requests[idx]
        if req.item is None:
            logger.warning("a TTL refresh write failed: %s", msg)
            continue
        outcome.failures.setdefault(req.item, msg)
        if req.role == "items":
            item_failed.add(req.item)
    # A put whose item write landed and only whose vector write failed: its value is
    # stored, listing hashes with no vectors (unscored until their next put re-embeds).
    outcome.stored = {t for t in outcome.failures if t not in item_failed and state.puts[t].value is not None}
