"""The only code that calls pymongo and the embedder: ``run_sync`` and ``run_async``.

Each driver pumps a plan (see ``_plan``): it runs the step the plan yields, sends
the answer back, or throws the step's exception into the plan so the plan can
decide (e.g. fall back to local ranking when ``$vectorSearch`` is unsupported).

``SyncIO`` works on pymongo ``Collection`` s (and mongomock); ``AsyncIO`` on pymongo
``AsyncCollection`` s and on Motor collections, whose ``aggregate`` and
``list_search_indexes`` return cursors without ``await`` (handled by ``_maybe_await``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from pymongo import DeleteMany, DeleteOne, UpdateMany, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, ClientBulkWriteException, CollectionInvalid, OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.config import VectorSearchMode
from mongostore.core.plan import Plan, search_probe_plan, server_probe_plan
from mongostore.core.queries import IndexSpec, Role, WriteRequest
from mongostore.core.steps import (
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
    ServerInfo,
    Sleep,
    Step,
    UpdateSearchIndex,
    Write,
    WriteOutcome,
)
from mongostore.drivers.mongomock_compat import is_fake

T = TypeVar("T")

# While the vector index is missing or building, ask again this often (seconds).
RECHECK_SECONDS = 30.0
NAMESPACE_EXISTS = 48


def run_sync(plan: Plan, io: SyncIO) -> Any:
    """Drive a plan to completion with blocking I/O."""
    try:
        step = next(plan)
        while True:
            try:
                answer = io.execute(step)
            except Exception as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(answer)
    except StopIteration as stop:
        return stop.value


async def run_async(plan: Plan, io: AsyncIO) -> Any:
    """Drive a plan to completion with asyncio I/O; ``Parallel`` steps run concurrently."""
    try:
        step = next(plan)
        while True:
            try:
                answer = await io.execute(step)
            except Exception as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(answer)
    except StopIteration as stop:
        return stop.value


# --------------------------------------------------------------------------- shared helpers


def _model(req: WriteRequest, namespace: str | None = None) -> Any:
    ns: dict[str, Any] = {"namespace": namespace} if namespace else {}
    if req.kind == "update_one":
        return UpdateOne(req.filter, req.update or {}, upsert=req.upsert, **ns)
    if req.kind == "update_many":
        return UpdateMany(req.filter, req.update or {}, upsert=req.upsert, **ns)
    if req.kind == "delete_one":
        return DeleteOne(req.filter, **ns)
    return DeleteMany(req.filter, **ns)


def _find_cursor(coll: Any, step: Find) -> Any:
    """``find`` is synchronous in pymongo, pymongo async and Motor alike; only iterating differs."""
    # A copy: mongomock reorders the projection it is given, in place.
    cur = coll.find(step.filter, dict(step.projection) if step.projection is not None else None)
    if step.sort:
        cur = cur.sort(step.sort)
    if step.skip:
        cur = cur.skip(step.skip)
    if step.limit:
        cur = cur.limit(step.limit)
    if step.batch_size:
        cur = cur.batch_size(step.batch_size)
    return cur


def _aggregate_kwargs(step: Aggregate) -> dict[str, Any]:
    return {"batchSize": step.batch_size} if step.batch_size else {}


def _index_kwargs(spec: IndexSpec) -> dict[str, Any]:
    kw: dict[str, Any] = {"name": spec.name}
    if spec.unique:
        kw["unique"] = True
    if spec.expire_after_seconds is not None:
        kw["expireAfterSeconds"] = spec.expire_after_seconds
    return kw


def _client_models(items: Any, vectors: Any | None, requests: tuple[WriteRequest, ...]) -> list[Any]:
    """Models for a client-level bulk_write: each names its collection (``db.coll``)."""
    names = {"items": items.full_name, "vectors": vectors.full_name if vectors is not None else ""}
    return [_model(r, names[r.role]) for r in requests]


def _by_collection(requests: tuple[WriteRequest, ...]) -> list[tuple[Role, list[int]]]:
    """Request indexes per collection, in request order: one bulk_write each.

    The two bulk writes may run at once. Order between them does not matter for
    correctness: a vector counts only while its item lists its text hash, so
    whichever lands first, a search never returns a stale match, and the next put
    (which compares with the stored vectors' hashes) repairs a half-done write.
    """
    groups: dict[Role, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(req.role, []).append(i)
    return list(groups.items())


def _bulk_errors(exc: BulkWriteError, indexes: list[int]) -> list[tuple[int, str]]:
    """Per-request errors of an unordered bulk write; anything else is raised.

    A write-concern error (``w: "majority"`` timed out...) means the writes were
    applied on the primary but not acknowledged as asked: no write of the bulk is
    known to be durable, so the error goes to the caller, never reported as success.
    """
    details: Any = exc.details or {}
    if details.get("writeConcernErrors") or not details.get("writeErrors"):
        raise exc
    return [(indexes[e["index"]], str(e.get("errmsg", e))) for e in details["writeErrors"]]


def _client_bulk_errors(exc: ClientBulkWriteException) -> list[tuple[int, str]]:
    """Per-request errors of an unordered client-level bulk write (every request was tried).

    A top-level error (e.g. network) or a write-concern error is not a per-item
    rejection: raised, as in ``_bulk_errors``.
    """
    raw: list[Any] = list(exc.write_errors or [])
    if not raw or exc.error or exc.write_concern_errors:
        raise exc
    return [(int(e["idx"]), str(e.get("errmsg", e))) for e in raw]


def _deleted(result: Any) -> int:
    return int(getattr(result, "deleted_count", 0) or 0)


def _wants_item_deletions(requests: tuple[WriteRequest, ...]) -> bool:
    return any(r.role == "items" and r.kind.startswith("delete") for r in requests)


def _client_deleted(result: Any, requests: tuple[WriteRequest, ...]) -> int:
    """Items deleted by a client-level bulk_write: its ``deleted_count`` sums every
    collection, so count the item deletions from the verbose per-request results."""
    if not _wants_item_deletions(requests):
        return 0
    per_request = getattr(result, "delete_results", None) or {}
    return sum(int(r.deleted_count) for i, r in per_request.items() if requests[int(i)].role == "items")


def _created_concurrently(exc: Exception) -> bool:
    # pymongo raises CollectionInvalid when it sees the collection first; when another
    # process wins the race between its check and the create, the server says 48.
    return isinstance(exc, CollectionInvalid) or (isinstance(exc, OperationFailure) and exc.code == NAMESPACE_EXISTS)


def _disabled(base: Capabilities, step: DisableVectorSearch) -> Capabilities:
    return replace(
        base,
        vector_search=False,
        detail=step.reason,
        search_commands=base.search_commands if step.temporary else False,
        index_status=step.index_status,
        recheck=step.temporary,
    )


def _due(caps: Capabilities | None, checked_at: float, every: float, refresh: bool) -> bool:
    return caps is None or refresh or (caps.recheck and time.monotonic() - checked_at >= every)


# --------------------------------------------------------------------------- sync


class SyncIO:
    """Runs steps against pymongo ``Collection`` s; remembers the server's capabilities."""

    def __init__(
        self,
        items: Collection[Any],
        vectors: Collection[Any] | None,
        embeddings: Embeddings | None,
        mode: VectorSearchMode = "auto",
    ) -> None:
        self.items = items
        self.vectors = vectors
        self.embeddings = embeddings
        self.mode = mode
        self.server: Capabilities | None = None  # hello/buildInfo only: what writes need
        self.caps: Capabilities | None = None  # plus the search state: what searches need
        self.recheck_seconds = RECHECK_SECONDS
        self._checked_at = 0.0
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def coll(self, role: Role) -> Any:
        if role == "vectors":
            if self.vectors is None:
                raise RuntimeError("no vectors collection: configure index= for semantic search")
            return self.vectors
        return self.items

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="mongostore-read")
        return self._executor

    def server_info(self) -> Capabilities:
        if self.server is None:
            has_bulk = callable(getattr(self.items.database.client, "bulk_write", None))
            self.server = run_sync(server_probe_plan(fake=is_fake(self.items), has_client_bulk=has_bulk), self)
        return self.server

    def probe(self, index_name: str = "", refresh: bool = False) -> Capabilities:
        if _due(self.caps, self._checked_at, self.recheck_seconds, refresh):
            plan = search_probe_plan(
                self.server_info(),
                has_vectors=self.vectors is not None,
                mode=self.mode,
                index_name=index_name,
                previous=self.caps,
            )
            self.caps, self._checked_at = run_sync(plan, self), time.monotonic()
        assert self.caps is not None
        return self.caps

    def write(self, step: Write) -> WriteOutcome:
        caps = self.server_info() if len({r.role for r in step.requests}) > 1 else self.server
        if caps is not None and caps.client_bulk_write:
            models = _client_models(self.items, self.vectors, step.requests)
            verbose = _wants_item_deletions(step.requests)
            try:
                res = self.items.database.client.bulk_write(models, ordered=False, verbose_results=verbose)
            except ClientBulkWriteException as exc:
                return WriteOutcome(_client_bulk_errors(exc), round_trips=1)
            return WriteOutcome([], _client_deleted(res, step.requests), 1)
        groups = _by_collection(step.requests)

        def bulk(group: tuple[Role, list[int]]) -> tuple[list[tuple[int, str]], int]:
            role, indexes = group
            try:
                res = self.coll(role).bulk_write([_model(step.requests[i]) for i in indexes], ordered=False)
            except BulkWriteError as exc:
                return _bulk_errors(exc, indexes), 0
            return [], _deleted(res) if role == "items" else 0

        if len(groups) > 1 and not is_fake(self.items):
            done = list(self._pool().map(bulk, groups))
        else:
            done = [bulk(g) for g in groups]
        return WriteOutcome([e for errs, _ in done for e in errs], sum(d for _, d in done), len(groups))

    def execute(self, step: Step) -> Any:
        if isinstance(step, Find):
            return list(_find_cursor(self.coll(step.role), step))
        if isinstance(step, Aggregate):
            return list(self.coll(step.role).aggregate(step.pipeline, **_aggregate_kwargs(step)))
        if isinstance(step, Parallel):
            if len(step.steps) < 2 or is_fake(self.items):
                return [self.execute(s) for s in step.steps]
            # pymongo is thread-safe: independent reads overlap their round trips.
            return list(self._pool().map(self.execute, step.steps))
        if isinstance(step, Write):
            return self.write(step)
        if isinstance(step, Embed):
            assert self.embeddings is not None
            return self.embeddings.embed_documents(list(step.texts))
        if isinstance(step, Count):
            return self.coll(step.role).count_documents(step.filter)
        if isinstance(step, Probe):
            return self.probe(step.index_name, step.refresh)
        if isinstance(step, ServerInfo):
            return self.server_info()
        if isinstance(step, ServerCommand):
            return self.items.database.command(step.name)
        if isinstance(step, DisableVectorSearch):
            self.caps, self._checked_at = _disabled(self.caps or self.server_info(), step), time.monotonic()
            return None
        if isinstance(step, CreateIndexes):
            coll = self.coll(step.role)
            for spec in step.specs:
                coll.create_index(list(spec.keys), **_index_kwargs(spec))
            return None
        if isinstance(step, ListIndexes):
            return sorted(self.coll(step.role).index_information())
        if isinstance(step, EnsureCollection):
            coll = self.coll(step.role)
            if coll.name not in coll.database.list_collection_names():
                try:
                    coll.database.create_collection(coll.name)
                except (CollectionInvalid, OperationFailure) as exc:
                    if not _created_concurrently(exc):
                        raise
            return None
        if isinstance(step, ListSearchIndexes):
            return list(self.coll(step.role).list_search_indexes(step.name))
        if isinstance(step, CreateSearchIndex):
            model = SearchIndexModel(definition=step.definition, name=step.name, type=step.type)
            return self.coll(step.role).create_search_index(model)
        if isinstance(step, UpdateSearchIndex):
            return self.coll(step.role).update_search_index(step.name, step.definition)
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        raise TypeError(f"unknown step {step!r}")


