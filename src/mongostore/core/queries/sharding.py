"""Builders for a sharded cluster (behind ``mongos``): shard-key ranges, targeted writes, shard-key advice.

An item's ``_id`` is ``path + NUL + key``, ``path`` ends with ``.`` and labels hold neither
``.`` nor NUL: so the items under a namespace prefix whose path is ``P`` are exactly those whose
``_id`` (their vectors: ``item_id``) lies in ``[P, P[:-1] + "/")`` (``/`` follows ``.``). A range
on the shard key lets ``mongos`` send a prefix read only to the shards that hold it; an ``_id``
regex would do so only where mongod's regex-prefix analysis gives bounds. Unused on a replica set.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from mongostore.core.codec import namespace_path

if TYPE_CHECKING:
    from langgraph.store.base import MatchCondition

Role = Literal["items", "vectors"]  # the store's two collections

# The field each collection's writes and prefix reads carry for mongos: its shard key, ranged
# (recommended) or hashed (supported).
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


def literal_prefix(conditions: Sequence[MatchCondition] | None) -> tuple[str, ...]:
    """The longest run of literal leading labels (``*`` ends it) of any ``prefix`` condition: every
    namespace ``list_namespaces`` returns starts with it, so its range bounds the listing's reads."""
    best: tuple[str, ...] = ()
    for cond in conditions or ():
        if cond.match_type == "prefix":
            best = max(best, tuple(itertools.takewhile(lambda label: label != "*", cond.path)), key=len)
    return best


def shard_key_verdict(role: Role, key: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(verdict, advice)`` for a collection's shard key: ``unsharded``, ``recommended``,
    ``supported`` (works; costs said in the advice) or ``unsupported`` (the store refuses it)."""
    recommended = {KEY_FIELD[role]: 1}
    if key is None:
        return "unsharded", f"unsharded (on the database's primary shard); to shard it use key {recommended}"
    norm = {str(k): (v if isinstance(v, str) else int(v)) for k, v in key.items()}
    if norm == recommended:
        return "recommended", (
            "ranged key: single-item operations reach one shard, a namespace prefix only the shards that hold it"
        )
    if norm == {KEY_FIELD[role]: "hashed"}:
        return "supported", (
            f"hashed key: single-item operations reach one shard, but every namespace-prefix read reaches every "
            f"shard; {recommended} keeps a tenant together (docs/scaling.md)"
        )
    return "unsupported", (
        f"shard key {dict(key)} does not fit the store: its writes and reads are keyed by "
        f"{KEY_FIELD[role]!r}, so mongos could target none of them (MongoDB 7.0 refuses its upserts, code 61). "
        f"Reshard it with db.adminCommand({{reshardCollection: '<db>.<collection>', key: {recommended}}}) "
        "(docs/scaling.md)"
    )
