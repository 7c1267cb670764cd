"""The batch plan: a LangGraph batch as a short sequence of phases, each a function that leaves
its answers in the ``BatchState`` (what each does: docs/architecture.md, "The phases of a batch")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
from langgraph.store.base import GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchOp

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core.codec import ITEM_PROJECTION, doc_to_item, doc_to_search_item, extract_texts, item_id, text_hash
from mongostore.core.plan.context import LARGE_BATCH, BatchState, PendingPut, PendingSearch, Plan, PlanContext
from mongostore.core.plan.paths import fall_back, path_for, search_path
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes
from mongostore.core.steps import (
    Aggregate,
    Distinct,
    Embed,
    Find,
    Parallel,
    Probe,
    Step,
    Write,
    WriteOutcome,
)
from mongostore.errors import WriteError

logger = logging.getLogger("mongostore")

# (request index, item id, field, text hash, vector): what the vector cache learns once written.
Cached = list[tuple[int, str, str, str, Any]]


@dataclass
class BatchOutcome:
    """Every op's result, and what of the write failed: ``failures`` (namespace, key) -> the server's
    message, ``stored`` those whose value landed (only their vectors failed), ``write_error`` what the
    whole write raised (network, write concern: the reads are answered, the writes unknown)."""

    results: list[Result]
    failures: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)
    stored: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    write_error: Exception | None = None
    refreshing: set[int] = field(default_factory=set)  # positions of reads whose TTL refresh was written
    items_matched: int = 0  # items the write updated or inserted (a compare-and-set's answer)

    def error_for(self, pos: int, op: Op) -> Exception | None:
        """The exception the caller of op ``pos`` must see, or None: a whole write's error concerns
        the puts and the reads whose refresh it held; a rejected item, its put only."""
        if self.write_error is not None and (isinstance(op, PutOp) or pos in self.refreshing):
            return self.write_error
        if not isinstance(op, PutOp):
            return None
        target = (op.namespace, op.key)
        if target in self.failures:
            return WriteError([(*target, self.failures[target])], self.stored & {target})
        return None

    def raise_any(self) -> None:
        if self.write_error is not None:
            raise self.write_error
        if self.failures:
            raise WriteError([(ns, key, msg) for (ns, key), msg in self.failures.items()], self.stored)


def batch_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan[list[Result]]:
    """Run a LangGraph batch: results in op order, reads before writes, puts deduped."""
    outcome: BatchOutcome = yield from batch_outcome_plan(ops, ctx)
    outcome.raise_any()
    return outcome.results


def batch_outcome_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan[BatchOutcome]:
    """``batch_plan``, but a failed write is reported per op in a ``BatchOutcome``, not raised."""
    state = validate_phase(ops, ctx)
    yield from probe_phase(state)
    yield from read_phase(state)
    yield from embed_phase(state)
    yield from search_read_phase(state)
    yield from rank_phase(state)
    outcome: BatchOutcome = yield from write_phase(state)
    return outcome


def validate_phase(ops: Sequence[Op], ctx: PlanContext) -> BatchState:
    """Check every op (``check_op``) before any I/O, and group them by kind. The last put of an item
    wins, in its place (puts are written in op order); its texts are found and sized then."""
    checked = [check_op(op) for op in ops]
    last = {(op.namespace, op.key): pos for pos, op in enumerate(checked) if isinstance(op, PutOp)}
    state = BatchState(ctx, [None] * len(checked))
    for pos, op in enumerate(checked):
        if isinstance(op, GetOp):
            state.gets.append((pos, op))
        elif isinstance(op, SearchOp):
            state.searches.append(PendingSearch(pos, op, semantic=bool(op.query) and ctx.index is not None))
            if op.limit == 0:
                state.results[pos] = []  # asks nothing
        elif isinstance(op, ListNamespacesOp):
            state.listings.append((pos, op))
            if op.limit == 0:
                state.results[pos] = []
        elif isinstance(op, PutOp) and last[op.namespace, op.key] == pos:
            value = cast("dict[str, Any] | None", op.value)  # check_op's checked copy (in a SizedPut), or None
            texts: dict[str, tuple[str, str]] = {}
            if isinstance(op, SizedPut) and value is not None and ctx.index is not None:
                if op.texts is not None and op.texts[0] is ctx.index:  # found by AsyncMongoStore.aput
                    texts = op.texts[1]
                else:
                    texts = indexed_texts(op.namespace, op.key, value, op.index, ctx.index, op.item_bytes)
            state.puts[op.namespace, op.key] = PendingPut(op.namespace, op.key, value, op.ttl, texts)
    return state


def indexed_texts(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    fields: list[str] | bool | None,
    index: IndexSettings,
    item_bytes: int,
) -> dict[str, tuple[str, str]]:
    """A put's ``{field: (text, text hash)}``, with the item's and its vectors' sizes checked
    (the hashes are stored on the item): a put too big fails here, before any I/O."""
    if fields is False:
        return {}
    tokenized = index.tokenized(tuple(fields) if isinstance(fields, list) else None)
    texts = {fname: (text, text_hash(fname, text)) for fname, text in extract_texts(value, tokenized).items()}
    check_sizes(namespace, key, value, [h for _, h in texts.values()], list(texts), index, item_bytes)
    return texts


def embed_texts(texts: tuple[str, ...], index: IndexSettings) -> Plan[dict[str, Any]]:
    """One embedding call, its answer checked before anything is written; returns ``{text: vector}``,
    each as the embedder gave it (puts pack it straight to float32, queries take plain floats)."""
    embedded = yield Embed(texts)
    if len(embedded) != len(texts):
        raise ValueError(f"the embedder returned {len(embedded)} vectors for {len(texts)} texts")
    for vec in embedded:
        if len(vec) != index.dims:
            raise ValueError(f"the embedder returned {len(vec)} dimensions; index['dims'] is {index.dims}")
    return dict(zip(texts, embedded, strict=True))


def probe_phase(state: BatchState) -> Plan[None]:
    """For semantic searches: the search path (one ``Probe``); an Atlas-only mode fails here, before any read."""
    index = state.index
    if not state.semantic or index is None:
        return None
    caps = yield Probe(index.index_name)
    state.caps, state.use_atlas = caps, caps.vector_search
    path_for(index, caps, state.use_atlas)
    return None


@dataclass
class Read:
    """One read of a batch and what takes its answer: each consumer gets its own answer, whatever the
    other reads of the ``Parallel`` it joined."""

    step: Step
    take: Callable[[Any], None]


def read_phase(state: BatchState) -> Plan[None]:
    """Every read of the batch that needs no query vector, in one ``Parallel`` step, each answer handed to
    its reader. When ``$vectorSearch`` refuses, the store ranks locally from then on and the reads are
    asked again."""
    yield from _read_all(state, lambda: batch_reads(state))


def search_read_phase(state: BatchState) -> Plan[None]:
    """The reads that need their query's vector (``$vectorSearch`` pages), in one ``Parallel`` step after
    the batch's one embedding call; when ``$vectorSearch`` refuses, those searches rank locally."""
    waiting = [s for s in state.semantic if s.path is None]
    yield from _read_all(state, lambda: [r for s in waiting for r in _search_reads(state, s, deferred=False)])


