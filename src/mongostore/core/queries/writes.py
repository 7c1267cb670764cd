"""Write requests: item upserts, vector writes, deletes and TTL refreshes (pure data)."""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from bson.binary import VECTOR_SUBTYPE, Binary, BinaryVectorDtype

from mongostore.core.codec import ancestor_paths, item_id, namespace_key, namespace_path, vector_id
from mongostore.core.queries.filters import NS_KEY
from mongostore.core.queries.sharding import Role


@dataclass(slots=True)
class WriteRequest:
    """One write of a bulk request on either collection; immutable by convention (``dataclasses.replace``),
    not frozen: a frozen ``__init__`` costs ~1.7 us more."""

    role: Role
    kind: Literal["update_one", "update_many", "delete_one", "delete_many"]
    filter: dict[str, Any]
    update: dict[str, Any] | list[dict[str, Any]] | None = None  # a list is an update pipeline
    upsert: bool = False
    item: tuple[tuple[str, ...], str] | None = field(default=None, compare=False)


def put_item_request(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    now: datetime,
    ttl_minutes: float | None,
    vector_hashes: list[str] | None,
    iid: str = "",
    revision: Revision | None = None,
) -> WriteRequest:
    """Upsert of one item as an update pipeline, so no read is needed to order writes.

    ``revision`` (a compare-and-set, ``put_if_unchanged``): the write lands only on the item as it was
    read, its ``created_at`` and ``updated_at`` (``Revision``), matching nothing otherwise; or, for
    ``ABSENT``, only where there is no item (an upsert that finds one fails with a duplicate key).

    ``updated_at`` becomes the later of ``now`` and the stored ``updated_at`` plus one millisecond (BSON dates hold
    milliseconds): every write of an item moves it forward, however close together two writes land. ``created_at`` is
    set on insert from that same ``updated_at``, so ``created_at <= updated_at`` always holds. Everything the caller
    gave goes in as a ``$literal`` (in a pipeline a string starting with ``$`` is a field path). ``vector_hashes`` None
    leaves ``vectors`` as it is (no index), an empty list removes it. ``iid`` is the item's ``item_id`` when known.
    """
    set_: dict[str, Any] = {
        "namespace": {"$literal": list(namespace)},
        "path": {"$literal": namespace_path(namespace)},
        "depth": len(namespace),
        NS_KEY: {"$literal": namespace_key(namespace)},
        "key": {"$literal": key},
        "value": {"$literal": value},
        "updated_at": {"$max": [now, {"$add": ["$updated_at", 1]}]},
    }
    unset: list[str] = []
    if ttl_minutes is not None:
        set_["expires_at"] = now + timedelta(minutes=ttl_minutes)
        set_["ttl_minutes"] = float(ttl_minutes)
    else:
        unset += ["expires_at", "ttl_minutes"]
    if vector_hashes:
        set_["vectors"] = {"$literal": vector_hashes}
    elif vector_hashes is not None:
        unset.append("vectors")
    pipeline: list[dict[str, Any]] = [
        {"$set": set_},
        {"$set": {"created_at": {"$ifNull": ["$created_at", "$updated_at"]}}},
    ]
    if unset:
        # $project with exclusions is $unset's older spelling (mongomock 4.3 lacks $unset).
        pipeline.append({"$project": {name: 0 for name in unset}})
    filt: dict[str, Any] = {"_id": iid or item_id(namespace, key)}
    if revision is ABSENT:
        filt["created_at"] = {"$exists": False}
    elif revision is not None:
        filt.update(created_at=revision.created_at, updated_at=revision.updated_at)
    upsert = revision is None or revision is ABSENT
    return WriteRequest("items", "update_one", filt, pipeline, upsert=upsert, item=(namespace, key))


@dataclass(frozen=True)
class Revision:
    """Which stored item a compare-and-set expects: its ``created_at`` and ``updated_at``. Every write
    of an item moves ``updated_at`` forward (by a millisecond at least, ``put_item_request``), and a
    deleted then re-created item has a new ``created_at`` (unless both happened within the very
    millisecond the first was created in): together they name one version of the item."""

    created_at: datetime
    updated_at: datetime


