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
  (``shardkey_util.cpp``; message from memory of that file, not re-read here).
- upserts (``update`` with ``upsert: true``, one or many) must carry an exact shard-key
  equality (``extractShardKeyFromQuery``): before 7.1 mongos refuses with code 61
  ShardKeyNotFound "Failed to target upsert by query :: could not extract exact shard key"
  (``chunk_manager_targeter.cpp``, ``targetUpdate``); from 7.1 (8.0 here) it runs the write
  as a "write without shard key" (a broadcast read, then the targeted write; PM-2955,
  ``write_without_shard_key_util.cpp``): allowed, recorded, reaches every shard.
- single-document updates/deletes (``multi: false``) without the shard key: before 7.1
  they need an exact ``_id`` equality and are broadcast; without it code 72 (the
  "A single update on a sharded collection must contain an exact match on _id ..."
  refusal; code from memory). From 7.1: a write without shard key, as above.
- changing a document's shard-key value: only by a single-document write whose filter
  carries the exact shard key, or (7.1+) one run as a write without shard key (code 72
  otherwise, "Shard key update is not allowed without specifying the full shard key in
  the query"; never by a multi-update);
  moving it to another shard is recorded (``WouldChangeOwningShard``: pymongo's
  retryable writes let it through).
- read routing: from the shard key's bounds in the filter, as ``ChunkManager::getShardIdsForQuery``
  does through the index bounds of the shard key: equality, ``$in``, ``$gt/$gte/$lt/$lte``,
  ``$and`` (intersection), ``$or`` (union), and regexes anchored with ``^`` (or ``\\A``)
  whose literal prefix gives a range (``IndexBoundsBuilder::simpleRegex``: flags other
  than ``m``/``s``/``x`` or a ``|`` give no range); anything else reaches every shard.
  A hashed key targets equality and ``$in`` only. An aggregation is routed by its first
  ``$match``; a ``$vectorSearch``/``$search`` first stage reaches every shard.
- ``hello`` answers ``msg: "isdbgrid"``; ``buildInfo`` the version; ``config.collections``
  holds ``{_id: "db.coll", key: {...}, unique: false}`` per sharded collection.

``$lookup`` stages: for each one whose ``from`` collection is sharded the double counts the
documents entering the stage and how many remote queries mongos would send for them
(one per input document, to one shard when ``foreignField`` is the shard key, else to
every shard): ``OpRecord.lookups``. It finds the inputs by running the pipeline's prefix
once more (with ``atlas``, that counts as one more search in ``AtlasSearch``'s counters).
``Cluster(atlas=AtlasSearch(...))`` gives the cluster Atlas Search (``fakes.atlas``):
``$vectorSearch`` first stages reach every shard, as mongos sends them to each shard's mongot.

Not modelled: chunk migrations and the balancer, orphans, collations, compound shard keys
(single-field keys only), transactions, read concern, zones other than by chunk owners.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import bson
import mongomock
from bson.regex import Regex
from pymongo import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException, OperationFailure, WriteError
from pymongo.operations import IndexModel

from mongostore.drivers.mongomock_compat import new_client

__all__ = [
    "CANNOT_CREATE_INDEX",
    "INVALID_OPTIONS",
    "SHARD_KEY_NOT_FOUND",
    "AsyncMongosClient",
    "Cluster",
    "MongosClient",
    "MongosCollection",
    "MongosDatabase",
    "OpRecord",
    "ShardedNs",
    "exact_shard_key",
    "key_bounds",
    "regex_prefix",
]

SHARD_KEY_NOT_FOUND = 61
CANNOT_CREATE_INDEX = 67
INVALID_OPTIONS = 72
INDEX_OPTIONS_CONFLICT = 85
SEARCH_NOT_ENABLED = 31082  # 8.x without mongot
SEARCH_ONLY_ON_ATLAS = 6047401  # 7.0: "$listSearchIndexes stage is only allowed on MongoDB Atlas"

# --------------------------------------------------------------------------- key order and bounds

_INF = object()  # +infinity / -infinity marker in intervals (None would be a value)


def _order(value: Any) -> tuple[int, Any]:
    """A sort key in (roughly) BSON type order, so values of different types never compare."""
    if value is None:
        return (1, 0)
    if isinstance(value, bool):
        return (8, value)
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value.encode("utf-8"))  # MongoDB compares strings by their UTF-8 bytes
    return (5, repr(value))


@dataclass(frozen=True)
class Interval:
    """An interval of shard-key values; ``lo``/``hi`` ``_INF`` when unbounded."""

    lo: Any = _INF
    lo_incl: bool = True
    hi: Any = _INF
    hi_incl: bool = True

    @staticmethod
    def point(v: Any) -> Interval:
        return Interval(v, True, v, True)

    def empty(self) -> bool:
        if self.lo is _INF or self.hi is _INF:
            return False
        a, b = _order(self.lo), _order(self.hi)
        return a > b or (a == b and not (self.lo_incl and self.hi_incl))

    def intersect(self, other: Interval) -> Interval:
        lo, lo_incl = self.lo, self.lo_incl
        if other.lo is not _INF and (lo is _INF or _order(other.lo) > _order(lo)):
            lo, lo_incl = other.lo, other.lo_incl
        elif other.lo is not _INF and lo is not _INF and _order(other.lo) == _order(lo):
            lo_incl = lo_incl and other.lo_incl
        hi, hi_incl = self.hi, self.hi_incl
        if other.hi is not _INF and (hi is _INF or _order(other.hi) < _order(hi)):
            hi, hi_incl = other.hi, other.hi_incl
        elif other.hi is not _INF and hi is not _INF and _order(other.hi) == _order(hi):
            hi_incl = hi_incl and other.hi_incl
        return Interval(lo, lo_incl, hi, hi_incl)

    def is_point(self) -> bool:
        return self.lo is not _INF and self.lo_incl and self.hi_incl and self.lo is self.hi


Bounds = list[Interval] | None  # None: every value (no bound on the shard key)


def _intersect(a: Bounds, b: Bounds) -> Bounds:
    if a is None:
        return b
    if b is None:
        return a
    return [r for x in a for y in b if not (r := x.intersect(y)).empty()]


_REGEX_SPECIAL = set("\\^$.[]|()?*+{}")


def regex_prefix(pattern: str, flags: str = "") -> str | None:
    """The literal prefix an anchored regex gives an index range for, or None (no range).

    As mongod's ``IndexBoundsBuilder::simpleRegex`` (``index_bounds_builder.cpp``, the
    classic form): the pattern starts with ``^`` (or ``\\A``); flags other than ``m``
    (only with ``\\A``), ``s`` or ``x`` give no bounds; a ``|`` anywhere gives none; the
    prefix runs until the first special character, an escaped non-alphanumeric being
    literal; a following ``*``/``?`` (or ``{``) makes the last literal optional.
    """
    if pattern.startswith("\\A"):
        rest, multiline_ok = pattern[2:], True
    elif pattern.startswith("^"):
        rest, multiline_ok = pattern[1:], False
    else:
        return None
    for flag in flags:
        if flag == "m" and multiline_ok:
            continue
        if flag not in "sx":
            return None
    if "|" in rest:
        return None
    out: list[str] = []
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\":
            if i + 1 < len(rest) and not rest[i + 1].isalnum():
                out.append(rest[i + 1])
                i += 2
                continue
            break
        if c in "*?{":
            if out:
                out.pop()
            break
        if c in _REGEX_SPECIAL:
            break
        out.append(c)
        i += 1
    return "".join(out) or None


def _regex_bounds(pattern: str, flags: str) -> Bounds:
    prefix = regex_prefix(pattern, flags)
    if prefix is None:
        return None
    return [Interval(prefix, True, prefix[:-1] + chr(ord(prefix[-1]) + 1), False)]


def _regex_parts(spec: Any, options: str = "") -> tuple[str, str] | None:
    if isinstance(spec, Regex):
        return str(spec.pattern), _flag_letters(spec.flags)
    if isinstance(spec, re.Pattern):
        # Python 3 patterns carry the u flag once BSON-encoded: no bounds (mongodb-facts.md §0.6)
        return str(spec.pattern), _flag_letters(spec.flags) + "u"
    if isinstance(spec, str):
        return spec, options
    return None


def _flag_letters(flags: int) -> str:
    letters = {re.IGNORECASE: "i", re.MULTILINE: "m", re.DOTALL: "s", re.VERBOSE: "x"}
    return "".join(v for k, v in letters.items() if flags & k)


def _condition_bounds(spec: Any) -> Bounds:
    """Bounds on one field from its condition (``{field: spec}``)."""
    if isinstance(spec, (Regex, re.Pattern)):
        parts = _regex_parts(spec)
        assert parts is not None
        return _regex_bounds(*parts)
    if isinstance(spec, Mapping) and spec and all(str(k).startswith("$") for k in spec):
        out: Bounds = None
        for op, arg in spec.items():
            if op == "$eq":
                got: Bounds = [Interval.point(arg)]
            elif op == "$in":
                regexes = any(isinstance(v, (Regex, re.Pattern)) for v in arg)
                got = None if regexes else [Interval.point(v) for v in arg]
            elif op == "$gt":
                got = [Interval(arg, False)]
            elif op == "$gte":
                got = [Interval(arg, True)]
            elif op == "$lt":
                got = [Interval(hi=arg, hi_incl=False)]
            elif op == "$lte":
                got = [Interval(hi=arg, hi_incl=True)]
            elif op == "$regex":
                parts = _regex_parts(arg, str(spec.get("$options", "")))
                got = _regex_bounds(*parts) if parts else None
            else:  # $ne, $nin, $not, $exists, $options, $elemMatch...: no bound
                got = None
            out = _intersect(out, got)
        return out
    return [Interval.point(spec)]


def key_bounds(filt: Mapping[str, Any] | None, key_field: str) -> Bounds:
    """The shard key's bounds in a query filter (None: unbounded, every shard)."""
    out: Bounds = None
    for name, spec in (filt or {}).items():
        if name == key_field:
            got = _condition_bounds(spec)
        elif name == "$and":
            got = None
            for sub in spec:
                got = _intersect(got, key_bounds(sub, key_field))
        elif name == "$or":
            subs = [key_bounds(sub, key_field) for sub in spec]
            got = None if any(s is None for s in subs) else [i for s in subs if s for i in s]
        else:
            continue
        out = _intersect(out, got)
    return out


_NO_KEY = object()


def exact_shard_key(filt: Mapping[str, Any] | None, key_field: str) -> Any:
    """The exact shard-key value of a filter (``extractShardKeyFromQuery``): an equality on
    the key at the top level or in a top-level ``$and`` (``$eq``, or ``$in`` of one value,
    which canonicalisation makes an equality); ``_NO_KEY`` when there is none."""
    for name, spec in (filt or {}).items():
        if name == key_field:
            if isinstance(spec, (Regex, re.Pattern)):
                continue
            if isinstance(spec, Mapping) and spec and all(str(k).startswith("$") for k in spec):
                if "$eq" in spec:
                    return spec["$eq"]
                if set(spec) == {"$in"} and len(spec["$in"]) == 1:
                    return spec["$in"][0]
                continue
            return spec
        if name == "$and":
            for sub in spec:
                got = exact_shard_key(sub, key_field)
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
    """One sharded collection: its single-field key and its chunks.

    ``splits``: the chunk boundaries, sorted (in hashed space for a hashed key); chunk ``i``
    is ``[splits[i-1], splits[i])``, the first and last open-ended. ``owners[i]``: the shard
    holding chunk ``i`` (round robin by default; set it for zones).
    """

    field: str
    hashed: bool
    splits: list[Any]
    owners: list[str]
    unique: bool = False

    @property
    def pattern(self) -> dict[str, Any]:
        return {self.field: "hashed" if self.hashed else 1}

    def chunk_of(self, value: Any) -> int:
        v = _order(_hash64(value) if self.hashed else value)
        i = 0
        while i < len(self.splits) and v >= _order(self.splits[i]):
            i += 1
        return i

    def shard_of(self, value: Any) -> str:
        return self.owners[self.chunk_of(value)]

    def shards_for(self, bounds: Bounds) -> set[str]:
        if bounds is None:
            return set(self.owners)
        if self.hashed:
            if all(b.is_point() for b in bounds):
                return {self.shard_of(b.lo) for b in bounds}
            return set(self.owners)
        reached: set[str] = set()
        for i, owner in enumerate(self.owners):
            lo = self.splits[i - 1] if i > 0 else _INF
            hi = self.splits[i] if i < len(self.splits) else _INF
            chunk = Interval(lo, True, hi, False)
            if any(not b.intersect(chunk).empty() for b in bounds):
                reached.add(owner)
        return reached


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
        """``sh.shardCollection(full_name, key)``, with chunk boundaries ``splits``.

        Refuses a compound key (not modelled) and an existing unique index the key does not
        prefix (code 72). Hashed keys default to boundaries that split the hash space evenly.
        """
        if len(key) != 1:
            raise NotImplementedError("the double models single-field shard keys only")
        [(name, kind)] = key.items()
        hashed = kind == "hashed"
        if splits is None and hashed:
            n = len(self.shards)
            splits = [-(2**63) + i * (2**64 // n) for i in range(1, n)]
        elif splits is None:
            splits = []  # a ranged key on a new collection: one chunk, on the first shard
        splits = sorted(splits, key=_order)
        owners = (
            list(owners) if owners is not None else [self.shards[i % len(self.shards)] for i in range(len(splits) + 1)]
        )
        if len(owners) != len(splits) + 1:
            raise ValueError("one owner per chunk: len(splits) + 1")
        sns = ShardedNs(name, hashed, list(splits), owners)
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
            supported = any(list(dict(spec["key"]))[:1] == [name] for spec in data.index_information().values())
            if not supported and not hashed:
                if data.count_documents({}):
                    raise OperationFailure(
                        "Please create an index that starts with the proposed shard key before sharding the collection",
                        INVALID_OPTIONS,
                    )
                data.create_index([(name, 1)])
            self.sharded[full_name] = sns
        return sns

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


def _errmsg(exc: OperationFailure) -> str:
    return str((exc.details or {}).get("errmsg") or exc)


def _unique_compatible(sns: ShardedNs, pattern: Mapping[str, Any]) -> bool:
    """``ShardKeyPattern::isUniqueIndexCompatible``: ``_id`` first, or the key's field names a prefix."""
    names = list(pattern)
    return (bool(names) and names[0] == "_id") or names[:1] == [sns.field]


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

    def _route(self, filt: Mapping[str, Any] | None) -> tuple[frozenset[str], bool]:
        if self.database.name == "config":
            return frozenset({"config"}), True  # the config servers' catalog, not a shard
        sns = self.sharding
        if sns is None:
            return frozenset(self.cluster.shards[:1]), True  # unsharded: its primary shard
        bounds = key_bounds(filt, sns.field)
        reached = sns.shards_for(bounds)
        return frozenset(reached), bounds is not None and (not sns.hashed or all(b.is_point() for b in bounds))

    def _all(self) -> frozenset[str]:
        sns = self.sharding
        return frozenset(sns.owners) if sns else frozenset(self.cluster.shards[:1])

    # ------------------------------------------------------------ reads

    def find(self, filter: Any = None, projection: Any = None, *args: Any, **kwargs: Any) -> _Cursor:
        shards, targeted = self._route(filter)
        self.cluster.record(OpRecord("find", self.full_name, shards, targeted, filter))
        return _Cursor(self, filter, projection)

    def find_one(self, filter: Any = None, *args: Any, **kwargs: Any) -> Any:
        for doc in self.find(filter, *args, **kwargs).limit(1):
            return doc
        return None

    def count_documents(self, filter: Any, *args: Any, **kwargs: Any) -> int:
        shards, targeted = self._route(filter)
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
            shards, targeted = self._route(first["$match"])
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
        if not unique or sns is None:
            return
        pattern = dict(keys) if not isinstance(keys, str) else {keys: 1}
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
                doc = model._doc
                rec.shards = frozenset([sns.shard_of(doc.get(sns.field)) if sns else self.cluster.shards[0]])
                rec.targeted = True
            elif sns is None:
                rec.shards, rec.targeted = frozenset(self.cluster.shards[:1]), True
            else:
                exact = exact_shard_key(filt, sns.field)
                if exact is not _NO_KEY and (upsert or not multi):
                    rec.shards, rec.targeted = frozenset([sns.shard_of(exact)]), True
                elif upsert or not multi:
                    self._no_exact_key(rec, filt, upsert)
                else:
                    rec.shards, rec.targeted = self._route(filt)
                if kind == "update":
                    before = {d["_id"]: d.get(sns.field, _NO_KEY) for d in self._data.find(filt, {sns.field: 1})}
            self.cluster.record(rec)
            res = self._data.bulk_write([model], ordered=True)
            if kind == "update" and sns is not None:
                self._check_key_change(rec, model, before, multi, filt)
        return res

    def _no_exact_key(self, rec: OpRecord, filt: Any, upsert: bool) -> None:
        if self.cluster.writes_without_shard_key:
            rec.without_shard_key, rec.shards, rec.targeted = True, self._all(), False
            return
        if upsert:
            self.cluster.log.append(rec)
            raise WriteError(
                "Failed to target upsert by query :: could not extract exact shard key",
                SHARD_KEY_NOT_FOUND,
                {
                    "code": SHARD_KEY_NOT_FOUND,
                    "errmsg": "Failed to target upsert by query :: could not extract exact shard key",
                },
            )
        if exact_shard_key(filt, "_id") is _NO_KEY:
            self.cluster.log.append(rec)
            msg = (
                "A single update/delete on a sharded collection must contain an exact match on _id (and have the "
                "collection default collation) or contain the shard key (and have the simple collation)."
            )
            raise WriteError(msg, INVALID_OPTIONS, {"code": INVALID_OPTIONS, "errmsg": msg})
        rec.shards, rec.targeted = self._all(), False  # broadcast by _id before 7.1

    def _check_key_change(self, rec: OpRecord, model: Any, before: dict[Any, Any], multi: bool, filt: Any) -> None:
        sns = self.sharding
        assert sns is not None
        for _id, old in before.items():
            now = self._data.find_one({"_id": _id}, {sns.field: 1})
            new = now.get(sns.field, _NO_KEY) if now else _NO_KEY
            if now is None or new == old or old is _NO_KEY:
                continue
            if multi or (exact_shard_key(filt, sns.field) is _NO_KEY and not rec.without_shard_key):
                self._data.update_one({"_id": _id}, {"$set": {sns.field: old}})  # undo, then refuse
                msg = "Shard key update is not allowed without specifying the full shard key in the query"
                raise WriteError(msg, INVALID_OPTIONS, {"code": INVALID_OPTIONS, "errmsg": msg})
            if sns.shard_of(new) != sns.shard_of(old):
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
