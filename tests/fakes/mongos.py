"""A test double of ``mongos`` over mongomock: shard keys, chunks, targeting and its rules.

``Cluster`` pretends to be a sharded cluster of ``len(shards)`` shards behind one mongos.
Its collections (``MongosCollection``) present the pymongo ``Collection`` surface the
store uses; the documents live once, in one mongomock collection per namespace (the
logical view mongos gives), and the double computes, for every operation, which shards
mongos would send it to, from the collection's shard key and chunk map (``ShardedNs``).
It records each operation (``OpRecord``: kind, namespace, shards reached, whether it was
targeted, whether it ran as a "write without shard key") and enforces the rules that bind
the store (mongod/mongos source cited per rule, as read in the public mongodb/mongo
repository; codes are those of ``src/mongo/base/error_codes.yml``):

- unique indexes: a unique index must be prefixed by the shard key, unless it starts with
  ``_id`` (``ShardKeyPattern::isUniqueIndexCompatible``, ``shard_key_pattern.cpp``); else
  ``createIndexes`` fails with code 67 CannotCreateIndex "cannot create unique index over
  { path: 1, key: 1 } with shard key pattern { _id: 1 }" (``checkUniqueIndexConstraints``),
  and ``shardCollection`` over an existing incompatible unique index fails with code 72
  InvalidOptions "... Uniqueness can't be maintained unless shard key is a prefix"
  (``src/mongo/db/s/shard_key_util.cpp``). A unique hashed index fails with 16764, sharded or
  not (``src/mongo/db/index/hash_access_method.cpp``).
- ``shardCollection`` of a collection that holds documents needs an index supporting the key
  (hashed for a hashed key), else code 72 "Please create an index that starts with the
  proposed shard key before sharding the collection" (``shard_key_util.cpp``,
  ``verifyCanCreateShardKeyIndex``); on an empty one it creates it. ``refine_shard_key`` appends
  ranged fields (``refineCollectionShardKey``); chunks keep splitting on the first field.
- read routing (``getShardIdsForQuery``, ``src/mongo/s/shard_key_pattern_query_util.cpp``): an
  exact key (an equality on every key field, never an array or regex, never a string under a
  non-simple collation: ``extractShardKeyFromQuery``, ``ChunkManager::findIntersectingChunk``)
  reaches its chunk's shard; else the query is planned on the key as an index
  (``IndexBoundsBuilder``, ``src/mongo/db/query/index_bounds_builder.cpp``): equality (an array
  gives itself and its first element, ``undefined`` when empty), ``$in``, comparisons within
  their type's bracket, ``$and``/``$or``, regexes (the literal prefix of
  ``analyze_regex::getRegexPrefixMatch``, ``src/mongo/db/query/analyze_regex.cpp``, or every
  string, plus the regex's own point, which sorts after every string); a non-simple collation
  drops string, object and array comparisons; bounds that admit no value reach the first
  chunk's shard (SERVER-4914). A hashed key targets non-array points only. An aggregation is
  routed by its first ``$match``; a ``$vectorSearch``/``$search`` first stage reaches every shard.
- inserts: by the document's key; an array there fails with 61 (``targetInsert``,
  ``src/mongo/s/collection_routing_info_targeter.cpp``).
- updates and deletes (``targetUpdate``/``targetDelete`` there; ``Cluster.version`` picks 7.0,
  where ``featureFlagUpdateOneWithoutShardKey`` is off, or 7.1+/8.0, where it is on):
  - an upsert on 7.0, and an ``updateMany`` upsert on 8.0, needs the exact key: else 61
    "Failed to target upsert by query :: could not extract exact shard key";
  - a write whose query reaches one shard goes there; on 8.0 a single *update* doing so
    without the exact key (nor an exact ``_id``) still runs as a write without shard key
    (two phases: ``OpRecord.without_shard_key``), a delete does not;
  - reaching several shards, outside a transaction it goes to every shard (``WriteOp::targetWrites``,
    ``write_op.cpp``): a multi-write so; a single one needs an exact ``_id`` (broadcast, on 8.0
    too when not an upsert), else 7.0 refuses an update with 72 and a delete with 61, and 8.0
    runs it in two phases, whose read phase reaches only the shards the query bounds
    (``_clusterQueryWithoutShardKey``, ``cluster_query_without_shard_key_cmd.cpp``); only a
    single write runs in two phases (``targetWriteOps``, ``batch_write_op.cpp``);
  - a replacement reaching several shards on 7.0 (or by exact ``_id`` on 8.0) is targeted by
    its replacement document's key.
- changing a document's shard-key value (``UpdateStage::_checkRestrictionsOnUpdatingShardKeyAreNotViolated``,
  ``src/mongo/db/exec/update_stage.cpp``): without an equality on every key field in the query,
  code 31025 "Shard key update is not allowed without specifying the full shard key in the
  query" (a two-phase write is let through: mongos marks it
  ``$_allowShardKeyUpdatesWithoutFullShardKeyInQuery``); in a multi-update, code 72. Moving it
  to another shard is recorded (``WouldChangeOwningShard``: pymongo's retryable writes let it through).
- ``hello`` answers ``msg: "isdbgrid"``; ``buildInfo`` the version; ``config.collections``
  holds ``{_id: "db.coll", key: {...}, unique: false}`` per sharded collection.

``$lookup`` stages: for each one whose ``from`` collection is sharded the double counts the
documents entering the stage and how many remote queries mongos would send for them
(one per input document, to one shard when ``foreignField`` is the shard key, else to
every shard): ``OpRecord.lookups``. It finds the inputs by running the pipeline's prefix
once more (with ``atlas``, that counts as one more search in ``AtlasSearch``'s counters).
``Cluster(atlas=AtlasSearch(...))`` gives the cluster Atlas Search (``fakes.atlas``):
``$vectorSearch`` first stages reach every shard, as mongos sends them to each shard's mongot.

Chunk migrations: ``move_chunk`` commits one at once (routing changes; the orphans a migration
leaves are set apart, ``orphans``). Not modelled: the balancer, the migration's own steps,
transactions, read concern, zones other than by chunk owners, chunk bounds on a compound
key's later fields, a collection's default collation, ``$ne``/``$nin``/``$not`` bounds (none: every shard).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import bson
import mongomock
from bson.decimal128 import Decimal128
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from pymongo import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException, OperationFailure, WriteError
from pymongo.operations import IndexModel

from mongostore.drivers.mongomock_compat import new_client

__all__ = [
    "CANNOT_CREATE_INDEX",
    "HASHED_UNIQUE",
    "INVALID_OPTIONS",
    "SHARD_KEY_NOT_FOUND",
    "SHARD_KEY_UPDATE_FORBIDDEN",
    "AsyncMongosClient",
    "Cluster",
    "MongosClient",
    "MongosCollection",
    "MongosDatabase",
    "OpRecord",
    "ShardedNs",
    "exact_shard_key",
    "key_bounds",
    "key_of",
    "regex_prefix",
]

SHARD_KEY_NOT_FOUND = 61
CANNOT_CREATE_INDEX = 67
INVALID_OPTIONS = 72
INDEX_OPTIONS_CONFLICT = 85
HASHED_UNIQUE = 16764  # an inline uassert code (hash_access_method.cpp), not in error_codes.yml
SHARD_KEY_UPDATE_FORBIDDEN = 31025  # inline uassert in update_stage.cpp
SEARCH_NOT_ENABLED = 31082  # 8.x without mongot
SEARCH_ONLY_ON_ATLAS = 6047401  # 7.0: "$listSearchIndexes stage is only allowed on MongoDB Atlas"

# --------------------------------------------------------------------------- key order and bounds
# Source paths below are in the public mongodb/mongo repository (as read for issue 34).

# Canonical BSON type ranks (``canonicalizeBSONType``, ``src/mongo/bson/bsontypes.cpp``): values of
# different types order by rank; MinKey below all, MaxKey above all.
_RANK_MINKEY, _RANK_UNDEFINED, _RANK_NULL, _RANK_NUMBER, _RANK_STRING = -1, 0, 5, 10, 15
_RANK_OBJECT, _RANK_ARRAY, _RANK_BINDATA, _RANK_OID, _RANK_BOOL = 20, 25, 30, 35, 40
_RANK_DATE, _RANK_TIMESTAMP, _RANK_REGEX, _RANK_MAXKEY = 45, 47, 50, 127

Key = tuple[Any, ...]  # an order key: (rank, 0, value) for a value; (rank, -1) / (rank, 1) for a type's edges
_LOWEST: Key = (-2,)  # below MinKey: the open end of an unbounded interval
_HIGHEST: Key = (128,)


class Undefined:
    """BSON ``undefined``: what an empty array is indexed as (``translateEquality``)."""


def _rank(value: Any) -> int:
    if isinstance(value, MinKey):
        return _RANK_MINKEY
    if isinstance(value, MaxKey):
        return _RANK_MAXKEY
    if isinstance(value, Undefined):
        return _RANK_UNDEFINED
    if value is None:
        return _RANK_NULL
    if isinstance(value, bool):
        return _RANK_BOOL
    if isinstance(value, (int, float, Decimal128)):
        return _RANK_NUMBER
    if isinstance(value, str):
        return _RANK_STRING
    if isinstance(value, Mapping):
        return _RANK_OBJECT
    if isinstance(value, (list, tuple)):
        return _RANK_ARRAY
    if isinstance(value, bytes):
        return _RANK_BINDATA
    if isinstance(value, ObjectId):
        return _RANK_OID
    if isinstance(value, datetime):
        return _RANK_DATE
    if isinstance(value, Timestamp):
        return _RANK_TIMESTAMP
    if isinstance(value, (Regex, re.Pattern)):
        return _RANK_REGEX
    return _RANK_OBJECT


def key_of(value: Any) -> Key:
    """The order key of a shard-key value (strings compare by their UTF-8 bytes, as mongod's)."""
    rank = _rank(value)
    if rank == _RANK_NUMBER:
        comparable: Any = float(value.to_decimal()) if isinstance(value, Decimal128) else value
    elif rank == _RANK_STRING:
        comparable = value.encode("utf-8")
    elif rank == _RANK_REGEX:
        parts = _regex_parts(value)
        comparable = parts or ("", "")
    elif rank in (_RANK_BOOL, _RANK_OID, _RANK_BINDATA):
        comparable = value if rank != _RANK_OID else value.binary
    elif rank == _RANK_DATE:
        comparable = value.timestamp() if value.tzinfo else value.replace(tzinfo=timezone.utc).timestamp()
    elif rank == _RANK_TIMESTAMP:
        comparable = (value.time, value.inc)
    elif rank in (_RANK_MINKEY, _RANK_MAXKEY, _RANK_NULL, _RANK_UNDEFINED):
        comparable = 0
    else:
        comparable = repr(value)
    return (rank, 0, comparable)


@dataclass(frozen=True)
class Interval:
    """An interval of shard-key order keys (``key_of``); ``lo``/``hi`` ``_LOWEST``/``_HIGHEST`` when open."""

    lo: Key = _LOWEST
    lo_incl: bool = True
    hi: Key = _HIGHEST
    hi_incl: bool = True
    value: Any = None  # a point's value (hashed keys hash it)

    @staticmethod
    def point(v: Any) -> Interval:
        k = key_of(v)
        return Interval(k, True, k, True, v)

    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_incl and self.hi_incl))

    def intersect(self, other: Interval) -> Interval:
        lo, lo_incl = max((self.lo, not self.lo_incl), (other.lo, not other.lo_incl))
        hi, hi_incl = min((self.hi, self.hi_incl), (other.hi, other.hi_incl))
        value = self.value if self.is_point() else other.value
        return Interval(lo, not lo_incl, hi, hi_incl, value)

    def is_point(self) -> bool:
        return self.lo == self.hi and self.lo_incl and self.hi_incl

    def touches_strings(self) -> bool:
        return not Interval((_RANK_STRING, -1), True, (_RANK_STRING, 1), True).intersect(self).empty()


