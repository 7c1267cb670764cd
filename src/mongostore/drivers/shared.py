"""What both drivers share, without I/O: pymongo models, cursors, bulk-write error mapping,
capability bookkeeping, and the dispatch of a step to its handler.

The sync driver (``drivers.sync``) and the async one (``drivers.aio``) each hold one table
from step type to handler; ``handler_for`` looks a step up in it. Adding a step means one
entry in each table (``tests/unit/test_drivers.py`` checks that every step has both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from pymongo import DeleteMany, DeleteOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException, CollectionInvalid, OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.config import VectorSearchMode
from mongostore.core.plan import Plan, search_probe_plan, server_probe_plan
from mongostore.core.queries import IndexSpec, Role, WriteRequest
from mongostore.core.steps import Aggregate, Capabilities, CreateSearchIndex, DisableVectorSearch, Find
from mongostore.drivers.backend import Backend, backend_for

H = TypeVar("H", bound=Callable[..., Any])

# While the vector index is missing or building, ask again this often (seconds).
RECHECK_SECONDS = 30.0
NAMESPACE_EXISTS = 48


class IOBase:
    """What both drivers' I/O objects hold, and their capability bookkeeping (no I/O here).

    ``server``: hello/buildInfo only, what writes need; ``caps``: plus the search state,
    what searches need, asked again every ``recheck_seconds`` while the index is missing
    or building.
    """

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
        self.server: Capabilities | None = None
        self.caps: Capabilities | None = None
        self.recheck_seconds = RECHECK_SECONDS
        self._checked_at = 0.0

    def coll(self, role: Role) -> Any:
        if role == "vectors":
            if self.vectors is None:
                raise no_vectors_error()
            return self.vectors
        return self.items

    def server_plan(self, has_client_bulk: bool) -> Plan:
        return server_probe_plan(
            emulated=self.backend.emulated, has_client_bulk=has_client_bulk, local=self.backend.local_file
        )

    def search_plan(self, server: Capabilities, index_name: str) -> Plan:
        return search_probe_plan(
            server, has_vectors=self.vectors is not None, mode=self.mode, index_name=index_name, previous=self.caps
        )

    def probe_due(self, refresh: bool) -> bool:
        return due(self.caps, self._checked_at, self.recheck_seconds, refresh)

    def note_caps(self, caps: Capabilities) -> Capabilities:
        self.caps, self._checked_at = caps, time.monotonic()
        return caps

    def note_disabled(self, base: Capabilities, step: DisableVectorSearch) -> None:
        self.note_caps(disabled(base, step))


def handler_for(table: Mapping[type[Any], H], step: object) -> H:
    """The handler of ``step``'s type (or of a base class, as ``isinstance`` would match)."""
    for cls in type(step).__mro__:
        handler = table.get(cls)
        if handler is not None:
            return handler
    raise TypeError(f"unknown step {step!r}")


def no_vectors_error() -> RuntimeError:
    return RuntimeError("no vectors collection: configure index= for semantic search")


def model(req: WriteRequest, namespace: str | None = None) -> Any:
    ns: dict[str, Any] = {"namespace": namespace} if namespace else {}
    if req.kind == "update_one":
        return UpdateOne(req.filter, req.update or {}, upsert=req.upsert, **ns)
    if req.kind == "update_many":
        return UpdateMany(req.filter, req.update or {}, upsert=req.upsert, **ns)
    if req.kind == "delete_one":
        return DeleteOne(req.filter, **ns)
    return DeleteMany(req.filter, **ns)


def find_cursor(coll: Any, step: Find) -> Any:
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


def shard_keys_read(items: Any, vectors: Any | None) -> tuple[Any, dict[str, Any], dict[str, Role]]:
    """``config.collections`` (the cluster's catalog, readable through mongos), the filter for
    the store's collections, and each collection's role by full name (``ShardKeys``)."""
    roles: dict[str, Role] = {items.full_name: "items"}
    if vectors is not None:
        roles[vectors.full_name] = "vectors"
    config = items.database.client["config"]["collections"]
    return config, {"_id": {"$in": list(roles)}, "dropped": {"$ne": True}}, roles


