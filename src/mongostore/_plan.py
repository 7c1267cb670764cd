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
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from langgraph.store.base import (
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    _validate_namespace,
    validate_op_namespace,
)
from pymongo.errors import OperationFailure

from mongostore import _queries as q
from mongostore import _vectors
from mongostore._codec import (
    ITEM_PROJECTION,
    check_value,
    doc_to_item,
    doc_to_search_item,
    extract_texts,
    item_id,
    namespace_path,
    text_hash,
    vector_id,
)
from mongostore._steps import (
    Aggregate,
    Capabilities,
    Count,
    CreateIndexes,
    CreateSearchIndex,
    DisableVectorSearch,
    Embed,
    EnsureCollection,
    Find,
    ListIndexes,
    ListSearchIndexes,
    Parallel,
    Probe,
    ServerCommand,
    Sleep,
    Step,
    UpdateSearchIndex,
    Write,
    WriteOutcome,
)
from mongostore.config import IndexSettings, TTLSettings, VectorSearchMode
from mongostore.errors import InvalidFilterError, VectorIndexError, WriteError

logger = logging.getLogger("mongostore")

# Server answers that mean "this deployment has no Atlas Search / $vectorSearch".
NO_SEARCH_CODES = frozenset({31082, 6047401, 115, 59, 40324})
MAX_CANDIDATES = 10_000
# Cursor batch size for reads whose every document is needed (the server caps a batch at 16 MiB).
LARGE_BATCH = 100_000

Plan = Generator[Step, Any, Any]


@dataclass(frozen=True)
class PlanContext:
    """What a plan needs to know about its store; frozen, no I/O handles."""

    items_name: str
    index: IndexSettings | None
    ttl: TTLSettings | None
    now: datetime
    # The store's client-side matrix of stored embeddings (local ranking); None: a fresh one per search.
    vector_cache: _vectors.VectorCache | None = None

    @property
    def expiry_cutoff(self) -> datetime | None:
        """``now`` when expired items must be hidden (``omit_expired``), else None."""
        return self.now if self.ttl is not None and self.ttl.omit_expired else None


def is_no_search_error(exc: BaseException) -> bool:
    if isinstance(exc, OperationFailure):
        return exc.code in NO_SEARCH_CODES
    # mongomock (and its async wrappers) know no search stages or commands.
    return isinstance(exc, (NotImplementedError, TypeError, AttributeError))


# --------------------------------------------------------------------------- validation


def _check_paging(op: SearchOp | ListNamespacesOp) -> None:
    for name in ("limit", "offset"):
        v = getattr(op, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(op).__name__}.{name} must be a non-negative int, got {v!r}")


def _validate(op: Op) -> None:
    if isinstance(op, PutOp):
        # validate_op_namespace checks labels only; a put also needs a non-empty,
        # non-"langgraph" namespace, including when the op comes straight to batch().
        _validate_namespace(op.namespace)
        if op.index not in (None, False) and not (
            isinstance(op.index, list) and all(isinstance(f, str) for f in op.index)
        ):
            raise ValueError(f"PutOp.index must be None, False or a list of field paths, got {op.index!r}")
        if op.ttl is not None and (not isinstance(op.ttl, (int, float)) or op.ttl <= 0):
            raise ValueError(f"PutOp.ttl must be a positive number of minutes or None, got {op.ttl!r}")
    elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
        validate_op_namespace(op)
        if isinstance(op, (SearchOp, ListNamespacesOp)):
            _check_paging(op)
        if isinstance(op, ListNamespacesOp):
            if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 0):
                raise ValueError(f"max_depth must be a non-negative int or None, got {op.max_depth!r}")
            for cond in op.match_conditions or ():
                if cond.match_type not in ("prefix", "suffix"):
                    raise InvalidFilterError(f"unknown match_type {cond.match_type!r}: use 'prefix' or 'suffix'")
    else:
        raise ValueError(f"Unknown operation type: {type(op).__name__}")


def check_op(op: Op) -> None:
    """Every client-side check of one op: namespace, paging, filter, value, ttl, index.

    ``batch_plan`` runs it on each op before any I/O; ``AsyncMongoStore`` runs it
    before an op is queued, so a bad call fails only its own caller.
    """
    _validate(op)
    if isinstance(op, SearchOp):
        q.value_filter(op.filter)
    elif isinstance(op, PutOp) and op.value is not None:
        check_value(op.namespace, str(op.key), op.value)


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


