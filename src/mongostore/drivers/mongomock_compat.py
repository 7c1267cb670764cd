"""The embedded default: mongomock, made to work with pymongo 4.11+.

mongomock 4.3 predates two pymongo changes that the store relies on, so this
module patches them once, when the embedded default (or a test) asks for it:

- pymongo >= 4.11 passes ``sort=`` to ``BulkOperationBuilder.add_update`` and
  ``add_replace`` when a ``bulk_write`` holds ``UpdateOne``/``ReplaceOne``;
  mongomock's builders do not take it (``TypeError``).
- ``Collection.create_index`` is called with ``keys=`` by some callers (pymongo's
  own name is ``keys``; mongomock's is ``key_or_list``).

It also gives mongomock lookups that do not scan the collection (``_patch_lookups``):
mongomock evaluates every filter against every document, checks a unique index with
another full scan per write, and scans for expired documents on every access when a
TTL index exists, so each upsert or ``_id`` lookup costs O(collection) and a batch of
N puts O(N x collection). The patch answers equality and ``$in`` on ``_id`` from the
store's own dict and on indexed fields from hash maps it keeps in step with every
write, then applies the whole filter to those candidates only: same documents, same
order, same errors.

This is for development and tests only: mongomock keeps everything in memory,
has no TTL monitor (it hides expired documents at read time instead) and no
``$vectorSearch``.
"""

from __future__ import annotations

import functools
import threading
from datetime import datetime, timedelta
from typing import Any

_patched = False


def patch_mongomock() -> None:
    """Apply the compatibility patches (idempotent)."""
    global _patched
    if _patched:
        return
    from mongomock.collection import BulkOperationBuilder, Collection

    def drop_sort(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, sort: Any = None, **kwargs: Any) -> Any:
            return fn(self, *args, **kwargs)

        return wrapper

    BulkOperationBuilder.add_update = drop_sort(BulkOperationBuilder.add_update)  # type: ignore[method-assign]
    BulkOperationBuilder.add_replace = drop_sort(BulkOperationBuilder.add_replace)  # type: ignore[method-assign]

    original_create_index: Any = Collection.create_index

    @functools.wraps(original_create_index)
    def create_index(self: Any, key_or_list: Any = None, *args: Any, keys: Any = None, **kwargs: Any) -> Any:
        return original_create_index(self, key_or_list if key_or_list is not None else keys, *args, **kwargs)

    Collection.create_index = create_index  # type: ignore[method-assign]
    _patch_date_add()
    _patch_lookups()
    _patched = True


def _patch_date_add() -> None:
    """``{"$add": [<date>, <milliseconds>]}`` in expressions (item writes' update pipeline).

    MongoDB adds numbers to a date as milliseconds; mongomock 4.3's ``$add`` asserts
    that every operand is a number. Only ``$add`` with a date operand is changed.
    """
    import datetime

    from mongomock import aggregate

    original: Any = aggregate._Parser._handle_arithmetic_operator

    @functools.wraps(original)
    def handle(self: Any, operator: str, values: Any) -> Any:
        if operator == "$add" and isinstance(values, (list, tuple)):
            parsed = list(self.parse_many(values))
            dates = [v for v in parsed if isinstance(v, datetime.datetime)]
            if dates:
                if any(v is None for v in parsed) or len(dates) > 1:
                    return None
                millis = sum(v for v in parsed if not isinstance(v, datetime.datetime))
                return dates[0] + datetime.timedelta(milliseconds=millis)
        return original(self, operator, values)

    aggregate._Parser._handle_arithmetic_operator = handle  # type: ignore[method-assign]


