"""The lookup index mongomock lacks: which documents an equality or ``$in`` filter can match.

Kept on each of the engine's own ``CollectionStore``s (attributes below), built from the
documents on first use and kept in step by ``lookups`` (every write goes through the
store's ``__setitem__`` / ``__delitem__`` or is an in-place update it re-files); rebuilt
when it was built for another documents dict (a dropped collection gets a new one):

- ``_Lookup``: each document's insertion rank (mongomock answers in its OrderedDict's
  order) and, per top-level field of an index that a query asked about, value -> keys;
- TTL (``lookups``): the earliest moment a document could expire, so the expiry scan
  mongomock runs on every access runs only then.

``candidates`` answers from it, or says None (scan everything).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from bson import ObjectId

LOOKUP_ATTR = "_mongostore_lookup"
TTL_ATTR = "_mongostore_ttl"
FIELDS_ATTR = "_mongostore_indexed_fields"

# Exact types whose == and hash agree (with each other and with mongomock's operator.eq).
_FILED = frozenset({str, int, float, bool, type(None), datetime, ObjectId})


def _fileable(v: Any) -> bool:
    t = type(v)
    return t in _FILED and (t is not float or v == v)  # NaN equals nothing


def _queryable(v: Any) -> bool:
    return type(v) is not datetime and _fileable(v)  # query dates are re-based by mongomock


def _filed_values(doc: Any, name: str) -> tuple[Any, ...] | None:
    """The values a ``{name: v}`` query can match this document by, or None: always a candidate.

    A missing field matches ``None``; an array matches by each element.
    """
    if not isinstance(doc, dict):
        return None
    if name not in doc:
        return (None,)
    v = doc[name]
    if isinstance(v, (list, tuple)):
        if all(_fileable(e) for e in v):
            return tuple(dict.fromkeys(v))
        return None
    return (v,) if _fileable(v) else None


class _FieldMap:
    """Document keys by the values of one top-level field."""

    __slots__ = ("by_value", "filed", "unfiled")

    def __init__(self) -> None:
        self.by_value: dict[Any, dict[Any, None]] = {}
        self.filed: dict[Any, tuple[Any, ...]] = {}
        self.unfiled: dict[Any, None] = {}

    def put(self, key: Any, values: tuple[Any, ...] | None) -> None:
        if values is not None and self.filed.get(key) == values:
            return
        self.drop(key)
        if values is None:
            self.unfiled[key] = None
            return
        self.filed[key] = values
        for v in values:
            self.by_value.setdefault(v, {})[key] = None

    def drop(self, key: Any) -> None:
        old = self.filed.pop(key, None)
        for v in old or ():
            bucket = self.by_value.get(v)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self.by_value[v]
        self.unfiled.pop(key, None)

    def size(self, values: tuple[Any, ...]) -> int:
        return sum(len(self.by_value.get(v, ())) for v in values) + len(self.unfiled)

    def keys(self, values: tuple[Any, ...]) -> dict[Any, None]:
        out: dict[Any, None] = {}
        for v in values:
            out.update(self.by_value.get(v, {}))
        out.update(self.unfiled)
        return out


class _Lookup:
    """Insertion ranks and field maps of one collection's documents dict."""

    def __init__(self, docs: Any) -> None:
        self.docs = docs
        self.lock = threading.RLock()
        self.rank: dict[Any, int] = {k: i for i, k in enumerate(docs)}
        self.next_rank = len(self.rank)
        self.fields: dict[str, _FieldMap] = {}

    def put(self, key: Any, doc: Any) -> None:
        with self.lock:
            if key not in self.rank:
                self.rank[key] = self.next_rank
                self.next_rank += 1
            for name, fm in self.fields.items():
                fm.put(key, _filed_values(doc, name))

    def drop(self, key: Any) -> None:
        with self.lock:
            self.rank.pop(key, None)
            for fm in self.fields.values():
                fm.drop(key)

    def field(self, name: str) -> _FieldMap:
        """The field map of ``name`` (called under ``lock`` and mongomock's reader lock)."""
        fm = self.fields.get(name)
        if fm is None:
            fm = _FieldMap()
            for key, doc in self.docs.items():
                fm.put(key, _filed_values(doc, name))
            self.fields[name] = fm
        return fm


