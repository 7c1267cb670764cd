"""The blocking driver: ``run_sync`` pumps a plan, ``SyncIO`` runs its steps on pymongo.

Each driver pumps a plan (see ``core.plan``): it runs the step the plan yields, sends
the answer back, or throws the step's exception into the plan so the plan can
decide (e.g. fall back to local ranking when ``$vectorSearch`` is unsupported).
``SyncIO`` works on pymongo ``Collection`` s (and mongomock); how it runs each kind of
step is one entry of ``HANDLERS``. The async twin is ``drivers.aio``.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

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


def run_sync(plan: Plan, io: SyncIO) -> Any:
    """Drive a plan to completion with blocking I/O, inside one unit of work of the backend."""
    with io.backend.unit():
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


class SyncIO(shared.IOBase):
    """Runs steps against pymongo ``Collection`` s; remembers the server's capabilities."""

    _executor: concurrent.futures.ThreadPoolExecutor | None = None  # made on first use

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="mongostore-read")
        return self._executor

    def server_info(self) -> Capabilities:
        if self.server is None:
            self.server = run_sync(
                self.server_plan(callable(getattr(self.items.database.client, "bulk_write", None))), self
            )
        return self.server

    def probe(self, index_name: str = "", refresh: bool = False) -> Capabilities:
        if self.probe_due(refresh):
            self.note_caps(run_sync(self.search_plan(self.server_info(), index_name), self))
        assert self.caps is not None
        return self.caps

    def disable_vector_search(self, step: DisableVectorSearch) -> None:
        self.note_disabled(self.caps or self.server_info(), step)

    def write(self, step: Write) -> WriteOutcome:
        caps = self.server_info() if len({r.role for r in step.requests}) > 1 else self.server
        if caps is not None and caps.client_bulk_write:
            models = shared.client_models(self.items, self.vectors, step.requests)
            verbose = shared.wants_item_deletions(step.requests)
            try:
                res = self.items.database.client.bulk_write(models, ordered=False, verbose_results=verbose)
            except ClientBulkWriteException as exc:
                return WriteOutcome(shared.client_bulk_errors(exc), round_trips=1)
            return WriteOutcome([], shared.client_deleted(res, step.requests), 1, shared.matched(res))
        groups = shared.by_collection(step.requests)

        def bulk(group: tuple[Role, list[int]]) -> tuple[list[tuple[int, str]], int, int]:
            role, indexes = group
            try:
                res = self.coll(role).bulk_write([shared.model(step.requests[i]) for i in indexes], ordered=False)
            except BulkWriteError as exc:
                return shared.bulk_errors(exc, indexes), 0, 0
            return [], shared.deleted(res) if role == "items" else 0, shared.matched(res)

        if len(groups) > 1 and self.backend.threads:
            done = list(self._pool().map(bulk, groups))
        else:
            done = [bulk(g) for g in groups]
        return WriteOutcome(
            [e for errs, _, _ in done for e in errs], sum(d for _, d, _ in done), len(groups), sum(m for *_, m in done)
        )

    def execute(self, step: Step) -> Any:
        return shared.handler_for(HANDLERS, step)(self, step)


# --------------------------------------------------------------------------- one handler per step


def _parallel(io: SyncIO, step: Parallel) -> list[Any]:
    if len(step.steps) < 2 or not io.backend.threads:
        return [io.execute(s) for s in step.steps]
    # pymongo is thread-safe: independent reads overlap their round trips.
    return list(io._pool().map(io.execute, step.steps))


def _embed(io: SyncIO, step: Embed) -> list[list[float]]:
    assert io.embeddings is not None
    return io.embeddings.embed_documents(list(step.texts))


def _create_indexes(io: SyncIO, step: CreateIndexes) -> None:
    coll = io.coll(step.role)
    for spec in step.specs:
        coll.create_index(list(spec.keys), **shared.index_kwargs(spec))


def _ensure_collection(io: SyncIO, step: EnsureCollection) -> None:
    coll = io.coll(step.role)
    if coll.name not in coll.database.list_collection_names():
        try:
            coll.database.create_collection(coll.name)
        except (CollectionInvalid, OperationFailure) as exc:
            if not shared.created_concurrently(exc):
                raise


def _shard_keys(io: SyncIO, step: ShardKeys) -> dict[Role, dict[str, Any] | None]:
    config, filt, roles = shared.shard_keys_read(io.items, io.vectors)
    return shared.shard_keys_answer(list(config.find(filt, {"key": 1})), roles)


def _shard_collection(io: SyncIO, step: ShardCollection) -> Any:
    admin, command = shared.shard_collection_command(io.coll(step.role), step.key)
    return admin.command(command)


def _sleep(io: SyncIO, step: Sleep) -> None:
    time.sleep(step.seconds)


HANDLERS: dict[type[Any], Callable[[SyncIO, Any], Any]] = {
    Find: lambda io, s: list(shared.find_cursor(io.coll(s.role), s)),
    Aggregate: lambda io, s: list(io.coll(s.role).aggregate(s.pipeline, **shared.aggregate_kwargs(s))),
    Parallel: _parallel,
    Write: lambda io, s: io.write(s),
    Embed: _embed,
    Count: lambda io, s: io.coll(s.role).count_documents(s.filter),
    Probe: lambda io, s: io.probe(s.index_name, s.refresh),
    ServerInfo: lambda io, s: io.server_info(),
    ServerCommand: lambda io, s: io.items.database.command(s.name),
    DisableVectorSearch: lambda io, s: io.disable_vector_search(s),
    CreateIndexes: _create_indexes,
    ListIndexes: lambda io, s: sorted(io.coll(s.role).index_information()),
    EnsureCollection: _ensure_collection,
    ListSearchIndexes: lambda io, s: list(io.coll(s.role).list_search_indexes(s.name)),
    CreateSearchIndex: lambda io, s: io.coll(s.role).create_search_index(shared.search_index_model(s)),
    UpdateSearchIndex: lambda io, s: io.coll(s.role).update_search_index(s.name, s.definition),
    ShardKeys: _shard_keys,
    ShardCollection: _shard_collection,
    Sleep: _sleep,
}
"""How ``SyncIO`` runs each kind of step: one entry per step type of ``core.steps``."""
