"""The asyncio driver: ``run_async`` pumps a plan, ``AsyncIO`` runs its steps.

``AsyncIO`` works on pymongo ``AsyncCollection`` s and on Motor collections, whose
``aggregate`` and ``list_search_indexes`` return cursors without ``await`` (handled by
``_maybe_await``); ``Parallel`` steps run concurrently. How it runs each kind of step
is one entry of ``HANDLERS``, the twin of ``drivers.sync.HANDLERS``. No thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from pymongo.errors import BulkWriteError, ClientBulkWriteException, CollectionInvalid, OperationFailure

from mongostore.core.plan import Plan
from mongostore.core.queries import Role
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
    ShardCollection,
    ShardKeys,
    Sleep,
    Step,
    UpdateSearchIndex,
    Write,
    WriteOutcome,
)
from mongostore.drivers import shared

T = TypeVar("T")


async def run_async(plan: Plan, io: AsyncIO) -> Any:
    """Drive a plan to completion with asyncio I/O, inside one unit of work of the backend;
    ``Parallel`` steps run concurrently."""
    aunit = io.backend.aunit
    async with aunit() if aunit is not None else _held(io.backend.unit):
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


@contextlib.asynccontextmanager
async def _held(unit: Callable[[], AbstractContextManager[Any]]) -> AsyncIterator[None]:
    with unit():
        yield


def _is_motor(client: Any) -> bool:
    try:
        from motor.motor_asyncio import AsyncIOMotorClient
    except ImportError:
        return False
    return isinstance(client, AsyncIOMotorClient)


async def _maybe_await(value: Awaitable[T] | T) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


async def _to_list(cursor: Any) -> list[Any]:
    cursor = await _maybe_await(cursor)
    return list(await cursor.to_list(length=None))


class AsyncIO(shared.IOBase):
    """Runs steps against pymongo ``AsyncCollection`` s or Motor; remembers the server's capabilities."""

    _probe_lock: asyncio.Lock | None = None  # made on first use, in the running loop

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
                has_bulk = callable(getattr(client, "bulk_write", None)) and not _is_motor(client)
                self.server = await run_async(self.server_plan(has_bulk), self)
        return self.server

    async def probe(self, index_name: str = "", refresh: bool = False) -> Capabilities:
        if self.probe_due(refresh):
            server = await self.server_info()
            async with self._lock():
                if self.probe_due(refresh):
                    self.note_caps(await run_async(self.search_plan(server, index_name), self))
        assert self.caps is not None
        return self.caps

    async def disable_vector_search(self, step: DisableVectorSearch) -> None:
        self.note_disabled(self.caps or await self.server_info(), step)

    async def write(self, step: Write) -> WriteOutcome:
        caps = await self.server_info() if len({r.role for r in step.requests}) > 1 else self.server
        if caps is not None and caps.client_bulk_write:
            models = shared.client_models(self.items, self.vectors, step.requests)
            verbose = shared.wants_item_deletions(step.requests)
            try:
                res = await self.items.database.client.bulk_write(models, ordered=False, verbose_results=verbose)
            except ClientBulkWriteException as exc:
                return WriteOutcome(shared.client_bulk_errors(exc), round_trips=1)
            return WriteOutcome([], shared.client_deleted(res, step.requests), 1, shared.matched(res))
        groups = shared.by_collection(step.requests)

        async def bulk(group: tuple[Role, list[int]]) -> tuple[list[tuple[int, str]], int, int]:
            role, indexes = group
            try:
                res = await self.coll(role).bulk_write([shared.model(step.requests[i]) for i in indexes], ordered=False)
            except BulkWriteError as exc:
                return shared.bulk_errors(exc, indexes), 0, 0
            return [], shared.deleted(res) if role == "items" else 0, shared.matched(res)

        done = await _all(bulk(g) for g in groups)
        return WriteOutcome(
            [e for errs, _, _ in done for e in errs], sum(d for _, d, _ in done), len(groups), sum(m for *_, m in done)
        )

    async def execute(self, step: Step) -> Any:
        return await shared.handler_for(HANDLERS, step)(self, step)


# --------------------------------------------------------------------------- one handler per step


async def _parallel(io: AsyncIO, step: Parallel) -> list[Any]:
    return await _all(io.execute(s) for s in step.steps)


async def _all(aws: Iterable[Awaitable[Any]]) -> list[Any]:
    """``asyncio.gather``, without its task when there is only one awaitable: each task
    costs the event loop a few scheduling passes (~10 us), paid on every coalesced batch."""
    pending = list(aws)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


async def _embed(io: AsyncIO, step: Embed) -> list[list[float]]:
    assert io.embeddings is not None
    return await io.embeddings.aembed_documents(list(step.texts))


async def _create_indexes(io: AsyncIO, step: CreateIndexes) -> None:
    coll = io.coll(step.role)
    for spec in step.specs:
        await coll.create_index(list(spec.keys), **shared.index_kwargs(spec))


async def _list_indexes(io: AsyncIO, step: ListIndexes) -> list[str]:
    return sorted(await io.coll(step.role).index_information())


async def _ensure_collection(io: AsyncIO, step: EnsureCollection) -> None:
    coll = io.coll(step.role)
    if coll.name not in await coll.database.list_collection_names():
        try:
            await coll.database.create_collection(coll.name)
        except (CollectionInvalid, OperationFailure) as exc:
            if not shared.created_concurrently(exc):
                raise


async def _sleep(io: AsyncIO, step: Sleep) -> None:
    await asyncio.sleep(step.seconds)


# Entries return an awaitable: a coroutine function, or a lambda over a call that
# already returns one (pymongo async and Motor methods; ``_to_list`` for cursors).
async def _shard_keys(io: AsyncIO, step: ShardKeys) -> dict[Role, dict[str, Any] | None]:
    config, filt, roles = shared.shard_keys_read(io.items, io.vectors)
    return shared.shard_keys_answer(await _to_list(config.find(filt, {"key": 1})), roles)


async def _shard_collection(io: AsyncIO, step: ShardCollection) -> Any:
    admin, command = shared.shard_collection_command(io.coll(step.role), step.key)
    return await admin.command(command)


HANDLERS: dict[type[Any], Callable[[AsyncIO, Any], Awaitable[Any]]] = {
    Find: lambda io, s: _to_list(shared.find_cursor(io.coll(s.role), s)),
    Aggregate: lambda io, s: _to_list(io.coll(s.role).aggregate(s.pipeline, **shared.aggregate_kwargs(s))),
    Parallel: _parallel,
    Write: lambda io, s: io.write(s),
    Embed: _embed,
    Count: lambda io, s: io.coll(s.role).count_documents(s.filter),
    Probe: lambda io, s: io.probe(s.index_name, s.refresh),
    ServerInfo: lambda io, s: io.server_info(),
    ServerCommand: lambda io, s: io.items.database.command(s.name),
    DisableVectorSearch: lambda io, s: io.disable_vector_search(s),
    CreateIndexes: _create_indexes,
    ListIndexes: _list_indexes,
    EnsureCollection: _ensure_collection,
    ListSearchIndexes: lambda io, s: _to_list(io.coll(s.role).list_search_indexes(s.name)),
    CreateSearchIndex: lambda io, s: io.coll(s.role).create_search_index(shared.search_index_model(s)),
    UpdateSearchIndex: lambda io, s: io.coll(s.role).update_search_index(s.name, s.definition),
    ShardKeys: _shard_keys,
    ShardCollection: _shard_collection,
    Sleep: _sleep,
}
"""How ``AsyncIO`` runs each kind of step: one entry per step type of ``core.steps``."""