def _read_all(state: BatchState, build: Callable[[], list[Read]]) -> Plan[None]:
    while True:
        reads = build()
        if not reads:
            return None
        try:
            answers = yield Parallel(tuple(r.step for r in reads))
            break
        except Exception as exc:
            if not state.use_atlas:
                raise
            yield from fall_back(state, exc)
    for read, answer in zip(reads, answers, strict=True):
        read.take(answer)
    return None


def batch_reads(state: BatchState) -> list[Read]:
    """Every read of a batch that needs no query vector (gets, searches, listings, the puts' stored
    hashes), each with its consumer."""
    ctx = state.ctx
    cutoff = ctx.expiry_cutoff
    reads: list[Read] = []
    if state.gets:
        ids = list(dict.fromkeys(item_id(op.namespace, str(op.key)) for _, op in state.gets))
        filt = q.all_of([{"_id": {"$in": ids}}, q.not_expired(cutoff)])
        reads.append(Read(Find("items", filt, {**ITEM_PROJECTION, "_id": 1}, batch_size=len(ids)), _gets(state)))
    for s in state.searches:
        if s.op.limit == 0:
            continue  # answered [] by validate_phase
        if s.semantic:
            reads += _search_reads(state, s, deferred=True)
            continue
        filt = q.search_filter(s.op.namespace_prefix, s.op.filter, cutoff, ctx.ranges)
        reads.append(Read(Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, s.op.offset, s.op.limit), _page(state, s)))
    for pos, lop in state.listings:
        if lop.limit == 0:
            continue
        if ctx.distinct_paths:
            step: Step = Distinct("items", "path", q.namespace_paths_filter(lop.match_conditions, cutoff))
        else:
            step = Aggregate(
                "items",
                q.list_namespaces_pipeline(
                    lop.match_conditions, lop.max_depth, cutoff, lop.offset, lop.limit, sharded=ctx.ranges
                ),
            )
        reads.append(Read(step, _listing(state, pos, lop)))
    if ctx.index is not None and state.puts:
        filt = {"item_id": {"$in": [p.id for p in state.puts.values()]}}
        # The embeddings too: a put rewrites each vector it lists, unchanged ones with their stored embedding.
        projection = dict.fromkeys(("_id", "item_id", "text_hash"), 1)
        if ctx.index.auto_embed is None:
            projection["embedding"] = 1
        reads.append(Read(Find("vectors", filt, projection, batch_size=LARGE_BATCH), _stored(state)))
    return reads


