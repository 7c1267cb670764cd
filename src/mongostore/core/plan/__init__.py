"""Batch, setup, probe, sweep and status plans: generators that yield steps, no I/O.

A plan yields ``steps`` objects, receives their answers, and returns its result.
The drivers (``mongostore.drivers``: ``run_sync`` / ``run_async``) are the only code
that talks to MongoDB or to the embedder, so each store operation is written once
here and runs unchanged in ``MongoStore`` and ``AsyncMongoStore``.

The modules: ``context`` (``Plan``, ``PlanContext``), ``validate`` (op checks),
``state`` (what a batch's phases share, ``BatchOutcome``), ``batch`` (the batch plan
as named phases) with ``batch_reads`` and ``batch_writes``, ``paths`` (local and
Atlas semantic search), ``probe`` (server and search probes, no-search detection),
``setup`` (indexes, index waits) and ``status`` (status, sweep, aggregate).
Import from here: ``from mongostore.core.plan import batch_plan``.
"""

from __future__ import annotations

from mongostore.core.plan.batch import (
    batch_outcome_plan,
    batch_plan,
    embed_phase,
    indexed_texts,
    query_phase,
    rank_phase,
    read_phase,
    validate_phase,
)
from mongostore.core.plan.batch_reads import answer_phase, batch_reads
from mongostore.core.plan.batch_writes import put_requests, refresh_requests, write_phase
from mongostore.core.plan.context import LARGE_BATCH, Plan, PlanContext, embed_texts, write_clock
from mongostore.core.plan.paths import VECTOR_PROJECTION
from mongostore.core.plan.probe import (
    CLIENT_BULK_WRITE_WIRE_VERSION,
    FAKE_SERVER,
    NO_SEARCH_CODES,
    TRUSTED_EMPTY_LIST_VERSION,
    is_index_unavailable,
    is_no_search_error,
    search_probe_plan,
    server_probe_plan,
)
from mongostore.core.plan.setup import INDEX_ALREADY_EXISTS, setup_plan, shard_plan
from mongostore.core.plan.state import BatchOutcome, BatchState, PendingPut, PendingSearch
from mongostore.core.plan.status import aggregate_plan, status_plan, sweep_plan
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes, check_ttl, normalize_op
from mongostore.core.queries import missing_vectors_pipeline, unscored_pipeline
from mongostore.core.retrieval import MAX_CANDIDATES

__all__ = [
    "CLIENT_BULK_WRITE_WIRE_VERSION",
    "FAKE_SERVER",
    "INDEX_ALREADY_EXISTS",
    "LARGE_BATCH",
    "MAX_CANDIDATES",
    "NO_SEARCH_CODES",
    "TRUSTED_EMPTY_LIST_VERSION",
    "VECTOR_PROJECTION",
    "BatchOutcome",
    "BatchState",
    "PendingPut",
    "PendingSearch",
    "Plan",
    "PlanContext",
    "SizedPut",
    "aggregate_plan",
    "answer_phase",
    "batch_outcome_plan",
    "batch_plan",
    "batch_reads",
    "check_op",
    "check_sizes",
    "check_ttl",
    "embed_phase",
    "embed_texts",
    "indexed_texts",
    "is_index_unavailable",
    "is_no_search_error",
    "missing_vectors_pipeline",
    "normalize_op",
    "put_requests",
    "query_phase",
    "rank_phase",
    "read_phase",
    "refresh_requests",
    "search_probe_plan",
    "server_probe_plan",
    "setup_plan",
    "shard_plan",
    "status_plan",
    "sweep_plan",
    "unscored_pipeline",
    "validate_phase",
    "write_clock",
    "write_phase",
]
