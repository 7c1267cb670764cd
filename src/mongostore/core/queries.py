"""Pure builders: filters, pipelines, write requests and index definitions.

Everything here takes arguments and returns dicts, lists or small frozen
dataclasses; nothing touches the network or a store. User input reaches MQL only
as *values* under operators this module wrote itself: field names and operators
from a filter are checked against an allow-list first, and namespace labels are
``re.escape``-d before they go into a ``$regex``.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from bson.binary import VECTOR_SUBTYPE, Binary, BinaryVectorDtype
from bson.decimal128 import Decimal128
from bson.objectid import ObjectId
from bson.regex import Regex
from langgraph.store.base import MatchCondition

from mongostore.core.codec import ancestor_paths, item_id, namespace_key, namespace_path, unencodable, vector_id
from mongostore.errors import InvalidFilterError

Role = Literal["items", "vectors"]

# Operators of LangGraph's filter contract, plus the safe extensions.
COMPARISON_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
EXTENSION_OPS = frozenset({"$in", "$nin", "$exists"})
LOGICAL_OPS = frozenset({"$and", "$or"})

ITEM_SORT: list[tuple[str, int]] = [("updated_at", -1), ("path", 1), ("key", 1)]


# --------------------------------------------------------------------------- namespaces


def prefix_filter(namespace_prefix: tuple[str, ...], field_name: str = "path") -> dict[str, Any]:
    """Items whose namespace starts with the prefix: an anchored, option-free ``$regex``.

    ``("a",)`` becomes ``{"path": {"$regex": "^a\\."}}``: it matches ``("a", "b")`` and never
    ``("ab",)``, and the server scans only the index range of the literal prefix.
    The empty prefix matches everything and adds no condition.
    """
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
    """A ``$match`` filter for list_namespaces conditions (``*`` = exactly one label).

    Each condition is a regex on ``path``; a prefix's leading literal labels keep
    the index range, and ``depth`` checks the length so ``("a", "*")`` needs two labels.
    """
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
) -> list[dict[str, Any]]:
    """Distinct namespaces (truncated to ``max_depth``) that satisfy the conditions.

    Without ``limit``: every distinct namespace, for the client to sort (MongoDB sorts
    arrays by their smallest element, not as tuples). With ``limit``: sorted and paged
    on the server, one ``$facet`` document back: ``page`` (the namespaces) and
    ``unkeyed`` (groups whose items all lack ``ns_key``: documents written before it
    existed; then the client must fall back to sorting everything).

    Each group sorts by the smallest ``ns_key`` of its items: every key in a group
    starts with the key of the group's (truncated) namespace, and a group shorter than
    ``max_depth`` holds exactly that namespace, so the groups come out in tuple order.
    """
    match: dict[str, Any] = namespaces_match(conditions)
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
    pipeline.append(
        {
            "$facet": {
                "page": [{"$sort": {"k": 1}}, {"$skip": offset}, {"$limit": limit}, {"$project": {"_id": 1}}],
                "unkeyed": [{"$match": {"k": None}}, {"$count": "n"}],
            }
        }
    )
    return pipeline


def ns_key_migration() -> WriteRequest:
    """Give items written before ``ns_key`` existed their key, on the server (MongoDB 4.2+)."""
    rest = {"$slice": ["$namespace", 1, {"$max": [1, {"$size": "$namespace"}]}]}
    joined = {
        "$reduce": {
            "input": rest,
            "initialValue": {"$arrayElemAt": ["$namespace", 0]},
            "in": {"$concat": ["$$value", "\x00", "$$this"]},
        }
    }
    return WriteRequest(
        "items",
        "update_many",
        {NS_KEY: {"$exists": False}, "namespace.0": {"$exists": True}},
        [{"$set": {NS_KEY: joined}}],
    )


def ns_key_request(_id: Any, namespace: Sequence[str]) -> WriteRequest:
    """The same, for one item, computed in the client (servers or fakes without ``$reduce``)."""
    return WriteRequest("items", "update_one", {"_id": _id}, {"$set": {NS_KEY: namespace_key(list(namespace))}})


# --------------------------------------------------------------------------- filters


def _reject(msg: str) -> InvalidFilterError:
    return InvalidFilterError(msg + " (allowed: $eq $ne $gt $gte $lt $lte $in $nin $exists, $and/$or)")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Filters nest through dicts, lists and $and/$or; deeper than this is refused up front
# (MongoDB refuses documents nested over 100 levels, and the checks here recurse).
MAX_FILTER_DEPTH = 50
# Operand types a filter may hold besides containers: what a stored value can hold and
# compare by value. Python's Decimal, set, date, UUID and arbitrary objects have no BSON
# encoding; compiled patterns and bson Regex would run a regex, which $regex is refused for.
LITERAL_TYPES: tuple[type, ...] = (str, bool, int, float, datetime, type(None), ObjectId, Decimal128, bytes)


class _NeverEqual(Exception):
    """An operand no stored value can equal (an int beyond int64 that no double equals)."""


def _int_bounds(n: int) -> tuple[float, float]:
    """The doubles ``lo <= n <= hi`` next to an int beyond int64 (``lo == hi`` when exact).

    Stored numbers are int64 or double, so comparing with ``lo``/``hi`` gives exactly the
    answer the comparison with ``n`` would: no stored number lies strictly between them.
    """
    try:
        f = float(n)
    except OverflowError:
        f = math.inf if n > 0 else -math.inf
    if f == n:
        return f, f
    if f > n:
        return math.nextafter(f, -math.inf), f
    return f, math.nextafter(f, math.inf)


def _literal(value: Any, where: str, depth: int = 0) -> Any:
    """An operand as BSON can send it, or ``InvalidFilterError`` naming what is wrong.

    Operands are data: no ``$`` field names, no regex patterns, only types MongoDB stores.
    An int beyond int64 becomes the double equal to it, or raises ``_NeverEqual``.
    """
    if depth > MAX_FILTER_DEPTH:
        raise InvalidFilterError(f"filter {where}: nested deeper than {MAX_FILTER_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str) or k.startswith("$"):
                raise _reject(f"filter {where}: operator {k!r} is not allowed inside a value")
            if unencodable(k):
                raise InvalidFilterError(f"filter {where}: field name {k!r} is not valid UTF-8")
            out[k] = _literal(v, f"{where}.{k}", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_literal(v, where, depth + 1) for v in value]
    if isinstance(value, (re.Pattern, Regex)):
        raise InvalidFilterError(f"filter {where}: regex patterns are not allowed (a $regex in disguise)")
    if not isinstance(value, LITERAL_TYPES):
        raise InvalidFilterError(
            f"filter {where}: a {type(value).__name__} cannot be compared with stored values "
            "(use a str, int, float, bool, datetime, None, list or dict)"
        )
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        lo, hi = _int_bounds(value)
        if lo != hi:
            raise _NeverEqual
        return lo
    if isinstance(value, str) and unencodable(value):
        raise InvalidFilterError(f"filter {where}: the string {value!r} is not valid UTF-8 (a lone surrogate)")
    return value


def _check_field_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise _reject(f"filter field {name!r} must be a non-empty string")
    if name.startswith("$"):
        if name in COMPARISON_OPS | EXTENSION_OPS:
            raise InvalidFilterError(
                f"filter operator {name!r} must apply to a field, e.g. {{'field': {{{name!r}: ...}}}}"
            )
        raise _reject(f"filter operator {name!r} is not supported")
    if "." in name or "\x00" in name:
        raise InvalidFilterError(
            f"filter field {name!r}: field names cannot contain '.' or NUL; "
            "match nested fields with a nested dict, e.g. {'meta': {'a': 1}}"
        )
    if unencodable(name):
        raise InvalidFilterError(f"filter field {name!r} is not valid UTF-8 (a lone surrogate)")
    return name


NOT_ARRAY: dict[str, Any] = {"$not": {"$type": "array"}}
SCALARS = (str, int, float, bool, datetime, type(None), ObjectId, Decimal128, bytes)
# A condition no document meets: what equality with an operand no stored value equals becomes.
NEVER: dict[str, Any] = {"_id": {"$in": []}}


def _list_equal(path: str, value: list[Any]) -> dict[str, Any]:
    """The field equals this list exactly.

    ``{f: {"$eq": L}}`` alone also matches arrays that hold L as an element; the
    ``$expr`` (built here, with the operand as a ``$literal``) compares the whole
    value. The plain clause comes first: it can use an index, and it keeps the
    ``$expr`` away from documents that lack the field.
    """
    return {"$and": [{path: {"$eq": value}}, {"$expr": {"$eq": ["$" + path, {"$literal": value}]}}]}


def _equality(path: str, value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """Whole-value equality as in LangGraph's stores; dicts match by containment.

    MongoDB compares each element of an array field; LangGraph compares the value as a
    whole, so scalar comparisons exclude arrays, and containment never looks inside
    arrays on the way down (each dict level must not be an array). A nested dict of
    operators (``{"meta": {"level": {"$gte": 2}}}``) applies them to that nested field,
    with the same semantics as at the top level, as InMemoryStore does.
    """
    if depth > MAX_FILTER_DEPTH:
        raise InvalidFilterError(f"filter {path}: nested deeper than {MAX_FILTER_DEPTH} levels")
    if isinstance(value, Mapping):
        if not value:
            return [{path: {"$type": "object", **NOT_ARRAY}}]
        clauses: list[dict[str, Any]] = [{path: NOT_ARRAY}]
        for k, v in value.items():
            clauses.extend(_field_clauses(k, v, path, depth + 1))
        return clauses
    try:
        literal = _literal(value, path)
    except _NeverEqual:
        return [NEVER]
    if isinstance(literal, list):
        return [_list_equal(path, literal)]
    return [{path: {"$eq": literal, **NOT_ARRAY}}]


def _range(path: str, op: str, operand: int) -> list[dict[str, Any]]:
    """A comparison with an int beyond int64, through the doubles next to it."""
    lo, hi = _int_bounds(operand)
    if lo == hi:
        return [{path: {op: lo, **NOT_ARRAY}}]
    if op in ("$lt", "$lte"):
        return [{path: {"$lt": hi, **NOT_ARRAY}}]
    if op in ("$gt", "$gte"):
        return [{path: {"$gt": lo, **NOT_ARRAY}}]
    if op == "$eq":
        return [NEVER]
    return []  # $ne: every value differs from it


def _in_operand(path: str, op: str, operand: Any) -> list[Any]:
    if not isinstance(operand, (list, tuple)):
        raise InvalidFilterError(f"filter {path}: {op} takes a list, got {type(operand).__name__}")
    out = []
    for v in operand:
        try:
            out.append(_literal(v, f"{path} {op}"))
        except _NeverEqual:
            continue  # no stored value equals it: it adds nothing to $in nor to $nin
    return out


def _operators(path: str, ops: Mapping[str, Any]) -> list[dict[str, Any]]:
    cond: dict[str, Any] = {}
    clauses: list[dict[str, Any]] = []
    for op, operand in ops.items():
        if op in COMPARISON_OPS:
            if isinstance(operand, int) and not isinstance(operand, bool) and not INT64_MIN <= operand <= INT64_MAX:
                clauses.extend(_range(path, op, operand))
                continue
            try:
                literal = _literal(operand, f"{path} {op}")
            except _NeverEqual:
                # A list or dict holding such an int: no stored value equals it.
                literal = NEVER
            if literal is NEVER and op in ("$eq", "$ne"):
                clauses.extend([NEVER] if op == "$eq" else [])
            elif isinstance(literal, list) and op in ("$eq", "$ne"):
                exact = _list_equal(path, literal)
                clauses.append(exact if op == "$eq" else {"$nor": [exact]})
            elif not isinstance(literal, SCALARS):
                raise InvalidFilterError(
                    f"filter {path}: {op} takes a string, number, bool, date or null, got "
                    f"{type(operand).__name__}; match nested fields with a nested dict"
                )
            elif op == "$ne":
                # A whole array never equals a scalar, so arrays pass $ne (MongoDB would
                # drop arrays that contain the operand).
                clauses.append({"$or": [{path: {"$ne": literal}}, {path: {"$type": "array"}}]})
            else:
                cond[op] = literal
                cond.update(NOT_ARRAY)
        elif op in ("$in", "$nin"):
            # An extension with MongoDB's semantics: an array field matches by its elements.
            cond[op] = _in_operand(path, op, operand)
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise InvalidFilterError(f"filter {path}: $exists takes true or false")
            cond[op] = operand
        elif op in LOGICAL_OPS:
            raise InvalidFilterError(
                f"filter {path}: {op} combines whole filters; put it at the top level of the filter "
                f"(or inside another $and/$or), e.g. {{{op!r}: [{{'a': 1}}, {{'b': 2}}]}}"
            )
        else:
            raise _reject(f"filter {path}: operator {op!r} is not supported")
    return ([{path: cond}] if cond else []) + clauses


def _field_clauses(name: str, spec: Any, base: str, depth: int = 0) -> list[dict[str, Any]]:
    path = f"{base}.{_check_field_name(name)}"
    if isinstance(spec, Mapping) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec):
        return _operators(path, spec)
    if isinstance(spec, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in spec):
        raise InvalidFilterError(
            f"filter {path}: do not mix operators and field names in one dict "
            "(use {'field': {'$gt': 1}} for operators, {'field': {'sub': 1}} for nested fields)"
        )
    return _equality(path, spec, depth)


def value_filter(filter: Mapping[str, Any] | None, base: str = "value", _depth: int = 0) -> dict[str, Any]:
    """A LangGraph search filter on top-level ``value`` fields -> MQL on ``base.<field>``.

    Raises ``InvalidFilterError`` (a ``ValueError``) for anything outside the allow-list:
    ``$where``, ``$expr``, ``$function``, ``$regex``... never reach the server.
    """
    if not filter:
        return {}
    if not isinstance(filter, Mapping):
        raise InvalidFilterError(f"filter must be a dict, got {type(filter).__name__}")
    if _depth > MAX_FILTER_DEPTH:
        raise InvalidFilterError(f"filter: $and/$or nested deeper than {MAX_FILTER_DEPTH} levels")
    clauses: list[dict[str, Any]] = []
    for name, spec in filter.items():
        if name in LOGICAL_OPS:
            if not isinstance(spec, (list, tuple)) or not spec:
                raise InvalidFilterError(f"filter {name} takes a non-empty list of filters")
            subs = [value_filter(sub, base, _depth + 1) if isinstance(sub, Mapping) else None for sub in spec]
            if any(s is None for s in subs):
                raise InvalidFilterError(f"filter {name} takes a list of dicts")
            clauses.append({name: [s or {} for s in subs]})
        else:
            clauses.extend(_field_clauses(name, spec, base, _depth))
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def search_filter(
    namespace_prefix: tuple[str, ...], filter: Mapping[str, Any] | None, now: datetime | None
) -> dict[str, Any]:
    """The ``find`` filter of a plain search: prefix, value filter, expiry."""
    parts = [prefix_filter(namespace_prefix), value_filter(filter)]
    if now is not None:
        parts.append(not_expired(now))
    parts = [p for p in parts if p]
    if not parts:
        return {}
    return parts[0] if len(parts) == 1 else {"$and": parts}


# --------------------------------------------------------------------------- vector search


def vector_prefilter(
    namespace_prefix: tuple[str, ...],
    filter: Mapping[str, Any] | None,
    filter_fields: Sequence[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a search into the ``$vectorSearch`` pre-filter and the post-filter on items.

    The namespace prefix becomes equality on ``ns_prefixes`` (``$vectorSearch`` has no
    ``$regex``). Filter entries on declared filter fields whose operators
    ``$vectorSearch`` understands go into the pre-filter (on the vector documents'
    copy ``value.<field>``); everything else is applied to the joined items.
    """
    pre: list[dict[str, Any]] = []
    if namespace_prefix:
        pre.append({"ns_prefixes": namespace_path(namespace_prefix)})
    post: dict[str, Any] = {}
    for name, spec in (filter or {}).items():
        if name in filter_fields and _prefilterable(spec):
            # Vector documents copy only scalar values of filter fields, so plain MQL
            # equality here cannot match an array that merely contains the value.
            ops = dict(spec) if isinstance(spec, Mapping) else {"$eq": spec}
            pre.append({f"value.{name}": {op: list(v) if isinstance(v, tuple) else v for op, v in ops.items()}})
        else:
            post[name] = spec
    pre_filter: dict[str, Any] = {} if not pre else pre[0] if len(pre) == 1 else {"$and": pre}
    return pre_filter, post