def batch_plan(ops: Sequence[Op], ctx: PlanContext) -> Plan:
    """Run a LangGraph batch: results in op order, reads before writes, puts deduped."""
    for op in ops:
        check_op(op)

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
            key = str(op.key)
            value = None if op.value is None else dict(op.value)
            puts[(op.namespace, key)] = _Put(op.namespace, key, value, op.index, op.ttl)

    semantic = [s for s in searches if s.semantic and s.op.limit > 0]
    use_atlas = False
    if semantic:
        assert index is not None
        caps: Capabilities = yield Probe()
        use_atlas = caps.vector_search
        # Queries first, in one call: their searches can then join the batch's other reads.
        vectors = yield from _embed(tuple(dict.fromkeys(str(s.op.query) for s in semantic)), index)
        for s in semantic:
            s.query_vector = np.asarray(vectors[str(s.op.query)], dtype=np.float64).tolist()  # plain floats

    # ---- 1. every read, in one parallel step -------------------------------------------
    put_list = list(puts.values())
    indexed_puts = [p for p in put_list if p.value is not None] if index is not None else []
    while True:
        reads = _reads(gets, searches, listings, put_list, ctx, use_atlas)
        try:
            answers: list[Any] = list((yield Parallel(tuple(reads)))) if reads else []
            break
        except Exception as exc:
            if not (use_atlas and is_no_search_error(exc)):
                raise
            logger.warning("$vectorSearch is not available (%s); ranking locally from now on", exc)
            yield DisableVectorSearch(str(exc))
            use_atlas = False
    answers.reverse()  # consumed in the order the reads were added

    refresh: dict[str, float] = {}  # item id -> its ttl_minutes, for refresh_ttl

    def note_refresh(docs: list[dict[str, Any]], wanted: bool, id_of: Any) -> None:
        if not wanted:
            return
        for doc in docs:
            if doc.get("ttl_minutes") is not None:
                refresh[id_of(doc)] = float(doc["ttl_minutes"])

    if gets:
        by_id = {doc["_id"]: doc for doc in answers.pop()}
        for pos, gop in gets:
            found = by_id.get(item_id(gop.namespace, str(gop.key)))
            results[pos] = doc_to_item(found) if found else None
            if found:
                note_refresh([found], gop.refresh_ttl, lambda d: d["_id"])
    first_answers: dict[int, Any] = {}  # search position -> its local candidates or its first Atlas page
    for s in searches:
        if s.op.limit == 0:
            results[s.pos] = []
        elif not s.semantic:
            docs = answers.pop()
            results[s.pos] = [doc_to_search_item(d) for d in docs]
            note_refresh(docs, s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]))
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
            old = stored.get(p.id, {})
            for fname, (text, h) in texts.items():
                if old.get(fname) != h:
                    to_embed.setdefault(text)
    packed: dict[str, Any] = {}  # text -> its float32 BinData vector
    if to_embed and index is not None:
        embedded = yield from _embed(tuple(to_embed), index)
        packed = {text: q.float32_vector(vec) for text, vec in embedded.items()}

    # ---- 3. semantic searches: rank, page, ask Atlas again if a page came back short ------
    for s in semantic:
        assert index is not None
        if use_atlas:
            docs_scores = yield from _atlas_search(s, index, ctx, first_answers[s.pos])
        else:
            docs_scores = yield from _local_search(s, index, ctx, first_answers[s.pos])
        results[s.pos] = [doc_to_search_item(d, score) for d, score in docs_scores]
        note_refresh([d for d, _ in docs_scores], s.op.refresh_ttl, lambda d: item_id(tuple(d["namespace"]), d["key"]))

    # ---- 4. one write: TTL refreshes, then vectors, then items ---------------------------
    requests: list[q.WriteRequest] = []
    put_ids = {p.id for p in put_list}
    refresh = {iid: ttl for iid, ttl in refresh.items() if iid not in put_ids}
    if refresh:
        by_ttl: dict[float, list[str]] = {}
        for iid, ttl in refresh.items():
            by_ttl.setdefault(ttl, []).append(iid)
        requests.extend(q.refresh_ttl_requests("items", by_ttl, ctx.now))
        if index is not None:
            requests.extend(q.refresh_ttl_requests("vectors", by_ttl, ctx.now, id_field="item_id"))
    item_requests: list[q.WriteRequest] = []
    cached: list[tuple[int, str, str, str, Any]] = []  # (request index, item, field, hash, vector): the cache
    for p in put_list:
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
                    cached.append((len(requests), p.id, fname, h, packed[text]))
                    requests.append(
                        q.put_vector_request(
                            p.namespace, p.key, fname, h, packed[text], filter_values, ctx.now, p.ttl
                        )
                    )
            if set(old) - set(texts):
                requests.append(q.prune_vectors_request(p.namespace, p.key, list(texts)))
            if unchanged:
                requests.append(q.retag_vectors_request(p.namespace, p.key, filter_values, ctx.now, p.ttl))
        item_requests.append(q.put_item_request(p.namespace, p.key, p.value, ctx.now, p.ttl, hashes))
    requests.extend(item_requests)
    if requests:
        outcome: WriteOutcome = yield Write(tuple(requests))
        if ctx.vector_cache is not None and ctx.vector_cache.in_use and cached:  # (Atlas-only stores: no)
            failed = {idx for idx, _ in outcome.errors}
            ctx.vector_cache.add_many([(iid, f, h, vec) for idx, iid, f, h, vec in cached if idx not in failed])
        failures: dict[tuple[tuple[str, ...], str], str] = {}
        for idx, msg in sorted(outcome.errors):
            target = requests[idx].item
            if target is not None:
                failures.setdefault(target, msg)
            else:
                logger.warning("a TTL refresh write failed: %s", msg)
        if failures:
            raise WriteError([(ns, key, msg) for (ns, key), msg in failures.items()])
    return results


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


