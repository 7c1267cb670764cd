"""The batch plan: a LangGraph batch as a short sequence of named phases.

``batch_outcome_plan`` runs them in this order (DESIGN.md section 5), each a function
of its own that yields the steps it needs and leaves its answers in the ``BatchState``:

1. ``validate_phase``: every op checked and grouped, puts deduped (last wins); no I/O.
2. ``query_phase``: the search path (``Probe``) and the queries' vectors (one ``Embed``).
3. ``read_phase``: every read in one ``Parallel`` step, semantic searches included (so
   reads see the state before the batch); ``$vectorSearch`` refusing falls back to local.
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
from mongostore.core.plan.batch_reads import answer_phase, batch_reads
from mongostore.core.plan.batch_writes import write_phase
from mongostore.core.plan.context import Plan, PlanContext, embed_texts
from mongostore.core.plan.probe import is_index_unavailable, is_no_search_error
from mongostore.core.plan.state import BatchOutcome, BatchState, PendingPut, PendingSearch
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes
from mongostore.core.steps import DisableVectorSearch, Parallel, Probe
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
    yield from query_phase(state)
    answers = yield from read_phase(state)
    answer_phase(state, answers)
    yield from embed_phase(state)
    yield from rank_phase(state)
    outcome: BatchOutcome = yield from write_phase(state)
    return outcome


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
            found = op.texts if isinstance(op, SizedPut) else None
            texts = found[1] if found is not None and found[0] is ctx.index else None
            # Last wins, and takes the last op's place: a batch's puts are written in op order.
            state.puts.pop((op.namespace, op.key), None)
            state.puts[(op.namespace, op.key)] = PendingPut(
                op.namespace, op.key, cast("dict[str, Any] | None", value), op.index, op.ttl, size, texts
            )
    if ctx.index is not None:
        for p in state.put_list:
            if p.texts is not None:
                state.put_texts[p.id] = p.texts
            elif p.value is not None:
                state.put_texts[p.id] = indexed_texts(p.namespace, p.key, p.value, p.index, ctx.index, p.item_bytes)
    return state


def indexed_texts(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    fields: list[str] | bool | None,
    index: IndexSettings,
    item_bytes: int = -1,
) -> dict[str, tuple[str, str]]:
    """A put's ``{field: (text, text hash)}``, with the item's and its vectors' sizes checked
    (the hashes are stored on the item): a put too big fails here, before any I/O."""
    if fields is False:
        return {}
    tokenized = index.tokenized(tuple(fields) if isinstance(fields, list) else None)
    texts = {fname: (text, text_hash(fname, text)) for fname, text in extract_texts(value, tokenized).items()}
    check_sizes(namespace, key, value, [h for _, h in texts.values()], list(texts), index, item_bytes)
    return texts


def query_phase(state: BatchState) -> Plan:
    """For semantic searches: the search path (one ``Probe``) and the queries' vectors (one ``Embed``).

    Queries are embedded first, in one call: their searches can then join the batch's other reads.
    """
    semantic = state.semantic
    index = state.index
    queries: tuple[str, ...] = ()
    if semantic:
        assert index is not None
        caps = yield Probe(index.index_name)
        state.caps, state.use_atlas = caps, caps.vector_search
        if modes.uses_modes(index):
            modes.path_for(index, caps, state.use_atlas)  # an Atlas-only mode fails here, before any read
        if index.auto_embed is None:  # automated embedding: Atlas embeds the query text
            queries = tuple(str(s.op.query) for s in semantic)
    if not queries:
        return None
    assert index is not None
    vectors = yield from embed_texts(tuple(dict.fromkeys(queries)), index)
    for s in semantic:
        s.query_vector = np.asarray(vectors[str(s.op.query)], dtype=np.float64).tolist()  # plain floats
    return None


def read_phase(state: BatchState) -> Plan:
    """Every read of the batch in one ``Parallel`` step; returns the answers, last read first.

    When ``$vectorSearch`` refuses (no search on this server, or an index still in its
    first build), the store ranks locally from then on and the reads are asked again.
    """
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
    elif is_no_search_error(exc, state.caps.emulated if state.caps else False):
        logger.warning("$vectorSearch is not available (%s); ranking locally from now on", exc)
        yield DisableVectorSearch(str(exc))
    else:
        raise exc
    state.use_atlas = False
    if modes.uses_modes(index):
        state.caps = yield Probe()  # its detail now says why (a mode may need to name it)


def embed_phase(state: BatchState) -> Plan:
    """One ``Embed`` call for the puts' texts not stored under the same hash."""
    to_embed = put_texts_to_embed(state)
    if to_embed:
        assert state.index is not None
        embedded = yield from embed_texts(to_embed, state.index)
        state.packed = {text: q.float32_vector(vec) for text, vec in embedded.items()}
    return None


def put_texts_to_embed(state: BatchState) -> tuple[str, ...]:
    """The puts' texts (``validate_phase`` found them) not stored under the same hash."""
    index = state.index
    if index is None:
        return ()
    to_embed: dict[str, None] = {}
    for iid, texts in state.put_texts.items():
        old = state.stored.get(iid, {})
        for fname, (text, h) in texts.items():
            if old.get(fname) != h:
                to_embed.setdefault(text)
    if index.auto_embed is not None:
        return ()  # Atlas embeds the stored texts at index time
    return tuple(to_embed)


def rank_phase(state: BatchState) -> Plan:
    """Rank and page each semantic search; ask Atlas again when a page came back short."""
    for s in state.semantic:
        docs_scores = yield from s.path.rank(s, state, s.first)
        state.results[s.pos] = [doc_to_search_item(d, score) for d, score in docs_scores]
        state.note_refresh(
            [d for d, _ in docs_scores], s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]), s.pos
        )
    return None
