"""``purge``: delete every item under a namespace prefix, with its vectors, in bounded batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import InvalidNamespaceError

from mongostore.core import queries as q
from mongostore.core import vectors as _vectors
from mongostore.core.codec import as_namespace
from mongostore.core.plan.context import Plan
from mongostore.core.plan.validate import check_labels
from mongostore.core.steps import Count, Find, Parallel, Write, WriteOutcome
from mongostore.errors import WriteError

# Items deleted per round: a bounded ``$in`` per write, whatever the tenant's size.
PURGE_BATCH = 1000


@dataclass(frozen=True)
class PurgeReport:
    """What ``purge`` deleted (or, with ``dry_run``, would delete): ``items`` and their ``vectors``."""

    namespace_prefix: tuple[str, ...]
    items: int
    vectors: int
    dry_run: bool = False


def check_purge_prefix(namespace_prefix: Any) -> tuple[str, ...]:
    """The prefix as a tuple of valid labels; the empty prefix (everything) is refused."""
    prefix = as_namespace(namespace_prefix, "namespace prefix")
    if not prefix:
        raise InvalidNamespaceError(
            "purge needs a non-empty namespace prefix, e.g. ('users', 'alice'): it deletes every item under it. "
            "To empty the whole store, drop its collections"
        )
    check_labels(prefix)
    return prefix


def purge_plan(
    namespace_prefix: tuple[str, ...],
    with_vectors: bool,
    dry_run: bool = False,
    cache: _vectors.VectorCache | None = None,
    batch: int | None = None,
) -> Plan[PurgeReport]:
    """Delete the items under the prefix (whole labels: its ``_id`` range, which mongos targets) and their
    vector documents (their ``item_id`` s, in the same range), ``batch`` items at a time, the items first:
    a purge cut short leaves vectors no item lists (the TTL sweep's to remove), never an item listing a
    vector that is gone. ``dry_run``: count them, delete nothing."""
    batch = batch or PURGE_BATCH
    items_range = q.shard_range_filter(namespace_prefix, "items")
    vectors_range = q.shard_range_filter(namespace_prefix, "vectors")
    if dry_run:
        counts: list[Any] = [Count("items", items_range)]
        if with_vectors:
            counts.append(Count("vectors", vectors_range))
        found = yield Parallel(tuple(counts))
        return PurgeReport(namespace_prefix, found[0], found[1] if with_vectors else 0, dry_run=True)
    items = vectors = 0
    while True:
        docs: Sequence[dict[str, Any]] = yield Find("items", items_range, {"_id": 1}, [("_id", 1)], 0, batch)
        ids = [d["_id"] for d in docs]
        if not ids:
            break
        items += yield from _delete("items", {"_id": {"$in": ids}})
        if with_vectors:
            vectors += yield from _delete("vectors", {"item_id": {"$in": ids}})
        if cache is not None:
            cache.forget_many(ids)
        if len(ids) < batch:
            break
    if with_vectors:  # vectors whose item went before (a failed write, a purge cut short)
        vectors += yield from _delete("vectors", vectors_range)
    return PurgeReport(namespace_prefix, items, vectors)


def _delete(role: q.Role, filt: dict[str, Any]) -> Plan[int]:
    outcome: WriteOutcome = yield Write((q.WriteRequest(role, "delete_many", filt),))
    if outcome.errors:
        raise WriteError([((), "", f"the purge's delete of {role} failed: {msg}") for _, msg in outcome.errors])
    return outcome.deleted if role == "items" else outcome.vectors_deleted
