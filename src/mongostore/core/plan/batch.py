"""The batch plan: a LangGraph batch as a short sequence of named phases.

``batch_outcome_plan`` runs them in this order (DESIGN.md section 5), each a function
of its own that yields the steps it needs and leaves its answers in the ``BatchState``:

1. ``validate_phase``: every op checked and grouped, puts deduped (last wins); no I/O.
2. ``query_phase``: the search path (``Probe``) and the queries' vectors (one ``Embed``).
3. ``read_phase``: every read in one ``Parallel`` step, semantic searches included (so
   reads see the state before the batch); ``$vectorSearch`` refusing falls back to local;
   local searches whose candidates have not changed since an earlier search read none.
4. ``answer_phase``: the reads' answers become results (or first pages of semantic searches).
5. ``embed_phase``: the puts' new texts, one ``Embed`` call (sizes checked first).
6. ``rank_phase``: the semantic searches ranked and paged (local or Atlas).
7. ``write_phase``: one ``Write``: TTL refreshes, then vectors, then items.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core import retrieval_plan as modes
from mongostore.core.codec import doc_to_search_item, extract_texts, item_id, text_hash
from mongostore.core.plan import one_trip
from mongostore.core.plan.batch_reads import answer_phase, batch_reads
from mongostore.core.plan.batch_writes import learn_hashes, put_requests, record, refresh_requests, write_phase
from mongostore.core.plan.context import Plan, PlanContext, embed_texts
from mongostore.core.plan.probe import is_index_unavailable, is_no_search_error
from mongostore.core.plan.search import atlas_search_plan, candidates_key, local_search_plan
from mongostore.core.plan.state import BatchOutcome, BatchState, PendingPut, PendingSearch
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes
from mongostore.core.steps import Attempt, Attempted, DisableVectorSearch, Parallel, Probe, Version, Write, WriteOutcome
from mongostore.errors import VectorIndexError

logger = logging.getLogger("mongostore")


def batch_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan:
    """Run a LangGraph batch: results in op order, reads before writes, puts deduped."""
    outcome: BatchOutcome = yield from batch_outcome_plan(ops, ctx)
    outcome.raise_any()
    return outcome.results


def batch_outcome_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan:
    """``batch_plan``, but a failed write is reported per op in a ``BatchOutcome``, not raised."""
    state = validate_phase(ops, ctx)
    if one_trip.eligible(state):
        one: BatchOutcome = yield from one_trip_plan(state)
        return one
    yield from query_phase(state)
    answers = yield from read_phase(state)
    yield from answer_phase(state, answers)
    yield from embed_phase(state)
    yield from rank_phase(state)
    outcome: BatchOutcome = yield from write_phase(state)
    return outcome


def one_trip_plan(state: BatchState) -> Plan:
    """The batch in one round trip: its reads and writes sent at once (``one_trip.eligible``).

    The queries and the puts' changed texts are embedded first, in one call. Each of
    the reads, the write and the conditional retags (``one_trip``) is an ``Attempt``, so
    a failed read cannot hide whether the write beside it landed: the reads' callers get
    the read's error, the puts' callers their write's. ``$vectorSearch`` refusing falls
    back to local ranking and reads again, as in ``read_phase``.
    """
    yield from query_phase(state, with_puts=True)
    yield from _recall_candidates(state)
    reads = batch_reads(state)
    write_now = state.ctx.clock()
    requests: list[q.WriteRequest] = []
    checks: list[q.WriteRequest] = []
    cached = put_requests(state, write_now, requests, checks)
    steps = [Attempt(Write(tuple(requests)))]
    if checks:
        steps.append(Attempt(Write(tuple(checks))))
    if reads:
        steps.append(Attempt(Parallel(tuple(reads))))
    done: list[Attempted] = list((yield Parallel(tuple(steps))))
    outcome = BatchOutcome(state.results)
    if done[0].error is not None:
        outcome.write_error = done[0].error
        learn_hashes(state, outcome)
    else:
        record(state, outcome, requests, done[0].value, cached)
    if checks and (done[1].error is not None or done[1].value.matched < len(checks)):
        try:
            yield from one_trip.repair_plan(state, outcome, one_trip.checked_puts(state, checks), write_now)
        except Exception as exc:  # (the embedder): those puts' values landed, their vectors did not
            one_trip.vectors_failed(state, outcome, dict.fromkeys((r.item for r in checks), str(exc)))
    if reads:
        try:
            answers = yield from _one_trip_answers(state, done[-1])
            yield from answer_phase(state, answers)
            yield from rank_phase(state)
        except Exception as exc:
            outcome.read_error = exc
            return outcome
        yield from _refresh_after(state, outcome)
    return outcome


def _refresh_after(state: BatchState, outcome: BatchOutcome) -> Plan:
    """The TTL refreshes the reads asked for, known only from their answers: one more write,
    only when a read returned an item with a TTL (a failed refresh concerns those reads only)."""
    refreshes = refresh_requests(state, state.ctx.clock())
    if not refreshes:
        return None
    outcome.refreshing = {p for iid in state.refresh for p in state.refreshers[iid]}
    try:
        written: WriteOutcome = yield Write(tuple(refreshes))
    except Exception as exc:
        outcome.refresh_error = exc
        return None
    for _, msg in written.errors:
        logger.warning("a TTL refresh write failed: %s", msg)
    return None


def _one_trip_answers(state: BatchState, attempted: Attempted) -> Plan:
    """The answers of the reads sent with the writes (last read first), or read again locally."""
    if attempted.error is None:
        answers = list(attempted.value)
        answers.reverse()
        return answers
    if not state.use_atlas:
        raise attempted.error
    yield from _fall_back_to_local(state, attempted.error)
    again: list[Any] = yield from read_phase(state)
    return again


def validate_phase(ops: Sequence[Op], ctx: PlanContext) -> BatchState:
    """Check every op (``check_op``) before any I/O, and group them by kind."""
    checked = [check_op(op) for op in ops]
    results: list[Result] = [None] * len(checked)
    state = BatchState(ctx, results)
    for pos, op in enumerate(checked):
        if isinstance(op, GetOp):
            state.gets.append((pos, op))
        elif isinstance(op, SearchOp):
            state.searches.append(PendingSearch(pos, op, semantic=bool(op.query) and ctx.index is not None))
        elif isinstance(op, ListNamespacesOp):
            state.listings.append((pos, op))
        elif isinstance(op, PutOp):
            # check_op gives a put with a value as a SizedPut, whose value is already a copy.
            value = op.value if isinstance(op, SizedPut) or op.value is None else dict(op.value)
            size = op.item_bytes if isinstance(op, SizedPut) else -1
            # Last wins, and takes the last op's place: a batch's puts are written in op order.
            state.puts.pop((op.namespace, op.key), None)
            state.puts[(op.namespace, op.key)] = PendingPut(
                op.namespace, op.key, cast("dict[str, Any] | None", value), op.index, op.ttl, size
            )
    return state


def query_phase(state: BatchState, with_puts: bool = False) -> Plan:
    """For semantic searches: the search path (one ``Probe``) and the queries' vectors (one ``Embed``).

    Queries are embedded first, in one call: their searches can then join the batch's other reads.
    ``with_puts``: the puts' new texts go in the same call (their stored hashes are known
    already: ``plan.one_trip``), so the writes can join the reads too.
    """
    semantic = state.semantic
    index = state.index
    queries: tuple[str, ...] = ()
    if semantic:
        assert index is not None
        caps = yield Probe(index.index_name)
        state.caps, state.use_atlas, state.fake = caps, caps.vector_search, caps.fake
        if modes.uses_modes(index):
            modes.path_for(index, caps, state.use_atlas)  # an Atlas-only mode fails here, before any read
        if index.auto_embed is None:  # automated embedding: Atlas embeds the query text
            queries = tuple(str(s.op.query) for s in semantic)
    new_texts = put_texts_to_embed(state) if with_puts else ()
    if not queries and not new_texts:
        return None
    assert index is not None
    vectors = yield from embed_texts(tuple(dict.fromkeys((*queries, *new_texts))), index)
    for s in semantic if queries else ():
        s.query_vector = np.asarray(vectors[str(s.op.query)], dtype=np.float64).tolist()  # plain floats
    state.packed = {text: q.float32_vector(vectors[text]) for text in new_texts}
    return None


def read_phase(state: BatchState) -> Plan:
    """Every read of the batch in one ``Parallel`` step; returns the answers, last read first.

    When ``$vectorSearch`` refuses (no search on this server, or an index still in its
    first build), the store ranks locally from then on and the reads are asked again.
    """
    yield from _recall_candidates(state)
    while True:
        reads = batch_reads(state)
        try:
            answers: list[Any] = list((yield Parallel(tuple(reads)))) if reads else []
            break
        except Exception as exc:
            if not state.use_atlas:
                raise
            yield from _fall_back_to_local(state, exc)
    answers.reverse()  # consumed (popped) in the order the reads were added
    return answers


def _recall_candidates(state: BatchState) -> Plan:
    """Local semantic searches whose candidates an earlier search kept: they read none when
    nothing changed since, and only the changed items after a write.

    The write states of both collections (``Version``: no I/O, and None on a server, where
    every search reads its candidates), read before the candidates so that any write after
    them makes what is kept stale (``VectorCache.recall``). Vectors count too: an item whose
    listed vector was missing is unscored only until that vector lands.
    """
    cache = state.ctx.vector_cache
    index = state.index
    if cache is None or index is None or not state.fake or state.use_atlas or modes.uses_modes(index):
        return None  # (only the mongomock family can tell its write versions)
    local = [s for s in state.semantic if s.op.limit > 0]
    if not local:
        return None
    keys = {s.pos: candidates_key(s.op) for s in local}
    kept = [v for v in (cache.kept_since(k) for k in keys.values()) if v is not None]
    items, vectors = yield Parallel((Version("items", min(kept) if kept else None), Version("vectors")))
    version = None if items is None or vectors is None else (items[0], vectors[0])
    for s in local:
        s.version = version
        s.recalled = cache.recall(keys[s.pos], items, vectors, state.ctx.expiry_cutoff)
    return None


def _fall_back_to_local(state: BatchState, exc: Exception) -> Plan:
    """``$vectorSearch`` failed the reads: rank locally (``DisableVectorSearch``) or raise ``exc``."""
    index = state.index
    assert index is not None
    if modes.uses_modes(index) and state.caps is not None:  # a refused $rerank raises here
        caps = modes.refused_stage(exc, index, state.caps)
        if caps is not None:  # $rankFusion refused: fuse locally, $vectorSearch stays on
            state.caps = caps
            return
    if is_index_unavailable(exc):
        # The index is still in its first build (or failed it): mongot refuses queries.
        why = f"vector search index {index.index_name!r} cannot serve queries yet ({exc})"
        if index.vector_search == "atlas":
            raise VectorIndexError(
                f"{why}; it is building: wait for setup() or use vector_search='auto' to rank locally meanwhile"
            ) from exc
        logger.warning("%s; ranking locally until it can", why)
        yield DisableVectorSearch(why, temporary=True, index_status="BUILDING")
    elif is_no_search_error(exc, state.fake):
        logger.warning("$vectorSearch is not available (%s); ranking locally from now on", exc)
        yield DisableVectorSearch(str(exc))
    else:
        raise exc
    state.use_atlas = False
    if modes.uses_modes(index):
        state.caps = yield Probe()  # its detail now says why (a mode may need to name it)


def embed_phase(state: BatchState) -> Plan:
    """The puts' texts (sizes checked), and one ``Embed`` call for those not stored under the same hash."""
    to_embed = put_texts_to_embed(state)
    if to_embed:
        assert state.index is not None
        embedded = yield from embed_texts(to_embed, state.index)
        state.packed = {text: q.float32_vector(vec) for text, vec in embedded.items()}
    return None