def _unscored_filter(op: SearchOp, cutoff: datetime | None) -> dict[str, Any]:
    base = q.search_filter(op.namespace_prefix, op.filter, cutoff)
    missing = {"vectors": {"$exists": False}}
    return {"$and": [base, missing]} if base else missing


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
        # Items that have no vectors at all come after every scored item. An item whose
        # vectors are all stale (a write failed between them) is left out until its next
        # put repairs it, as on the Atlas path, which cannot see it either.
        if len(ranked) < end:
            unscored = sorted(cands.unscored, key=lambda d: (-d["updated_at"].timestamp(), d["_id"]))
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
        page: list[tuple[dict[str, Any], float | None]] = [(d["item"], float(d["score"])) for d in facet["page"]]
        exhausted = hits < k
        if len(page) >= op.limit or exhausted or k >= MAX_CANDIDATES:
            break
        k = min(MAX_CANDIDATES, k * 4)
        out = yield Aggregate("vectors", _atlas_pipeline(s, index, ctx, k))
    if len(page) < op.limit and exhausted:
        # Every scored item was seen: fill the page with items that have no vectors
        # (index=False, no indexed field), newest first, as InMemoryStore does.
        skip = max(0, op.offset - scored)
        docs = yield Find(
            "items", _unscored_filter(op, ctx.expiry_cutoff), ITEM_PROJECTION, q.ITEM_SORT, skip, op.limit - len(page)
        )
        page.extend((d, None) for d in docs)
    return page


# --------------------------------------------------------------------------- capabilities

# MongoDB 8.0 speaks wire version 25; its clients can bulk_write across collections.
CLIENT_BULK_WRITE_WIRE_VERSION = 25
FAKE_SERVER = "mongomock (in-memory, for development)"


def _search_probe_answer(exc: Exception) -> tuple[bool, str]:
    if isinstance(exc, OperationFailure) and exc.code in NO_SEARCH_CODES:
        return False, f"server has no Atlas Search (code {exc.code})"
    if isinstance(exc, (TypeError, AttributeError, NotImplementedError)):
        return False, "this backend has no search index commands"
    raise exc


