"""Batch, setup, sweep and status plans: generators that yield steps, no I/O.

A plan yields ``_steps`` objects, receives their answers, and returns its result.
The drivers (``_drivers.run_sync`` / ``run_async``) are the only code that talks
to MongoDB or to the embedder, so each store operation is written once here and
runs unchanged in ``MongoStore`` and ``AsyncMongoStore``.

Batch order (DESIGN.md section 5): validate everything; embed the queries (one
call); all reads in one ``Parallel`` step, semantic searches included (so reads
see the state before the batch); embed the puts' new texts (one call); finish the
semantic pages; then one ``Write`` with TTL refreshes, vector writes and item writes.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import bson
import numpy as np
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    validate_op_namespace,
)
from pymongo.errors import OperationFailure

from mongostore.config import MAX_TTL_MINUTES, IndexSettings, TTLSettings, VectorSearchMode
from mongostore.core import queries as q
from mongostore.core import retrieval as _retrieval
from mongostore.core import retrieval_plan as modes
from mongostore.core import vectors as _vectors
from mongostore.core.codec import (
    ITEM_PROJECTION,
    MAX_DOC_BYTES,
    MAX_VALUE_BYTES,
    ancestor_paths,
    as_namespace,
    check_value,
    doc_to_item,
    doc_to_search_item,
    extract_texts,
    item_doc_size,
    item_id,
    namespace_path,
    plain_value,
    text_hash,
    unencodable,
    vector_id,
)
from mongostore.core.steps import (
    Aggregate,
    Capabilities,
    Count,
    CreateIndexes,
    DisableVectorSearch,
    Embed,
    EnsureCollection,
    Find,
    ListIndexes,
    ListSearchIndexes,
    Parallel,
    Probe,
    ServerCommand,
    ServerInfo,
    Sleep,
    Step,
    UpdateSearchIndex,
    Write,
    WriteOutcome,
)
from mongostore.errors import InvalidFilterError, InvalidValueError, VectorIndexError, WriteError

logger = logging.getLogger("mongostore")

# Server answers that mean "this deployment has no Atlas Search / $vectorSearch".
NO_SEARCH_CODES = frozenset({31082, 6047401, 115, 59, 40324})
INDEX_ALREADY_EXISTS = 68
MAX_CANDIDATES = 10_000
# Cursor batch size for reads whose every document is needed (the server caps a batch at 16 MiB).
LARGE_BATCH = 100_000

Plan = Generator[Step, Any, Any]


def write_clock() -> datetime:
    """Now, in UTC, cut to the millisecond BSON dates keep (so date arithmetic stays exact)."""
    now = datetime.now(timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class PlanContext:
    """What a plan needs to know about its store; frozen, no I/O handles.

    ``now`` is the batch's read time (expiry cut-off); ``clock`` is read again when
    the writes are built, after the reads and the embedding call, so a batch that
    waited on a slow embedder does not write an older ``updated_at`` than one that
    started after it.
    """

    items_name: str
    index: IndexSettings | None
    ttl: TTLSettings | None
    now: datetime
    clock: Callable[[], datetime] = field(default=write_clock, compare=False)
    vectors_name: str = ""
    # The store's client-side matrix of stored embeddings (local ranking); None: a fresh one per search.
    vector_cache: _vectors.VectorCache | None = None

    @property
    def expiry_cutoff(self) -> datetime | None:
        """``now`` when expired items must be hidden (``omit_expired``), else None."""
        return self.now if self.ttl is not None and self.ttl.omit_expired else None

    @property
    def vectors_collection(self) -> str:
        return self.vectors_name or f"{self.items_name}_vectors"


def is_no_search_error(exc: BaseException, fake: bool = True) -> bool:
    """A search stage or command failed because the server has no search at all.

    A TypeError/AttributeError/NotImplementedError means that only on the fakes
    (mongomock & co); from a real server's driver it is a bug and must surface.
    """
    if isinstance(exc, OperationFailure):
        return exc.code in NO_SEARCH_CODES or (exc.code is None and not _is_index_unavailable(exc))
    return fake and isinstance(exc, (NotImplementedError, TypeError, AttributeError))


def _is_index_unavailable(exc: BaseException) -> bool:
    """mongot refused the query because the index has not finished its first build.

    mongot's ``LuceneVectorIndex.throwIfUnavailableForQuerying``: "cannot query vector
    index ... while in state INITIAL_SYNC" (or NOT_STARTED, FAILED); its reply has no
    code, so mongod reports 8 (UnknownError).
    """
    return (
        isinstance(exc, OperationFailure)
        and exc.code in (8, None)
        and "cannot query vector index" in str(exc)
    )


# --------------------------------------------------------------------------- validation


def _check_paging(op: SearchOp | ListNamespacesOp) -> None:
    for name in ("limit", "offset"):
        v = getattr(op, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(op).__name__}.{name} must be a non-negative int, got {v!r}")


def _check_labels(namespace: tuple[str, ...]) -> None:
    for label in namespace:
        if isinstance(label, str) and unencodable(label):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace!r}: it is not valid UTF-8 (a lone surrogate)"
            )


def _check_key(namespace: tuple[str, ...], key: Any) -> None:
    # LangGraph types keys as str; its public get/put/delete str() them. An op given
    # straight to batch() with another type would alias its str() (5 and "5"): refused.
    if not isinstance(key, str):
        raise InvalidValueError(
            namespace, repr(key), f"the key must be a str, got {type(key).__name__} (put() and get() convert keys "
            "with str(); ops given to batch() must hold str keys)"
        )
    if unencodable(key):
        raise InvalidValueError(namespace, key, "the key is not valid UTF-8 (a lone surrogate)")


def check_ttl(namespace: tuple[str, ...], key: str, ttl: Any) -> None:
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise InvalidValueError(namespace, key, f"ttl must be a number of minutes or None, got {ttl!r}")
    if not math.isfinite(ttl) or ttl <= 0 or ttl > MAX_TTL_MINUTES:
        raise InvalidValueError(
            namespace, key, f"ttl must be a finite number of minutes in (0, {MAX_TTL_MINUTES:.0f}], got {ttl!r}"
        )


def normalize_op(op: Op) -> Op:
    """The op with every namespace (and match path) as a tuple; lists are accepted at the edge."""
    if isinstance(op, (GetOp, PutOp)):
        ns = as_namespace(op.namespace)
        return op if ns is op.namespace else op._replace(namespace=ns)
    if isinstance(op, SearchOp):
        ns = as_namespace(op.namespace_prefix, "namespace prefix")
        return op if ns is op.namespace_prefix else op._replace(namespace_prefix=ns)
    if isinstance(op, ListNamespacesOp) and op.match_conditions:
        conds = tuple(
            c if isinstance(c.path, tuple) else c._replace(path=as_namespace(c.path, "match path"))
            for c in op.match_conditions
        )
        return op._replace(match_conditions=conds)
    return op


def _validate(op: Op) -> None:
    if isinstance(op, PutOp):
        # Labels only: "non-empty, not rooted at 'langgraph'" is put()'s rule, not the
        # op's (LangGraph 4.3: "write-only rules belong to put, not to op validation");
        # InMemoryStore and the Agent Server write such ops through batch().
        validate_op_namespace(op)
        _check_labels(op.namespace)
        _check_key(op.namespace, op.key)
        if op.index not in (None, False) and not (
            isinstance(op.index, list) and all(isinstance(f, str) for f in op.index)
        ):
            raise ValueError(f"PutOp.index must be None, False or a list of field paths, got {op.index!r}")
        check_ttl(op.namespace, op.key, op.ttl)
    elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            _check_labels(op.namespace)
            _check_key(op.namespace, op.key)
        if isinstance(op, SearchOp):
            _check_labels(op.namespace_prefix)
        if isinstance(op, (SearchOp, ListNamespacesOp)):
            _check_paging(op)
        if isinstance(op, ListNamespacesOp):
            if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 0):
                raise ValueError(f"max_depth must be a non-negative int or None, got {op.max_depth!r}")
            for cond in op.match_conditions or ():
                if cond.match_type not in ("prefix", "suffix"):
                    raise InvalidFilterError(f"unknown match_type {cond.match_type!r}: use 'prefix' or 'suffix'")
                _check_labels(cond.path)
    else:
        raise ValueError(f"Unknown operation type: {type(op).__name__}")


def check_op(op: Op) -> Op:
    """Every client-side check of one op: namespace, key, paging, filter, value, ttl, index.

    Returns the op with its namespaces as tuples. ``batch_plan`` runs it on each op
    before any I/O; ``AsyncMongoStore`` runs it before an op is queued, so a bad call
    fails only its own caller.
    """
    op = normalize_op(op)
    _validate(op)
    if isinstance(op, SearchOp):
        q.value_filter(op.filter)
    elif isinstance(op, PutOp) and op.value is not None:
        check_value(op.namespace, op.key, op.value)
    return op


# --------------------------------------------------------------------------- the batch plan


@dataclass
class _Put:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None  # None = delete
    index: list[str] | bool | None
    ttl: float | None
    id: str = ""

    def __post_init__(self) -> None:
        self.id = item_id(self.namespace, self.key)


@dataclass
class _Search:
    pos: int
    op: SearchOp
    semantic: bool
    query_vector: list[float] | None = None
    read_vectors: bool = False  # local path: the batch's reads include every vector under the prefix


def _texts_for(put: _Put, index: IndexSettings) -> dict[str, str]:
    if put.value is None or put.index is False:
        return {}
    fields = tuple(put.index) if isinstance(put.index, list) else None
    return extract_texts(put.value, index.tokenized(fields))


@dataclass
class BatchOutcome:
    """What a batch did: every op's result, and what of its write failed.

    ``failures`` maps (namespace, key) to the server's message for each put or delete
    with a rejected write; ``stored`` holds those whose value landed and only whose
    vectors failed. ``write_error`` is an exception the whole write raised (a network
    error, a write-concern error): the batch's reads are answered, its writes unknown.
    """

    results: list[Result]
    failures: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)
    stored: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    write_error: Exception | None = None
    refreshing: set[int] = field(default_factory=set)  # positions of reads whose TTL refresh was written

    def error_for(self, pos: int, op: Op) -> Exception | None:
        """The exception the caller of op ``pos`` must see, or None when its op succeeded.

        A write that failed as a whole concerns the puts and deletes, and the reads whose
        TTL refresh was part of it; a per-item rejection concerns that item's put only
        (a failed refresh of one item is logged, as in the sync store).
        """
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


def batch_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan:
    """Run a LangGraph batch: results in op order, reads before writes, puts deduped."""
    outcome: BatchOutcome = yield from batch_outcome_plan(ops, ctx)
    outcome.raise_any()
    return outcome.results


def _check_sizes(put: _Put, hashes: list[str], fields: list[str], ctx: PlanContext) -> None:
    """The item and each vector document fit MongoDB's 16 MiB, checked before any write.

    A vector document holds every ancestor path of its item (``ns_prefixes``), so 200
    labels of 1 KB make one of 20 MB even for a small value.
    """
    assert put.value is not None and ctx.index is not None
    size = item_doc_size(put.namespace, put.key, put.value, hashes)
    if size > MAX_VALUE_BYTES:
        raise InvalidValueError(
            put.namespace, put.key, f"the item with its {len(hashes)} text hash(es) is {size:,} bytes as BSON; "
            "MongoDB's limit is 16 MiB per document"
        )
    if not fields:
        return
    base = len(
        bson.encode(
            {
                "_id": vector_id(put.id, max(fields, key=len)),
                "item_id": put.id,
                "ns_prefixes": ancestor_paths(put.namespace),
                "value": q.filter_field_values(put.value, ctx.index.filter_fields),
            }
        )
    )
    vec = base + 2 * max(len(f.encode()) for f in fields) + ctx.index.dims * 4 + 256
    if vec > MAX_DOC_BYTES:
        raise InvalidValueError(
            put.namespace, put.key, f"its vector documents would be {vec:,} bytes as BSON (each holds every "
            f"ancestor path of the namespace, {len(put.namespace)} labels); MongoDB's limit is 16 MiB per document"
        )


def batch_outcome_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan:
    """``batch_plan``, but a failed write is reported per op in a ``BatchOutcome``, not raised."""
    ops = [check_op(op) for op in ops]

    results: list[Result] = [None] * len(ops)
    gets: list[tuple[int, GetOp]] = []
    searches: list[_Search] = []
    listings: list[tuple[int, ListNamespacesOp]] = []
    puts: dict[tuple[tuple[str, ...], str], _Put] = {}
    index = ctx.index

    for pos, op in enumerate(ops):
        if isinstance(op, GetOp):
            gets.append((pos, op))
        elif isinstance(op, SearchOp):
            searches.append(_Search(pos, op, semantic=bool(op.query) and index is not None))
        elif isinstance(op, ListNamespacesOp):
            listings.append((pos, op))
        elif isinstance(op, PutOp):
            value = None if op.value is None else dict(op.value)
            # Last wins, and takes the last op's place: a batch's puts are written in op order.
            puts.pop((op.namespace, op.key), None)
            puts[(op.namespace, op.key)] = _Put(op.namespace, op.key, value, op.index, op.ttl)

    semantic = [s for s in searches if s.semantic and s.op.limit > 0]
    use_atlas = fake = False
    caps: Capabilities | None = None
    if semantic:
        assert index is not None
        caps = yield Probe(index.index_name)
        use_atlas, fake = caps.vector_search, caps.fake
        if modes.uses_modes(index):
            modes.path_for(index, caps, use_atlas)  # an Atlas-only mode fails here, before any read
        if index.auto_embed is None:  # automated embedding: Atlas embeds the query text
            # Queries first, in one call: their searches can then join the batch's other reads.
            vectors = yield from _embed(tuple(dict.fromkeys(str(s.op.query) for s in semantic)), index)
            for s in semantic:
                s.query_vector = np.asarray(vectors[str(s.op.query)], dtype=np.float64).tolist()  # plain floats

    # ---- 1. every read, in one parallel step -------------------------------------------
    put_list = list(puts.values())
    indexed_puts = [p for p in put_list if p.value is not None] if index is not None else []
    while True:
        reads = _reads(gets, searches, listings, put_list, ctx, use_atlas, caps)
        try:
            answers: list[Any] = list((yield Parallel(tuple(reads)))) if reads else []
            break
        except Exception as exc:
            if not use_atlas:
                raise
            assert index is not None
            if _is_index_unavailable(exc):
                # The index is still in its first build (or failed it): mongot refuses queries.
                why = f"vector search index {index.index_name!r} cannot serve queries yet ({exc})"
                if index.vector_search == "atlas":
                    raise VectorIndexError(
                        f"{why}; it is building: wait for setup() or use vector_search='auto' to rank locally meanwhile"
                    ) from exc
                logger.warning("%s; ranking locally until it can", why)
                yield DisableVectorSearch(why, temporary=True, index_status="BUILDING")
            elif is_no_search_error(exc, fake):
                logger.warning("$vectorSearch is not available (%s); ranking locally from now on", exc)
                yield DisableVectorSearch(str(exc))
            else:
                raise
            use_atlas = False
            if modes.uses_modes(index):
                caps = yield Probe()  # its detail now says why (a mode may need to name it)
    answers.reverse()  # consumed in the order the reads were added

    refresh: dict[str, float] = {}  # item id -> its ttl_minutes, for refresh_ttl

    refreshers: dict[str, list[int]] = {}  # item id -> positions of the reads that refresh it

    def note_refresh(docs: list[dict[str, Any]], wanted: bool, id_of: Any, pos: int) -> None:
        if not wanted:
            return
        for doc in docs:
            if doc.get("ttl_minutes") is not None:
                iid = id_of(doc)
                refresh[iid] = float(doc["ttl_minutes"])
                refreshers.setdefault(iid, []).append(pos)

    if gets:
        by_id = {doc["_id"]: doc for doc in answers.pop()}
        for pos, gop in gets:
            found = by_id.get(item_id(gop.namespace, gop.key))
            results[pos] = doc_to_item(found) if found else None
            if found:
                note_refresh([found], gop.refresh_ttl, lambda d: d["_id"], pos)
    first_answers: dict[int, Any] = {}  # search position -> its local candidates or its first Atlas page
    for s in searches:
        if s.op.limit == 0:
            results[s.pos] = []
        elif not s.semantic:
            docs = answers.pop()
            results[s.pos] = [doc_to_search_item(d) for d in docs]
            note_refresh(docs, s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]), s.pos)
        elif modes.uses_modes(index):
            assert index is not None and caps is not None
            n = 1 if modes.path_for(index, caps, use_atlas) == "atlas" else 2
            first_answers[s.pos] = [answers.pop() for _ in range(n)]
        elif use_atlas:
            first_answers[s.pos] = answers.pop()
        else:
            first_answers[s.pos] = (answers.pop(), answers.pop() if s.read_vectors else None)
    for pos, lop in listings:
        if lop.limit == 0:
            results[pos] = []
            continue
        [facet] = answers.pop() or [{"page": [], "unkeyed": []}]
        if any(d.get("n", 0) > 0 for d in facet["unkeyed"]):  # ($count gives nothing, or n: 0 on mongomock)
            # Items written before ns_key existed (setup() adds it): sort every namespace here.
            pipeline = q.list_namespaces_pipeline(lop.match_conditions, lop.max_depth, ctx.expiry_cutoff)
            results[pos] = _namespaces_result((yield Aggregate("items", pipeline, batch_size=LARGE_BATCH)), lop)
        else:
            results[pos] = [tuple(d["_id"]) for d in facet["page"]]
    stored: dict[str, dict[str, str]] = {}  # item id -> {field: text_hash} of its stored vectors
    if index is not None and put_list:
        for doc in answers.pop():
            stored.setdefault(doc["item_id"], {})[doc["field"]] = doc["text_hash"]

    # ---- 2. one embedding call for the new texts of the puts ----------------------------
    put_texts: dict[str, dict[str, tuple[str, str]]] = {}  # item id -> {field: (text, hash)}
    to_embed: dict[str, None] = {}
    if index is not None:
        for p in indexed_puts:
            texts = {fname: (text, text_hash(fname, text)) for fname, text in _texts_for(p, index).items()}
            put_texts[p.id] = texts
            _check_sizes(p, [h for _, h in texts.values()], list(texts), ctx)
            old = stored.get(p.id, {})
            for fname, (text, h) in texts.items():
                if old.get(fname) != h:
                    to_embed.setdefault(text)
    if index is not None and index.auto_embed is not None:
        to_embed = {}  # Atlas embeds the stored texts at index time
    packed: dict[str, Any] = {}  # text -> its float32 BinData vector
    if to_embed and index is not None:
        embedded = yield from _embed(tuple(to_embed), index)
        packed = {text: q.float32_vector(vec) for text, vec in embedded.items()}

    # ---- 3. semantic searches: rank, page, ask Atlas again if a page came back short ------
    for s in semantic:
        assert index is not None
        if modes.uses_modes(index):
            assert caps is not None
            path = modes.path_for(index, caps, use_atlas)
            cutoff = ctx.expiry_cutoff
            first = first_answers[s.pos]
            docs_scores = yield from modes.search_plan(
                s.op, index, ctx.items_name, cutoff, s.query_vector, path, first
            )
        elif use_atlas:
            docs_scores = yield from _atlas_search(s, index, ctx, first_answers[s.pos])
        else:
            docs_scores = yield from _local_search(s, index, ctx, first_answers[s.pos])
        results[s.pos] = [doc_to_search_item(d, score) for d, score in docs_scores]
        note_refresh(
            [d for d, _ in docs_scores], s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]), s.pos
        )

    # ---- 4. one write: TTL refreshes, then vectors, then items ---------------------------
    # The write time is read now, after the reads and the embedding call. Each put gets
    # its own millisecond, the last put "now", so newest-first lists a batch in op order.
    write_now = ctx.clock()
    requests: list[q.WriteRequest] = []
    put_ids = {p.id for p in put_list}
    refresh = {iid: ttl for iid, ttl in refresh.items() if iid not in put_ids}
    if refresh:
        by_ttl: dict[float, list[str]] = {}
        for iid, ttl in refresh.items():
            by_ttl.setdefault(ttl, []).append(iid)
        requests.extend(q.refresh_ttl_requests("items", by_ttl, write_now))
        if index is not None:
            requests.extend(q.refresh_ttl_requests("vectors", by_ttl, write_now, id_field="item_id"))
    item_requests: list[q.WriteRequest] = []
    cached: list[tuple[int, str, str, str, Any]] = []  # (request index, item, field, hash, vector): the cache
    for i, p in enumerate(put_list):
        now = write_now - timedelta(milliseconds=len(put_list) - 1 - i)
        if p.value is None:
            if ctx.vector_cache is not None:
                ctx.vector_cache.forget(p.id)
            reqs = q.delete_item_requests(p.namespace, p.key, with_vectors=index is not None)
            requests.extend(r for r in reqs if r.role == "vectors")
            item_requests.extend(r for r in reqs if r.role == "items")
            continue
        hashes: list[str] | None = None
        if index is not None:
            texts = put_texts.get(p.id, {})
            old = stored.get(p.id, {})
            filter_values = q.filter_field_values(p.value, index.filter_fields)
            hashes = []
            unchanged = False
            for fname, (text, h) in texts.items():
                hashes.append(h)
                if old.get(fname) == h:
                    unchanged = True
                else:
                    if index.auto_embed is not None:
                        req = q.put_vector_request(p.namespace, p.key, fname, h, [], filter_values, now, p.ttl)
                        req = _retrieval.auto_vector_request(req, text)
                    else:
                        vec = packed[text]
                        cached.append((len(requests), p.id, fname, h, vec))
                        req = q.put_vector_request(p.namespace, p.key, fname, h, vec, filter_values, now, p.ttl)
                        if index.stores_text:
                            req = _retrieval.with_text(req, text)
                    requests.append(req)
            if set(old) - set(texts):
                requests.append(q.prune_vectors_request(p.namespace, p.key, list(texts)))
            if unchanged:
                requests.append(q.retag_vectors_request(p.namespace, p.key, filter_values, now, p.ttl))
        item_requests.append(q.put_item_request(p.namespace, p.key, p.value, now, p.ttl, hashes))
    requests.extend(item_requests)
    outcome = BatchOutcome(results, refreshing={p for iid in refresh for p in refreshers[iid]})
    if requests:
        try:
            written: WriteOutcome = yield Write(tuple(requests))
        except Exception as exc:
            outcome.write_error = exc
            return outcome
        if ctx.vector_cache is not None and ctx.vector_cache.in_use and cached:  # (Atlas-only stores: no)
            failed = {idx for idx, _ in written.errors}
            ctx.vector_cache.add_many([(iid, f, h, vec) for idx, iid, f, h, vec in cached if idx not in failed])
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
        # stored, listing hashes with no vectors (unscored until its next put re-embeds).
        outcome.stored = {t for t in outcome.failures if t not in item_failed and puts[t].value is not None}
    return outcome


def _embed(texts: tuple[str, ...], index: IndexSettings) -> Plan:
    """One embedding call; checks the embedder's answer before anything is written.

    Returns ``{text: vector}``, each as the embedder gave it (no float conversion here:
    puts pack it straight to float32, queries take plain floats).
    """
    embedded = yield Embed(texts)
    if len(embedded) != len(texts):
        raise ValueError(f"the embedder returned {len(embedded)} vectors for {len(texts)} texts")
    for vec in embedded:
        if len(vec) != index.dims:
            raise ValueError(f"the embedder returned {len(vec)} dimensions; index['dims'] is {index.dims}")
    return dict(zip(texts, embedded, strict=True))


def _reads(
    gets: list[tuple[int, GetOp]],
    searches: list[_Search],
    listings: list[tuple[int, ListNamespacesOp]],
    put_list: list[_Put],
    ctx: PlanContext,
    use_atlas: bool,
    caps: Capabilities | None = None,
) -> list[Step]:
    """Every read of a batch, in the order ``batch_plan`` consumes the answers."""
    cutoff = ctx.expiry_cutoff
    reads: list[Step] = []
    if gets:
        ids = list(dict.fromkeys(item_id(op.namespace, str(op.key)) for _, op in gets))
        filt: dict[str, Any] = {"_id": {"$in": ids}}
        if cutoff is not None:
            filt = {"$and": [filt, q.not_expired(cutoff)]}
        reads.append(Find("items", filt, {**ITEM_PROJECTION, "_id": 1}, batch_size=len(ids)))
    for s in searches:
        if s.op.limit == 0:
            continue
        if not s.semantic:
            filt = q.search_filter(s.op.namespace_prefix, s.op.filter, cutoff)
            reads.append(Find("items", filt, ITEM_PROJECTION, q.ITEM_SORT, s.op.offset, s.op.limit))
        elif modes.uses_modes(ctx.index):
            assert ctx.index is not None and caps is not None
            path = modes.path_for(ctx.index, caps, use_atlas)
            reads.extend(modes.first_reads(s.op, ctx.index, ctx.items_name, cutoff, s.query_vector, path))
        elif use_atlas:
            assert ctx.index is not None
            reads.append(Aggregate("vectors", _atlas_pipeline(s, ctx.index, ctx, _initial_k(s.op, ctx.index))))
        else:
            cache = ctx.vector_cache
            s.read_vectors = cache is None or not cache.covers(namespace_path(s.op.namespace_prefix))
            reads.extend(_local_candidate_reads(s.op, cutoff, s.read_vectors))
    for _, lop in listings:
        if lop.limit == 0:
            continue
        pipeline = q.list_namespaces_pipeline(lop.match_conditions, lop.max_depth, cutoff, lop.offset, lop.limit)
        reads.append(Aggregate("items", pipeline))
    if ctx.index is not None and put_list:
        reads.append(
            Find(
                "vectors",
                {"item_id": {"$in": [p.id for p in put_list]}},
                {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1},
                batch_size=LARGE_BATCH,
            )
        )
    return reads


def _namespaces_result(docs: list[dict[str, Any]], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    found = sorted({tuple(d["_id"]) for d in docs})
    end = op.offset + op.limit
    return found[op.offset : end]


# --------------------------------------------------------------------------- semantic search


def unscored_pipeline(
    op: SearchOp, vectors_collection: str, cutoff: datetime | None, skip: int, limit: int
) -> list[dict[str, Any]]:
    """Items under the prefix that pass the filter and have no valid vector, newest first.

    "No valid vector" is what the Atlas page cannot score: no ``vectors`` listed, or
    none of the listed text hashes has a vector document (a failed vector write, or a
    delete or sweep that raced a re-put of the same text).
    """
    pipeline: list[dict[str, Any]] = []
    base = q.search_filter(op.namespace_prefix, op.filter, cutoff)
    if base:
        pipeline.append({"$match": base})
    pipeline += [
        _vectors_lookup(vectors_collection),
        {"$match": {"$expr": {"$eq": [{"$size": _BACKED_HASHES}, 0]}}},
        {"$sort": dict(q.ITEM_SORT)},
    ]
    if skip:
        pipeline.append({"$skip": skip})
    pipeline += [{"$limit": limit}, {"$project": ITEM_PROJECTION}]
    return pipeline


def missing_vectors_pipeline(vectors_collection: str) -> list[dict[str, Any]]:
    """Count the items that list text hashes some of which have no vector document.

    Such items are repairable: their next put re-embeds the missing texts.
    """
    return [
        {"$match": {"vectors": {"$exists": True}}},
        _vectors_lookup(vectors_collection),
        {"$match": {"$expr": {"$gt": [{"$size": {"$ifNull": ["$vectors", []]}}, {"$size": _BACKED_HASHES}]}}},
        {"$count": "n"},
    ]


def _vectors_lookup(vectors_collection: str) -> dict[str, Any]:
    return {"$lookup": {"from": vectors_collection, "localField": "_id", "foreignField": "item_id", "as": "_vectors"}}


# The item's listed text hashes that have a vector document (after _vectors_lookup).
# $filter + $in rather than the $set* operators, which mongomock 4.3 lacks.
_BACKED_HASHES: dict[str, Any] = {
    "$filter": {
        "input": {"$ifNull": ["$vectors", []]},
        "as": "h",
        "cond": {"$in": ["$$h", {"$ifNull": ["$_vectors.text_hash", []]}]},
    }
}


VECTOR_PROJECTION = {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1, "embedding": 1}


def _local_candidate_reads(op: SearchOp, cutoff: datetime | None, with_vectors: bool = True) -> list[Step]:
    """The items under the prefix that pass the filter (ids and listed hashes) and, unless
    the store's vector cache already holds the prefix, every vector under it."""
    reads: list[Step] = [
        Find(
            "items",
            q.search_filter(op.namespace_prefix, op.filter, cutoff),
            {"_id": 1, "vectors": 1, "updated_at": 1},
            batch_size=LARGE_BATCH,
        )
    ]
    if with_vectors:
        reads.append(
            Find(
                "vectors",
                q.vector_candidates_filter(op.namespace_prefix, cutoff),
                VECTOR_PROJECTION,
                batch_size=LARGE_BATCH,
            )
        )
    return reads