#: A compare-and-set that expects no item (create only).
ABSENT = Revision(datetime.min.replace(tzinfo=timezone.utc), datetime.min.replace(tzinfo=timezone.utc))


# How long a vector document is kept after its last write when no item may list it (docs/decisions.md,
# "Issue 34 (parts 1-2)"). A put lists only the hashes whose vector documents the same write (re)writes,
# and each write lands within half of it after its clock was read: so a vector not written for this long
# is one no write in flight can list, and expired items' vectors expire this much later than their items
# (a TTL refresh landing meanwhile still finds them).
VECTOR_GRACE = timedelta(minutes=10)
#: The expiry of a vector document whose item has no TTL: never (a date, so that ``$max`` keeps it).
NO_EXPIRY = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone.utc)


def delete_item_requests(
    namespace: tuple[str, ...], key: str, with_vectors: bool, now: datetime | None = None
) -> list[WriteRequest]:
    """Delete one item, and first, with an index, its vector documents not written for
    ``VECTOR_GRACE`` before ``now`` (``stale_vectors_request``)."""
    reqs = [WriteRequest("items", "delete_one", {"_id": item_id(namespace, key)}, item=(namespace, key))]
    if with_vectors:
        assert now is not None
        reqs.insert(0, stale_vectors_request(namespace, key, (), now))
    return reqs


def stale_vectors_request(
    namespace: tuple[str, ...], key: str, keep_hashes: Sequence[str], now: datetime
) -> WriteRequest:
    """Remove an item's vector documents of hashes other than ``keep_hashes`` that were not written for
    ``VECTOR_GRACE`` before ``now``: no write in flight can list those. A younger one may be another
    writer's whose item write is still on its way (even one this batch read: its vector landed first),
    so it stays, for a later put of the item or the sweep (``stale_vectors_pipeline``)."""
    filt: dict[str, Any] = {"item_id": item_id(namespace, key)}
    if keep_hashes:
        filt["text_hash"] = {"$nin": list(keep_hashes)}
    filt["updated_at"] = {"$lte": now - VECTOR_GRACE}
    return WriteRequest("vectors", "delete_many", filt, item=(namespace, key))


_FLOAT32 = BinaryVectorDtype.FLOAT32.value[0]  # 0x27; the padding byte after it is 0


@functools.lru_cache(maxsize=16)
def _float32_packer(dims: int) -> struct.Struct:
    return struct.Struct(f"<BB{dims}f")


def float32_vector(vector: Sequence[float] | npt.NDArray[np.floating[Any]]) -> Binary:
    """A vector as a packed float32 BinData vector, byte for byte ``Binary.from_vector(..., FLOAT32)``'s
    (a list packed by one precompiled ``struct`` call: ~3x faster than through numpy)."""
    if isinstance(vector, np.ndarray):
        with np.errstate(over="ignore"):
            m32 = np.ascontiguousarray(vector, dtype="<f4").reshape(-1)
        if np.isinf(m32).any() and np.isfinite(vector).all():
            raise ValueError("the embedder returned values too large for float32 vectors")
        data = bytes((_FLOAT32, 0)) + m32.tobytes()
    else:
        try:
            data = _float32_packer(len(vector)).pack(_FLOAT32, 0, *vector)
        except OverflowError as exc:
            raise ValueError("the embedder returned values too large for float32 vectors") from exc
        except struct.error as exc:
            raise ValueError(f"the embedder returned a vector that is not all numbers ({exc})") from exc
    return Binary(data, VECTOR_SUBTYPE)