def probe_plan(*, fake: bool, has_vectors: bool, mode: VectorSearchMode, has_client_bulk: bool) -> Plan:
    """What the server can do: its version, client-level bulk_write, ``$vectorSearch``.

    Run once per store by its driver. ``mode`` ``atlas``/``local`` (index config)
    overrides what the server says about search.
    """
    version, wire = FAKE_SERVER, 0
    if not fake:  # mongomock answers no server commands
        info = yield ServerCommand("buildInfo")
        version = str(info.get("version", "?"))
        wire = int((yield ServerCommand("hello")).get("maxWireVersion", 0))
    search = (False, "no index configured")
    if has_vectors and mode == "auto":
        try:
            yield ListSearchIndexes("vectors")
            search = (True, "list_search_indexes answered")
        except Exception as exc:
            search = _search_probe_answer(exc)
    return Capabilities(
        server_version=version,
        fake=fake,
        vector_search={"atlas": True, "local": False}.get(mode, search[0]),
        client_bulk_write=(not fake) and has_client_bulk and wire >= CLIENT_BULK_WRITE_WIRE_VERSION,
        detail=search[1] if mode == "auto" else f"vector_search={mode!r} set in index config",
    )


# --------------------------------------------------------------------------- setup, sweep, status


def _definition_matches(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    def key(defn: dict[str, Any]) -> tuple[Any, ...]:
        fields = defn.get("fields", [])
        vec = [
            (f.get("path"), f.get("numDimensions"), f.get("similarity")) for f in fields if f.get("type") == "vector"
        ]
        filters = sorted(f.get("path") for f in fields if f.get("type") == "filter")
        return (vec, filters)

    return key(existing) == key(wanted)


def setup_plan(index: IndexSettings | None) -> Plan:
    """Create B-tree and TTL indexes, and the vector index when the server has search."""
    yield CreateIndexes("items", tuple(q.item_indexes()))
    yield from _migrate_ns_keys()
    if index is None:
        return None
    yield CreateIndexes("vectors", tuple(q.vector_indexes()))
    caps: Capabilities = yield Probe()
    if not caps.vector_search:
        logger.info("no vector search on this server (%s): searches rank locally", caps.detail or caps.server_version)
        return None
    wanted = q.vector_index_definition(index.dims, index.similarity, index.filter_fields)
    yield EnsureCollection("vectors")
    existing = yield ListSearchIndexes("vectors", index.index_name)
    if not existing:
        logger.info("creating vector search index %r", index.index_name)
        yield CreateSearchIndex("vectors", index.index_name, wanted)
    elif not _definition_matches(existing[0].get("latestDefinition") or {}, wanted):
        logger.info("updating vector search index %r (dims, similarity or filters changed)", index.index_name)
        yield UpdateSearchIndex("vectors", index.index_name, wanted)
    deadline = time.monotonic() + index.setup_timeout
    delay = 0.2
    while True:
        found = yield ListSearchIndexes("vectors", index.index_name)
        doc = found[0] if found else {}
        status = doc.get("status", "MISSING")
        if doc.get("queryable") is True and _definition_matches(doc.get("latestDefinition") or wanted, wanted):
            logger.info("vector search index %r is queryable (%s)", index.index_name, status)
            return None
        if status == "FAILED":
            raise VectorIndexError(f"vector search index {index.index_name!r} failed: {doc.get('statusDetail') or doc}")
        if time.monotonic() >= deadline:
            raise VectorIndexError(
                f"vector search index {index.index_name!r} not queryable after {index.setup_timeout:.0f}s "
                f"(status {status}); raise index['setup_timeout'] or check the search node's logs"
            )
        logger.info("waiting for vector search index %r: status %s", index.index_name, status)
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
    return outcome.deleted


def status_plan(index: IndexSettings | None) -> Plan:
    """What ``mongostore doctor`` prints: server, search path, indexes, counts."""
    caps: Capabilities = yield Probe()
    steps: list[Step] = [Count("items", {}), ListIndexes("items")]
    if index is not None:
        steps += [Count("vectors", {}), ListIndexes("vectors")]
    answers = yield Parallel(tuple(steps))
    search_index: dict[str, Any] | None = None
    if index is not None and caps.vector_search:
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
        "detail": caps.detail,
    }


def aggregate_plan(pipeline: list[dict[str, Any]]) -> Plan:
    return (yield Aggregate("items", pipeline))


__all__ = [
    "NO_SEARCH_CODES",
    "PlanContext",
    "aggregate_plan",
    "batch_plan",
    "check_op",
    "is_no_search_error",
    "probe_plan",
    "setup_plan",
    "status_plan",
    "sweep_plan",
]
