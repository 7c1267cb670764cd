"""Maintenance and reporting plans: the TTL sweep, ``status()`` (what ``mongostore doctor`` prints), aggregation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo.errors import OperationFailure

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core.codec import plain_value
from mongostore.core.plan.context import LARGE_BATCH, Plan
from mongostore.core.plan.setup import shard_verdicts
from mongostore.core.steps import (
    Aggregate,
    Capabilities,
    Count,
    Find,
    ListIndexes,
    ListSearchIndexes,
    Parallel,
    Probe,
    ServerInfo,
    Step,
    Write,
    WriteOutcome,
)
from mongostore.errors import WriteError


def sweep_plan(now: datetime, with_vectors: bool, items_collection: str = "") -> Plan[int]:
    """Delete expired items and vectors (for servers or emulated engines with no TTL monitor), and the
    vector documents no item lists that were not written for ``VECTOR_GRACE`` (every server: no TTL
    index can tell them, docs/decisions.md "Issue 34"); returns the number of items deleted."""
    roles: tuple[q.Role, ...] = ("vectors", "items") if with_vectors else ("items",)
    expired = {"expires_at": {"$lte": now}}
    requests = [q.WriteRequest(role, "delete_many", expired) for role in roles]
    if with_vectors:
        cutoff = now - q.VECTOR_GRACE
        # The vectors of items this sweep deletes too, once no refresh can revive them (expired for half of
        # VECTOR_GRACE): a vector that never expires (a put without a TTL wrote it) would outlive them.
        stale = yield from stale_vectors_plan(items_collection, cutoff, dead_before=now - q.VECTOR_GRACE / 2)
        if stale:
            # Each one only if still not written since (a put that lists it again rewrites it).
            ids = {"item_id": {"$in": list({d["item_id"] for d in stale})}, "_id": {"$in": [d["_id"] for d in stale]}}
            requests.insert(0, q.WriteRequest("vectors", "delete_many", {**ids, "updated_at": {"$lte": cutoff}}))
    outcome: WriteOutcome = yield Write(tuple(requests))
    if outcome.errors:
        raise WriteError([((), "", f"the TTL sweep's delete failed: {msg}") for _, msg in outcome.errors])
    return outcome.deleted


def stale_vectors_plan(
    items_collection: str, cutoff: datetime | None, dead_before: datetime | None = None
) -> Plan[list[dict[str, Any]]]:
    """The vector documents no item lists (``_id``, ``item_id``), written at or before ``cutoff``
    (None: whenever), an item expired at ``dead_before`` listing none: ``q.stale_vectors_pipeline`` on a
    server; on an engine in this process two plain reads of what its indexes hold (the age is left to
    the caller's delete filter)."""
    caps: Capabilities = yield ServerInfo()
    if not caps.emulated:
        found: list[dict[str, Any]] = yield Aggregate(
            "vectors", q.stale_vectors_pipeline(items_collection, cutoff, dead_before), LARGE_BATCH
        )
        return found
    listing: dict[str, Any] = {"vectors": {"$exists": True}}
    if dead_before is not None:
        listing["expires_at"] = {"$not": {"$lte": dead_before}}
    items, vectors = yield Parallel(
        (
            Find("items", listing, {"_id": 1, "vectors": 1}, batch_size=LARGE_BATCH),
            Find("vectors", {}, {"_id": 1, "item_id": 1, "text_hash": 1}, batch_size=LARGE_BATCH),
        )
    )
    return q.unlisted_vectors(items, vectors)


def status_plan(
    index: IndexSettings | None, vectors_collection: str, items_collection: str = "", consistency: bool = True
) -> Plan[dict[str, Any]]:
    """What ``mongostore doctor`` prints: server, search path, indexes, counts.

    ``items_missing_vectors``: items listing text hashes without a vector document
    (unscored by semantic search until their next put re-embeds them). ``stale_vectors``: vector
    documents no item lists (a delete or re-put within ``VECTOR_GRACE`` of the item's last write,
    a writer that lost a race): the sweep removes those not written for ``VECTOR_GRACE``.
    ``cluster``: behind mongos, each collection's shard key with its verdict (``queries.shard_key_verdict``).
    ``items_without_vectors``: items that list no text hash (put with ``index=False``, no text at the
    indexed fields). ``consistency=False``: these counts, which read every item and vector, are left
    out (None).
    """
    caps: Capabilities = yield Probe(index.index_name if index is not None else "")
    cluster: dict[str, Any] | None = None  # None off mongos
    if caps.sharded:
        try:
            verdicts = yield from shard_verdicts(with_vectors=index is not None)
        except OperationFailure as exc:  # no privilege to read config.collections
            cluster = {"mongos": True, "shard_keys": {}, "detail": f"could not read config.collections: {exc}"}
        else:
            fields = ("key", "verdict", "advice")
            keys = {role: dict(zip(fields, verdict, strict=True)) for role, verdict in verdicts.items()}
            cluster = {"mongos": True, "shard_keys": keys}
    steps: list[Step] = [Count("items", {}), ListIndexes("items")]
    scan = index is not None and consistency
    if index is not None:
        steps += [Count("vectors", {}), ListIndexes("vectors")]
    if scan:
        if caps.emulated:  # an engine in this process: two plain reads, no $lookup per item
            steps += [
                Find("items", {}, {"_id": 1, "vectors": 1}, batch_size=LARGE_BATCH),
                Find("vectors", {}, {"_id": 0, "item_id": 1, "text_hash": 1}, batch_size=LARGE_BATCH),
            ]
        else:
            steps += [
                Aggregate("items", q.missing_vectors_pipeline(vectors_collection)),
                Aggregate("vectors", [*q.stale_vectors_pipeline(items_collection, None), {"$count": "n"}]),
                Count("items", {"vectors": {"$exists": False}}),
            ]
    items, item_indexes, *more = yield Parallel(tuple(steps))
    vectors, vector_indexes, *found = more or (None, None)
    missing = stale = unvectored = 0
    if scan and caps.emulated:
        missing, stale = q.items_missing_vectors(*found), len(q.unlisted_vectors(*found))
        unvectored = sum(1 for d in found[0] if "vectors" not in d)
    elif scan:
        missing, stale = (sum(d["n"] for d in counted) for counted in found[:2])
        unvectored = found[2]
    search_index: dict[str, Any] | None = None
    if index is not None and (caps.vector_search or caps.search_commands):
        found = yield ListSearchIndexes("vectors", index.index_name)
        search_index = found[0] if found else None
    return {
        "server_version": caps.server_version,
        "emulated": caps.emulated,
        "vector_search_available": caps.vector_search,
        "search_path": "none (no index configured)" if index is None else ("atlas" if caps.vector_search else "local"),
        "client_bulk_write": caps.client_bulk_write,
        "items": items,
        "item_indexes": item_indexes,
        "vectors": vectors,
        "vector_indexes": vector_indexes,
        "vector_search_index": search_index,
        "items_missing_vectors": int(missing) if scan else None,
        "stale_vectors": int(stale) if scan else None,
        "items_without_vectors": int(unvectored) if scan else None,
        "detail": caps.detail,
        "cluster": cluster,
    }


def aggregate_plan(pipeline: list[dict[str, Any]]) -> Plan[list[dict[str, Any]]]:
    """The pipeline's output documents, with ints as ints (``plain_value``) on every backend."""
    docs = yield Aggregate("items", pipeline)
    return [plain_value(doc) for doc in docs]