def _fetch_items(ids: list[str]) -> Plan:
    if not ids:
        return {}
    docs = yield Find("items", {"_id": {"$in": ids}}, {**ITEM_PROJECTION, "_id": 1})
    return {d["_id"]: d for d in docs}


def _local_search(
    s: _Search,
    index: IndexSettings,
    ctx: PlanContext,
    candidates: tuple[list[dict[str, Any]], list[dict[str, Any]] | None],
) -> Plan:
    """Exact ranking: every valid vector under the prefix, best per item, then unscored items.

    A vector counts only while its item (filtered, unexpired) still lists its text hash.
    The store's ``VectorCache`` holds the embeddings; vectors it lacks are fetched first.
    """
    items, vecs = candidates
    cache = ctx.vector_cache if ctx.vector_cache is not None else _vectors.VectorCache(index.dims)
    if vecs is not None:
        cache.add_documents(vecs)
        cache.mark_loaded(namespace_path(s.op.namespace_prefix))
    cands = cache.candidates(items)
    if cands.missing and vecs is None:
        filt: dict[str, Any] = {"item_id": {"$in": cands.missing}}
        if ctx.expiry_cutoff is not None:
            filt = {"$and": [filt, q.not_expired(ctx.expiry_cutoff)]}
        cache.add_documents((yield Find("vectors", filt, VECTOR_PROJECTION, batch_size=LARGE_BATCH)))
        cands = cache.candidates(items)
    assert s.query_vector is not None
    end = s.op.offset + s.op.limit
    while True:
        ranked: list[tuple[str, float | None, int | None]] = list(
            cache.rank(s.query_vector, cands, index.similarity, end)
        )
        # Items with no valid vector come after every scored item, newest first: those with
        # no vectors at all, and those whose listed hashes have no vector (a failed vector
        # write, or a delete or sweep racing a re-put): unscored until their next put
        # re-embeds them, as on the Atlas path (unscored_pipeline).
        if len(ranked) < end:
            with_rows = set(cands.item_index.tolist())
            unscored = sorted(
                (d for i, d in enumerate(items) if i not in with_rows),
                key=lambda d: (-d["updated_at"].timestamp(), d["_id"]),
            )
            ranked.extend((d["_id"], None, None) for d in unscored)
        page = ranked[s.op.offset : end]
        # The page's items, and (same trip) a check that each scored one's best vector is
        # still stored under the hash its item lists: held rows outlive a failed write.
        held = {vector_id(iid, cache.vector_of(r)[1]): r for iid, _, r in page if r is not None}
        page_ids = [iid for iid, _, _ in page]
        reads: list[Step] = [Find("items", {"_id": {"$in": page_ids}}, {**ITEM_PROJECTION, "_id": 1})]
        if held:
            check: dict[str, Any] = {"_id": {"$in": list(held)}}
            if ctx.expiry_cutoff is not None:
                check = {"$and": [check, q.not_expired(ctx.expiry_cutoff)]}
            reads.append(Find("vectors", check, {"_id": 1, "text_hash": 1}))
        answers = (yield Parallel(tuple(reads))) if page else [[], []]
        stored = {d["_id"]: d["text_hash"] for d in (answers[1] if held else [])}
        gone = {r for vid, r in held.items() if stored.get(vid) != cache.vector_of(r)[2]}
        if not gone:
            break
        cands = cache.drop_rows(cands, gone)
    docs = {d["_id"]: d for d in answers[0]}
    return [(docs[iid], score) for iid, score, _ in page if iid in docs]