Bounds = list[Interval] | None  # None: every value (no bound on the shard key); []: no value at all


def _intersect(a: Bounds, b: Bounds) -> Bounds:
    if a is None:
        return b
    if b is None:
        return a
    return [r for x in a for y in b if not (r := x.intersect(y)).empty()]


def regex_prefix(pattern: str, flags: str = "") -> str | None:
    """The literal prefix an anchored regex gives index bounds for, or None (no prefix).

    As ``analyze_regex::getRegexPrefixMatch`` (``src/mongo/db/query/analyze_regex.cpp``, used by
    ``IndexBoundsBuilder::simpleRegex``): the pattern starts with ``^`` (or ``\\A``); a ``|`` not
    escaped by a backslash (``stringMayHaveUnescapedPipe``, which also counts one after ``\\\\``)
    gives none; flags other than ``m`` (only after ``\\A``), ``s`` or ``x`` give none; then literal
    characters up to the first of ``^$.[()+{`` (``]``, ``}`` and ``|`` are literal there), an
    escaped alphanumeric (``\\d``...) or, with ``x``, a ``#``; ``*``/``?`` drop the last literal;
    ``\\Q...\\E`` quotes; an escaped non-alphanumeric is itself; with ``x`` spaces are skipped.
    """
    if pattern.startswith("\\A"):
        rest, multiline_ok = pattern[2:], True
    elif pattern.startswith("^"):
        rest, multiline_ok = pattern[1:], False
    else:
        return None
    if _may_have_unescaped_pipe(rest):
        return None
    extended = False
    for flag in flags:
        if flag == "m" and multiline_ok:
            continue
        if flag == "s":
            continue
        if flag == "x":
            extended = True
            continue
        return None
    out: list[str] = []
    i = 0
    while i < len(rest):
        c = rest[i]
        i += 1
        if c in "*?":
            return "".join(out[:-1]) or None
        if c == "\\":
            nxt = rest[i] if i < len(rest) else "\0"
            i += 1
            if nxt == "Q":
                end = rest.find("\\E", i)
                out.append(rest[i:] if end < 0 else rest[i:end])
                i = len(rest) if end < 0 else end + 2
                continue
            if nxt.isascii() and (nxt.isalnum() or nxt == "\0"):
                break
            out.append(nxt)
            continue
        if c in "^$.[()+{":
            break
        if extended and c == "#":
            break
        if extended and c.isspace():
            continue
        out.append(c)
    return "".join(out) or None


def _may_have_unescaped_pipe(s: str) -> bool:
    """``stringMayHaveUnescapedPipe`` (analyze_regex.cpp): best effort, false positives allowed."""
    if s[:1] == "|" or (len(s) > 1 and s[1] == "|" and s[0] != "\\"):
        return True
    return any(s[i] == "|" and (s[i - 1] != "\\" or s[i - 2] == "\\") for i in range(2, len(s)))


