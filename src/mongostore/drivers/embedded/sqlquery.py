"""MongoDB filters, sorts and projections as SQL over the local store's indexed columns (pure functions).

Each indexed field of a collection has a column holding its value when the value is *plain*: a string
(TEXT), a date (an 8-byte BLOB that sorts as the dates do) or null/missing (NULL). So SQLite's order of
types (NULL < TEXT < BLOB) is MongoDB's (null < string < date), and a comparison can be bracketed by
type as MongoDB's is (a string never compares with a date). A document whose indexed field holds
anything else (a number, an array...) stores NULL there and is counted against the column; a column
with such a document is not used for conditions or sorts (``translate``'s ``usable``).

``translate`` turns the conditions it can decide exactly into SQL and leaves the rest as a residual
filter, which the engine applies to each decoded candidate with mongomock's ``filter_applies``: SQL
narrows, MongoDB's semantics decide. Conditions translated: equality, ``$eq``, ``$ne``, ``$in``,
``$nin``, ``$gt``/``$gte``/``$lt``/``$lte`` on strings and dates, an anchored ``$regex`` as the range of
its literal prefix (exact when the pattern is nothing more), ``$not`` of an exact condition, and
``$and`` / ``$or`` of those.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

#: A date column value starts with BSON's date type byte; nothing else in a column is a BLOB.
DATE_TAG = b"\x09"
_DATE = struct.Struct(">Q")
_DATE_MIN = DATE_TAG  # below every date, above every string
_DATE_END = b"\x0a"  # above every date
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


class _Unplain(Exception):
    """The operand is no plain value: the condition stays in the residual filter."""


def date_key(value: datetime) -> bytes:
    """A date as its column value: milliseconds since the epoch (what BSON keeps), offset so that
    unsigned big-endian bytes sort as the dates do. A naive datetime is UTC, as pymongo reads it."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return DATE_TAG + _DATE.pack((value - _EPOCH) // _MS + (1 << 63))  # floor, as BSON truncates microseconds


def column_value(value: Any) -> tuple[Any, bool]:
    """(the column value, whether ``value`` is plain); a value that is not plain stores NULL."""
    if value is None or isinstance(value, str):
        return value, True
    if isinstance(value, datetime):
        return date_key(value), True
    return None, False


#: What ``lookup`` answers for a path the document does not have.
MISSING: Any = object()


