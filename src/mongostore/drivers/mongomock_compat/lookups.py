"""The patches that make mongomock's reads and writes cost what the documents they touch cost.

- ``Collection._iter_documents`` answers from the lookup index (``index.candidates``),
  then applies the whole filter to those candidates only: same documents, same order,
  same errors;
- every write to a ``CollectionStore`` (set, delete, drop, in-place update) keeps the
  index and the TTL state in step, and gives the store a new write version
  (``versions``); creating or dropping an index drops the derived state;
- the expiry scan mongomock runs on every access runs only when something may have
  expired (the TTL state holds the earliest deadline);
- ``Cursor.__next__`` slices its result list once, not once per document;
- ``packaging.version.parse`` is remembered for mongomock's per-field version checks.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

from mongostore.drivers.mongomock_compat.index import (
    FIELDS_ATTR,
    LOOKUP_ATTR,
    TTL_ATTR,
    candidates,
    init_filed_types,
    lookup,
)

# A deadline this much early absorbs float rounding in mongomock's total_seconds() test.
_TTL_MARGIN = timedelta(milliseconds=1)

_min_datetime: Any = None  # mongomock.store._get_min_datetime_from_value, set by install()
_mongomock_filter: Any = None  # mongomock.filtering.filter_applies, set by install()


def install() -> None:
    """Apply the patches of this module (once: ``compat.patch_mongomock`` guards it)."""
    global _min_datetime, _mongomock_filter
    from mongomock import filtering, helpers
    from mongomock.collection import Collection
    from mongomock.store import CollectionStore, _get_min_datetime_from_value

    init_filed_types()
    _min_datetime = _get_min_datetime_from_value
    _mongomock_filter = getattr(filtering, "filter_applies")  # noqa: B009 (untyped)
    _cache_version_parse()
    _patch_iter_documents(Collection)
    _patch_in_place_updates(Collection, helpers)
    _patch_cursor_next()
    _patch_store_writes(CollectionStore)
    _patch_expiry(CollectionStore)


def _ttl_state_key(store: Any, now: datetime) -> tuple[Any, ...]:
    # The TTL state is dropped whenever an index is created or dropped (see _patch_store_writes).
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
    state = store.__dict__.get(TTL_ATTR)
    if state is None or not store._ttl_indexes:
        return
    now = _mongomock_now()
    if not isinstance(now, datetime) or state[0] != _ttl_state_key(store, now):
        store.__dict__.pop(TTL_ATTR, None)
        return
    when = _doc_deadline(store, doc, now)
    if when is None:
        return
    try:
        if state[1] is None or when < state[1]:
            state[1] = when
    except TypeError:
        store.__dict__.pop(TTL_ATTR, None)


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


def _patch_iter_documents(collection_cls: Any) -> None:
    original_iter: Any = collection_cls._iter_documents

    @functools.wraps(original_iter)
    def iter_documents(self: Any, filter: Any) -> Any:
        store = self._store
        if not isinstance(filter, dict) or not filter:
            return original_iter(self, filter)
        store._remove_expired_documents()
        found = candidates(store, filter)
        if found is None:
            return original_iter(self, filter)
        if not found:
            _filter_applies(filter, {})  # validate the filter, as mongomock does on an empty collection
        return (doc for doc in found if _filter_applies(filter, doc))

    collection_cls._iter_documents = iter_documents


def _patch_in_place_updates(collection_cls: Any, helpers: Any) -> None:
    """Updates change a stored document in place: file it again afterwards."""

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
                    lk = lookup(store, create=False)
                    if lk is not None:
                        lk.put(key, existing_document)
                    _ttl_note(store, existing_document)

        return wrapper

    collection_cls._apply_update_document = after_in_place(collection_cls._apply_update_document)
    collection_cls._apply_update_pipeline = after_in_place(collection_cls._apply_update_pipeline)


def _patch_store_writes(store_cls: Any) -> None:
    """Sets, deletes and drops keep the index in step; index changes drop the derived state."""
    original_set: Any = store_cls.__setitem__
    original_del: Any = store_cls.__delitem__
    original_drop: Any = store_cls.drop
    original_create_index: Any = store_cls.create_index
    original_drop_index: Any = store_cls.drop_index

    def setitem(self: Any, key: Any, val: Any) -> None:
        original_set(self, key, val)
        lk = lookup(self, create=False)
        if lk is not None:
            lk.put(key, val)
        _ttl_note(self, val)

    def delitem(self: Any, key: Any) -> None:
        original_del(self, key)
        lk = lookup(self, create=False)
        if lk is not None:
            lk.drop(key)

    def drop(self: Any) -> None:
        original_drop(self)
        for attr in (LOOKUP_ATTR, TTL_ATTR, FIELDS_ATTR):
            self.__dict__.pop(attr, None)

    def create_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.__dict__.pop(TTL_ATTR, None)
        self.__dict__.pop(FIELDS_ATTR, None)
        return original_create_index(self, *args, **kwargs)

    def drop_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.__dict__.pop(TTL_ATTR, None)
        self.__dict__.pop(FIELDS_ATTR, None)
        return original_drop_index(self, *args, **kwargs)

    store_cls.__setitem__ = setitem
    store_cls.__delitem__ = delitem
    store_cls.drop = drop
    store_cls.create_index = create_index
    store_cls.drop_index = drop_index


def _patch_expiry(store_cls: Any) -> None:
    """Run mongomock's expiry scan only once the earliest deadline it could act on has come."""
    original_expire: Any = store_cls._remove_expired_documents

    @functools.wraps(original_expire)
    def remove_expired(self: Any) -> None:
        if not self._ttl_indexes:
            return
        now = _mongomock_now()
        if not isinstance(now, datetime):
            original_expire(self)
            return
        key = _ttl_state_key(self, now)
        state = self.__dict__.get(TTL_ATTR)
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
        self.__dict__[TTL_ATTR] = [key, earliest]

    store_cls._remove_expired_documents = remove_expired
