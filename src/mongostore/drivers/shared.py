"""How each step of ``core.steps`` runs (``HANDLERS``), written once for both drivers.

A handler returns what its driver answers: a pymongo call's result (the async driver
awaits it), ``Rows`` (a cursor's documents), ``All`` (several answers at once: threads or
tasks), ``Locked`` (one task at a time), a step, or a generator yielding these, pumped like
a plan (a failed call's exception is thrown back into it). So ``drivers.sync`` and
``drivers.aio`` write only how to wait: ``SyncIO.resolve`` and ``AsyncIO.resolve``.
Adding a step means one entry here (``tests/unit/test_drivers.py`` checks every step has one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.embeddings import Embeddings
from pymongo import DeleteMany, DeleteOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException, CollectionInvalid, OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.config import VectorSearchMode
from mongostore.core import steps
from mongostore.core.plan import search_probe_plan, server_probe_plan
from mongostore.core.queries import Role, WriteRequest
from mongostore.core.steps import Capabilities, ServerInfo, WriteOutcome
from mongostore.drivers.backend import Backend, backend_for

Handler = Generator[Any, Any, Any]
NAMESPACE_EXISTS = 48


@dataclass(frozen=True)
class Rows:
    """A cursor's documents (async: Motor's ``aggregate`` gives the cursor, pymongo's an awaitable of it)."""

    cursor: Any


@dataclass(frozen=True)
class All:
    """The answers of ``each`` (steps or handlers), run at once."""

    each: tuple[Any, ...]


@dataclass(frozen=True)
class Locked:
    """``handler``'s answer, one task at a time (the async probes: one round trip, not one per task)."""

    handler: Handler


class IOBase:
    """A store's collections, embedder and backend, and what it knows of the server.

    ``server``: hello/buildInfo only, what writes need; ``caps``: plus the search state, what searches need,
    asked again every ``recheck_seconds`` while the index is missing or building.
    """

    server: Capabilities | None = None
    caps: Capabilities | None = None
    recheck_seconds = 30.0
    _checked_at = 0.0

    def __init__(
        self,
        items: Any,
        vectors: Any | None,
        embeddings: Embeddings | None,
        mode: VectorSearchMode = "auto",
        backend: Backend | None = None,
    ) -> None:
        self.backend = backend if backend is not None else backend_for(items)
        self.items = items
        self.vectors = vectors
        self.embeddings = embeddings
        self.mode = mode

    def coll(self, role: Role) -> Any:
        if role == "items":
            return self.items
        if self.vectors is None:
            raise RuntimeError("no vectors collection: configure index= for semantic search")
        return self.vectors

    def has_client_bulk(self) -> bool:
        return callable(getattr(self.items.database.client, "bulk_write", None))

    def probe_due(self, refresh: bool) -> bool:
        caps = self.caps
        return caps is None or refresh or (caps.recheck and time.monotonic() - self._checked_at >= self.recheck_seconds)

    def note(self, caps: Capabilities) -> None:
        self.caps, self._checked_at = caps, time.monotonic()


def handler_for(step: object) -> Callable[[Any, Any], Any]:
    handler = HANDLERS.get(type(step))
    if handler is None:
        raise TypeError(f"unknown step {step!r}")
    return handler


def _server_info(io: IOBase, step: ServerInfo) -> Handler:
    if io.server is None:
        yield Locked(_ask_server(io))
    return io.server


def _ask_server(io: IOBase) -> Handler:
    if io.server is None:  # asked by another task while this one waited
        plan = server_probe_plan(
            emulated=io.backend.emulated, has_client_bulk=io.has_client_bulk(), local=io.backend.local_file
        )
        io.server = yield plan


def _probe(io: IOBase, step: steps.Probe) -> Handler:
    if io.probe_due(step.refresh):
        server = yield ServerInfo()
        yield Locked(_ask_search(io, server, step))
    return io.caps


def _ask_search(io: IOBase, server: Capabilities, step: steps.Probe) -> Handler:
    if io.probe_due(step.refresh):
        has_vectors = io.vectors is not None
        plan = search_probe_plan(
            server, has_vectors=has_vectors, mode=io.mode, index_name=step.index_name, previous=io.caps
        )
        io.note((yield plan))


