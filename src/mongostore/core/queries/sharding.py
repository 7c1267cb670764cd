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
# The fields every single-document write of the store carries by equality, per collection: a shard
# key made of these (starting with ``KEY_FIELD``) keeps each such write on one shard.
EXACT_FIELDS: dict[Role, tuple[str, ...]] = {"items": ("_id",), "vectors": ("item_id", "_id")}


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
    ``supported`` (works; costs said in the advice) or ``unsupported`` (the store refuses it).

    Decided from what ``mongos`` can do with the store's operations, not from a list of keys:
    an operation is targeted when the key's *first* field is bounded (mongos flattens the bounds
    of the key's fields in order, ``flattenBounds`` in ``src/mongo/s/shard_key_pattern_query_util.cpp``),
    and a single-document write or upsert needs an equality on *every* field of the key
    (``extractShardKeyFromQuery``, same file; 7.0 refuses an upsert without it, code 61). The store's
    prefix reads and multi-writes bound ``KEY_FIELD[role]``; its single-document writes carry
    ``EXACT_FIELDS[role]`` by equality. So a key fits when it starts with ``KEY_FIELD[role]`` and has
    no field outside ``EXACT_FIELDS[role]``: ``{item_id: 1, _id: 1}`` (what ``refineCollectionShardKey``
    makes of ``{item_id: 1}``) does, ``{_id: 1, path: 1}`` on the items does not.
    """
    field = KEY_FIELD[role]
    recommended = {field: 1}
    if key is None:
        return "unsharded", f"unsharded (on the database's primary shard); to shard it use key {recommended}"
    norm = {str(k): (v if isinstance(v, str) else int(v)) for k, v in key.items()}
    names = list(norm)
    if norm == recommended:
        return "recommended", (
            "ranged key: single-item operations reach one shard, a namespace prefix only the shards that hold it"
        )
    if norm == {field: "hashed"}:
        return "supported", (
            f"hashed key: single-item operations reach one shard, but every namespace-prefix read reaches every "
            f"shard; {recommended} keeps a tenant together (docs/scaling.md)"
        )
    extra = [n for n in names if n not in EXACT_FIELDS[role]]
    if names[:1] == [field] and not extra:
        ranged = norm[field] == 1
        reads = (
            "a namespace prefix only the shards that hold it"
            if ranged
            else "every namespace-prefix read reaches every shard (its first field is hashed)"
        )
        return "supported", (
            f"compound key starting with {field!r} (as refineCollectionShardKey makes of {recommended}): every "
            f"single-document write carries all of its fields, so single-item operations stay targeted, and {reads}; "
            f"one item's documents may straddle a chunk boundary (then its reads reach two shards)"
        )
    why = (
        f"its first field is {names[0]!r}, not {field!r}"
        if names[:1] != [field]
        else f"the store's single-document writes do not carry {', '.join(map(repr, extra))}"
    )
    return "unsupported", (
        f"shard key {dict(key)} does not fit the store: {why}. Its reads and writes are keyed by "
        f"{', '.join(map(repr, EXACT_FIELDS[role]))}, so mongos could not target them (MongoDB 7.0 refuses its "
        f"upserts, code 61). Reshard it with db.adminCommand({{reshardCollection: '<db>.<collection>', "
        f"key: {recommended}}}) (docs/scaling.md)"
    )