def _regex_bounds(spec: Any) -> list[Interval]:
    """``IndexBoundsBuilder::translateRegex`` (``src/mongo/db/query/index_bounds_builder.cpp``): the
    prefix's range (its last byte incremented), or every string when there is no prefix; and in
    both cases the point of the regex itself, since a field may hold that regex (regexes sort
    after strings, so with string split points it falls in the last chunk)."""
    pattern, flags = _regex_parts(spec) or ("", "")
    prefix = regex_prefix(pattern, flags)
    if prefix:
        raw = prefix.encode("utf-8")
        end = raw[:-1] + bytes([(raw[-1] + 1) % 256])
        strings = Interval((_RANK_STRING, 0, raw), True, (_RANK_STRING, 0, end), False)
    else:
        strings = Interval((_RANK_STRING, -1), True, (_RANK_STRING, 1), False)
    return [strings, Interval.point(Regex(pattern, flags))]


def _regex_parts(spec: Any, options: str = "") -> tuple[str, str] | None:
    if isinstance(spec, Regex):
        return str(spec.pattern), _flag_letters(spec.flags) if isinstance(spec.flags, int) else str(spec.flags)
    if isinstance(spec, re.Pattern):
        # Python 3 str patterns carry re.UNICODE, so the u flag once BSON-encoded: no prefix
        return str(spec.pattern), _flag_letters(spec.flags)
    if isinstance(spec, str):
        return spec, options
    return None


def _flag_letters(flags: int) -> str:
    # as bson encodes them (``bson._encode_regex``): a flag outside m/s/x takes a regex's prefix away
    letters = {re.IGNORECASE: "i", re.LOCALE: "l", re.MULTILINE: "m", re.DOTALL: "s", re.UNICODE: "u", re.VERBOSE: "x"}
    return "".join(v for k, v in letters.items() if flags & k)


def _is_regex(value: Any) -> bool:
    return isinstance(value, (Regex, re.Pattern))


def _equality_bounds(value: Any) -> list[Interval]:
    """``IndexBoundsBuilder::translateEquality``: an array is indexed by itself (inside another
    array) and by its first element, or ``undefined`` when empty."""
    if isinstance(value, (list, tuple)):
        return [Interval.point(list(value)), Interval.point(value[0] if value else Undefined())]
    return [Interval.point(value)]


def _operators(spec: Any) -> bool:
    return isinstance(spec, Mapping) and bool(spec) and all(str(k).startswith("$") for k in spec)


def _condition_bounds(spec: Any) -> Bounds:
    """Bounds on one field from its condition (``{field: spec}``), in the planner's terms: equality,
    ``$in``, the four comparisons (each within its type's bracket: ``$gt: "a"`` stops at the
    strings' end), regexes; any other operator gives no bound."""
    if _is_regex(spec):
        return _regex_bounds(spec)
    if not _operators(spec):
        return _equality_bounds(spec)
    out: Bounds = None
    for op, arg in spec.items():
        got: Bounds
        if op == "$eq":
            got = _regex_bounds(arg) if _is_regex(arg) else _equality_bounds(arg)
        elif op == "$in":
            got = [i for v in arg for i in (_regex_bounds(v) if _is_regex(v) else _equality_bounds(v))]
        elif op in ("$gt", "$gte"):
            rank = _rank(arg)
            got = [Interval(key_of(arg), op == "$gte", (rank, 1), True)]
        elif op in ("$lt", "$lte"):
            rank = _rank(arg)
            got = [Interval((rank, -1), True, key_of(arg), op == "$lte")]
        elif op == "$regex":
            got = _regex_bounds(Regex(*(_regex_parts(arg, str(spec.get("$options", ""))) or ("", ""))))
        else:  # $ne, $nin, $not, $exists, $options, $elemMatch, $type...: no bound
            got = None
        out = _intersect(out, got)
    return out


def key_bounds(filt: Mapping[str, Any] | None, key_field: str, collation: Mapping[str, Any] | None = None) -> Bounds:
    """The shard key's bounds in a query filter (None: unbounded, every shard; []: none).

    As ``getIndexBoundsForQuery`` (``src/mongo/s/shard_key_pattern_query_util.cpp``) plans the
    query on the shard key as an index: top-level conditions and ``$and`` intersect, ``$or``
    unions (a branch without a bound unbounds it). The shard-key "index" has the simple
    collation; a query with another one cannot use string, object or array comparisons on it
    (the planner's collation check), so those give no bound.
    """
    out: Bounds = None
    for name, spec in (filt or {}).items():
        if name == key_field:
            got = None if _non_simple(collation) and _collatable_comparison(spec) else _condition_bounds(spec)
        elif name == "$and":
            got = None
            for sub in spec:
                got = _intersect(got, key_bounds(sub, key_field, collation))
        elif name == "$or":
            subs = [key_bounds(sub, key_field, collation) for sub in spec]
            got = None if any(s is None for s in subs) else [i for s in subs if s for i in s]
        else:
            continue
        out = _intersect(out, got)
    return out


def _collatable_comparison(spec: Any) -> bool:
    """Whether a condition compares with a string, object or array (not a regex): what a query
    whose collation differs from the index's cannot bound (``QueryPlannerIXSelect``)."""

    def collatable(v: Any) -> bool:
        return not _is_regex(v) and _rank(v) in (_RANK_STRING, _RANK_OBJECT, _RANK_ARRAY)

    if _is_regex(spec):
        return False
    if not _operators(spec):
        return collatable(spec)
    comparisons = ("$eq", "$gt", "$gte", "$lt", "$lte")
    return any(collatable(v) for op, v in spec.items() if op in comparisons) or any(
        collatable(v) for v in spec.get("$in", ())
    )


def _non_simple(collation: Mapping[str, Any] | None) -> bool:
    return bool(collation) and dict(collation or {}) != {"locale": "simple"}


_NO_KEY = object()


def exact_shard_key(filt: Mapping[str, Any] | None, key_field: str, collation: Mapping[str, Any] | None = None) -> Any:
    """The exact value of one shard-key field in a filter, or ``_NO_KEY``.

    ``extractShardKeyFromQuery`` (``shard_key_pattern_query_util.cpp``): an equality at the top
    level or under top-level ``$and`` s (``$eq``, or ``$in`` of one value, which canonicalisation
    makes an equality), and ``ShardKeyPattern::isValidShardKeyElementForStorage``: never an array
    (nor a regex). With a non-simple collation a string (object, array) value cannot target one
    shard (``ChunkManager::findIntersectingChunk``, ``src/mongo/s/chunk_manager.cpp``: "Cannot
    target single shard due to collation of key").
    """
    for name, spec in (filt or {}).items():
        if name == key_field:
            value = spec
            if _operators(spec):
                if "$eq" in spec:
                    value = spec["$eq"]
                elif set(spec) == {"$in"} and len(spec["$in"]) == 1:
                    value = spec["$in"][0]
                else:
                    continue
            if _is_regex(value) or isinstance(value, (list, tuple)):
                continue
            if _non_simple(collation) and _rank(value) in (_RANK_STRING, _RANK_OBJECT):
                continue
            return value
        if name == "$and":
            for sub in spec:
                got = exact_shard_key(sub, key_field, collation)
                if got is not _NO_KEY:
                    return got
    return _NO_KEY


def _hash64(value: Any) -> int:
    """A stand-in for ``BSONElementHasher::hash64`` (md5 of the element, first 8 bytes)."""
    raw = bson.encode({"": value})
    return int.from_bytes(hashlib.md5(raw).digest()[:8], "little", signed=True)


# --------------------------------------------------------------------------- sharded namespaces


