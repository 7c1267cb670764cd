"""The filters of the store's reads: namespace prefix, expiry, LangGraph's search filter as MQL (an
allow-list of operators, values only as operands), and the list_namespaces pipeline (``ns_key`` sorted)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from bson.decimal128 import Decimal128
from bson.objectid import ObjectId
from bson.regex import Regex
from langgraph.store.base import MatchCondition

from mongostore.core.codec import namespace_path, unencodable
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


# Operators of LangGraph's filter contract, plus the safe extensions.
COMPARISON_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
EXTENSION_OPS = frozenset({"$in", "$nin", "$exists"})
LOGICAL_OPS = frozenset({"$and", "$or"})

# Newest first, ties by namespace then key: ``_id`` is ``path + NUL + key`` (``codec.item_id``; labels
# hold no NUL), so its order is (path, key)'s, and an index on ``{path: 1, updated_at: -1}`` holds it
# (the local store sorts by that index alone, reading no row).
ITEM_SORT: list[tuple[str, int]] = [("updated_at", -1), ("_id", 1)]


def _reject(msg: str, note: str = "") -> InvalidFilterError:
    return InvalidFilterError(msg + " (allowed: $eq $ne $gt $gte $lt $lte $in $nin $exists, $and/$or)" + note)


# MongoDB's own query operators that filters refuse: a name among them is meant as one.
MQL_OPERATORS = frozenset(
    [
        "$where",
        "$expr",
        "$function",
        "$regex",
        "$options",
        "$not",
        "$nor",
        "$elemMatch",
        "$size",
        "$type",
        "$mod",
        "$text",
        "$search",
        "$all",
        "$jsonSchema",
        "$geoWithin",
        "$geoIntersects",
        "$near",
        "$nearSphere",
        "$bitsAllSet",
        "$bitsAllClear",
        "$bitsAnySet",
        "$bitsAnyClear",
        "$comment",
        "$rand",
        "$sampleRate",
        "$accumulator",
    ]
)
# Why a value's own field named like an operator ("$ref", "$schema") cannot be filtered on.
DOLLAR_FIELDS = (
    "; if {name!r} is a field of your values (JSON Schema's $ref, $schema): such fields are "
    "stored and returned, but a filter cannot name a field that starts with '$' (MongoDB "
    "reads it as an operator and reaches it only through $getField in an $expr, which "
    "filters do not send): filter on another field"
)


def _reject_name(msg: str, name: str) -> InvalidFilterError:
    """``_reject`` for a ``$`` name that is no operator of ours: it may be a value's field."""
    return _reject(msg, "" if name in MQL_OPERATORS else DOLLAR_FIELDS.format(name=name))


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Deeper nesting (dicts, lists, $and/$or) is refused up front: MongoDB allows 100 levels, and the checks recurse.
MAX_FILTER_DEPTH = 50
# Operand types besides containers: what a stored value can hold and compare by value (Python's
# Decimal, set or UUID have no BSON encoding; a compiled pattern or bson Regex would run a regex).
SCALARS: tuple[type, ...] = (str, int, float, bool, datetime, type(None), ObjectId, Decimal128, bytes)


class _NeverEqual(Exception):
    """An operand no stored value can equal (an int beyond int64 that no double equals)."""


def _int_bounds(n: int) -> tuple[float, float]:
    """The doubles ``lo <= n <= hi`` next to an int beyond int64 (``lo == hi`` when exact): stored
    numbers are int64 or double, so none lies strictly between them and comparisons stay exact."""
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
    """An operand as BSON can send it (data: no ``$`` names, no regex), or ``InvalidFilterError``.
    An int beyond int64 becomes the double equal to it, or raises ``_NeverEqual``."""
    if depth > MAX_FILTER_DEPTH:
        raise InvalidFilterError(f"filter {where}: nested deeper than {MAX_FILTER_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _reject(f"filter {where}: operator {k!r} is not allowed inside a value")
            if k.startswith("$"):
                raise _reject_name(f"filter {where}: operator {k!r} is not allowed inside a value", k)
            if unencodable(k):
                raise InvalidFilterError(f"filter {where}: field name {k!r} is not valid UTF-8")
            out[k] = _literal(v, f"{where}.{k}", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_literal(v, where, depth + 1) for v in value]
    if isinstance(value, (re.Pattern, Regex)):
        raise InvalidFilterError(f"filter {where}: regex patterns are not allowed (a $regex in disguise)")
    if not isinstance(value, SCALARS):
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
        raise _reject_name(f"filter operator {name!r} is not supported", name)
    if "." in name or "\x00" in name:
        raise InvalidFilterError(
            f"filter field {name!r}: field names cannot contain '.' or NUL; "
            "match nested fields with a nested dict, e.g. {'meta': {'a': 1}}"
        )
    if unencodable(name):
        raise InvalidFilterError(f"filter field {name!r} is not valid UTF-8 (a lone surrogate)")
    return name


NOT_ARRAY: dict[str, Any] = {"$not": {"$type": "array"}}
# A condition no document meets: what equality with an operand no stored value equals becomes.
NEVER: dict[str, Any] = {"_id": {"$in": []}}


def _list_equal(path: str, value: list[Any]) -> dict[str, Any]:
    """The field equals this list exactly: ``{f: {"$eq": L}}`` alone also matches arrays holding L,
    the ``$expr`` compares the whole value (the plain clause first: it can use an index)."""
    return {"$and": [{path: {"$eq": value}}, {"$expr": {"$eq": ["$" + path, {"$literal": value}]}}]}


def _equality(path: str, value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """Whole-value equality as in LangGraph's stores (MongoDB compares each element of an array
    field, so arrays are excluded); dicts match by containment, never inside arrays. A nested dict
    of operators (``{"meta": {"level": {"$gte": 2}}}``) applies them to that field, as InMemoryStore does.
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
            raise _reject_name(f"filter {path}: operator {op!r} is not supported", op)
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
    """A LangGraph search filter on top-level ``value`` fields -> MQL on ``base.<field>``; anything off
    the allow-list (``$where``, ``$expr``, ``$regex``...) raises ``InvalidFilterError`` (a ``ValueError``)."""
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
    return all_of(clauses)


def search_filter(
    namespace_prefix: tuple[str, ...], filter: Mapping[str, Any] | None, now: datetime | None, sharded: bool = False
) -> dict[str, Any]:
    """The ``find`` filter of a plain search: prefix, value filter, expiry; ``sharded`` (behind mongos):
    the prefix's ``_id`` range too, so mongos targets the shards that hold it (``queries.sharding``)."""
    shard_range = shard_range_filter(namespace_prefix) if sharded else {}
    return all_of([prefix_filter(namespace_prefix), shard_range, value_filter(filter), not_expired(now)])


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


def namespace_paths_filter(conditions: Sequence[MatchCondition] | None, now: datetime | None) -> dict[str, Any]:
    """The items whose distinct ``path`` s list the namespaces (``namespaces_page``): the conditions' regexes
    (which imply the depth) and the expiry."""
    regexes = [{"path": {"$regex": _condition_regex(cond)}} for cond in conditions or () if cond.path]
    return all_of([*regexes, not_expired(now)])


def namespaces_page(paths: Iterable[str], max_depth: int | None, offset: int, limit: int) -> list[tuple[str, ...]]:
    """A page of ``list_namespaces`` from the distinct paths: each truncated to ``max_depth``, once, sorted."""
    found = {tuple(p[:-1].split(".")) if max_depth is None else tuple(p[:-1].split("."))[:max_depth] for p in paths}
    return sorted(found)[offset : offset + limit]


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