# --------------------------------------------------------------------------- lookups without a scan
#
# State kept on each mongomock ``CollectionStore`` (attributes below), rebuilt from the
# documents whenever it is missing or was built for another documents dict:
#
# - ``_Lookup``: each document's insertion rank (mongomock returns documents in the
#   order of its OrderedDict) and, for each top-level field named in one of the
#   collection's indexes that a query has asked about, a hash map value -> keys.
# - TTL: the earliest moment any document could expire, so the expiry scan mongomock
#   runs on every access runs only when something may have expired.
#
# Every change to a stored document goes through ``CollectionStore.__setitem__`` /
# ``__delitem__`` / ``drop`` or is an in-place update by ``_apply_update_document`` /
# ``_apply_update_pipeline``; those are wrapped to keep the state in step.

_LOOKUP_ATTR = "_mongostore_lookup"
_TTL_ATTR = "_mongostore_ttl"
_FIELDS_ATTR = "_mongostore_indexed_fields"
# A deadline this much early absorbs float rounding in mongomock's total_seconds() test.
_TTL_MARGIN = timedelta(milliseconds=1)


def _filed_types() -> frozenset[type]:
    from bson import ObjectId

    return frozenset({str, int, float, bool, type(None), datetime, ObjectId})


# Exact types whose == and hash agree (with each other and with mongomock's operator.eq).
_FILED: frozenset[type] = frozenset()
_min_datetime: Any = None  # mongomock.store._get_min_datetime_from_value, set by _patch_lookups
_mongomock_filter: Any = None  # mongomock.filtering.filter_applies, set by _patch_lookups


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
        fm = self.fields.get(name)
        if fm is None:
            fm = _FieldMap()
            for key, doc in list(self.docs.items()):
                fm.put(key, _filed_values(doc, name))
            self.fields[name] = fm
        return fm


def _lookup(store: Any, create: bool) -> _Lookup | None:
    lk: _Lookup | None = store.__dict__.get(_LOOKUP_ATTR)
    if lk is not None and lk.docs is store._documents:
        return lk
    if not create:
        store.__dict__.pop(_LOOKUP_ATTR, None)
        return None
    with store._rwlock.reader():
        lk = _Lookup(store._documents)
    store.__dict__[_LOOKUP_ATTR] = lk
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
    """Top-level fields named in the collection's indexes (remembered until they change)."""
    indexes = store.indexes
    sig = (id(indexes), len(indexes))
    cached = store.__dict__.get(_FIELDS_ATTR)
    if cached is not None and cached[0] == sig:
        return cached[1]  # type: ignore[no-any-return]
    names: set[str] = set()
    for spec in indexes.values():
        for entry in spec.get("key") or ():
            name = entry[0] if isinstance(entry, (list, tuple)) else entry
            if isinstance(name, str) and "." not in name:
                names.add(name)
    found = frozenset(names)
    store.__dict__[_FIELDS_ATTR] = (sig, found)
    return found


def _candidates(store: Any, filt: Any) -> list[Any] | None:
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
    lk = _lookup(store, create=True)
    assert lk is not None
    with lk.lock:
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
            return [doc for k, doc in list(docs.items()) if k in keys]
        rank = lk.rank
        return [docs[k] for k in sorted(keys, key=rank.__getitem__)]


def _ttl_state_key(store: Any, now: datetime) -> tuple[Any, ...]:
    # The TTL state is dropped whenever an index is created or dropped (see _patch_lookups).
    return (id(store._documents), now.tzinfo is None)


def _doc_deadline(store: Any, doc: Any, now: datetime) -> datetime | None:
    """The earliest moment mongomock's expiry test could remove ``doc`` (None: never, on this clock)."""
    best: datetime | None = None
    if not isinstance(doc, dict):
        return None
    for index in store._ttl_indexes.values():
        try:
            expiry = int(index["expireAfterSeconds"])
        except (TypeError, ValueError):
            continue
        if len(index["key"]) > 1:
            continue
        field = next(iter(index["key"]))[0]
        value = _min_datetime(doc.get(field))
        try:
            _ = now - value  # mongomock's own test; a TypeError there means never
            when = value + timedelta(seconds=expiry) - _TTL_MARGIN
            if best is None or when < best:
                best = when
        except (TypeError, OverflowError):
            continue
    return best