# --------------------------------------------------------------------------- async


async def _maybe_await(value: Awaitable[T] | T) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


async def _to_list(cursor: Any) -> list[Any]:
    cursor = await _maybe_await(cursor)
    return list(await cursor.to_list(length=None))


class AsyncIO:
    """Runs steps against pymongo ``AsyncCollection`` s or Motor collections."""

    def __init__(self, items: Any, vectors: Any | None, embeddings: Embeddings | None, mode: VectorSearchMode = "auto"):
        self.items = items
        self.vectors = vectors
        self.embeddings = embeddings
        self.mode = mode
        self.server: Capabilities | None = None  # hello/buildInfo only: what writes need
        self.caps: Capabilities | None = None  # plus the search state: what searches need
        self.recheck_seconds = RECHECK_SECONDS
        self._checked_at = 0.0
        self._probe_lock: asyncio.Lock | None = None

    def coll(self, role: Role) -> Any:
        if role == "vectors":
            if self.vectors is None:
                raise RuntimeError("no vectors collection: configure index= for semantic search")
            return self.vectors
        return self.items

    def _lock(self) -> asyncio.Lock:
        if self._probe_lock is None:
            self._probe_lock = asyncio.Lock()
        return self._probe_lock

    async def server_info(self) -> Capabilities:
        if self.server is not None:
            return self.server
        async with self._lock():
            if self.server is None:
                client = self.items.database.client
                # Motor clients have no client-level bulk_write; pymongo's AsyncMongoClient does.
                has_bulk = callable(getattr(client, "bulk_write", None)) and not type(client).__module__.startswith(
                    "motor"
                )
                plan = server_probe_plan(fake=is_fake(self.items), has_client_bulk=has_bulk)
                self.server = await run_async(plan, self)
        return self.server

    async def probe(self, index_name: str = "", refresh: bool = False) -> Capabilities:
        if not _due(self.caps, self._checked_at, self.recheck_seconds, refresh):
            assert self.caps is not None
            return self.caps
        server = await self.server_info()
        async with self._lock():
            if _due(self.caps, self._checked_at, self.recheck_seconds, refresh):
                has_vectors = self.vectors is not None
                plan = search_probe_plan(
                    server, has_vectors=has_vectors, mode=self.mode, index_name=index_name, previous=self.caps
                )
                self.caps, self._checked_at = await run_async(plan, self), time.monotonic()
        assert self.caps is not None
        return self.caps

    async def write(self, step: Write) -> WriteOutcome:
        caps = await self.server_info() if len({r.role for r in step.requests}) > 1 else self.server
        if caps is not None and caps.client_bulk_write:
            models = _client_models(self.items, self.vectors, step.requests)
            verbose = _wants_item_deletions(step.requests)
            try:
                res = await self.items.database.client.bulk_write(models, ordered=False, verbose_results=verbose)
            except ClientBulkWriteException as exc:
                return WriteOutcome(_client_bulk_errors(exc), round_trips=1)
            return WriteOutcome([], _client_deleted(res, step.requests), 1)
        groups = _by_collection(step.requests)

        async def bulk(group: tuple[Role, list[int]]) -> tuple[list[tuple[int, str]], int]:
            role, indexes = group
            try:
                res = await self.coll(role).bulk_write([_model(step.requests[i]) for i in indexes], ordered=False)
            except BulkWriteError as exc:
                return _bulk_errors(exc, indexes), 0
            return [], _deleted(res) if role == "items" else 0

        done = await asyncio.gather(*(bulk(g) for g in groups))
        return WriteOutcome([e for errs, _ in done for e in errs], sum(d for _, d in done), len(groups))

    async def execute(self, step: Step) -> Any:
        if isinstance(step, Find):
            return await _to_list(_find_cursor(self.coll(step.role), step))
        if isinstance(step, Aggregate):
            return await _to_list(self.coll(step.role).aggregate(step.pipeline, **_aggregate_kwargs(step)))
        if isinstance(step, Parallel):
            return list(await asyncio.gather(*(self.execute(s) for s in step.steps)))
        if isinstance(step, Write):
            return await self.write(step)
        if isinstance(step, Embed):
            assert self.embeddings is not None
            return await self.embeddings.aembed_documents(list(step.texts))
        if isinstance(step, Count):
            return await self.coll(step.role).count_documents(step.filter)
        if isinstance(step, Probe):
            return await self.probe(step.index_name, step.refresh)
        if isinstance(step, ServerInfo):
            return await self.server_info()
        if isinstance(step, ServerCommand):
            return await self.items.database.command(step.name)
        if isinstance(step, DisableVectorSearch):
            base = self.caps or await self.server_info()
            self.caps, self._checked_at = _disabled(base, step), time.monotonic()
            return None
        if isinstance(step, CreateIndexes):
            coll = self.coll(step.role)
            for spec in step.specs:
                await coll.create_index(list(spec.keys), **_index_kwargs(spec))
            return None
        if isinstance(step, ListIndexes):
            return sorted(await self.coll(step.role).index_information())
        if isinstance(step, EnsureCollection):
            coll = self.coll(step.role)
            if coll.name not in await coll.database.list_collection_names():
                try:
                    await coll.database.create_collection(coll.name)
                except (CollectionInvalid, OperationFailure) as exc:
                    if not _created_concurrently(exc):
                        raise
            return None
        if isinstance(step, ListSearchIndexes):
            return await _to_list(self.coll(step.role).list_search_indexes(step.name))
        if isinstance(step, CreateSearchIndex):
            model = SearchIndexModel(definition=step.definition, name=step.name, type=step.type)
            return await self.coll(step.role).create_search_index(model)
        if isinstance(step, UpdateSearchIndex):
            return await self.coll(step.role).update_search_index(step.name, step.definition)
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        raise TypeError(f"unknown step {step!r}")