FILTER_SCALARS = (str, int, float, bool, datetime)


def filter_field_values(value: Mapping[str, Any], filter_fields: Sequence[str]) -> dict[str, Any]:
    """The scalar values of the declared filter fields, copied onto vector documents."""
    return {f: value[f] for f in filter_fields if isinstance(value.get(f), FILTER_SCALARS)}


# mongot indexes filter strings up to this many characters (longer values are cut at
# index time, not at query time: a longer operand never matches).
MAX_FILTER_STRING = 8191


def _mongot_type(value: Any) -> str | None:
    """mongot's ``ValueType`` of an operand we may send (``Value.fromBson``), else None.

    bool, number, string and date are distinct types; null is left to the post-filter
    (vector documents do not copy missing or non-scalar values, so its meaning differs).
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number" if not isinstance(value, int) or -(2**63) <= value < 2**63 else None
    if isinstance(value, str):
        return "string" if len(value) <= MAX_FILTER_STRING else None
    if isinstance(value, datetime):
        return "date"
    return None


def _prefilterable(spec: Any) -> bool:
    """Only what mongot accepts, with the post-filter's meaning; the rest is post-filtered.

    Equality on a bool, number, string or date; ranges on numbers, strings and dates;
    ``$in`` of a non-empty list whose elements are all of one type (``InOperator``:
    "must have elements of the same type"; null is not allowed). ``$ne``/``$nin`` stay in
    the post-filter: how ``$vectorSearch`` treats documents that lack the field (vector
    documents copy only scalar values) is not documented.
    """
    if not (isinstance(spec, Mapping) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec)):
        return not isinstance(spec, Mapping) and _mongot_type(spec) is not None
    for op, v in spec.items():
        if op == "$eq":
            ok = _mongot_type(v) is not None
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = _mongot_type(v) in ("number", "string", "date")
        elif op == "$in":
            types = {_mongot_type(x) for x in v} if isinstance(v, (list, tuple)) and v else {None}
            ok = len(types) == 1 and None not in types
        else:
            ok = False
        if not ok:
            return False
    return True


def atlas_score_to_similarity(similarity: str) -> dict[str, Any]:
    """Convert ``vectorSearchScore`` back to what LangGraph's stores report.

    cosine / dotProduct: Atlas gives (1 + s) / 2 -> s = 2 * score - 1.
    euclidean: Atlas gives 1 / (1 + d^2) -> report -d = -sqrt(1 / score - 1).
    """
    if similarity == "euclidean":
        return {"$multiply": [-1, {"$sqrt": {"$subtract": [{"$divide": [1, "$score"]}, 1]}}]}
    return {"$subtract": [{"$multiply": [2, "$score"]}, 1]}


def vector_search_pipeline(
    *,
    index_name: str,
    query_vector: Sequence[float],
    num_candidates: int,
    k: int,
    pre_filter: Mapping[str, Any],
    post_filter: Mapping[str, Any],
    items_collection: str,
    similarity: str,
    offset: int,
    limit: int,
    now: datetime | None,
) -> list[dict[str, Any]]:
    """The Atlas pipeline of one semantic search page: item ids and scores, not items.

    ``$vectorSearch`` (pre-filtered) -> the score -> join the items once, keeping only
    what the next stages read (``vectors``, ``expires_at``, the post-filter's fields)
    -> ``$facet``: ``hits``, the raw vector hits (fewer than ``k`` means the search saw
    every candidate, so asking for more cannot fill a short page); ``scored``, how many
    items matched; and ``page``: drop vectors whose text hash the item no longer
    lists (a failed or stale write) or whose item is gone, apply the remaining
    filters, keep the best vector per item, then sort, skip and limit, as
    ``{_id: item id, score}``. Each ``$facet`` output is capped at 100 MB and the
    result document at 16 MiB (``$facet`` manual page), so whole items never go
    through it: the caller fetches the page's items by ``_id`` afterwards.
    """
    stage: dict[str, Any] = {
        "index": index_name,
        "path": "embedding",
        "queryVector": list(query_vector),
        "numCandidates": num_candidates,
        "limit": k,
    }
    if pre_filter:
        stage["filter"] = dict(pre_filter)
    # $in needs an array: an item without `vectors` (index=False) has no valid vector.
    item_match: list[dict[str, Any]] = [{"$expr": {"$in": ["$text_hash", {"$ifNull": ["$item.vectors", []]}]}}]
    vf = value_filter(post_filter, base="item.value")
    if vf:
        item_match.append(vf)
    if now is not None:
        item_match.append({"item.expires_at": {"$not": {"$lte": now}}})
    valid: list[dict[str, Any]] = [
        {"$unwind": "$item"},
        {"$match": item_match[0] if len(item_match) == 1 else {"$and": item_match}},
        {"$group": {"_id": "$item_id", "score": {"$max": "$score"}}},
    ]
    page: list[dict[str, Any]] = [
        *valid,
        {"$sort": {"score": -1, "_id": 1}},
        {"$skip": offset},
        {"$limit": limit},
        {"$project": {"_id": 1, "score": atlas_score_to_similarity(similarity)}},
    ]
    kept: dict[str, Any] = {"_id": 0, "item_id": 1, "text_hash": 1, "score": 1, "item.vectors": 1}
    if now is not None:
        kept["item.expires_at"] = 1
    kept.update({f"item.value.{name}": 1 for name in filter_field_names(post_filter)})
    return [
        {"$vectorSearch": stage},
        {"$project": {"_id": 0, "item_id": 1, "text_hash": 1, "score": {"$meta": "vectorSearchScore"}}},
        {"$lookup": {"from": items_collection, "localField": "item_id", "foreignField": "_id", "as": "item"}},
        {"$project": kept},
        {"$facet": {"hits": [{"$count": "n"}], "scored": [*valid, {"$count": "n"}], "page": page}},
    ]


def filter_field_names(filter: Mapping[str, Any] | None) -> list[str]:
    """The top-level ``value`` fields a search filter reads (through ``$and``/``$or``), sorted."""
    names: set[str] = set()

    def walk(f: Mapping[str, Any]) -> None:
        for name, spec in f.items():
            if name in LOGICAL_OPS:
                for sub in spec if isinstance(spec, (list, tuple)) else ():
                    if isinstance(sub, Mapping):
                        walk(sub)
            else:
                names.add(str(name))

    walk(filter or {})
    return sorted(names)


def vector_candidates_filter(namespace_prefix: tuple[str, ...], now: datetime | None) -> dict[str, Any]:
    """The local path's vector documents: those under the prefix (multikey index on ns_prefixes)."""
    parts: list[dict[str, Any]] = []
    if namespace_prefix:
        parts.append({"ns_prefixes": namespace_path(namespace_prefix)})
    if now is not None:
        parts.append(not_expired(now))
    if not parts:
        return {}
    return parts[0] if len(parts) == 1 else {"$and": parts}


# --------------------------------------------------------------------------- writes


@dataclass(frozen=True)
class WriteRequest:
    """One write of a bulk request, on the items or the vectors collection.

    The drivers turn these into pymongo models (with ``namespace=`` for the
    client-level ``bulk_write`` of MongoDB 8.0+).
    """

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
) -> WriteRequest:
    """Upsert of one item as an update pipeline, so no read is needed to order writes.

    ``updated_at`` becomes the later of ``now`` and the stored ``updated_at`` plus one
    millisecond (BSON dates hold milliseconds): every write of an item moves it
    forward, however close together two writes land. ``created_at`` is set on insert
    from that same ``updated_at``, so ``created_at <= updated_at`` always holds.
    Everything the caller gave goes in as a ``$literal``: in a pipeline a string
    starting with ``$`` would otherwise be read as a field path.

    ``vector_hashes`` None leaves ``vectors`` as it is (no index configured); a list
    sets it, an empty list removes it.
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
    if vector_hashes is not None:
        if vector_hashes:
            set_["vectors"] = {"$literal": vector_hashes}
        else:
            unset.append("vectors")
    pipeline: list[dict[str, Any]] = [
        {"$set": set_},
        {"$set": {"created_at": {"$ifNull": ["$created_at", "$updated_at"]}}},
    ]
    if unset:
        # $project with exclusions is $unset's older spelling (mongomock 4.3 lacks $unset).
        pipeline.append({"$project": {name: 0 for name in unset}})
    return WriteRequest(
        "items", "update_one", {"_id": item_id(namespace, key)}, pipeline, upsert=True, item=(namespace, key)
    )


def delete_item_requests(namespace: tuple[str, ...], key: str, with_vectors: bool) -> list[WriteRequest]:

    iid = item_id(namespace, key)
    reqs = [WriteRequest("items", "delete_one", {"_id": iid}, item=(namespace, key))]
    if with_vectors:
        reqs.insert(0, WriteRequest("vectors", "delete_many", {"item_id": iid}, item=(namespace, key)))
    return reqs


_FLOAT32_VECTOR = b"\x27\x00"  # BinaryVectorDtype.FLOAT32, padding 0


def float32_vector(vector: Sequence[float] | npt.NDArray[np.floating[Any]]) -> Binary:
    """A vector as a packed float32 BinData vector.

    Byte for byte what ``Binary.from_vector(list(vector), BinaryVectorDtype.FLOAT32)``
    gives; a list of floats is packed by one ``struct`` call (about 4x faster than a
    numpy conversion of a Python list), a numpy array by numpy.
    """
    if isinstance(vector, np.ndarray):
        with np.errstate(over="ignore"):
            m32 = np.ascontiguousarray(vector, dtype="<f4").reshape(-1)
        if np.isinf(m32).any() and np.isfinite(vector).all():
            raise ValueError("the embedder returned values too large for float32 vectors")
        data = m32.tobytes()
    else:
        try:
            data = struct.pack(f"<{len(vector)}f", *vector)
        except OverflowError as exc:
            raise ValueError("the embedder returned values too large for float32 vectors") from exc
        except struct.error as exc:
            raise ValueError(f"the embedder returned a vector that is not all numbers ({exc})") from exc
    return Binary(_FLOAT32_VECTOR + data, VECTOR_SUBTYPE)


def put_vector_request(
    namespace: tuple[str, ...],
    key: str,
    field_name: str,
    hash_: str,
    embedding: Sequence[float] | Binary,
    value_fields: Mapping[str, Any],
    now: datetime,
    ttl_minutes: float | None,
) -> WriteRequest:


    iid = item_id(namespace, key)
    set_: dict[str, Any] = {
        "item_id": iid,
        "field": field_name,
        "text_hash": hash_,
        "ns_prefixes": ancestor_paths(namespace),
        # A packed float32 BinData vector (what Atlas indexes most compactly): a third of
        # the size of an array of doubles, and the local path reads it without a Python
        # float object per number.
        "embedding": embedding
        if isinstance(embedding, Binary)
        else Binary.from_vector(list(embedding), BinaryVectorDtype.FLOAT32),
        "updated_at": now,
    }
    if value_fields:
        set_["value"] = dict(value_fields)
    update: dict[str, Any] = {"$set": set_}
    unset: dict[str, Any] = {}
    if not value_fields:
        unset["value"] = ""
    if ttl_minutes is not None:
        set_["expires_at"] = now + timedelta(minutes=ttl_minutes)
    else:
        unset["expires_at"] = ""
    if unset:
        update["$unset"] = unset
    return WriteRequest(
        "vectors", "update_one", {"_id": vector_id(iid, field_name)}, update, upsert=True, item=(namespace, key)
    )


def retag_vectors_request(
    namespace: tuple[str, ...],
    key: str,
    value_fields: Mapping[str, Any],
    now: datetime,
    ttl_minutes: float | None,
) -> WriteRequest:
    """Keep unchanged vectors of a re-put item in step with it (expiry, filter fields)."""


    set_: dict[str, Any] = {"updated_at": now}
    unset: dict[str, Any] = {}
    if value_fields:
        set_["value"] = dict(value_fields)
    else:
        unset["value"] = ""
    if ttl_minutes is not None:
        set_["expires_at"] = now + timedelta(minutes=ttl_minutes)
    else:
        unset["expires_at"] = ""
    update: dict[str, Any] = {"$set": set_}
    if unset:
        update["$unset"] = unset
    return WriteRequest(
        "vectors", "update_many", {"item_id": item_id(namespace, key)}, update, item=(namespace, key)
    )


def prune_vectors_request(namespace: tuple[str, ...], key: str, keep_fields: Sequence[str]) -> WriteRequest:
    """Remove the vectors of fields an item no longer has (or all, for index=False)."""

    filt: dict[str, Any] = {"item_id": item_id(namespace, key)}
    if keep_fields:
        filt["field"] = {"$nin": list(keep_fields)}
    return WriteRequest("vectors", "delete_many", filt, item=(namespace, key))


def refresh_ttl_requests(
    role: Role, ids_by_ttl: Mapping[float, Sequence[str]], now: datetime, id_field: str = "_id"
) -> list[WriteRequest]:
    """Reset ``expires_at`` from each item's own ``ttl_minutes`` (one update per distinct TTL)."""

    return [
        WriteRequest(
            role,
            "update_many",
            {id_field: {"$in": list(ids)}},
            {"$set": {"expires_at": now + timedelta(minutes=ttl)}},
        )
        for ttl, ids in sorted(ids_by_ttl.items())
    ]