def shard_collection_command(coll: Any, key: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The admin database and the ``shardCollection`` command for ``coll`` (``ShardCollection``)."""
    return coll.database.client["admin"], {"shardCollection": coll.full_name, "key": dict(key)}


def shard_keys_answer(docs: list[Any], roles: dict[str, Role]) -> dict[Role, dict[str, Any] | None]:
    """``{role: shard key pattern}``; None for a collection that is not sharded."""
    found = {d["_id"]: dict(d.get("key") or {}) for d in docs}
    return {role: found.get(name) for name, role in roles.items()}


def aggregate_kwargs(step: Aggregate) -> dict[str, Any]:
    return {"batchSize": step.batch_size} if step.batch_size else {}


def index_kwargs(spec: IndexSpec) -> dict[str, Any]:
    kw: dict[str, Any] = {"name": spec.name}
    if spec.unique:
        kw["unique"] = True
    if spec.expire_after_seconds is not None:
        kw["expireAfterSeconds"] = spec.expire_after_seconds
    return kw


def search_index_model(step: CreateSearchIndex) -> SearchIndexModel:
    return SearchIndexModel(definition=step.definition, name=step.name, type=step.type)


def client_models(items: Any, vectors: Any | None, requests: tuple[WriteRequest, ...]) -> list[Any]:
    """Models for a client-level bulk_write: each names its collection (``db.coll``)."""
    names = {"items": items.full_name, "vectors": vectors.full_name if vectors is not None else ""}
    return [model(r, names[r.role]) for r in requests]


def by_collection(requests: tuple[WriteRequest, ...]) -> list[tuple[Role, list[int]]]:
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


def bulk_errors(exc: BulkWriteError, indexes: list[int]) -> list[tuple[int, str]]:
    """Per-request errors of an unordered bulk write; anything else is raised.

    A write-concern error (``w: "majority"`` timed out...) means the writes were
    applied on the primary but not acknowledged as asked: no write of the bulk is
    known to be durable, so the error goes to the caller, never reported as success.
    """
    details: Any = exc.details or {}
    if details.get("writeConcernErrors") or not details.get("writeErrors"):
        raise exc
    return [(indexes[e["index"]], str(e.get("errmsg", e))) for e in details["writeErrors"]]


def client_bulk_errors(exc: ClientBulkWriteException) -> list[tuple[int, str]]:
    """Per-request errors of an unordered client-level bulk write (every request was tried).

    A top-level error (e.g. network) or a write-concern error is not a per-item
    rejection: raised, as in ``bulk_errors``.
    """
    raw: list[Any] = list(exc.write_errors or [])
    if not raw or exc.error or exc.write_concern_errors:
        raise exc
    return [(int(e["idx"]), str(e.get("errmsg", e))) for e in raw]


def deleted(result: Any) -> int:
    return int(getattr(result, "deleted_count", 0) or 0)


def matched(result: Any) -> int:
    """Documents the bulk's updates matched (an upsert that inserted matched none)."""
    return int(getattr(result, "matched_count", 0) or 0)


def wants_item_deletions(requests: tuple[WriteRequest, ...]) -> bool:
    return any(r.role == "items" and r.kind.startswith("delete") for r in requests)


def client_deleted(result: Any, requests: tuple[WriteRequest, ...]) -> int:
    """Items deleted by a client-level bulk_write: its ``deleted_count`` sums every
    collection, so count the item deletions from the verbose per-request results."""
    if not wants_item_deletions(requests):
        return 0
    per_request = getattr(result, "delete_results", None) or {}
    return sum(int(r.deleted_count) for i, r in per_request.items() if requests[int(i)].role == "items")


def created_concurrently(exc: Exception) -> bool:
    # pymongo raises CollectionInvalid when it sees the collection first; when another
    # process wins the race between its check and the create, the server says 48.
    return isinstance(exc, CollectionInvalid) or (isinstance(exc, OperationFailure) and exc.code == NAMESPACE_EXISTS)


def disabled(base: Capabilities, step: DisableVectorSearch) -> Capabilities:
    return replace(
        base,
        vector_search=False,
        detail=step.reason,
        search_commands=base.search_commands if step.temporary else False,
        index_status=step.index_status,
        recheck=step.temporary,
    )


def due(caps: Capabilities | None, checked_at: float, every: float, refresh: bool) -> bool:
    return caps is None or refresh or (caps.recheck and time.monotonic() - checked_at >= every)