@dataclass
class ShardedNs:
    """One sharded collection: its key and its chunks.

    ``field``: the key's first field, ``hashed`` or ranged; ``suffix``: further ranged fields
    (``refineCollectionShardKey`` appends them, and extends every chunk bound with MinKey for
    them: so chunks here split on the first field only, which is what a refined key's existing
    chunks look like). ``splits``: the chunk boundaries on the first field, sorted (in hashed space
    for a hashed key); chunk ``i`` is ``[splits[i-1], splits[i])``, the first and last open-ended.
    ``owners[i]``: the shard holding chunk ``i`` (round robin by default; set it for zones).
    """

    field: str
    hashed: bool
    splits: list[Any]
    owners: list[str]
    unique: bool = False
    suffix: tuple[str, ...] = ()

    @property
    def pattern(self) -> dict[str, Any]:
        return {self.field: "hashed" if self.hashed else 1, **dict.fromkeys(self.suffix, 1)}

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.field, *self.suffix)

    def chunk_of(self, value: Any) -> int:
        v = key_of(_hash64(value) if self.hashed else value)
        i = 0
        while i < len(self.splits) and v >= key_of(self.splits[i]):
            i += 1
        return i

    def shard_of(self, value: Any) -> str:
        return self.owners[self.chunk_of(value)]

    def exact_key(self, filt: Mapping[str, Any] | None, collation: Mapping[str, Any] | None = None) -> Any:
        """The first field's value when the filter has an exact equality on every key field, else ``_NO_KEY``.
        A hashed field with a non-simple collation cannot target one shard (findIntersectingChunk)."""
        values = [exact_shard_key(filt, f, collation) for f in self.fields]
        if any(v is _NO_KEY for v in values) or (self.hashed and _non_simple(collation)):
            return _NO_KEY
        return values[0]

    def bounds(self, filt: Mapping[str, Any] | None, collation: Mapping[str, Any] | None = None) -> Bounds:
        """The bounds mongos routes by: the first field's (a hashed key: only points, hashed)."""
        got = key_bounds(filt, self.field, collation)
        if self.hashed and got is not None:
            if not all(b.is_point() and _rank(b.value) not in (_RANK_ARRAY, _RANK_REGEX) for b in got):
                return None
            if _non_simple(collation):
                return None
        return got

    def shards_for(self, bounds: Bounds) -> set[str]:
        """``ChunkManager::getShardIdsForRange`` over the bounds; no bound at all (``[]``) reaches
        the shard of the first chunk (SERVER-4914, ``getShardIdsForQuery``)."""
        if bounds is None:
            return set(self.owners)
        if self.hashed:
            reached = {self.shard_of(b.value) for b in bounds}
        else:
            reached = set()
            for i, owner in enumerate(self.owners):
                lo = key_of(self.splits[i - 1]) if i > 0 else _LOWEST
                hi = key_of(self.splits[i]) if i < len(self.splits) else _HIGHEST
                chunk = Interval(lo, True, hi, False)
                if any(not b.intersect(chunk).empty() for b in bounds):
                    reached.add(owner)
        return reached or {self.owners[0]}


@dataclass
class OpRecord:
    """What mongos did for one operation."""

    op: str  # find, aggregate, count, update, delete, insert, createIndexes...
    ns: str
    shards: frozenset[str]
    targeted: bool  # the shard key bounded it (a subset of the shards, or one)
    filter: Any = None
    single: bool = False  # a single-document write (multi: false)
    upsert: bool = False
    without_shard_key: bool = False  # 7.1+: ran as a write without shard key (broadcast, two phases)
    moved_shard_key: bool = False  # the write changed the document's owning shard
    lookups: list[dict[str, Any]] = field(default_factory=list)  # per sharded $lookup stage


def _fmt(doc: Mapping[str, Any]) -> str:
    """BSON as mongod prints it in messages: ``{ path: 1, key: 1 }``."""
    inner = ", ".join(
        f"{k}: {_fmt(v) if isinstance(v, Mapping) else repr(v) if isinstance(v, str) else v}" for k, v in doc.items()
    )
    return "{ " + inner + " }" if inner else "{}"