def put_vector_request(
    namespace: tuple[str, ...],
    key: str,
    field_name: str,
    hash_: str,
    embedding: Sequence[float] | Binary | None,
    value_fields: Mapping[str, Any],
    now: datetime,
    ttl_minutes: float | None,
    iid: str = "",
    text: str | None = None,
    vid: str = "",
) -> WriteRequest:
    """Upsert of one vector document (one indexed text), its embedding a packed float32 BinData vector:
    what Atlas indexes most compactly, a third of an array of doubles; ``iid`` as in ``put_item_request``.
    ``text``: stored too (``$search``, ``$rerank`` read it); no ``embedding``: Atlas embeds the text.

    The whole document, every time (an unchanged text's with its stored embedding): the item write
    beside it lists the hash, and ``updated_at`` now keeps it from removal for ``VECTOR_GRACE``
    (``stale_vectors_request``). ``_id`` is ``vector_id`` (one document per text, so two writers'
    texts never overwrite each other) unless ``vid`` names the stored one; the expiry is the item's
    plus ``VECTOR_GRACE`` or a later one already there (``NO_EXPIRY`` without a TTL): a vector whose item
    lost its TTL or got a shorter one outlives it, until the item is deleted or the sweep finds it
    unlisted."""
    iid = iid or item_id(namespace, key)
    set_: dict[str, Any] = {
        "item_id": iid,
        "field": field_name,
        "text_hash": hash_,
        "ns_prefixes": ancestor_paths(namespace),
        "updated_at": now,
    }
    unset: dict[str, Any] = {}
    if value_fields:
        set_["value"] = dict(value_fields)
    else:
        unset["value"] = ""
    if embedding is None:
        unset["embedding"] = ""
    else:
        set_["embedding"] = embedding if isinstance(embedding, Binary) else float32_vector(embedding)
    if text is not None:
        set_["text"] = text  # retrieval.TEXT_PATH
    # Every put of this text writes this one document, each with its own TTL (or none), while only the last
    # item write stands: the expiry is the latest any of them asked (``$max``; no TTL is NO_EXPIRY), so that it
    # never comes before the item's, whichever writer's item lands last.
    expires = NO_EXPIRY if ttl_minutes is None else now + timedelta(minutes=ttl_minutes) + VECTOR_GRACE
    update: dict[str, Any] = {"$set": set_, "$max": {"expires_at": expires}}
    if unset:
        update["$unset"] = unset
    return WriteRequest(
        "vectors", "update_one", {"_id": vid or vector_id(iid, hash_)}, update, upsert=True, item=(namespace, key)
    )


def refresh_ttl_requests(
    role: Role, ids_by_ttl: Mapping[float, Sequence[str]], now: datetime, id_field: str = "_id"
) -> list[WriteRequest]:
    """Reset ``expires_at`` from each item's own ``ttl_minutes`` (one update per distinct TTL); vectors
    ``VECTOR_GRACE`` later. An item expired for half of it is not revived: its vectors may be gone.

    A put may land between the read and this write. An item is refreshed only while it still has the TTL
    the read saw (a put's new TTL stands). Vectors are refreshed only while they expire (a put that
    dropped the TTL leaves them without, as its item) and never to an earlier time (``$max``: a put's
    longer TTL stands): a vector's expiry never comes before its item's, which would remove what the
    item lists."""
    reqs = []
    for ttl, ids in sorted(ids_by_ttl.items()):
        at = now + timedelta(minutes=ttl)
        if role == "vectors":
            filt = {id_field: {"$in": list(ids)}, "expires_at": {"$ne": None}}
            reqs.append(WriteRequest(role, "update_many", filt, {"$max": {"expires_at": at + VECTOR_GRACE}}))
        else:
            filt = {id_field: {"$in": list(ids)}, "ttl_minutes": ttl, "expires_at": {"$gt": now - VECTOR_GRACE / 2}}
            reqs.append(WriteRequest(role, "update_many", filt, {"$set": {"expires_at": at}}))
    return reqs


def targeted_writes(requests: Sequence[WriteRequest]) -> list[WriteRequest]:
    """Each vector write keyed by ``_id`` also carries its item's ``item_id`` (the shard key).

    A vector's ``_id`` starts with its ``item_id``, so the filter matches the same document;
    with the shard key in it, ``mongos`` sends the write to one shard (MongoDB 7.0 refuses an
    upsert without it, code 61; 7.1+ would run it as a "write without shard key", querying
    every shard first). Requests that already carry it, or are not vector writes, are kept.
    """
    out: list[WriteRequest] = []
    for req in requests:
        if req.role == "vectors" and "_id" in req.filter and "item_id" not in req.filter and req.item is not None:
            req = replace(req, filter={**req.filter, "item_id": item_id(*req.item)})
        out.append(req)
    return out