def _initial_k(op: SearchOp, index: IndexSettings) -> int:
    """Vectors to ask for: enough for the page when items have a few vectors each."""
    return min(MAX_CANDIDATES, max((op.offset + op.limit) * max(2, len(index.fields)), 10))


def _atlas_pipeline(s: _Search, index: IndexSettings, ctx: PlanContext, k: int) -> list[dict[str, Any]]:
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


def _atlas_search(s: _Search, index: IndexSettings, ctx: PlanContext, first: list[dict[str, Any]]) -> Plan:
    """Read a ``$vectorSearch`` page (the first one came with the batch's reads); when a
    page comes back short while more candidates exist, ask again with four times more."""
    op = s.op
    k = _initial_k(op, index)
    out = first
    while True:
        facet = out[0] if out else {"hits": [], "scored": [], "page": []}
        hits = facet["hits"][0]["n"] if facet["hits"] else 0
        scored = facet["scored"][0]["n"] if facet["scored"] else 0
        ranked = [(d["_id"], float(d["score"])) for d in facet["page"]]
        exhausted = hits < k
        if len(ranked) >= op.limit or exhausted or k >= MAX_CANDIDATES:
            break
        k = min(MAX_CANDIDATES, k * 4)
        out = yield Aggregate("vectors", _atlas_pipeline(s, index, ctx, k))
    # The $facet carried ids and scores only (its output is capped at 100 MB, the
    # document at 16 MiB): one more round trip fetches the page's items by _id.
    docs = yield from _fetch_items([iid for iid, _ in ranked])
    page: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score in ranked if iid in docs]
    if len(page) < op.limit and exhausted:
        # Every scored item was seen: fill the page with items that have no vectors
        # (index=False, no indexed field), newest first, as InMemoryStore does.
        skip = max(0, op.offset - scored)
        docs = yield Aggregate(
            "items", unscored_pipeline(op, ctx.vectors_collection, ctx.expiry_cutoff, skip, op.limit - len(page))
        )
        page.extend((d, None) for d in docs)
    return page