def lookup(doc: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path through sub-documents, or ``MISSING``."""
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def plain_at(doc: Mapping[str, Any], path: str) -> tuple[Any, bool]:
    """``column_value`` of the field at ``path``: not plain when an array lies on the way (MongoDB would
    compare each element)."""
    cur: Any = doc
    for part in path.split("."):
        if isinstance(cur, list):
            return None, False
        if not isinstance(cur, Mapping):
            return None, True
        cur = cur.get(part)
    return column_value(cur)


def _operand(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return date_key(value)
    raise _Unplain


_UPWARD, _DOWNWARD = ("$gt", "$gte"), ("$lt", "$lte")
_SIGNS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _bounded(spec: Mapping[str, Any], ops: tuple[str, str], kind: type) -> bool:
    """Does ``spec`` also bound the field by one of ``ops`` with an operand of this type?"""
    return any(isinstance(spec.get(op), kind) for op in ops)


def _comparison(q: str, op: str, operand: str | datetime, spec: Mapping[str, Any]) -> str:
    """A comparison kept to the operand's type, as MongoDB's are (a string never compares with a date).
    A column holds NULL, TEXT or date BLOBs only, so only the side a bound leaves open can reach another
    type (NULL never compares): above a string lie the dates, below a date the strings. That side is
    closed by the type's edge, unless ``spec`` bounds it with the same type: then the condition is one
    range SQLite can seek (an extra edge there made it seek the whole type instead)."""
    cond = f"{q} {_SIGNS[op]} ?"
    if isinstance(operand, str) and op in _UPWARD and not _bounded(spec, _DOWNWARD, str):
        cond += f" AND {q} < X'09'"
    elif isinstance(operand, datetime) and op in _DOWNWARD and not _bounded(spec, _UPWARD, datetime):
        cond = f"{q} >= X'09' AND {cond}"
    return f"({cond})"


@dataclass
class Translation:
    """``where`` (SQL with ``?`` parameters ``params``) selects a superset of the matches; ``residual``
    (a MongoDB filter, None when SQL decides exactly) must still hold for each."""

    where: str = "1"
    params: list[Any] = field(default_factory=list)
    residual: dict[str, Any] | None = None


# An unescaped "|" outside a character class: the pattern has alternatives (no common prefix).
_ALTERNATION = re.compile(r"(?<!\\)(?:\\\\)*\|")


def literal_prefix(pattern: str) -> tuple[str, bool]:
    """The literal text an anchored regex starts with, and whether the pattern is nothing more.

    ``^a\\.b`` -> ("a.b", True); ``^a\\.[^.]+`` -> ("a.", False); unanchored: ("", False).
    An escaped non-alphanumeric character is itself (``re.escape``'s output); anything else ends it.
    """
    if not pattern.startswith("^") or _ALTERNATION.search(pattern):
        return "", False
    out: list[str] = []
    i, n = 1, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n and not pattern[i + 1].isalnum():
            out.append(pattern[i + 1])
            i += 2
        elif ch.isalnum() or ch in " _-/:,;'\"=<>!@#%&~`\x00":
            out.append(ch)
            i += 1
        else:
            break
    if i < n and pattern[i] in "?*{" and out:
        out.pop()  # the last literal is optional or repeated: not part of the prefix
    return "".join(out), i == n


def _successor(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (None: no bound)."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i])
        if code < 0x10FFFF and not 0xD7FF <= code < 0xE000:
            return prefix[:i] + chr(code + 1)
    return None


def _is_map(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # (a dict's check first: the ABC's is slow)


def _maps(values: list[Any]) -> bool:
    return all(map(_is_map, values))


def _operators(spec: Any) -> bool:
    """Is ``spec`` a non-empty document of ``$`` operators?"""
    if not spec or not _is_map(spec):
        return False
    return all(type(key) is str and key[:1] == "$" for key in spec)


class _Translator:
    def __init__(self, columns: Mapping[str, str]) -> None:
        self.columns = columns  # field -> column name, usable ones only
        self.params: list[Any] = []

    def conjunction(self, filt: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """SQL conditions and the residual conditions of a filter's conjuncts."""
        sql: list[str] = []
        residual: list[dict[str, Any]] = []
        for name, spec in filt.items():
            if name == "$and" and type(spec) is list and _maps(spec):
                for sub in spec:
                    s, r = self.conjunction(sub)
                    sql += s
                    residual += r
                continue
            if name == "$or" and type(spec) is list and spec and _maps(spec):
                mark = len(self.params)
                branches = []
                for sub in spec:
                    s, r = self.conjunction(sub)
                    if r:
                        break
                    branches.append("(" + (" AND ".join(s) or "1") + ")")
                else:
                    sql.append("(" + " OR ".join(branches) + ")")
                    continue
                del self.params[mark:]
                residual.append({name: spec})
                continue
            col = self.columns.get(name) if not name.startswith("$") else None
            if col is None:
                residual.append({name: spec})
                continue
            mark = len(self.params)
            try:
                cond, exact = self.field(col, spec)
            except _Unplain:
                del self.params[mark:]
                residual.append({name: spec})
                continue
            sql.append(cond)
            if not exact:
                residual.append({name: spec})
        return sql, residual

    def field(self, col: str, spec: Any) -> tuple[str, bool]:
        if _operators(spec):
            conds: list[str] = []
            exact = True
            for op, operand in spec.items():
                c, e = self.op(col, op, operand, spec)
                conds.append(c)
                exact = exact and e
            return " AND ".join(conds), exact
        return self.op(col, "$eq", spec, {})

    def op(self, col: str, op: str, operand: Any, spec: Mapping[str, Any]) -> tuple[str, bool]:
        q = f'"{col}"'
        if op in ("$eq", "$ne"):
            value = _operand(operand)
            if value is None:
                return f"{q} IS {'' if op == '$eq' else 'NOT '}NULL", True
            self.params.append(value)
            return (f"{q} = ?" if op == "$eq" else f"({q} IS NULL OR {q} != ?)"), True
        if op in ("$in", "$nin"):
            if not isinstance(operand, (list, tuple)):
                raise _Unplain
            values = [_operand(v) for v in operand]
            present = [v for v in values if v is not None]
            self.params.extend(present)
            marks = ", ".join("?" * len(present))
            has_null = len(present) < len(values)
            if op == "$in":
                parts = ([f"{q} IN ({marks})"] if present else []) + ([f"{q} IS NULL"] if has_null else [])
                return ("(" + " OR ".join(parts) + ")") if parts else "0", True
            if has_null:
                return (f"({q} IS NOT NULL AND {q} NOT IN ({marks}))" if present else f"{q} IS NOT NULL"), True
            return (f"({q} IS NULL OR {q} NOT IN ({marks}))" if present else "1"), True
        if op in ("$gt", "$gte", "$lt", "$lte"):
            value = _operand(operand)
            if value is None:
                raise _Unplain  # comparisons with null: MongoDB's rules, not SQL's
            self.params.append(value)
            return _comparison(q, op, operand, spec), True
        if op == "$regex":
            if not isinstance(operand, str) or spec.get("$options"):
                raise _Unplain
            prefix, whole = literal_prefix(operand)
            if not prefix:
                raise _Unplain
            upper = _successor(prefix)
            self.params.append(prefix)
            if upper is None:
                return f"({q} >= ? AND {q} < X'09')", whole
            self.params.append(upper)
            return f"({q} >= ? AND {q} < ?)", whole
        if op == "$options" and "$regex" in spec:
            return "1", True
        if op == "$not" and isinstance(operand, Mapping):
            inner, exact = self.field(col, operand)
            if not exact:
                raise _Unplain
            return f"NOT COALESCE(({inner}), 0)", True
        raise _Unplain


def translate(filt: Mapping[str, Any] | None, columns: Mapping[str, str]) -> Translation:
    """SQL for what ``columns`` (field -> column, each usable) can decide of ``filt``; the rest as a residual."""
    if not filt:
        return Translation()
    t = _Translator(columns)
    sql, residual = t.conjunction(filt)
    rest = None if not residual else (residual[0] if len(residual) == 1 else {"$and": residual})
    return Translation(" AND ".join(sql) or "1", t.params, rest)


def order_by(sort: Sequence[tuple[str, int]] | None, columns: Mapping[str, str]) -> str | None:
    """``ORDER BY`` for a sort whose every key has a usable column; None when one has none ("" for no sort)."""
    if not sort:
        return ""
    parts = []
    for name, direction in sort:
        col = columns.get(name)
        if col is None or direction not in (1, -1):
            return None
        parts.append(f'"{col}"' + (" DESC" if direction == -1 else ""))
    return " ORDER BY " + ", ".join(parts)


# --------------------------------------------------------------------------- $group


@dataclass
class GroupSQL:
    """A ``$group`` stage as SQL: ``select`` (one expression per output field in ``fields``) with
    ``params``; ``by``: the grouping expression with ``key_params`` (None: one group of everything);
    ``bare``: columns compared without ``$ifNull``, exact only where no document lacks the field (missing
    is not null there)."""

    by: str | None
    fields: list[str]
    select: list[str]
    params: list[Any]
    bare: set[str] = field(default_factory=set)
    key_params: list[Any] = field(default_factory=list)
    by_day: tuple[str, str] | None = None  # (column, format): ``by`` is a format of the day of a date column


_AGG_SIGNS = {"$eq": "=", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}


def _agg_condition(cond: Any, columns: Mapping[str, str], params: list[Any], bare: set[str]) -> str:
    """An aggregation comparison (BSON order: null and missing below strings, strings below dates) on
    a plain column, as SQL; raises ``_Unplain`` for anything else."""
    if isinstance(cond, Mapping) and len(cond) == 1 and "$and" in cond and isinstance(cond["$and"], list):
        return "(" + " AND ".join(_agg_condition(c, columns, params, bare) for c in cond["$and"]) + ")"
    if not (isinstance(cond, Mapping) and len(cond) == 1):
        raise _Unplain
    ((op, args),) = cond.items()
    if op not in _AGG_SIGNS or not isinstance(args, list) or len(args) != 2:
        raise _Unplain
    field, literal = args
    null_is_null = False  # ``{$ifNull: ["$f", null]}``: a missing field is null (a bare missing one is not)
    if isinstance(field, Mapping) and list(field) == ["$ifNull"] and field["$ifNull"][1:] == [None]:
        field, null_is_null = field["$ifNull"][0], True
    if not (isinstance(field, str) and field.startswith("$") and field[1:] in columns):
        raise _Unplain
    col = f'"{columns[field[1:]]}"'
    if not null_is_null:
        bare.add(columns[field[1:]])
    if isinstance(literal, str) and literal.startswith("$"):  # a field path, not a string
        if literal[1:] not in columns or null_is_null:
            raise _Unplain
        other = columns[literal[1:]]
        bare.update((columns[field[1:]], other))  # both present (never NULL): SQL compares as MongoDB does
        return f'({col} {_AGG_SIGNS[op]} "{other}")'
    if literal is None:
        if not null_is_null:
            raise _Unplain
        return {"$eq": f"{col} IS NULL", "$ne": f"{col} IS NOT NULL", "$lt": "0", "$lte": f"{col} IS NULL",
                "$gt": f"{col} IS NOT NULL", "$gte": "1"}[op]  # fmt: skip
    params.append(_operand(literal))
    if op in ("$lt", "$lte", "$ne"):  # null / missing are below every string and date: true for them
        return f"({col} IS NULL OR {col} {_AGG_SIGNS[op]} ?)"
    return f"({col} IS NOT NULL AND {col} {_AGG_SIGNS[op]} ?)"


# ``$dateToString`` specifiers that mean what ``strftime``'s do (UTC), in MongoDB's 4-digit-year range.
_DATE_FORMAT = re.compile(r"(?:[^%]|%[YmdHMSjGVu%])*")


#: Dates whose column values share their first ``DATE_BUCKET`` bytes lie within 2**24 ms (4.7 hours) of
#: each other: on one day or two days in a row.
DATE_BUCKET = 6


def day_start_key(key: bytes) -> bytes:
    """The column value of the first instant of the (UTC) day of this date column value."""
    ms = _DATE.unpack(key[1:])[0] - (1 << 63)
    return DATE_TAG + _DATE.pack(ms - ms % 86_400_000 + (1 << 63))


def date_string(key: Any, fmt: str) -> str | None:
    """SQL function ``mongo_date_string(column, format)``: ``$dateToString`` of a date column value; null
    for null or missing, as MongoDB answers. Raises for anything else (a string, a year out of 1000-9999),
    so that the statement fails and mongomock runs the stage."""
    if key is None:
        return None
    if not (isinstance(key, bytes) and len(key) == 9 and key[:1] == DATE_TAG):
        raise ValueError("not a date")
    ms = _DATE.unpack(key[1:])[0] - (1 << 63)
    if "%H" in fmt or "%M" in fmt or "%S" in fmt:
        return _format_date(ms, fmt)
    return _format_day(ms // 86_400_000, fmt)  # the same string all day long: one strftime per day


@functools.lru_cache(maxsize=1024)
def _format_day(day: int, fmt: str) -> str:
    return _format_date(day * 86_400_000, fmt)


def _format_date(ms: int, fmt: str) -> str:
    value = _EPOCH + timedelta(milliseconds=ms)
    if not 1000 <= value.year <= 9999:
        raise ValueError("a year strftime may not pad as MongoDB does")
    return value.strftime(fmt)


def _null_merged(key: Any) -> Any:
    """A group key without ``{$ifNull: [<expression>, null]}`` around it: grouping by a field already makes
    its null and missing one group. Raises ``_Unplain`` for any other ``$ifNull``."""
    if isinstance(key, Mapping) and list(key) == ["$ifNull"] and isinstance(key["$ifNull"], list):
        if key["$ifNull"][1:] != [None]:
            raise _Unplain
        return key["$ifNull"][0]
    return key


def _group_key(key: Any, columns: Mapping[str, str], params: list[Any]) -> tuple[str, str | None]:
    """The SQL expression of a ``$group`` ``_id``: a plain column (or ``{$ifNull: [column, null]}``: the
    column holds NULL for null and missing alike, and a group by ``"$f"`` makes them one group too), or
    ``$dateToString`` of one in UTC with the specifiers ``_DATE_FORMAT`` allows; raises ``_Unplain`` for
    anything else. Also the column a ``$dateToString`` formats, if it is that."""
    key = _null_merged(key)
    if isinstance(key, str) and key.startswith("$") and key[1:] in columns:
        return f'"{columns[key[1:]]}"', None
    if isinstance(key, Mapping) and list(key) == ["$dateToString"] and isinstance(key["$dateToString"], Mapping):
        spec = key["$dateToString"]
        fmt, date = spec.get("format"), spec.get("date")
        if (
            set(spec) == {"format", "date"}
            and isinstance(fmt, str)
            and _DATE_FORMAT.fullmatch(fmt)
            and isinstance(date, str)
            and date[1:] in columns
            and date.startswith("$")
        ):
            params.append(fmt)
            col = columns[date[1:]]
            return f'mongo_date_string("{col}", ?)', col
    raise _Unplain


def group_sql(spec: Mapping[str, Any], columns: Mapping[str, str]) -> GroupSQL | None:
    """A ``$group`` SQL can answer: ``_id`` null, one plain column or ``$dateToString`` of a date column,
    and counts (``$sum: 1``) or counts of a condition (``$sum: {$cond: [<comparison>, 1, 0]}``); None for
    anything else (mongomock runs it)."""
    key = spec.get("_id")
    by: str | None = None
    fields: list[str] = []
    select: list[str] = []
    params: list[Any] = []
    key_params: list[Any] = []
    by_day = None
    if key is not None:
        try:
            by, date_column = _group_key(key, columns, key_params)
        except _Unplain:
            return None
        if date_column is not None and not any(f"%{c}" in key_params[0] for c in "HMS"):
            by_day = (date_column, key_params[0])
    bare: set[str] = set()
    try:
        for name, acc in spec.items():
            if name == "_id":
                continue
            if not (isinstance(acc, Mapping) and list(acc) == ["$sum"]):
                return None
            term = acc["$sum"]
            if term == 1 and type(term) is int:
                select.append("count(*)")
            elif (
                isinstance(term, Mapping)
                and list(term) == ["$cond"]
                and isinstance(term["$cond"], list)
                and len(term["$cond"]) == 3
                and [type(v) for v in term["$cond"][1:]] == [int, int]
                and term["$cond"][1:] == [1, 0]
            ):
                condition = _agg_condition(term["$cond"][0], columns, params, bare)
                select.append(f"sum(CASE WHEN {condition} THEN 1 ELSE 0 END)")
            else:
                return None
            fields.append(name)
    except _Unplain:
        return None
    return GroupSQL(by, fields, select, params, bare, key_params, by_day)


def counted_path(spec: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """(the dotted path, the output fields) of a ``$group`` that counts documents (``$sum: 1`` only) by
    one field (``"$f"`` or ``{$ifNull: ["$f", null]}``: missing and null are one group, as MongoDB
    makes them); None for anything else."""
    try:
        key = _null_merged(spec.get("_id"))
    except _Unplain:
        return None
    if not (isinstance(key, str) and key.startswith("$") and not key.startswith("$$") and len(key) > 1):
        return None
    fields = [name for name in spec if name != "_id"]
    if any(spec[name] != {"$sum": 1} or type(spec[name]["$sum"]) is not int for name in fields):
        return None
    return key[1:], fields


# --------------------------------------------------------------------------- projections


class Projection(NamedTuple):
    """A projection of 0/1 flags: inclusion or exclusion of ``paths`` (dotted, split), whether ``_id`` is
    kept, and ``covered``: the top-level fields an inclusion keeps besides ``_id`` (None for an exclusion
    or a dotted path)."""

    include: bool
    paths: list[list[str]]
    keep_id: bool
    covered: tuple[str, ...] | None


def simple_projection(spec: Mapping[str, Any] | None) -> Projection | None:
    """A projection of 0/1 flags, parsed; None when it is anything more."""
    if not spec:
        return None
    try:
        return _projection(tuple(spec.items()))
    except TypeError:  # an unhashable flag: not 0/1 anyway
        return _parse_projection(spec)


@functools.lru_cache(maxsize=256)
def _projection(items: tuple[tuple[str, Any], ...]) -> Projection | None:
    return _parse_projection(dict(items))


def _parse_projection(spec: Mapping[str, Any]) -> Projection | None:
    include: bool | None = None
    paths: list[list[str]] = []
    keep_id = True
    for name, flag in spec.items():
        if isinstance(flag, bool) or flag in (0, 1):
            on = bool(flag)
        else:
            raise NotImplementedError(f"projection {name!r}: {flag!r}: the local store projects with 0/1 only")
        if name == "_id":
            keep_id = on
            continue
        if include is None:
            include = on
        elif include != on:
            raise ValueError(f"projection {dict(spec)!r} mixes inclusion and exclusion")
        paths.append(name.split("."))
    inclusion = keep_id if include is None else include
    covered = tuple(p[0] for p in paths) if inclusion and all(len(p) == 1 for p in paths) else None
    return Projection(inclusion, paths, keep_id, covered)


def filter_fields(filt: Mapping[str, Any]) -> set[str] | None:
    """The top-level fields a filter reads; None when it holds an operator that may read anything
    (``$expr``, ``$where``, ``$text``...)."""
    out: set[str] = set()
    for name, spec in filt.items():
        if name in ("$and", "$or", "$nor") and isinstance(spec, list):
            for sub in spec:
                found = filter_fields(sub) if isinstance(sub, Mapping) else None
                if found is None:
                    return None
                out |= found
        elif name.startswith("$"):
            return None
        else:
            out.add(name.split(".")[0])
    return out


def _take(doc: Mapping[str, Any], path: list[str], out: dict[str, Any]) -> None:
    head = path[0]
    if head not in doc:
        return
    value = doc[head]
    if len(path) == 1:
        out[head] = value
        return
    if isinstance(value, Mapping):
        sub = out.setdefault(head, {})
        if isinstance(sub, dict):
            _take(value, path[1:], sub)
    elif isinstance(value, list):
        items = []
        for element in value:
            if isinstance(element, Mapping):
                part: dict[str, Any] = {}
                _take(element, path[1:], part)
                items.append(part)
        out[head] = items


def _drop(doc: dict[str, Any], path: list[str]) -> None:
    head = path[0]
    if head not in doc:
        return
    if len(path) == 1:
        del doc[head]
        return
    value = doc[head]
    if isinstance(value, dict):
        _drop(value, path[1:])
    elif isinstance(value, list):
        for element in value:
            if isinstance(element, dict):
                _drop(element, path[1:])


def project(doc: dict[str, Any], plan: Projection) -> dict[str, Any]:
    """``doc`` through a ``simple_projection``, as MongoDB's find projects (``_id`` first when kept)."""
    include, paths, keep_id, _ = plan
    if include:
        out: dict[str, Any] = {"_id": doc["_id"]} if keep_id and "_id" in doc else {}
        for path in paths:
            if len(path) == 1:  # a top-level field (the store's projections): no walk
                if path[0] in doc:
                    out[path[0]] = doc[path[0]]
            else:
                _take(doc, path, out)
        return out
    for path in paths:
        _drop(doc, path)
    if not keep_id:
        doc.pop("_id", None)
    return doc


# --------------------------------------------------------------------------- upserts


def equality_fields(filt: Mapping[str, Any]) -> dict[str, Any]:
    """The fields an upsert's new document starts with: the filter's top-level equalities (``$and`` too)."""
    out: dict[str, Any] = {}
    for name, spec in filt.items():
        if name == "$and" and isinstance(spec, list):
            for sub in spec:
                if isinstance(sub, Mapping):
                    out.update(equality_fields(sub))
        elif name.startswith("$"):
            continue
        elif isinstance(spec, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in spec):
            if "$eq" in spec:
                _set_path(out, name, spec["$eq"])
        else:
            _set_path(out, name, spec)
    return out


def _set_path(doc: dict[str, Any], name: str, value: Any) -> None:
    parts = name.split(".")
    cur = doc
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    cur[parts[-1]] = value


def apply_fields(doc: dict[str, Any], update: Mapping[str, Any], inserting: bool) -> bool:
    """Apply ``$set`` / ``$unset`` / ``$setOnInsert`` in place, and ``$max`` / ``$min`` of a tz-aware date on
    a top-level field that is missing, null or such a date; False (nothing changed) when the update holds
    anything else: BSON's whole order across types is mongomock's to apply."""
    if any(op not in ("$set", "$unset", "$setOnInsert", "$max", "$min") for op in update):
        return False
    for op in ("$max", "$min"):
        for name, value in (update.get(op) or {}).items():
            current = doc.get(name)
            if "." in name or not _aware_date(value) or not (current is None or _aware_date(current)):
                return False
    for name, value in (update.get("$set") or {}).items():
        _set_path(doc, name, value)
    if inserting:
        for name, value in (update.get("$setOnInsert") or {}).items():
            _set_path(doc, name, value)
    for name in update.get("$unset") or {}:
        _drop(doc, name.split("."))
    for name, value in (update.get("$max") or {}).items():  # null and missing are below every date
        if doc.get(name) is None or value > doc[name]:
            doc[name] = value
    for name, value in (update.get("$min") or {}).items():  # a missing field is set, a null one is lower
        if name not in doc or (doc[name] is not None and value < doc[name]):
            doc[name] = value
    return True


def _aware_date(value: Any) -> bool:
    return isinstance(value, datetime) and value.tzinfo is not None