def _mongomock_now() -> Any:
    import mongomock

    module: Any = mongomock
    return module.utcnow()  # looked up on each call: tests patch it


def _ttl_note(store: Any, doc: Any) -> None:
    """A document was written: the next expiry can only come sooner."""
    state = store.__dict__.get(_TTL_ATTR)
    if state is None or not store._ttl_indexes:
        return
    now = _mongomock_now()
    if not isinstance(now, datetime) or state[0] != _ttl_state_key(store, now):
        store.__dict__.pop(_TTL_ATTR, None)
        return
    when = _doc_deadline(store, doc, now)
    if when is None:
        return
    try:
        if state[1] is None or when < state[1]:
            state[1] = when
    except TypeError:
        store.__dict__.pop(_TTL_ATTR, None)


class _CachedVersion:
    """``packaging.version`` for mongomock.collection, with ``parse`` remembered.

    mongomock compares pymongo's version with ``version.parse('3.6')`` on every field
    it sets (about a tenth of an upsert's time); the answers never change.
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self.parse = functools.lru_cache(maxsize=64)(module.parse)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def _cache_version_parse() -> None:
    import mongomock.collection

    mcoll: Any = mongomock.collection
    if not isinstance(mcoll.version, _CachedVersion):
        mcoll.version = _CachedVersion(mcoll.version)


def _filter_applies(filt: Any, doc: Any) -> bool:
    return bool(_mongomock_filter(filt, doc))


def _patch_cursor_next() -> None:
    """mongomock's ``Cursor.__next__`` re-slices the whole result list (skip, limit) for
    every document it returns: reading n documents cost O(n^2) (at 100k, most of a
    minute). Slice once per result list and index into that; same documents."""
    from mongomock.collection import Cursor

    if getattr(Cursor.__next__, "_mongostore", False):
        return
    original = Cursor.__next__

    def cursor_next(self: Any) -> Any:
        full = self._compute_results()  # (re)computes the result list only when the query changed
        window = self.__dict__.get("_mongostore_window")
        if window is None or window[0] is not full or window[1] != (self._skip, self._limit):
            results = full[self._skip :]
            if self._limit:
                results = results[: abs(self._limit)]
            window = (full, (self._skip, self._limit), results)
            self.__dict__["_mongostore_window"] = window
        try:
            doc = window[2][self._emitted]
        except IndexError as err:
            raise StopIteration() from err
        self._emitted += 1
        return doc

    cursor_next._mongostore = True  # type: ignore[attr-defined]
    Cursor.__next__ = cursor_next  # type: ignore[method-assign]
    Cursor.next = cursor_next
    Cursor._mongostore_original_next = original  # type: ignore[attr-defined]


def _patch_lookups() -> None:
    global _FILED, _min_datetime, _mongomock_filter
    from mongomock import filtering, helpers
    from mongomock.collection import Collection
    from mongomock.store import CollectionStore, _get_min_datetime_from_value

    _FILED = _filed_types()
    _min_datetime = _get_min_datetime_from_value
    _mongomock_filter = getattr(filtering, "filter_applies")  # noqa: B009 (untyped)
    _cache_version_parse()

    original_iter: Any = Collection._iter_documents

    @functools.wraps(original_iter)
    def iter_documents(self: Any, filter: Any) -> Any:
        store = self._store
        if not isinstance(filter, dict) or not filter:
            return original_iter(self, filter)
        store._remove_expired_documents()
        found = _candidates(store, filter)
        if found is None:
            return original_iter(self, filter)
        if not found:
            _filter_applies(filter, {})  # validate the filter, as mongomock does on an empty collection
        return (doc for doc in found if _filter_applies(filter, doc))

    Collection._iter_documents = iter_documents  # type: ignore[method-assign]

    def key_of(doc: Any) -> Any:
        _id = doc.get("_id") if isinstance(doc, dict) else None
        return helpers.hashdict(_id) if isinstance(_id, dict) else _id

    def after_in_place(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(self: Any, existing_document: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, existing_document, *args, **kwargs)
            finally:
                store = self._store
                key = key_of(existing_document)
                # Only a stored document (an upsert's new document is not stored yet).
                if store._documents.get(key) is existing_document:
                    lk = _lookup(store, create=False)
                    if lk is not None:
                        lk.put(key, existing_document)
                    _ttl_note(store, existing_document)

        return wrapper

    Collection._apply_update_document = after_in_place(Collection._apply_update_document)  # type: ignore[method-assign]
    Collection._apply_update_pipeline = after_in_place(Collection._apply_update_pipeline)  # type: ignore[method-assign]

    original_set: Any = CollectionStore.__setitem__
    original_del: Any = CollectionStore.__delitem__
    original_drop: Any = CollectionStore.drop
    original_create_index: Any = CollectionStore.create_index
    original_drop_index: Any = CollectionStore.drop_index
    original_expire: Any = CollectionStore._remove_expired_documents

    def setitem(self: Any, key: Any, val: Any) -> None:
        original_set(self, key, val)
        lk = _lookup(self, create=False)
        if lk is not None:
            lk.put(key, val)
        _ttl_note(self, val)

    def delitem(self: Any, key: Any) -> None:
        original_del(self, key)
        lk = _lookup(self, create=False)
        if lk is not None:
            lk.drop(key)

    def drop(self: Any) -> None:
        original_drop(self)
        for attr in (_LOOKUP_ATTR, _TTL_ATTR, _FIELDS_ATTR):
            self.__dict__.pop(attr, None)

    def create_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.__dict__.pop(_TTL_ATTR, None)
        self.__dict__.pop(_FIELDS_ATTR, None)
        return original_create_index(self, *args, **kwargs)

    def drop_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.__dict__.pop(_TTL_ATTR, None)
        self.__dict__.pop(_FIELDS_ATTR, None)
        return original_drop_index(self, *args, **kwargs)

    @functools.wraps(original_expire)
    def remove_expired(self: Any) -> None:
        if not self._ttl_indexes:
            return
        now = _mongomock_now()
        if not isinstance(now, datetime):
            original_expire(self)
            return
        key = _ttl_state_key(self, now)
        state = self.__dict__.get(_TTL_ATTR)
        if state is not None and state[0] == key:
            try:
                if state[1] is None or now < state[1]:
                    return
            except TypeError:
                pass
        original_expire(self)
        earliest: datetime | None = None
        with self._rwlock.reader():
            docs = list(self._documents.values())
        for doc in docs:
            when = _doc_deadline(self, doc, now)
            if when is not None and (earliest is None or when < earliest):
                earliest = when
        self.__dict__[_TTL_ATTR] = [key, earliest]

    _patch_cursor_next()
    CollectionStore.__setitem__ = setitem  # type: ignore[method-assign]
    CollectionStore.__delitem__ = delitem  # type: ignore[method-assign]
    CollectionStore.drop = drop  # type: ignore[method-assign]
    CollectionStore.create_index = create_index  # type: ignore[method-assign]
    CollectionStore.drop_index = drop_index  # type: ignore[method-assign]
    CollectionStore._remove_expired_documents = remove_expired  # type: ignore[method-assign]


_FAKE_MODULES = ("mongomock", "mongomock_motor", "pymongo_async_mock")


def is_fake(collection: Any) -> bool:
    """True for mongomock and its async wrappers (no server commands, no client bulk_write).

    Looks through wrappers (counting proxies, test doubles) at the client they sit on.
    """
    for obj in (collection, getattr(getattr(collection, "database", None), "client", None)):
        if obj is not None and any(cls.__module__.startswith(_FAKE_MODULES) for cls in type(obj).__mro__):
            return True
    return False


def in_memory_collection(db_name: str = "mongostore", collection_name: str = "memories") -> Any:
    """A fresh mongomock collection (tz-aware, like the store's real clients)."""
    import mongomock

    patch_mongomock()
    client: Any = mongomock.MongoClient(tz_aware=True)
    return client[db_name][collection_name]
