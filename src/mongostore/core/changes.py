"""The change feed's pure half (no I/O): the ``Change`` a feed yields, the ``$match`` that scopes a change
stream to a namespace prefix, and the reading of a change event (MongoDB's, or the local store's log,
which has the same shape) into a ``Change``. The streams themselves are opened in ``drivers.changes``.

An item's ``_id`` is ``path + NUL + key`` (``codec.item_id``), and a delete event carries nothing but
``documentKey._id``: so the prefix is matched on ``documentKey._id`` by its string range (the one
``queries.prefix_range`` gives), and a delete's namespace and key are read back from that ``_id``. Labels
reach the server only as values of ``$gte`` / ``$lt``, never as an operator or a pattern. Behind mongos
every shard runs the stream whatever the range (MongoDB's manual, "Sharded Cluster Considerations"): the
``$match`` runs on each shard, so only the prefix's events travel to mongos and to the watcher.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from bson.timestamp import Timestamp
from langgraph.store.base import SearchOp, validate_op_namespace

from mongostore.core.codec import as_namespace, as_utc, plain_value
from mongostore.core.queries.sharding import prefix_range

__all__ = [
    "HISTORY_LOST",
    "Change",
    "change_from_event",
    "change_pipeline",
    "split_item_id",
    "streams_unsupported",
    "watch_prefix",
]

#: MongoDB's ``ChangeStreamHistoryLost``: the resume point is no longer in the oplog (or the local log).
HISTORY_LOST = 286
#: What a server without change streams answers ``$changeStream`` with: 40573 (a standalone mongod: "The
#: $changeStream stage is only supported on replica sets"), 40324 (an unknown stage), 115
#: (``CommandNotSupported``); a server that gives no code is read by its message (``streams_unsupported``).
_UNSUPPORTED_CODES = frozenset({40573, 40324, 115})
#: The events that change an item. ``drop`` / ``rename`` / ``dropDatabase`` are left to the server's
#: ``invalidate``, which ends the stream (and so the feed).
_ITEM_OPS = ["insert", "update", "replace", "delete"]


@dataclass(frozen=True, slots=True)
class Change:
    """One change of one item, as ``store.watch()`` yields it.

    ``op``: ``"put"`` (an insert or an update of the item) or ``"delete"`` (by a delete, a purge or
    the TTL monitor). ``value``: the item's value after the put (None for a delete, and for a put whose
    item is gone again by the time MongoDB looked it up: a later delete in the feed says so).
    ``updated_at``: the item's ``updated_at`` after a put; for a delete, when it was deleted (the event's
    wall time). ``resume_token``: pass it as ``start_after=`` to a new ``watch()`` to go on after this
    change (an opaque document: MongoDB's ``{"_data": ...}``, or the local store's ``{"_local": n}``).
    """

    op: Literal["put", "delete"]
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    updated_at: datetime
    resume_token: Mapping[str, Any]


def watch_prefix(namespace_prefix: Any) -> tuple[str, ...]:
    """The prefix as a tuple, checked as a search's is (a label with ``.`` would reach another namespace)."""
    prefix = as_namespace(namespace_prefix, "namespace prefix")
    validate_op_namespace(SearchOp(prefix))
    return prefix


def change_pipeline(namespace_prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    """The change stream's pipeline: the item events under the prefix (whole labels: ``("a",)`` is the
    ``_id`` range ``["a.", "a/")``, never ``("ab",)``), without the updates that only move ``expires_at``
    (a TTL refresh on read: the item's value and ``updated_at`` are unchanged, there is nothing to report)."""
    match: dict[str, Any] = {"operationType": {"$in": list(_ITEM_OPS)}}
    bounds = prefix_range(namespace_prefix)
    if bounds is not None:
        match["documentKey._id"] = bounds
    match["$nor"] = [
        {
            "operationType": "update",
            "updateDescription.updatedFields.expires_at": {"$exists": True},
            "updateDescription.updatedFields.updated_at": {"$exists": False},
        }
    ]
    return [{"$match": match}]


def split_item_id(doc_id: Any) -> tuple[tuple[str, ...], str] | None:
    """``("a", "b"), "k"`` from ``"a.b.\\x00k"``; None for an ``_id`` that is not an item's."""
    if not isinstance(doc_id, str):
        return None
    path, sep, key = doc_id.partition("\x00")
    if not sep or not path.endswith("."):
        return None
    return tuple(path[:-1].split(".")), key


def _event_time(event: Mapping[str, Any]) -> datetime:
    """When the event happened: ``wallTime`` (MongoDB 6.0+, the local log), else ``clusterTime``'s seconds."""
    wall = event.get("wallTime")
    if isinstance(wall, datetime):
        return as_utc(wall)
    cluster = event.get("clusterTime")
    if isinstance(cluster, Timestamp):
        return cluster.as_datetime()
    return datetime.now(timezone.utc)


def change_from_event(event: Mapping[str, Any]) -> Change | None:
    """The ``Change`` a change event stands for; None for an event that is not an item's change."""
    op = event.get("operationType")
    if op not in _ITEM_OPS:
        return None
    found = split_item_id((event.get("documentKey") or {}).get("_id"))
    if found is None:
        return None
    namespace, key = found
    token = event["_id"]
    if op == "delete":
        return Change("delete", namespace, key, None, _event_time(event), token)
    doc = event.get("fullDocument")
    if isinstance(doc, Mapping) and isinstance(doc.get("value"), Mapping):
        return Change("put", namespace, key, dict(plain_value(doc["value"])), as_utc(doc["updated_at"]), token)
    # updateLookup found no document: the item was deleted (or changed and deleted) since this update.
    updated = ((event.get("updateDescription") or {}).get("updatedFields") or {}).get("updated_at")
    when = as_utc(updated) if isinstance(updated, datetime) else _event_time(event)
    return Change("put", namespace, key, None, when, token)


def streams_unsupported(code: int | None, message: str) -> bool:
    """Does this server error say the server has no change streams (rather than a bad request)?"""
    if code in _UNSUPPORTED_CODES:
        return True
    text = message.lower()
    return "$changestream" in text and any(w in text for w in ("unsupported", "not supported", "unrecognized"))