def put_texts_to_embed(state: BatchState) -> tuple[str, ...]:
    """Fill ``state.put_texts`` (sizes checked); return the texts not stored under the same hash."""
    index = state.index
    if index is None:
        return ()
    to_embed: dict[str, None] = {}
    for p in state.put_list:
        if p.value is None:
            continue
        texts = {fname: (text, text_hash(fname, text)) for fname, text in _texts_for(p, index).items()}
        state.put_texts[p.id] = texts
        check_sizes(p.namespace, p.key, p.value, [h for _, h in texts.values()], list(texts), index, p.item_bytes)
        old = state.stored.get(p.id, {})
        for fname, (text, h) in texts.items():
            if old.get(fname) != h:
                to_embed.setdefault(text)
    if index.auto_embed is not None:
        return ()  # Atlas embeds the stored texts at index time
    return tuple(to_embed)


def rank_phase(state: BatchState) -> Plan:
    """Rank and page each semantic search; ask Atlas again when a page came back short."""
    index, ctx = state.index, state.ctx
    for s in state.semantic:
        assert index is not None
        first: Any = state.first_answers.get(s.pos)  # None: a local search that recalled its candidates
        if modes.uses_modes(index):
            assert state.caps is not None
            path = modes.path_for(index, state.caps, state.use_atlas)
            docs_scores = yield from modes.search_plan(
                s.op, index, ctx.items_name, ctx.expiry_cutoff, s.query_vector, path, first, ctx.vectors_collection
            )
        elif state.use_atlas:
            docs_scores = yield from atlas_search_plan(s, index, ctx, first)
        else:
            docs_scores = yield from local_search_plan(s, index, ctx, first)
        state.results[s.pos] = [doc_to_search_item(d, score) for d, score in docs_scores]
        state.note_refresh(
            [d for d, _ in docs_scores], s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]), s.pos
        )
    return None


def _texts_for(put: PendingPut, index: IndexSettings) -> dict[str, str]:
    if put.value is None or put.index is False:
        return {}
    fields = tuple(put.index) if isinstance(put.index, list) else None
    return extract_texts(put.value, index.tokenized(fields))