def _search_reads(state: BatchState, s: PendingSearch, deferred: bool) -> list[Read]:
    """A semantic search's first reads, by its path (chosen now, ``plan.paths``), each answer appended to
    ``s.first`` in the order asked; none yet (``deferred``) when they need the query's vector."""
    path = search_path(state)
    if deferred and path.needs_vector(state):
        s.path = None  # asked after the embedding call: ``search_read_phase``
        return []
    s.path, s.first = path, []
    return [Read(step, s.first.append) for step in path.reads(s, state)]


def _gets(state: BatchState) -> Callable[[list[dict[str, Any]]], None]:
    def take(docs: list[dict[str, Any]]) -> None:
        by_id = {doc["_id"]: doc for doc in docs}
        for pos, gop in state.gets:
            found = by_id.get(item_id(gop.namespace, gop.key))
            state.results[pos] = doc_to_item(found) if found else None
            state.note_refresh(pos, [found] if found else [], gop.refresh_ttl)

    return take


def _page(state: BatchState, s: PendingSearch) -> Callable[[list[dict[str, Any]]], None]:
    def take(docs: list[dict[str, Any]]) -> None:
        state.results[s.pos] = [doc_to_search_item(d) for d in docs]
        state.note_refresh(s.pos, docs, s.op.refresh_ttl)

    return take


def _listing(state: BatchState, pos: int, lop: ListNamespacesOp) -> Callable[[Any], None]:
    def take(found: Any) -> None:
        if state.ctx.distinct_paths:
            state.results[pos] = q.namespaces_page(found, lop.max_depth, lop.offset, lop.limit)
        else:
            state.results[pos] = [tuple(d["_id"]) for d in found]

    return take