# --------------------------------------------------------------------------- capabilities

# MongoDB 8.0 speaks wire version 25; its clients can bulk_write across collections.
CLIENT_BULK_WRITE_WIRE_VERSION = 25
FAKE_SERVER = "mongomock (in-memory, for development)"
# Before 7.1, $listSearchIndexes off Atlas may answer an empty list instead of an error
# (manual, $listSearchIndexes "Errors"; SERVER-78831, SERVER-117001).
TRUSTED_EMPTY_LIST_VERSION = (7, 1)


def _version(version: str) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", version)[:2]
    return tuple(int(p) for p in parts) if len(parts) == 2 else None


def _search_probe_answer(exc: Exception, fake: bool = True) -> tuple[bool, str]:
    """``(False, why)`` when a search command's error means "this server has no search"; else raise it."""
    if isinstance(exc, OperationFailure):
        if exc.code in NO_SEARCH_CODES:
            return False, f"server has no Atlas Search (code {exc.code})"
        if exc.code is None and not _is_index_unavailable(exc):
            # MongoDB always codes its errors (mongod gives even mongot's uncoded ones code 8); an
            # uncoded refusal comes from a server that only speaks the protocol and knows no search.
            message = str((exc.details or {}).get("errmsg") or exc)
            logger.warning("the server refused a search command without an error code (%s): treating it as "
                           "a server without Atlas Search; semantic searches rank locally", message)
            return False, f"server has no Atlas Search (uncoded answer: {message})"
    if fake and isinstance(exc, (TypeError, AttributeError, NotImplementedError)):
        # mongomock and its async wrappers know no search stages or commands.
        return False, "this backend has no search index commands"
    raise exc