def lookup(store: Any, create: bool) -> _Lookup | None:
    lk: _Lookup | None = store.__dict__.get(LOOKUP_ATTR)
    if lk is not None and lk.docs is store._documents:
        return lk
    if not create:
        store.__dict__.pop(LOOKUP_ATTR, None)
        return None
    with store._rwlock.reader():
        lk = _Lookup(store._documents)
    store.__dict__[LOOKUP_ATTR] = lk
    return lk


def _eq_values(spec: Any) -> tuple[Any, ...] | None:
    """The values a top-level condition requires one of (equality, ``$eq``, ``$in``), or None."""
    if _queryable(spec):
        return (spec,)
    if isinstance(spec, dict) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec):
        if "$eq" in spec and _queryable(spec["$eq"]):
            return (spec["$eq"],)
        within = spec.get("$in")
        if isinstance(within, (list, tuple)) and all(_queryable(v) for v in within):
            return tuple(within)
    return None


def _conditions(filt: Any, out: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Equality-like conditions every match must meet: top level and inside ``$and``."""
    if not isinstance(filt, dict):
        return
    for name, spec in filt.items():
        if name == "$and":
            if isinstance(spec, list):
                for sub in spec:
                    _conditions(sub, out)
        elif isinstance(name, str) and name and not name.startswith("$") and "." not in name:
            values = _eq_values(spec)
            if values is not None:
                out.append((name, values))


def _indexed_fields(store: Any) -> frozenset[str]:
    """Top-level fields named in the collection's indexes (remembered until they change).

    Remembered with the index specs themselves (not their ids): creating or dropping an
    index, or dropping the collection, is seen at the next lookup.
    """
    indexes = store.indexes
    specs = list(indexes.values())
    cached = store.__dict__.get(FIELDS_ATTR)
    same = cached is not None and len(cached[0]) == len(specs)
    if same and all(a is b for a, b in zip(cached[0], specs, strict=True)):
        return cached[1]  # type: ignore[no-any-return]
    names: set[str] = set()
    for spec in specs:
        for entry in spec.get("key") or ():
            name = entry[0] if isinstance(entry, (list, tuple)) else entry
            if isinstance(name, str) and "." not in name:
                names.add(name)
    found = frozenset(names)
    store.__dict__[FIELDS_ATTR] = (specs, found)
    return found


def candidates(store: Any, filt: Any) -> list[Any] | None:
    """The documents that can match ``filt``, in store order, or None (scan everything)."""
    if len(filt) == 1 and _queryable(filt.get("_id", NotImplemented)):  # the commonest: one _id
        doc = store._documents.get(filt["_id"])
        return [] if doc is None else [doc]
    conds: list[tuple[str, tuple[Any, ...]]] = []
    _conditions(filt, conds)
    if not conds:
        return None
    indexed = _indexed_fields(store)
    usable = [(n, v) for n, v in conds if n == "_id" or n in indexed]
    if not usable:
        return None
    lk = lookup(store, create=True)
    assert lk is not None
    # Under mongomock's reader lock, as its own scan reads (then the index's: the same order
    # as a write's, which files under the writer lock): another thread's set or delete is
    # wholly before or wholly after.
    with store._rwlock.reader(), lk.lock:
        docs = lk.docs
        best: tuple[int, str, tuple[Any, ...]] | None = None
        for name, values in usable:
            size = len(values) if name == "_id" else lk.field(name).size(values)
            if best is None or size < best[0]:
                best = (size, name, values)
        assert best is not None
        _, name, values = best
        if name == "_id":
            keys: dict[Any, None] = {v: None for v in values if v in docs}
        else:
            keys = lk.field(name).keys(values)
        if len(keys) * 8 > len(docs):
            return [doc for k, doc in docs.items() if k in keys]
        rank = lk.rank
        return [docs[k] for k in sorted(keys, key=rank.__getitem__)]
