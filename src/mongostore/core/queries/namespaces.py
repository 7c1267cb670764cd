"""Namespace filters and the list_namespaces pipeline (with its ``ns_key`` sort key)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import MatchCondition

from mongostore.core.codec import namespace_path
from mongostore.core.queries.sharding import literal_prefix, with_shard_range
from mongostore.errors import InvalidFilterError


def prefix_filter(namespace_prefix: tuple[str, ...], field_name: str = "path") -> dict[str, Any]:
    """Items whose namespace starts with the prefix: an anchored, option-free ``$regex`` (``("a",)``:
    ``^a\\.``, never ``("ab",)``) that scans only the literal prefix's index range; ``()``: no condition."""
    if not namespace_prefix:
        return {}
    return {field_name: {"$regex": "^" + re.escape(namespace_path(namespace_prefix))}}


def not_expired(now: datetime) -> dict[str, Any]:
    """Documents without an expiry, or whose expiry is still ahead."""
    return {"expires_at": {"$not": {"$lte": now}}}


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
    offset: int | None = None,
    limit: int | None = None,
    sharded: bool = False,
) -> list[dict[str, Any]]:
    """Distinct namespaces (truncated to ``max_depth``) meeting the conditions: all, for the client to sort,
    or with ``limit`` paged on the server by each group's smallest ``ns_key`` (which sorts as the tuples).
    ``sharded``: the conditions' literal prefix's ``_id`` range first, so mongos targets its shards."""
    match: dict[str, Any] = namespaces_match(conditions)
    if sharded:
        match = with_shard_range(match, literal_prefix(conditions))
    if now is not None:
        match = {"$and": [match, not_expired(now)]} if match else not_expired(now)
    ns: Any = "$namespace"
    if max_depth == 0:
        ns = {"$literal": []}  # $slice with 0 is not something to rely on across servers
    elif max_depth is not None:
        ns = {"$slice": ["$namespace", max_depth]}
    pipeline: list[dict[str, Any]] = []
    if match:
        pipeline.append({"$match": match})
    if limit is None:
        pipeline.append({"$group": {"_id": ns}})
        return pipeline
    if limit < 1 or offset is None or offset < 0:
        raise ValueError(f"server-side paging needs limit >= 1 and offset >= 0, got {limit!r}, {offset!r}")
    pipeline.append({"$group": {"_id": ns, "k": {"$min": "$" + NS_KEY}}})
    pipeline.extend([{"$sort": {"k": 1}}, {"$skip": offset}, {"$limit": limit}, {"$project": {"_id": 1}}])
    return pipeline
