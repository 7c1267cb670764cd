"""Namespace filters and the list_namespaces pipeline (with its ``ns_key`` sort key)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import MatchCondition

from mongostore.core.codec import namespace_path
from mongostore.core.queries.sharding import literal_prefix, shard_range_filter
from mongostore.errors import InvalidFilterError


def prefix_filter(namespace_prefix: tuple[str, ...]) -> dict[str, Any]:
    """Items whose namespace starts with the prefix: an anchored, option-free ``$regex`` (``("a",)``:
    ``^a\\.``, never ``("ab",)``) that scans only the literal prefix's index range; ``()``: no condition."""
    if not namespace_prefix:
        return {}
    return {"path": {"$regex": "^" + re.escape(namespace_path(namespace_prefix))}}


def not_expired(now: datetime | None) -> dict[str, Any]:
    """Documents without an expiry, or whose expiry is still ahead; ``{}`` when ``now`` is None."""
    return {} if now is None else {"expires_at": {"$not": {"$lte": now}}}


def all_of(conditions: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The conditions that are not empty: ``{}`` for none, the one itself, or their ``$and``."""
    kept = [c for c in conditions if c]
    if len(kept) == 1:
        return kept[0]
    return {"$and": kept} if kept else {}


def _condition_regex(cond: MatchCondition) -> str:
    parts = ["[^.]+" if label == "*" else re.escape(label) for label in cond.path]
    body = "".join(p + r"\." for p in parts)
    if cond.match_type == "prefix":
        return "^" + body
    if cond.match_type == "suffix":
        return r"(?:^|\.)" + body + "$"
    raise InvalidFilterError(f"unknown match_type {cond.match_type!r}: use 'prefix' or 'suffix'")


def namespaces_match(conditions: Sequence[MatchCondition] | None) -> dict[str, Any]:
    """A ``$match`` filter for list_namespaces conditions (``*`` = exactly one label): a regex on ``path``
    each, and ``depth`` so ``("a", "*")`` needs two labels."""
    clauses: list[dict[str, Any]] = []
    for cond in conditions or ():
        if not cond.path:
            continue
        clauses.append({"path": {"$regex": _condition_regex(cond)}})
        clauses.append({"depth": {"$gte": len(cond.path)}})
    if not clauses:
        return {}
    if len(clauses) == 2:
        return {**clauses[0], **clauses[1]}
    return {"$and": clauses}


NS_KEY = "ns_key"  # namespace_key(namespace), stored on each item: it sorts as the tuples do


def list_namespaces_pipeline(
    conditions: Sequence[MatchCondition] | None,
    max_depth: int | None,
    now: datetime | None,
    offset: int,
    limit: int,
    sharded: bool = False,
) -> list[dict[str, Any]]:
    """A page of the distinct namespaces (truncated to ``max_depth``) meeting the conditions, sorted on the
    server by each group's smallest ``ns_key`` (which sorts as the tuples). ``sharded``: the conditions'
    literal prefix's ``_id`` range first, so mongos targets its shards."""
    shard_range = shard_range_filter(literal_prefix(conditions)) if sharded else {}
    match = all_of([shard_range, namespaces_match(conditions), not_expired(now)])
    ns: Any = "$namespace"
    if max_depth == 0:
        ns = {"$literal": []}  # $slice with 0 is not something to rely on across servers
    elif max_depth is not None:
        ns = {"$slice": ["$namespace", max_depth]}
    pipeline: list[dict[str, Any]] = [{"$match": match}] if match else []
    pipeline.append({"$group": {"_id": ns, "k": {"$min": "$" + NS_KEY}}})
    pipeline.extend([{"$sort": {"k": 1}}, {"$skip": offset}, {"$limit": limit}, {"$project": {"_id": 1}}])
    return pipeline