class Cluster:
    """The state of one pretend sharded cluster: shards, sharded namespaces, the op log."""

    def __init__(
        self, version: str = "7.0.12", shards: Sequence[str] = ("shard0", "shard1", "shard2"), atlas: Any = None
    ) -> None:
        if len(shards) < 1:
            raise ValueError("a cluster needs a shard")
        self.atlas = atlas  # a ``fakes.atlas.AtlasSearch``: the cluster has Atlas Search (mongot on each shard)
        self.version = version
        self.shards = list(shards)
        self.backend: Any = new_client()
        self.sharded: dict[str, ShardedNs] = {}
        self.log: list[OpRecord] = []
        self.lock = threading.RLock()
        self.config_readable = True  # False: reading config.* fails as for a user without privileges (code 13)
        # Orphans: copies of documents a chunk migration left on a shard that does not own them
        # (until the range deleter runs). Reads through mongos never see them (shard filtering);
        # a shard's mongot indexes them, and $vectorSearch's idLookup drops them (``fakes.atlas``).
        self.orphans: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        if atlas is not None:
            atlas.sharded_view = self._sharded_view

    # ------------------------------------------------------------ version behaviour

    @property
    def major_minor(self) -> tuple[int, int]:
        parts = [int(p) for p in re.findall(r"\d+", self.version)[:2]]
        return (parts[0], parts[1])

    @property
    def writes_without_shard_key(self) -> bool:
        """7.1+ runs upserts and single writes without the shard key (PM-2955)."""
        return self.major_minor >= (7, 1)

    @property
    def wire_version(self) -> int:
        return 25 if self.major_minor >= (8, 0) else 21

    # ------------------------------------------------------------ admin

    def client(self) -> MongosClient:
        return MongosClient(self)

    def async_client(self) -> AsyncMongosClient:
        return AsyncMongosClient(self)

    def shard_collection(
        self,
        full_name: str,
        key: Mapping[str, Any],
        splits: Sequence[Any] | None = None,
        owners: Sequence[str] | None = None,
    ) -> ShardedNs:
        """``sh.shardCollection(full_name, key)``, with chunk boundaries ``splits`` (on the key's first field).

        As ``shardCollection`` (``src/mongo/db/s/shard_key_util.cpp``): refuses an existing unique
        index the key does not prefix (code 72); on a collection that holds documents it needs an
        index that supports the key (``{field: "hashed"}`` for a hashed key, an index starting with
        the key's fields for a ranged one), else code 72 "Please create an index that starts with
        the proposed shard key before sharding the collection"; on an empty one it creates that
        index. Hashed keys default to boundaries that split the hash space evenly. Compound keys:
        the first field ranged or hashed, the others ranged (chunks split on the first field).
        """
        [(name, kind), *rest] = key.items()
        if any(v != 1 for _, v in rest):
            raise NotImplementedError("the double models further key fields as ranged only")
        hashed = kind == "hashed"
        if splits is None and hashed:
            n = len(self.shards)
            splits = [-(2**63) + i * (2**64 // n) for i in range(1, n)]
        elif splits is None:
            splits = []  # a ranged key on a new collection: one chunk, on the first shard
        splits = sorted(splits, key=key_of)
        owners = (
            list(owners) if owners is not None else [self.shards[i % len(self.shards)] for i in range(len(splits) + 1)]
        )
        if len(owners) != len(splits) + 1:
            raise ValueError("one owner per chunk: len(splits) + 1")
        sns = ShardedNs(name, hashed, list(splits), owners, suffix=tuple(f for f, _ in rest))
        db, _, coll = full_name.partition(".")
        with self.lock:
            for spec in self.backend[db][coll].index_information().values():
                pattern = dict(spec["key"])
                if spec.get("unique") and not _unique_compatible(sns, pattern):
                    raise OperationFailure(
                        f"can't shard collection '{full_name}' with unique index on {_fmt(pattern)} and proposed "
                        f"shard key {_fmt(sns.pattern)}. Uniqueness can't be maintained unless shard key is a prefix",
                        INVALID_OPTIONS,
                    )
            data = self.backend[db][coll]
            if not _supporting_index(data, sns):
                if data.count_documents({}):
                    raise OperationFailure(
                        "Please create an index that starts with the proposed shard key before sharding the "
                        "collection. ",
                        INVALID_OPTIONS,
                    )
                data.create_index([(f, "hashed" if f == name and hashed else 1) for f in sns.fields])
            self.sharded[full_name] = sns
        return sns

    def move_chunk(self, full_name: str, chunk: int, to: str) -> None:
        """``moveRange`` of chunk ``chunk`` to shard ``to``, committed at once. One backend holds every
        document (a shard is the owner of its chunks), so a move changes routing only, as a committed
        migration does to what mongos sees; the copies it leaves behind are ``orphans``, set apart."""
        with self.lock:
            sns = self.sharded[full_name]
            if to not in self.shards:
                raise ValueError(f"no shard {to!r}")
            sns.owners[chunk] = to

    def refine_shard_key(self, full_name: str, key: Mapping[str, Any]) -> ShardedNs:
        """``refineCollectionShardKey``: the new key starts with the current one and adds ranged
        fields; chunks keep their boundaries (extended with MinKey). Not modelled: the supporting
        index the command requires."""
        sns = self.sharded[full_name]
        names = list(key)
        if names[: len(sns.fields)] != list(sns.fields) or any(key[f] != 1 for f in names[len(sns.fields) :]):
            raise OperationFailure(f"refineCollectionShardKey: {dict(key)} does not extend {sns.pattern}", 72)
        sns.suffix = tuple(names[1:])
        return sns

    def _sharded_view(self, coll_name: str) -> tuple[Any, list[tuple[str, dict[str, Any]]]] | None:
        """For ``fakes.atlas``: a sharded collection's owner-of-a-document and its orphans."""
        for full_name, sns in self.sharded.items():
            if full_name.partition(".")[2] == coll_name:
                return (lambda doc, sns=sns: sns.shard_of(doc.get(sns.field))), self.orphans.get(full_name, [])
        return None

    def config_collections(self) -> list[dict[str, Any]]:
        return [
            {"_id": ns, "key": s.pattern, "unique": s.unique, "dropped": False}
            for ns, s in sorted(self.sharded.items())
        ]

    # ------------------------------------------------------------ observation

    def mark(self) -> int:
        return len(self.log)

    def since(self, mark: int) -> list[OpRecord]:
        return self.log[mark:]

    def shard_counts(self, full_name: str) -> dict[str, int]:
        """Documents per shard of a collection (where its chunks live)."""
        db, _, coll = full_name.partition(".")
        sns = self.sharded.get(full_name)
        counts = dict.fromkeys(self.shards, 0)
        with self.lock:
            for doc in self.backend[db][coll].find({}, {sns.field if sns else "_id": 1}):
                counts[sns.shard_of(doc.get(sns.field)) if sns else self.shards[0]] += 1
        return counts

    def record(self, rec: OpRecord) -> None:
        self.log.append(rec)


def _key_values(doc: Mapping[str, Any], sns: ShardedNs) -> tuple[Any, ...]:
    return tuple(doc.get(f, _NO_KEY) for f in sns.fields)


def _errmsg(exc: OperationFailure) -> str:
    return str((exc.details or {}).get("errmsg") or exc)


def _unique_compatible(sns: ShardedNs, pattern: Mapping[str, Any]) -> bool:
    """``ShardKeyPattern::isUniqueIndexCompatible``: ``_id`` first, or the key's field names a prefix."""
    names = list(pattern)
    return (bool(names) and names[0] == "_id") or tuple(names[: len(sns.fields)]) == sns.fields


def _supporting_index(data: Any, sns: ShardedNs) -> bool:
    """An index that can serve the shard key: its fields start with the key's, with the same
    kind (a hashed key needs the hashed index; a ranged one an ascending or descending one)."""
    for spec in data.index_information().values():
        pattern = list(dict(spec["key"]).items())
        if len(pattern) < len(sns.fields) or tuple(f for f, _ in pattern[: len(sns.fields)]) != sns.fields:
            continue
        first = pattern[0][1]
        if (first == "hashed") == sns.hashed:
            return True
    return False


# --------------------------------------------------------------------------- pymongo surface


class MongosClient:
    """The client of the pretend mongos: databases, and the 8.0 client-level ``bulk_write``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def __getitem__(self, name: str) -> MongosDatabase:
        return MongosDatabase(self.cluster, name)

    def get_database(self, name: str, *args: Any, **kwargs: Any) -> MongosDatabase:
        return self[name]

    @property
    def admin(self) -> MongosDatabase:
        return self["admin"]

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name == "bulk_write" and self.cluster.wire_version < 25:
            raise AttributeError(name)  # before 8.0 pymongo's MongoClient.bulk_write refuses; keep it simple
        if name == "bulk_write":
            return self._bulk_write
        raise AttributeError(name)

    def _bulk_write(self, models: Sequence[Any], *args: Any, verbose_results: bool = False, **kwargs: Any) -> Any:
        errors: list[dict[str, Any]] = []
        deleted: dict[int, Any] = {}
        total_deleted = matched = 0
        for i, model in enumerate(models):
            db, _, coll = str(model._namespace).partition(".")
            try:
                res = self[db][coll]._write_one(model)
            except (WriteError, OperationFailure) as exc:
                errors.append({"idx": i, "code": exc.code, "errmsg": _errmsg(exc)})
                continue
            matched += res.matched_count
            if isinstance(model, (DeleteOne, DeleteMany)):
                deleted[i] = SimpleNamespace(deleted_count=res.deleted_count)
                total_deleted += res.deleted_count
        if errors:
            raise ClientBulkWriteException(
                {"writeErrors": errors, "writeConcernErrors": [], "error": None}, verbose_results
            )
        return SimpleNamespace(
            deleted_count=total_deleted,
            matched_count=matched,
            delete_results=deleted if verbose_results else None,
            has_verbose_results=verbose_results,
        )


class MongosDatabase:
    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name

    @property
    def client(self) -> MongosClient:
        return MongosClient(self.cluster)

    @property
    def _backend(self) -> Any:
        return self.cluster.backend[self.name]

    def __getitem__(self, name: str) -> MongosCollection:
        return MongosCollection(self, name)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> MongosCollection:
        return self[name]

    def __getattr__(self, name: str) -> MongosCollection:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def command(self, command: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        cmd = command if isinstance(command, str) else next(iter(command))
        if cmd in ("hello", "isMaster", "ismaster"):
            return {
                "isWritablePrimary": True,
                "msg": "isdbgrid",
                "maxWireVersion": self.cluster.wire_version,
                "ok": 1.0,
            }
        if cmd == "buildInfo":
            return {"version": self.cluster.version, "ok": 1.0}
        if cmd == "ping":
            return {"ok": 1.0}
        if cmd == "shardCollection" and self.name == "admin" and isinstance(command, Mapping):
            self.cluster.shard_collection(str(command["shardCollection"]), dict(command["key"]))
            return {"collectionsharded": command["shardCollection"], "ok": 1.0}
        raise OperationFailure(f"no such command: '{cmd}'", 59)

    def list_collection_names(self, *args: Any, **kwargs: Any) -> list[str]:
        if self.name == "config":
            return ["collections"]
        with self.cluster.lock:
            return list(self._backend.list_collection_names())

    def create_collection(self, name: str, *args: Any, **kwargs: Any) -> MongosCollection:
        with self.cluster.lock:
            self._backend.create_collection(name)
        return self[name]

    def drop_collection(self, name: str, *args: Any, **kwargs: Any) -> None:
        with self.cluster.lock:
            self._backend.drop_collection(name)
            self.cluster.sharded.pop(f"{self.name}.{name}", None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MongosDatabase) and (other.cluster, other.name) == (self.cluster, self.name)

    def __hash__(self) -> int:
        return hash((id(self.cluster), self.name))


class _Cursor:
    """``find``'s cursor: chains sort/skip/limit/batch_size, reads under the cluster's lock."""

    def __init__(self, coll: MongosCollection, filt: Any, projection: Any) -> None:
        self._coll, self._filter, self._projection = coll, filt, projection
        self._sort: Any = None
        self._skip = 0
        self._limit = 0

    def sort(self, key: Any, direction: Any = None) -> _Cursor:
        self._sort = key if direction is None else [(key, direction)]
        return self

    def skip(self, n: int) -> _Cursor:
        self._skip = n
        return self

    def limit(self, n: int) -> _Cursor:
        self._limit = n
        return self

    def batch_size(self, n: int) -> _Cursor:
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._coll.cluster.lock:
            cur = self._coll._data.find(self._filter, self._projection)
            if self._sort:
                cur = cur.sort(self._sort)
            if self._skip:
                cur = cur.skip(self._skip)
            if self._limit:
                cur = cur.limit(self._limit)
            docs = list(cur)
        return iter(docs)

    def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        return list(self)


class MongosCollection:
    """A collection seen through the pretend mongos (pymongo ``Collection`` surface)."""

    def __init__(self, database: MongosDatabase, name: str) -> None:
        self.database = database
        self.name = name
        self.cluster = database.cluster

    @property
    def full_name(self) -> str:
        return f"{self.database.name}.{self.name}"

    @property
    def _data(self) -> Any:
        if self.full_name == "config.collections":
            if not self.cluster.config_readable:
                raise OperationFailure('not authorized on config to execute command { find: "collections" }', 13)
            backend = mongomock.MongoClient()["config"]["collections"]
            for doc in self.cluster.config_collections():
                backend.insert_one(doc)
            return backend
        if self.cluster.atlas is not None:
            from fakes.atlas import AtlasDatabase

            return AtlasDatabase(self.cluster.backend[self.database.name], self.cluster.atlas)[self.name]
        return self.cluster.backend[self.database.name][self.name]

    @property
    def sharding(self) -> ShardedNs | None:
        return self.cluster.sharded.get(self.full_name)

    def with_options(self, *args: Any, **kwargs: Any) -> MongosCollection:
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MongosCollection) and (other.cluster, other.full_name) == (
            self.cluster,
            self.full_name,
        )

    def __hash__(self) -> int:
        return hash((id(self.cluster), self.full_name))

    def __repr__(self) -> str:
        return f"MongosCollection({self.full_name!r}, key={self.sharding.pattern if self.sharding else None})"

    # ------------------------------------------------------------ routing

    def _route(
        self, filt: Mapping[str, Any] | None, collation: Mapping[str, Any] | None = None
    ) -> tuple[frozenset[str], bool]:
        """``getShardIdsForQuery``: an exact key first (one shard), else the bounds' chunks."""
        if self.database.name == "config":
            return frozenset({"config"}), True  # the config servers' catalog, not a shard
        sns = self.sharding
        if sns is None:
            return frozenset(self.cluster.shards[:1]), True  # unsharded: its primary shard
        exact = sns.exact_key(filt, collation)
        if exact is not _NO_KEY:
            return frozenset([sns.shard_of(exact)]), True
        bounds = sns.bounds(filt, collation)
        return frozenset(sns.shards_for(bounds)), bounds is not None

    def _all(self) -> frozenset[str]:
        sns = self.sharding
        return frozenset(sns.owners) if sns else frozenset(self.cluster.shards[:1])

    # ------------------------------------------------------------ reads

    def find(self, filter: Any = None, projection: Any = None, *args: Any, **kwargs: Any) -> _Cursor:
        shards, targeted = self._route(filter, kwargs.get("collation"))
        self.cluster.record(OpRecord("find", self.full_name, shards, targeted, filter))
        return _Cursor(self, filter, projection)

    def find_one(self, filter: Any = None, *args: Any, **kwargs: Any) -> Any:
        for doc in self.find(filter, *args, **kwargs).limit(1):
            return doc
        return None

    def count_documents(self, filter: Any, *args: Any, **kwargs: Any) -> int:
        shards, targeted = self._route(filter, kwargs.get("collation"))
        self.cluster.record(OpRecord("count", self.full_name, shards, targeted, filter))
        with self.cluster.lock:
            return int(self._data.count_documents(filter))

    def estimated_document_count(self, *args: Any, **kwargs: Any) -> int:
        self.cluster.record(OpRecord("count", self.full_name, self._all(), False))
        with self.cluster.lock:
            return int(self._data.count_documents({}))

    def aggregate(self, pipeline: Sequence[Mapping[str, Any]], *args: Any, **kwargs: Any) -> Iterator[Any]:
        first = pipeline[0] if pipeline else {}
        if "$match" in first:
            shards, targeted = self._route(first["$match"], kwargs.get("collation"))
        else:
            shards, targeted = self._all(), len(self._all()) == 1
        rec = OpRecord("aggregate", self.full_name, shards, targeted, first.get("$match"))
        with self.cluster.lock:
            rec.lookups = self._lookups(pipeline)
            self.cluster.record(rec)
            docs = list(self._data.aggregate(list(pipeline)))
        return iter(docs)

    def _lookups(self, pipeline: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Per ``$lookup`` into a sharded collection: input documents and remote queries."""
        out = []
        for i, stage in enumerate(pipeline):
            spec = stage.get("$lookup")
            if not isinstance(spec, Mapping):
                continue
            target = self.cluster.sharded.get(f"{self.database.name}.{spec.get('from')}")
            if target is None:
                continue
            entering = len(list(self._data.aggregate(list(pipeline[:i])))) if i else self._data.count_documents({})
            per_doc = 1 if spec.get("foreignField") == target.field else len(set(target.owners))
            out.append(
                {
                    "stage": i,
                    "from": spec.get("from"),
                    "inputs": entering,
                    "remote_queries": entering * per_doc,
                    "shards_per_input": per_doc,
                }
            )
        return out

    # ------------------------------------------------------------ indexes

    def _check_unique(self, keys: Any, unique: bool) -> None:
        sns = self.sharding
        pattern = dict(keys) if not isinstance(keys, str) else {keys: 1}
        if unique and "hashed" in pattern.values():
            # HashAccessMethod (src/mongo/db/index/hash_access_method.cpp), sharded or not
            raise OperationFailure(
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.", HASHED_UNIQUE
            )
        if not unique or sns is None:
            return
        if not _unique_compatible(sns, pattern):
            raise OperationFailure(
                f"cannot create unique index over {_fmt(pattern)} with shard key pattern {_fmt(sns.pattern)}",
                CANNOT_CREATE_INDEX,
            )

    def create_index(self, keys: Any = None, *args: Any, **kwargs: Any) -> str:
        keys = keys if keys is not None else kwargs.pop("keys")
        self._check_unique(keys, bool(kwargs.get("unique")))
        self.cluster.record(OpRecord("createIndexes", self.full_name, self._all(), False))
        with self.cluster.lock:
            try:
                return str(self._data.create_index(keys, **kwargs))
            except OperationFailure as exc:
                if exc.code is None and "already exists with different options" in str(exc):
                    raise OperationFailure(str(exc), INDEX_OPTIONS_CONFLICT) from None  # mongomock has no code
                raise

    def create_indexes(self, indexes: Sequence[IndexModel], *args: Any, **kwargs: Any) -> list[str]:
        names = []
        for model in indexes:
            doc = dict(model.document)
            keys = list(doc.pop("key").items())
            names.append(self.create_index(keys, **doc))
        return names

    def index_information(self) -> dict[str, Any]:
        with self.cluster.lock:
            return dict(self._data.index_information())

    def list_indexes(self) -> Iterator[dict[str, Any]]:
        with self.cluster.lock:
            return iter(list(self._data.list_indexes()))

    def drop_index(self, name: Any, *args: Any, **kwargs: Any) -> None:
        with self.cluster.lock:
            self._data.drop_index(name)

    def drop(self, *args: Any, **kwargs: Any) -> None:
        self.database.drop_collection(self.name)

    # ------------------------------------------------------------ search (a cluster without mongot)

    def _no_search(self) -> OperationFailure:
        if self.cluster.major_minor >= (8, 0):
            return OperationFailure(
                "Using Atlas Search Database Commands and the $listSearchIndexes aggregation "
                "stage requires additional configuration.",
                SEARCH_NOT_ENABLED,
            )
        return OperationFailure("$listSearchIndexes stage is only allowed on MongoDB Atlas", SEARCH_ONLY_ON_ATLAS)

    def list_search_indexes(self, *args: Any, **kwargs: Any) -> Any:
        if self.cluster.atlas is None:
            raise self._no_search()
        with self.cluster.lock:
            return iter(list(self._data.list_search_indexes(*args, **kwargs)))

    def create_search_index(self, *args: Any, **kwargs: Any) -> Any:
        if self.cluster.atlas is None:
            raise self._no_search()
        with self.cluster.lock:
            return self._data.create_search_index(*args, **kwargs)

    def update_search_index(self, *args: Any, **kwargs: Any) -> Any:
        if self.cluster.atlas is None:
            raise self._no_search()
        with self.cluster.lock:
            return self._data.update_search_index(*args, **kwargs)

    # ------------------------------------------------------------ writes

    def _write_one(self, model: Any) -> Any:
        """One write model through mongos: its rules, its routing, then mongomock's bulk_write."""
        sns = self.sharding
        filt = getattr(model, "_filter", None)
        multi = isinstance(model, (UpdateMany, DeleteMany))
        upsert = bool(getattr(model, "_upsert", False))
        collation = getattr(model, "_collation", None)
        kind = (
            "delete"
            if isinstance(model, (DeleteOne, DeleteMany))
            else "insert"
            if isinstance(model, InsertOne)
            else "update"
        )
        rec = OpRecord(
            kind, self.full_name, self._all(), False, filt, single=not multi and kind != "insert", upsert=upsert
        )
        with self.cluster.lock:
            before: Any = None
            if kind == "insert":
                rec.shards, rec.targeted = self._target_insert(rec, model._doc)
            elif sns is None:
                rec.shards, rec.targeted = frozenset(self.cluster.shards[:1]), True
            else:
                replacement = model._doc if isinstance(model, ReplaceOne) else None
                self._target_write(rec, kind, filt, multi, upsert, collation, replacement)
                if kind == "update":
                    found = self._data.find(filt, dict.fromkeys(sns.fields, 1))
                    before = {d["_id"]: _key_values(d, sns) for d in found}
            self.cluster.record(rec)
            res = self._data.bulk_write([model], ordered=True)
            if kind == "update" and sns is not None:
                self._check_key_change(rec, model, before, multi, filt, collation)
        return res

    def _refuse(self, rec: OpRecord, code: int, msg: str) -> None:
        self.cluster.log.append(rec)
        raise WriteError(msg, code, {"code": code, "errmsg": msg})

    def _target_insert(self, rec: OpRecord, doc: Mapping[str, Any]) -> tuple[frozenset[str], bool]:
        """``targetInsert`` (``src/mongo/s/collection_routing_info_targeter.cpp``): by the document's
        key; a missing key field counts as null; an array there is refused (code 61)."""
        sns = self.sharding
        if sns is None:
            return frozenset(self.cluster.shards[:1]), True
        values = [doc.get(f) for f in sns.fields]
        if any(isinstance(v, (list, tuple)) for v in values):
            self._refuse(rec, SHARD_KEY_NOT_FOUND, "Shard key cannot contain array values or array descendants.")
        return frozenset([sns.shard_of(values[0])]), True

    def _target_write(
        self,
        rec: OpRecord,
        kind: str,
        filt: Any,
        multi: bool,
        upsert: bool,
        collation: Any,
        replacement: Mapping[str, Any] | None,
    ) -> None:
        """``CollectionRoutingInfoTargeter::targetUpdate`` / ``targetDelete``
        (``src/mongo/s/collection_routing_info_targeter.cpp``), as of 7.0 (the feature flag
        ``featureFlagUpdateOneWithoutShardKey`` off) and 7.1+/8.0 (on), then ``WriteOp::targetWrites``
        (``src/mongo/s/write_ops/write_op.cpp``: a write reaching several shards outside a transaction
        goes to every shard) and ``targetWriteOps`` (``batch_write_op.cpp``: only a single write runs
        as a write without shard key). Fills ``rec`` or raises as mongos does."""
        sns = self.sharding
        assert sns is not None
        v8 = self.cluster.writes_without_shard_key
        exact = sns.exact_key(filt, collation)
        exact_id = exact_shard_key(filt, "_id", collation) is not _NO_KEY  # isExactIdQuery
        if kind == "update" and upsert and (not v8 or multi):
            if exact is _NO_KEY:
                self._refuse(
                    rec, SHARD_KEY_NOT_FOUND, "Failed to target upsert by query :: could not extract exact shard key"
                )
            rec.shards, rec.targeted = frozenset([sns.shard_of(exact)]), True
            return
        reached, _ = self._route(filt, collation)
        if len(reached) == 1:
            rec.shards, rec.targeted = reached, True
            # 8.0: an update without the full key (nor an exact _id) that reaches one shard still
            # runs in two phases (its read phase on that shard); a delete does not.
            if kind == "update" and v8 and not multi and exact is _NO_KEY and not exact_id:
                rec.without_shard_key = True
            return
        rec.shards, rec.targeted = self._all(), False  # several shards: every shard (write_op.cpp)
        if multi:
            return
        if kind == "update" and replacement is not None and (not v8 or exact_id):
            values = [replacement.get(f, filt.get(f) if f == "_id" else None) for f in sns.fields]
            if any(isinstance(v, (list, tuple)) for v in values):
                self._refuse(
                    rec,
                    SHARD_KEY_NOT_FOUND,
                    "Failed to target update by replacement document :: could not extract exact shard key",
                )
            rec.shards, rec.targeted = frozenset([sns.shard_of(values[0])]), True
            return
        if exact_id and not (kind == "update" and upsert):
            return  # broadcast by exact _id (8.0: a "write without shard key with _id", still broadcast)
        if v8:
            rec.without_shard_key = True
            rec.shards = reached  # the read phase reaches only the shards the query bounds
            return
        if kind == "update":
            self._refuse(
                rec,
                INVALID_OPTIONS,
                "A {multi:false} update on a sharded collection must contain an exact match on _id (and have the "
                "collection default collation) or target a single shard (and have the simple collation)",
            )
        self._refuse(
            rec,
            SHARD_KEY_NOT_FOUND,
            "A single delete on a sharded collection must contain an exact match on _id (and have the collection "
            "default collation) or contain the shard key (and have the simple collation).",
        )

    def _check_key_change(
        self, rec: OpRecord, model: Any, before: dict[Any, Any], multi: bool, filt: Any, collation: Any
    ) -> None:
        """``UpdateStage::_checkRestrictionsOnUpdatingShardKeyAreNotViolated``
        (``src/mongo/db/exec/update_stage.cpp``): changing a key value needs an equality on every
        key field in the query (code 31025; a two-phase write is let through, mongos marks it
        ``$_allowShardKeyUpdatesWithoutFullShardKeyInQuery``), and never in a multi-update
        (code 72). The change is undone before refusing."""
        sns = self.sharding
        assert sns is not None
        for _id, old in before.items():
            now = self._data.find_one({"_id": _id}, dict.fromkeys(sns.fields, 1))
            if now is None:
                continue
            new = _key_values(now, sns)
            if new == old:
                continue
            full = all(exact_shard_key(filt, f, collation) is not _NO_KEY for f in sns.fields)
            code, msg = 0, ""
            if not full and not rec.without_shard_key:
                code = SHARD_KEY_UPDATE_FORBIDDEN
                msg = "Shard key update is not allowed without specifying the full shard key in the query"
            elif multi:
                code = INVALID_OPTIONS
                msg = "Multi-update operations are not allowed when updating the shard key field."
            if code:
                restore = {f: v for f, v in zip(sns.fields, old, strict=True) if v is not _NO_KEY}
                self._data.update_one({"_id": _id}, {"$set": restore})
                raise WriteError(msg, code, {"code": code, "errmsg": msg})
            if sns.shard_of(new[0] if new[0] is not _NO_KEY else None) != sns.shard_of(
                old[0] if old[0] is not _NO_KEY else None
            ):
                rec.moved_shard_key = True

    def bulk_write(self, requests: Sequence[Any], ordered: bool = True, *args: Any, **kwargs: Any) -> Any:
        errors: list[dict[str, Any]] = []
        totals = dict.fromkeys(("inserted", "matched", "modified", "deleted", "upserted"), 0)
        for i, model in enumerate(requests):
            try:
                res = self._write_one(model)
            except (WriteError, OperationFailure) as exc:
                errors.append({"index": i, "code": exc.code, "errmsg": _errmsg(exc), "op": {}})
                if ordered:
                    break
                continue
            for k in totals:
                totals[k] += int(getattr(res, f"{k}_count", 0) or 0)
        if errors:
            raise BulkWriteError(
                {
                    "writeErrors": errors,
                    "writeConcernErrors": [],
                    "nInserted": totals["inserted"],
                    "nMatched": totals["matched"],
                    "nModified": totals["modified"],
                    "nRemoved": totals["deleted"],
                    "nUpserted": totals["upserted"],
                    "upserted": [],
                }
            )
        return SimpleNamespace(acknowledged=True, **{f"{k}_count": v for k, v in totals.items()})

    def _single(self, model: Any) -> Any:
        try:
            return self.bulk_write([model])
        except BulkWriteError as exc:
            err = exc.details["writeErrors"][0]
            raise WriteError(err["errmsg"], err["code"], err) from None

    def insert_one(self, document: Any, *args: Any, **kwargs: Any) -> Any:
        document.setdefault("_id", bson.ObjectId())
        self._single(InsertOne(document))
        return SimpleNamespace(inserted_id=document["_id"], acknowledged=True)

    def insert_many(self, documents: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        for d in documents:
            d.setdefault("_id", bson.ObjectId())
        self.bulk_write([InsertOne(d) for d in documents], ordered=kwargs.get("ordered", True))
        return SimpleNamespace(inserted_ids=[d["_id"] for d in documents], acknowledged=True)

    def update_one(self, filter: Any, update: Any, upsert: bool = False, *args: Any, **kwargs: Any) -> Any:
        return self._single(UpdateOne(filter, update, upsert=upsert))

    def update_many(self, filter: Any, update: Any, upsert: bool = False, *args: Any, **kwargs: Any) -> Any:
        return self._single(UpdateMany(filter, update, upsert=upsert))

    def replace_one(self, filter: Any, replacement: Any, upsert: bool = False, *args: Any, **kwargs: Any) -> Any:
        return self._single(ReplaceOne(filter, replacement, upsert=upsert))

    def delete_one(self, filter: Any, *args: Any, **kwargs: Any) -> Any:
        return self._single(DeleteOne(filter))

    def delete_many(self, filter: Any, *args: Any, **kwargs: Any) -> Any:
        return self._single(DeleteMany(filter))


# --------------------------------------------------------------------------- the async face (pymongo async shape)


class _AsyncCursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def sort(self, *args: Any) -> _AsyncCursor:
        self._cursor = self._cursor.sort(*args)
        return self

    def skip(self, n: int) -> _AsyncCursor:
        self._cursor = self._cursor.skip(n)
        return self

    def limit(self, n: int) -> _AsyncCursor:
        self._cursor = self._cursor.limit(n)
        return self

    def batch_size(self, n: int) -> _AsyncCursor:
        return self

    async def to_list(self, length: int | None = None) -> list[Any]:
        docs = list(self._cursor)
        return docs if length is None else docs[:length]


class AsyncMongosClient:
    """``Cluster.async_client()``: the pretend mongos as pymongo's ``AsyncMongoClient`` shows it."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def __getitem__(self, name: str) -> AsyncMongosDatabase:
        return AsyncMongosDatabase(MongosDatabase(self.cluster, name))

    @property
    def admin(self) -> AsyncMongosDatabase:
        return self["admin"]

    def __getattr__(self, name: str) -> Any:
        bulk = getattr(MongosClient(self.cluster), name)  # AttributeError before 8.0, as the sync face

        async def call(*args: Any, **kwargs: Any) -> Any:
            return bulk(*args, **kwargs)

        return call


class AsyncMongosDatabase:
    def __init__(self, database: MongosDatabase) -> None:
        self._db = database
        self.name = database.name

    @property
    def client(self) -> AsyncMongosClient:
        return AsyncMongosClient(self._db.cluster)

    def __getitem__(self, name: str) -> AsyncMongosCollection:
        return AsyncMongosCollection(self._db[name])

    async def command(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.command(*args, **kwargs)

    async def list_collection_names(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._db.list_collection_names()

    async def create_collection(self, name: str, *args: Any, **kwargs: Any) -> AsyncMongosCollection:
        self._db.create_collection(name)
        return self[name]


class AsyncMongosCollection:
    def __init__(self, collection: MongosCollection) -> None:
        self.sync = collection
        self.name = collection.name
        self.full_name = collection.full_name

    @property
    def database(self) -> AsyncMongosDatabase:
        return AsyncMongosDatabase(self.sync.database)

    def find(self, *args: Any, **kwargs: Any) -> _AsyncCursor:
        return _AsyncCursor(self.sync.find(*args, **kwargs))

    async def aggregate(self, *args: Any, **kwargs: Any) -> _AsyncCursor:
        return _AsyncCursor(self.sync.aggregate(*args, **kwargs))

    async def list_search_indexes(self, *args: Any, **kwargs: Any) -> _AsyncCursor:
        return _AsyncCursor(self.sync.list_search_indexes(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self.sync, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call
