"""Builders for a sharded cluster (behind ``mongos``): shard-key ranges, targeted writes, shard-key advice.

An item's ``_id`` is ``path + NUL + key`` and ``path`` ends with ``.``; labels hold neither
``.`` nor NUL. So the items under a namespace prefix ``P`` (a path, ending with ``.``) are
exactly those whose ``_id`` lies in ``[P, P[:-1] + "/")`` (``/`` is the character after
``.``), and their vectors those whose ``item_id`` (and ``_id``) lies in the same range.
A range on the shard key lets ``mongos`` send a prefix read only to the shards whose
chunks hold the prefix; a regex on ``_id`` would do the same only where mongod's
regex-prefix analysis gives bounds, so the store adds ranges, never ``_id`` regexes.

On a replica set none of this is used: the store's queries stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mongostore.core.codec import item_id, namespace_path

if TYPE_CHECKING:  # runtime imports would be circular: namespaces and writes use this module
    from langgraph.store.base import MatchCondition

    from mongostore.core.queries.writes import Role, WriteRequest

# The shard keys the store supports per collection; the first one of each is recommended.
RECOMMENDED_KEYS: dict[Role, dict[str, Any]] = {"items": {"_id": 1}, "vectors": {"item_id": 1}}
SUPPORTED_KEYS: dict[Role, tuple[dict[str, Any], ...]] = {
    "items": ({"_id": 1}, {"_id": "hashed"}),
    "vectors": ({"item_id": 1}, {"item_id": "hashed"}),
}
# The field each collection's writes and prefix reads carry for mongos.
KEY_FIELD: dict[Role, str] = {"items": "_id", "vectors": "item_id"}


def prefix_range(namespace_prefix: tuple[str, ...]) -> dict[str, Any] | None:
    """``{"$gte": P, "$lt": P[:-1] + "/"}`` for the prefix's path ``P``; None for the empty prefix."""
    if not namespace_prefix:
        return None
    path = namespace_path(namespace_prefix)
    return {"$gte": path, "$lt": path[:-1] + "/"}


def shard_range_filter(namespace_prefix: tuple[str, ...], role: Role = "items") -> dict[str, Any]:
    """The prefix's range on the collection's shard-key field (``_id`` / ``item_id``); ``{}`` for ``()``."""
    bounds = prefix_range(namespace_prefix)
    return {KEY_FIELD[role]: bounds} if bounds is not None else {}


def with_shard_range(
    filt: Mapping[str, Any], namespace_prefix: tuple[str, ...], role: Role = "items"
) -> dict[str, Any]:
    """``filt`` and the prefix's shard-key range (``$and``); ``filt`` itself when there is no range."""
    rng = shard_range_filter(namespace_prefix, role)
    if not rng:
        return dict(filt)
    if not filt:
        return rng
    return {"$and": [rng, dict(filt)]}


def literal_prefix(conditions: Sequence[MatchCondition] | None) -> tuple[str, ...]:
    """The longest run of literal leading labels of any ``prefix`` condition (``*`` ends it).

    Every namespace ``list_namespaces`` returns under such conditions starts with it, so its
    range bounds the listing's reads; suffix conditions give none.
    """
    best: tuple[str, ...] = ()
    for cond in conditions or ():
        if cond.match_type != "prefix":
            continue
        labels: list[str] = []
        for label in cond.path:
            if label == "*":
                break
            labels.append(label)
        if len(labels) > len(best):
            best = tuple(labels)
    return best


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


def held_vectors_filter(vector_ids: Sequence[str], item_ids: Sequence[str], sharded: bool) -> dict[str, Any]:
    """Vectors by ``_id``; on a cluster with their items' ``item_id`` s too (targeted by ``$in``)."""
    filt: dict[str, Any] = {"_id": {"$in": list(vector_ids)}}
    if sharded:
        filt["item_id"] = {"$in": list(dict.fromkeys(item_ids))}
    return filt


def _normal_key(key: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if key is None:
        return None
    return {str(k): (v if isinstance(v, str) else int(v)) for k, v in key.items()}


def shard_key_verdict(role: Role, key: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(verdict, advice)`` for a collection's shard key: ``unsharded``, ``recommended``,
    ``supported`` (works; costs said in the advice) or ``unsupported`` (the store refuses it)."""
    norm = _normal_key(key)
    recommended = RECOMMENDED_KEYS[role]
    if norm is None:
        return "unsharded", f"unsharded (on the database's primary shard); to shard it use key {recommended}"
    if norm == recommended:
        return "recommended", (
            "ranged key: single-item operations reach one shard, a namespace prefix only the shards that hold it"
        )
    if norm in SUPPORTED_KEYS[role]:
        return "supported", (
            f"hashed key: single-item operations reach one shard, but every namespace-prefix read reaches every "
            f"shard; {recommended} keeps a tenant together (docs/scaling.md)"
        )
    return "unsupported", (
        f"shard key {dict(key or {})} does not fit the store: its writes and reads are keyed by "
        f"{KEY_FIELD[role]!r}, so mongos could target none of them (MongoDB 7.0 refuses its upserts, code 61). "
        f"Reshard it with db.adminCommand({{reshardCollection: '<db>.<collection>', key: {recommended}}}) "
        "(docs/scaling.md)"
    )