def _stored(state: BatchState) -> Callable[[list[dict[str, Any]]], None]:
    def take(docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            state.stored.setdefault(doc["item_id"], {})[doc["text_hash"]] = doc

    return take


def embed_phase(state: BatchState) -> Plan[None]:
    """The batch's one ``Embed`` call: its semantic searches' queries and its puts' texts not stored under
    the same hash, together (none with automated embedding: Atlas embeds queries and stored texts)."""
    index = state.index
    if index is None or index.auto_embed is not None:
        return None
    queries = [str(s.op.query) for s in state.semantic]
    to_embed: dict[str, None] = dict.fromkeys(queries)
    changed: dict[str, None] = {}
    for p in state.puts.values():
        old = state.stored.get(p.id, {})
        for text, h in p.texts.values():
            if old.get(h, {}).get("embedding") is None:
                changed.setdefault(text)
    to_embed.update(changed)
    if not to_embed:
        return None
    embedded = yield from embed_texts(tuple(to_embed), index)
    for s in state.semantic:
        s.query_vector = np.asarray(embedded[str(s.op.query)], dtype=np.float64).tolist()  # plain floats
    state.packed = {text: q.float32_vector(embedded[text]) for text in changed}
    return None


def rank_phase(state: BatchState) -> Plan[None]:
    """Rank and page each semantic search by its search path."""
    for s in state.semantic:
        docs_scores = yield from s.path.rank(s, state, s.first)
        state.results[s.pos] = [doc_to_search_item(d, score) for d, score in docs_scores]
        state.note_refresh(s.pos, [d for d, _ in docs_scores], s.op.refresh_ttl)
    return None


def write_phase(state: BatchState) -> Plan[BatchOutcome]:
    """One ``Write``: TTL refreshes, then vectors, then items; returns the ``BatchOutcome`` (a failed
    write is reported in it). The time is read now, after the embedding call; each put gets its own
    millisecond, the last put "now", so newest-first lists a batch in op order.

    Items and vectors stay in step under any interleaving of writers (docs/decisions.md, issue 34):
    a put lists only hashes whose whole vector documents this write (re)writes, and removes only
    vector documents not written for ``VECTOR_GRACE``."""
    if not state.puts and not state.refresh:  # reads only: nothing to write
        return BatchOutcome(state.results)
    now = state.ctx.clock()
    put_ids = {p.id for p in state.puts.values()}
    refresh = {iid: ttl for iid, ttl in state.refresh.items() if iid not in put_ids}  # a put is rewritten
    by_ttl: dict[float, list[str]] = {}
    for iid, ttl in refresh.items():
        by_ttl.setdefault(ttl, []).append(iid)
    requests = q.refresh_ttl_requests("items", by_ttl, now)
    if state.index is not None:
        requests += q.refresh_ttl_requests("vectors", by_ttl, now, id_field="item_id")
    cached = _put_requests(state, now, requests)
    if state.ctx.ranges:  # vector writes carry their shard key, item_id (same order, same length)
        requests = q.targeted_writes(requests)
    outcome = BatchOutcome(state.results, refreshing={pos for iid in refresh for pos in state.refreshers[iid]})
    if not requests:
        return outcome
    try:
        written: WriteOutcome = yield Write(tuple(requests))
    except Exception as exc:
        outcome.write_error = exc
        return outcome
    _record(state, outcome, requests, written, cached)
    return outcome


def _put_requests(state: BatchState, now: datetime, requests: list[q.WriteRequest]) -> Cached:
    """Append the puts' and deletes' vector writes, then their item writes, to ``requests``;
    returns the new vectors for the store's vector cache once their writes land."""
    index, cache = state.index, state.ctx.vector_cache
    item_requests: list[q.WriteRequest] = []
    cached: Cached = []
    ms = timedelta(milliseconds=1)
    at = now - ms * len(state.puts)
    for p in state.puts.values():
        at += ms
        if p.value is None:
            if cache is not None:
                cache.forget(p.id)
            reqs = q.delete_item_requests(p.namespace, p.key, index is not None, now)
            requests.extend(r for r in reqs if r.role == "vectors")
            item_requests.extend(r for r in reqs if r.role == "items")
            continue
        hashes = _vector_requests(state, p, at, requests, cached) if index is not None else None
        item_requests.append(q.put_item_request(p.namespace, p.key, p.value, at, p.ttl, hashes, p.id, p.revision))
    requests.extend(item_requests)
    return cached


def _vector_requests(
    state: BatchState, p: PendingPut, now: datetime, requests: list[q.WriteRequest], cached: Cached
) -> list[str]:
    """Append one put's vector writes (every text's whole document: new ones embedded now, unchanged
    ones with their stored embedding, under their stored ``_id``) and the removal of its other vectors
    that no write in flight can list; return its hashes."""
    index = state.index
    assert index is not None and p.value is not None
    old = state.stored.get(p.id, {})
    filter_values = q.filter_field_values(p.value, index.filter_fields)
    hashes: list[str] = []
    for fname, (text, h) in p.texts.items():
        hashes.append(h)
        stored = old.get(h, {})
        vec = None  # automated embedding: Atlas embeds the stored text
        if index.auto_embed is None:
            vec = stored.get("embedding")
            if vec is None:
                vec = state.packed[text]
                cached.append((len(requests), p.id, fname, h, vec))
        stored_text = text if index.stores_text else None
        requests.append(
            q.put_vector_request(
                p.namespace,
                p.key,
                fname,
                h,
                vec,
                filter_values,
                now,
                p.ttl,
                p.id,
                stored_text,
                vid=stored.get("_id", ""),
            )
        )
    if old.keys() - set(hashes):
        requests.append(q.stale_vectors_request(p.namespace, p.key, hashes, now))
    return hashes


def _record(
    state: BatchState, outcome: BatchOutcome, requests: list[q.WriteRequest], written: WriteOutcome, cached: Cached
) -> None:
    """What the write's answer means: the vector cache learns what landed, failures are noted per item."""
    outcome.items_matched = written.items_matched
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


def put_if_unchanged_plan(op: PutOp, expected: q.Revision, ctx: PlanContext) -> Plan[bool]:
    """``put_if_unchanged``: write ``op`` only if the stored item is still ``expected`` (``ABSENT``: there is
    none). The item and its stored hashes are read first: a stale ``expected`` costs that read and no
    embedding call or write. Then the put's usual write, its item write conditional (``put_item_request``):
    of callers expecting one version, the first write wins and the others match nothing (or, creating,
    meet a duplicate key). A loser of that race may leave the vectors of its new texts, which no item
    lists (the sweep removes them, issue 34)."""
    state = validate_phase([GetOp(op.namespace, op.key, refresh_ttl=False), op], ctx)
    yield from read_phase(state)
    current = state.results[0]
    found = q.Revision(current.created_at, current.updated_at) if isinstance(current, Item) else q.ABSENT
    if found != expected:
        return False
    pending = state.puts[op.namespace, op.key]
    pending.revision = expected
    yield from embed_phase(state)
    outcome: BatchOutcome = yield from write_phase(state)
    if outcome.write_error is not None:
        raise outcome.write_error
    failure = outcome.failures.get((op.namespace, op.key))
    if failure is not None:
        if expected is q.ABSENT and "E11000" in failure:  # created by another caller meanwhile
            return False
        outcome.raise_any()
    return outcome.items_matched > 0