def server_probe_plan(*, fake: bool, has_client_bulk: bool) -> Plan:
    """Server version and client-level bulk_write: ``buildInfo`` and ``hello`` only.

    What writes need; it never asks about search, so puts and deletes work while
    mongot is unreachable (code 125) or the user may not list search indexes (13).
    """
    version, wire = FAKE_SERVER, 0
    if not fake:  # mongomock answers no server commands
        info = yield ServerCommand("buildInfo")
        version = str(info.get("version", "?"))
        wire = int((yield ServerCommand("hello")).get("maxWireVersion", 0))
    return Capabilities(
        server_version=version,
        fake=fake,
        vector_search=False,
        client_bulk_write=(not fake) and has_client_bulk and wire >= CLIENT_BULK_WRITE_WIRE_VERSION,
        detail="search not asked",
    )


def _age(doc: dict[str, Any], now: datetime) -> str:
    created = (doc.get("latestDefinitionVersion") or {}).get("createdAt")
    if not isinstance(created, datetime):
        return ""
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return f" for {max(0.0, (now - created).total_seconds()):.0f}s"


def _index_state(found: list[dict[str, Any]], index_name: str, now: datetime) -> tuple[str, bool, str]:
    """(status, queryable, description) of the named index in a ``$listSearchIndexes`` answer."""
    mine = [d for d in found if d.get("name") == index_name]
    if not mine:
        names = sorted(str(d.get("name")) for d in found)
        return "MISSING", False, (
            f"there is no vector search index {index_name!r} on the vectors collection "
            f"(found: {', '.join(names) or 'none'}); run setup() to create it"
        )
    doc = mine[0]
    status = str(doc.get("status", "?"))
    if doc.get("queryable") is True:
        return status, True, f"vector search index {index_name!r} is queryable (status {status})"
    return status, False, f"vector search index {index_name!r} is {status}{_age(doc, now)} and cannot serve queries yet"