# --------------------------------------------------------------------------- indexes


@dataclass(frozen=True)
class IndexSpec:
    keys: tuple[tuple[str, int], ...]
    name: str
    unique: bool = False
    expire_after_seconds: int | None = None


def item_indexes() -> list[IndexSpec]:
    return [
        IndexSpec((("path", 1), ("key", 1)), "path_key", unique=True),
        IndexSpec((("path", 1), ("updated_at", -1)), "path_updated_at"),
        IndexSpec((("expires_at", 1),), "expires_at_ttl", expire_after_seconds=0),
    ]


def vector_indexes() -> list[IndexSpec]:
    return [
        IndexSpec((("item_id", 1),), "item_id"),
        IndexSpec((("ns_prefixes", 1),), "ns_prefixes"),
        IndexSpec((("expires_at", 1),), "expires_at_ttl", expire_after_seconds=0),
    ]


def vector_index_definition(dims: int, similarity: str, filter_fields: Sequence[str]) -> dict[str, Any]:
    """The Atlas ``vectorSearch`` index definition (what ``atlas-index.json`` holds)."""
    fields: list[dict[str, Any]] = [
        {"type": "vector", "path": "embedding", "numDimensions": dims, "similarity": similarity},
        {"type": "filter", "path": "ns_prefixes"},
    ]
    fields.extend({"type": "filter", "path": f"value.{name}"} for name in filter_fields)
    return {"fields": fields}
