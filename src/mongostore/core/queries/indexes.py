"""The B-tree and TTL index specs of both collections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexSpec:
    keys: tuple[tuple[str, int | str], ...]  # 1 / -1, or "hashed"
    name: str
    unique: bool = False
    expire_after_seconds: int | None = None


def item_indexes(sharded: bool = False) -> list[IndexSpec]:
    """The items' B-tree and TTL indexes. ``sharded`` (behind mongos): ``path_key`` is not unique, as a unique index
    must start with the shard key (code 67); ``_id`` = ``path + NUL + key`` already makes (path, key) unique."""
    return [
        IndexSpec((("path", 1), ("key", 1)), "path_key", unique=not sharded),
        IndexSpec((("path", 1), ("updated_at", -1)), "path_updated_at"),
        IndexSpec((("expires_at", 1),), "expires_at_ttl", expire_after_seconds=0),
    ]


def hashed_index(field: str) -> IndexSpec:
    """The ``{field: "hashed"}`` index ``shardCollection`` needs before it hashes a collection that holds documents
    (on an empty one it creates it itself; code 72 otherwise, ``shard_key_util.cpp``). Named as mongod names it."""
    return IndexSpec(((field, "hashed"),), f"{field}_hashed")


def vector_indexes() -> list[IndexSpec]:
    return [
        IndexSpec((("item_id", 1),), "item_id"),
        IndexSpec((("ns_prefixes", 1),), "ns_prefixes"),
        IndexSpec((("expires_at", 1),), "expires_at_ttl", expire_after_seconds=0),
    ]