def search_probe_plan(
    server: Capabilities,
    *,
    has_vectors: bool,
    mode: VectorSearchMode,
    index_name: str,
    previous: Capabilities | None = None,
    now: datetime | None = None,
) -> Plan:
    """Whether semantic searches use ``$vectorSearch`` now: the server has search and
    the index exists and is queryable (a missing index answers every query with nothing).

    ``auto`` ranks locally otherwise and says why once (``previous``: the last answer);
    ``atlas`` raises ``VectorIndexError`` for a missing or unqueryable index, and trusts
    the configuration when the index list cannot be read; ``local`` asks nothing.
    """
    now = now or datetime.now(timezone.utc)
    if not has_vectors:
        return replace(server, detail="no index configured")
    if mode == "local":
        return replace(server, vector_search=False, detail="vector_search='local' set in index config")
    try:
        found = list((yield ListSearchIndexes("vectors")))
    except Exception as exc:
        if mode == "atlas":
            return replace(
                server, vector_search=True, detail=f"vector_search='atlas' set in index config (index list: {exc})"
            )
        searchable, why = _search_probe_answer(exc, server.fake)
        return replace(server, vector_search=searchable, search_commands=False, detail=why)
    if not found and not server.fake and mode == "auto":
        v = _version(server.server_version)
        if v is None or v < TRUSTED_EMPTY_LIST_VERSION:
            return replace(
                server,
                vector_search=False,
                search_commands=None,
                detail=(
                    f"MongoDB {server.server_version} answers $listSearchIndexes with an empty list whether or not "
                    "it has Atlas Search: ranking locally (setup() finds out by creating the index)"
                ),
            )
    status, queryable, why = _index_state(found, index_name, now)
    if mode == "atlas":
        if not queryable:
            raise VectorIndexError(f"{why}; vector_search='atlas' does not fall back to local ranking")
        return replace(server, vector_search=True, search_commands=True, index_status=status,
                       detail="vector_search='atlas' set in index config")
    caps = replace(server, vector_search=queryable, search_commands=True, index_status=status,
                   recheck=not queryable, detail=why if queryable else why + ": ranking locally until it can")
    if not queryable and (previous is None or previous.index_status != status):
        logger.warning("%s", caps.detail)
    return caps