def _disable(io: IOBase, step: steps.DisableVectorSearch) -> Handler:
    base = io.caps or (yield ServerInfo())
    search_commands = base.search_commands if step.temporary else False
    io.note(
        replace(
            base,
            vector_search=False,
            detail=step.reason,
            search_commands=search_commands,
            index_status=step.index_status,
            recheck=step.temporary,
        )
    )


def _find_cursor(coll: Any, step: steps.Find) -> Any:
    # A copy: mongomock reorders the projection it is given, in place.
    cur = coll.find(step.filter, dict(step.projection) if step.projection is not None else None)
    for option in ("sort", "skip", "limit", "batch_size"):  # each one the step sets, by the cursor's method
        if value := getattr(step, option):
            cur = getattr(cur, option)(value)
    return cur


def _model(req: WriteRequest, namespace: str | None = None) -> Any:
    ns: dict[str, Any] = {"namespace": namespace} if namespace else {}
    if req.kind in ("update_one", "update_many"):
        update = UpdateOne if req.kind == "update_one" else UpdateMany
        return update(req.filter, req.update or {}, upsert=req.upsert, **ns)
    return (DeleteOne if req.kind == "delete_one" else DeleteMany)(req.filter, **ns)


def _write(io: IOBase, step: steps.Write) -> Handler:
    """All requests unordered: every one is tried, each failure reported on its own (``WriteOutcome``).

    A top-level or write-concern error (``w: "majority"`` timed out...) is raised: the
    writes were applied on the primary but none is known to be durable, so never success.
    """
    requests = step.requests
    caps = (yield ServerInfo()) if len({r.role for r in requests}) > 1 else io.server
    if caps is not None and caps.client_bulk_write:
        # One client-level bulk_write: each model names its collection (``db.coll``). Its
        # deleted_count sums every collection: count each one's deletions from the per-request results.
        models = [_model(r, io.coll(r.role).full_name) for r in requests]
        # Per-request results where a count matters: deletions, and an item write that may match nothing.
        verbose = any(r.kind.startswith("delete") or (r.role == "items" and not r.upsert) for r in requests)
        try:
            res = yield io.items.database.client.bulk_write(models, ordered=False, verbose_results=verbose)
        except ClientBulkWriteException as exc:
            raw: list[Any] = list(exc.write_errors or [])
            if not raw or exc.error or exc.write_concern_errors:
                raise
            return WriteOutcome([(int(e["idx"]), str(e.get("errmsg", e))) for e in raw])
        per_request = (getattr(res, "delete_results", None) or {}) if verbose else {}
        counts = {"items": 0, "vectors": 0}
        for i, r in per_request.items():
            counts[requests[int(i)].role] += int(r.deleted_count)
        updates = (getattr(res, "update_results", None) or {}) if verbose else {}
        matched = sum(
            int(r.matched_count) + (1 if r.upserted_id is not None else 0)
            for i, r in updates.items()
            if requests[int(i)].role == "items"
        )
        if not verbose:
            matched = sum(1 for r in requests if r.role == "items" and r.kind.startswith("update"))  # all upserts
        return WriteOutcome([], counts["items"], counts["vectors"], matched)
    # One bulk_write per collection, at once. Their order does not matter: a vector counts only
    # while its item lists its text hash, so a search never returns a stale match, and the next
    # put (which compares with the stored vectors' hashes) repairs a half-done write.
    groups: dict[Role, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(req.role, []).append(i)
    roles = list(groups)
    done = yield All(tuple(_bulk(io, requests, role, groups[role]) for role in roles))
    deleted = {role: d for role, (_, d, _) in zip(roles, done, strict=True)}
    updated = {role: m for role, (_, _, m) in zip(roles, done, strict=True)}
    errors = [e for errs, _, _ in done for e in errs]
    return WriteOutcome(errors, deleted.get("items", 0), deleted.get("vectors", 0), updated.get("items", 0))


def _bulk(io: IOBase, requests: tuple[WriteRequest, ...], role: Role, indexes: list[int]) -> Handler:
    """(errors by request index, documents deleted, documents matched or upserted by updates)."""
    try:
        res = yield io.coll(role).bulk_write([_model(requests[i]) for i in indexes], ordered=False)
    except BulkWriteError as exc:
        details: Any = exc.details or {}
        if details.get("writeConcernErrors") or not details.get("writeErrors"):
            raise
        errors = [(indexes[e["index"]], str(e.get("errmsg", e))) for e in details["writeErrors"]]
        return errors, 0, int(details.get("nMatched", 0) or 0) + len(details.get("upserted") or [])
    matched = int(getattr(res, "matched_count", 0) or 0) + int(getattr(res, "upserted_count", 0) or 0)
    return [], int(getattr(res, "deleted_count", 0) or 0), matched


def _create_indexes(io: IOBase, step: steps.CreateIndexes) -> Handler:
    coll = io.coll(step.role)
    for spec in step.specs:
        kw: dict[str, Any] = {"name": spec.name}
        if spec.unique:
            kw["unique"] = True
        if spec.expire_after_seconds is not None:
            kw["expireAfterSeconds"] = spec.expire_after_seconds
        yield coll.create_index(list(spec.keys), **kw)


def _list_indexes(io: IOBase, step: steps.ListIndexes) -> Handler:
    return sorted((yield io.coll(step.role).index_information()))


def _ensure_collection(io: IOBase, step: steps.EnsureCollection) -> Handler:
    coll = io.coll(step.role)
    if coll.name not in (yield coll.database.list_collection_names()):
        try:
            yield coll.database.create_collection(coll.name)
        except (CollectionInvalid, OperationFailure) as exc:
            # pymongo raises CollectionInvalid when it sees the collection first; when another
            # process wins the race between its check and the create, the server says 48.
            if isinstance(exc, OperationFailure) and exc.code != NAMESPACE_EXISTS:
                raise


def _shard_keys(io: IOBase, step: steps.ShardKeys) -> Handler:
    """``{role: shard key pattern}``, None for a collection that is not sharded, from
    ``config.collections`` (the cluster's catalog, readable through mongos)."""
    roles: dict[str, Role] = {io.items.full_name: "items"}
    if io.vectors is not None:
        roles[io.vectors.full_name] = "vectors"
    config = io.items.database.client["config"]["collections"]
    docs = yield Rows(config.find({"_id": {"$in": list(roles)}, "dropped": {"$ne": True}}, {"key": 1}))
    found = {d["_id"]: dict(d.get("key") or {}) for d in docs}
    return {role: found.get(name) for name, role in roles.items()}


def _shard_collection(io: IOBase, step: steps.ShardCollection) -> Any:
    coll = io.coll(step.role)
    return coll.database.client["admin"].command({"shardCollection": coll.full_name, "key": dict(step.key)})


def _aggregate(io: IOBase, step: steps.Aggregate) -> Rows:
    kw = {"batchSize": step.batch_size} if step.batch_size else {}
    return Rows(io.coll(step.role).aggregate(step.pipeline, **kw))


HANDLERS: dict[type[Any], Callable[[Any, Any], Any]] = {
    steps.Find: lambda io, s: Rows(_find_cursor(io.coll(s.role), s)),
    steps.Aggregate: _aggregate,
    steps.Parallel: lambda io, s: All(s.steps),
    steps.Write: _write,
    steps.Embed: lambda io, s: io.embed(list(s.texts)),
    steps.Count: lambda io, s: io.coll(s.role).count_documents(s.filter),
    steps.Distinct: lambda io, s: io.coll(s.role).distinct(s.field, s.filter),
    steps.Probe: _probe,
    ServerInfo: _server_info,
    steps.ServerCommand: lambda io, s: io.items.database.command(s.name),
    steps.DisableVectorSearch: _disable,
    steps.CreateIndexes: _create_indexes,
    steps.ListIndexes: _list_indexes,
    steps.EnsureCollection: _ensure_collection,
    steps.ListSearchIndexes: lambda io, s: Rows(io.coll(s.role).list_search_indexes(s.name)),
    steps.PutSearchIndex: lambda io, s: (
        io.coll(s.role).update_search_index(s.name, s.definition)
        if s.update
        else io.coll(s.role).create_search_index(SearchIndexModel(s.definition, s.name, s.type))
    ),
    steps.ShardKeys: _shard_keys,
    steps.ShardCollection: _shard_collection,
    steps.Sleep: lambda io, s: io.sleep(s.seconds),
}