def probe_plan(
    *, fake: bool, has_vectors: bool, mode: VectorSearchMode, has_client_bulk: bool, index_name: str = ""
) -> Plan:
    """``server_probe_plan`` then ``search_probe_plan``: everything a store asks once."""
    server = yield from server_probe_plan(fake=fake, has_client_bulk=has_client_bulk)
    return (yield from search_probe_plan(server, has_vectors=has_vectors, mode=mode, index_name=index_name))


# --------------------------------------------------------------------------- setup, sweep, status


def _definition_matches(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    def key(defn: dict[str, Any]) -> tuple[Any, ...]:
        fields = defn.get("fields", [])
        vec = [
            (f.get("path"), f.get("numDimensions"), f.get("similarity")) for f in fields if f.get("type") == "vector"
        ]
        filters = sorted(f.get("path") for f in fields if f.get("type") == "filter")
        auto = [(f.get("path"), f.get("model"), f.get("numDimensions")) for f in fields if f.get("type") == "autoEmbed"]
        return (vec, filters, auto)

    return key(existing) == key(wanted)


def _recreate_advice(name: str) -> str:
    return (
        f"drop it and let setup() create it again: vectors_collection.drop_search_index({name!r}), "
        "then store.setup() (searches rank locally while it builds), or change index_name to build a new "
        "index next to the old one"
    )


def _status_message(doc: dict[str, Any]) -> str:
    msgs = [str(d.get("message")) for d in doc.get("statusDetail") or () if isinstance(d, dict) and d.get("message")]
    return "; ".join(msgs) or str(doc.get("status"))


def setup_plan(index: IndexSettings | None) -> Plan:
    """Create B-tree and TTL indexes, and the vector index when the server has search.

    After creating or updating the vector index it waits (bounded by ``setup_timeout``,
    with progress in the log) until the index is ``READY`` on the wanted definition:
    during a rebuild mongot reports ``queryable: true`` and the new ``latestDefinition``
    while queries still run on the old one, so ``queryable`` alone is not enough.
    """
    yield CreateIndexes("items", tuple(q.item_indexes()))
    yield from _migrate_ns_keys()
    if index is None:
        return None
    yield CreateIndexes("vectors", tuple(q.vector_indexes()))
    if index.vector_search == "local":
        _refuse_atlas_only(index, "vector_search='local' set in index config")
        logger.info("vector_search='local' set in index config: searches rank locally")
        return None
    server: Capabilities = yield ServerInfo()
    forced = index.vector_search == "atlas"

    def no_search(exc: Exception) -> str | None:
        """Why the server has no search, or None (then the caller raises)."""
        if forced:
            return None
        try:
            return _search_probe_answer(exc, server.fake)[1]
        except Exception:
            return None

    wanted = _retrieval.vector_index_definition(index.dims, index.similarity, index.filter_fields, index.auto_embed)
    yield EnsureCollection("vectors")
    try:
        existing = yield ListSearchIndexes("vectors", index.index_name)
    except Exception as exc:
        why = no_search(exc)
        if why is None:
            raise
        _refuse_atlas_only(index, why)
        logger.info("no vector search on this server (%s): searches rank locally", why)
        yield DisableVectorSearch(why)
        return None
    # The server answers search-index commands: a mode it cannot run (reranking before 8.3)
    # fails now, and hybrid's $search index is built next to the vector index.
    modes.setup_checks(index, replace(server, vector_search=True))
    text_index = yield from modes.text_index_plan(index, server)
    if text_index is not None:  # hybrid's $search index: the same READY rule as the vector index
        text_name, text_wanted = text_index
        yield from _wait_until_ready(
            text_name, "search index", lambda latest: latest == text_wanted, index.setup_timeout,
            _recreate_advice(text_name),
        )
    updated = False
    try:
        if not existing:
            logger.info("creating vector search index %r", index.index_name)
            yield from modes.create_vector_index(index.index_name, wanted, index)
        elif not _definition_matches(existing[0].get("latestDefinition") or {}, wanted):
            logger.info("updating vector search index %r (dims, similarity or filters changed)", index.index_name)
            updated = True
            yield UpdateSearchIndex("vectors", index.index_name, wanted)
    except Exception as exc:
        why = no_search(exc)
        if why is not None:  # e.g. 115/59 from a pre-7.1 server whose empty index list told nothing
            _refuse_atlas_only(index, why)
            logger.info("no vector search on this server (%s): searches rank locally", why)
            yield DisableVectorSearch(why)
            return None
        if isinstance(exc, OperationFailure) and exc.code == INDEX_ALREADY_EXISTS:
            pass  # another process created it at the same moment: wait for it like ours
        elif updated and isinstance(exc, OperationFailure):
            raise VectorIndexError(
                f"could not update vector search index {index.index_name!r} ({exc}); "
                f"Atlas Local may not support updating it: {_recreate_advice(index.index_name)}"
            ) from exc
        else:
            raise
    yield from _wait_until_ready(
        index.index_name,
        "vector search index",
        lambda latest: _definition_matches(latest, wanted),
        index.setup_timeout,
        _recreate_advice(index.index_name),
    )
    yield Probe(index.index_name, refresh=True)  # searches use the index from now on
    return None


def _refuse_atlas_only(index: IndexSettings, why: str) -> None:
    """Automated embedding and reranking cannot rank locally: say so at ``setup()``."""
    err = modes.needs_atlas(index, why)
    if err is not None:
        raise err


def _wait_until_ready(
    name: str,
    what: str,
    matches: Callable[[dict[str, Any]], bool],
    timeout: float,
    advice: str,
) -> Plan:
    """Poll a search index until it is ``READY`` on the wanted definition (``matches``).

    FAILED is checked first; during a rebuild mongot reports ``queryable: true`` and the
    new ``latestDefinition`` while the old one still serves, so only ``READY`` counts.
    Bounded by ``timeout`` seconds, with progress in the log.
    """
    start = time.monotonic()
    deadline = start + timeout
    delay = 0.2
    while True:
        found = yield ListSearchIndexes("vectors", name)
        doc = found[0] if found else {}
        status = str(doc.get("status", "MISSING"))
        latest = doc.get("latestDefinition") or {}
        if status == "FAILED":
            serving = " (the previous definition still serves queries)" if doc.get("queryable") else ""
            raise VectorIndexError(
                f"{what} {name!r} failed to build{serving}: {_status_message(doc)}; fix the cause, then {advice}"
            )
        if status == "READY" and matches(latest):
            logger.info("%s %r is ready", what, name)
            return None
        waited = time.monotonic() - start
        if time.monotonic() >= deadline:
            raise VectorIndexError(
                f"{what} {name!r} not ready on the wanted definition after "
                f"{timeout:.0f}s (status {status}, queryable {doc.get('queryable')}); "
                "raise index['setup_timeout'] or check the search node's logs"
            )
        queryable = doc.get("queryable")
        logger.info("waiting for %s %r: status %s, queryable %s (%.0fs)", what, name, status, queryable, waited)
        yield Sleep(delay)
        delay = min(delay * 2, 2.0)


def _migrate_ns_keys() -> Plan:
    """Items from before ``ns_key`` (list_namespaces' sort key) get it: on the server in one
    update when it has pipeline updates with ``$reduce``, else computed here."""
    try:
        yield Write((q.ns_key_migration(),))
        return None
    except (NotImplementedError, TypeError, OperationFailure) as exc:  # mongomock: no $reduce
        logger.debug("ns_key migration on the server failed (%s); computing the keys here", exc)
    docs = yield Find(
        "items", {q.NS_KEY: {"$exists": False}, "namespace.0": {"$exists": True}}, {"_id": 1, "namespace": 1},
        batch_size=LARGE_BATCH,
    )
    if docs:
        yield Write(tuple(q.ns_key_request(d["_id"], d["namespace"]) for d in docs))
    return None


def sweep_plan(now: datetime, with_vectors: bool) -> Plan:
    """Delete expired items (and their vectors): for servers or fakes with no TTL monitor."""
    reqs = []
    if with_vectors:
        reqs.append(q.WriteRequest("vectors", "delete_many", {"expires_at": {"$lte": now}}))
    reqs.append(q.WriteRequest("items", "delete_many", {"expires_at": {"$lte": now}}))
    outcome: WriteOutcome = yield Write(tuple(reqs))
    if outcome.errors:
        raise WriteError([((), "", f"the TTL sweep's delete failed: {msg}") for _, msg in outcome.errors])
    return outcome.deleted


def status_plan(index: IndexSettings | None, vectors_collection: str = "") -> Plan:
    """What ``mongostore doctor`` prints: server, search path, indexes, counts.

    ``items_missing_vectors``: items listing text hashes without a vector document
    (unscored by semantic search until their next put re-embeds them).
    """
    caps: Capabilities = yield Probe(index.index_name if index is not None else "")
    steps: list[Step] = [Count("items", {}), ListIndexes("items")]
    if index is not None:
        steps += [Count("vectors", {}), ListIndexes("vectors")]
        if vectors_collection:
            steps.append(Aggregate("items", missing_vectors_pipeline(vectors_collection)))
    answers = yield Parallel(tuple(steps))
    missing: int | None = None
    if index is not None and vectors_collection:
        missing = int(answers[4][0]["n"]) if answers[4] else 0
    search_index: dict[str, Any] | None = None
    if index is not None and (caps.vector_search or caps.search_commands):
        found = yield ListSearchIndexes("vectors", index.index_name)
        search_index = found[0] if found else None
    return {
        "server_version": caps.server_version,
        "fake": caps.fake,
        "vector_search_available": caps.vector_search,
        "search_path": "none (no index configured)" if index is None else ("atlas" if caps.vector_search else "local"),
        "client_bulk_write": caps.client_bulk_write,
        "items": answers[0],
        "item_indexes": answers[1],
        "vectors": answers[2] if index is not None else None,
        "vector_indexes": answers[3] if index is not None else None,
        "vector_search_index": search_index,
        "items_missing_vectors": missing,
        "detail": caps.detail,
    }


def aggregate_plan(pipeline: list[dict[str, Any]]) -> Plan:
    """The pipeline's output documents, with ints as ints (``plain_value``) on every backend."""
    docs = yield Aggregate("items", pipeline)
    return [plain_value(doc) for doc in docs]


__all__ = [
    "NO_SEARCH_CODES",
    "BatchOutcome",
    "PlanContext",
    "aggregate_plan",
    "batch_outcome_plan",
    "batch_plan",
    "check_op",
    "is_no_search_error",
    "probe_plan",
    "search_probe_plan",
    "server_probe_plan",
    "setup_plan",
    "status_plan",
    "sweep_plan",
]
