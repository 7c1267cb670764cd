# mongomock is untyped: its functions are called as Any.
# mypy: disable-error-code="no-untyped-call"
"""The store's own mongomock classes: every change the store makes to mongomock lives here.

Nothing of mongomock's is replaced: these are subclasses, and only the store's objects
are instances of them: the engine's own clients (``new_client``: ``MongoStore.in_memory``,
the local store's file engine) and the handles ``compat.adapt_collection`` makes over a
collection a user gave the store (same data, the user's own objects untouched). A user's
mongomock client, database, collection or bulk builder behaves exactly as mongomock does,
before and after a store has used its data (``tests/unit/test_mongomock_compat.py``).

The changes, each guarded by a test showing unpatched mongomock differs from MongoDB
(or from pymongo) and ours matches:

For every collection the store uses (its own engine's and a user's):

1. ``Collection.bulk_write`` accepts the ``sort=`` pymongo 4.11+ passes for every
   ``UpdateOne``/``ReplaceOne`` (``pymongo/operations.py``, ``_add_to_bulk``: ``sort=self._sort``;
   pymongo changelog 4.11, "UpdateOne/ReplaceOne sort"); mongomock 4.3's
   ``BulkOperationBuilder.add_update``/``add_replace`` raise ``TypeError`` on it. ``None``
   (what the store sends) is dropped; a real sort raises ``NotImplementedError``.
2. ``Collection._apply_update_pipeline``: ``{$add: [<expr>, <numbers>...]}`` is MongoDB's
   date arithmetic when the expression is a date ("If one of the arguments is a date,
   ``$add`` treats the other arguments as milliseconds to add to the date", manual,
   ``$add`` (aggregation)); mongomock 4.3 asserts numbers. The pipeline is rewritten to
   ``{$subtract: [<expr>, -sum]}``, which MongoDB and mongomock both evaluate as the same
   ``$add`` for a date, a number and null (``compat.mongodb_expressions``).
3. ``CollectionStore._remove_expired_documents``: the TTL clock. mongomock reads
   ``mongomock.utcnow()``, i.e. ``datetime.utcnow()``, deprecated since Python 3.12 (a
   ``DeprecationWarning`` on every access to a collection with a TTL index, raised into
   the user's code). Ours reads ``datetime.now(timezone.utc)`` (naive, as mongomock
   stores dates), or ``mongomock.utcnow`` when a test replaced it (mongomock's README,
   "utcnow"); mongomock's own ``_value_meets_expiry`` decides. On the engine's own
   stores it also runs only once the earliest deadline has come (see 4).

Only on the engine's own stores (``new_client``), which no other code writes behind its
back: the lookup index (``index``). It earns its keep: without it (a user's mongomock, as
mongomock is) a get at 10k items takes ~45 ms and each put into 10k items ~60 ms (10k puts
in one batch: minutes); with it, 0.04 ms and 10k indexed puts in one batch ~4 s of CPU,
against the embedded store's targets of 2 ms and 5 s (mongomock evaluates every filter
against every document, and checks a unique index by another full scan per write):

4. ``Collection._iter_documents`` answers from the index (equality and ``$in`` on ``_id``
   and on indexed top-level fields), then applies the whole filter to those candidates:
   same documents, same order, same errors.
5. ``CollectionStore.__setitem__`` and 6. ``__delitem__`` keep the index, the earliest TTL
   deadline in step.
7. ``Collection._apply_update_document`` (and the pipeline of 2) re-file a document mongomock
   updated in place.

8. ``Collection.find``'s cursors iterate in linear time (``_LinearCursor``): mongomock's
   ``Cursor.__next__`` slices the whole result list again for every document (``results[skip:]``),
   so reading n documents costs O(n^2): a local search's candidate read of 100k items took
   ~25 s, ~1.5 s with this (same documents, same order).

Plumbing, no behaviour of their own (9-11): ``Collection._store`` hands mongomock's code
our view of the same ``CollectionStore`` state (one ``__dict__``: a ``_Store`` for a user's
data, an ``_OwnStore`` for the engine's), ``Database.get_collection`` and
``MongoClient.get_database`` return these classes.

Eleven in all, none of them on mongomock's own classes (the store replaced 19 class
attributes before), all on classes only the store's own objects have.

Not changed any more (the targets above hold without them, and each replaced a module or
class attribute every mongomock user would have seen): mongomock's date walk and its
``packaging.version.parse`` per field (about 15% of a put's time, together), and
``create_index(keys=)`` (the store passes keys positionally; the bench shims it for
langgraph-store-mongodb itself).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import mongomock
from mongomock import filtering, helpers, results
from mongomock.collection import BulkOperationBuilder
from mongomock.collection import Collection as _MockCollection
from mongomock.database import Database as _MockDatabase
from mongomock.mongo_client import MongoClient as _MockClient
from mongomock.store import CollectionStore, _get_min_datetime_from_value

from mongostore.drivers.mongomock_compat.compat import mongodb_expressions
from mongostore.drivers.mongomock_compat.index import (
    TTL_ATTR,
    candidates,
    init_filed_types,
    lookup,
)

init_filed_types()

# A deadline this much early absorbs float rounding in mongomock's total_seconds() test.
_TTL_MARGIN = timedelta(milliseconds=1)
_mongomock_utcnow: Any = helpers.utcnow
_BULK_RESULT: Any = vars(results)["BulkWriteResult"]  # not in its __all__
_filter_applies: Callable[[Any, Any], Any] = filtering.filter_applies


def engine_now() -> datetime:
    """mongomock's clock (naive UTC) without ``datetime.utcnow()``'s deprecation warning;
    ``mongomock.utcnow`` when a test replaced it, as mongomock's README says to."""
    module: Any = mongomock
    clock = module.utcnow  # looked up on each call: tests patch it
    if clock is not _mongomock_utcnow:
        return clock()  # type: ignore[no-any-return]
    return datetime.now(timezone.utc).replace(tzinfo=None)


# --------------------------------------------------------------------------- bulk writes


class _SortAware:
    """mongomock's bulk builder, taking pymongo 4.11+'s ``sort=`` (change 1)."""

    def __init__(self, bulk: BulkOperationBuilder) -> None:
        self._bulk = bulk

    def add_update(self, selector: Any, doc: Any, *args: Any, sort: Any = None, **kwargs: Any) -> None:
        _no_sort(sort)
        self._bulk.add_update(selector, doc, *args, **kwargs)

    def add_replace(self, selector: Any, doc: Any, *args: Any, sort: Any = None, **kwargs: Any) -> None:
        _no_sort(sort)
        self._bulk.add_replace(selector, doc, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bulk, name)


def _no_sort(sort: Any) -> None:
    if sort:
        raise NotImplementedError("mongomock cannot apply an UpdateOne/ReplaceOne sort=; the store never sends one")


# --------------------------------------------------------------------------- the collection store


def _ttl_state_key(store: Any, now: datetime) -> tuple[Any, ...]:
    # Objects, not ids: a dropped collection's dicts are replaced, and never mistaken for the new.
    return (store._documents, store._ttl_indexes, tuple(store._ttl_indexes), now.tzinfo is None)


def _same_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a[0] is b[0] and a[1] is b[1] and a[2] == b[2] and a[3] == b[3]


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
        value = _get_min_datetime_from_value(doc.get(next(iter(index["key"]))[0]))
        try:
            _ = now - value  # mongomock's own test; a TypeError there means never
            when = value + timedelta(seconds=expiry) - _TTL_MARGIN
            if best is None or when < best:
                best = when
        except (TypeError, OverflowError):
            continue
    return best


class _Store(CollectionStore):
    """A view of a ``CollectionStore``: the same ``__dict__``, our clock (change 4)."""

    def _remove_expired_documents(self) -> None:
        if self._ttl_indexes:
            self._expire(engine_now())

    def _expire(self, now: Any) -> None:
        # mongomock's _expire_documents, on the clock given.
        for index in list(self._ttl_indexes.values()):
            try:
                expiry = int(index["expireAfterSeconds"])
            except ValueError:
                continue
            if len(index["key"]) > 1:
                continue
            field = next(iter(index["key"]))[0]
            with self._rwlock.reader():
                expired = [
                    doc["_id"]
                    for doc in self._documents.values()
                    if self._value_meets_expiry(doc.get(field), expiry, now)
                ]
            for _id in expired:
                del self[_id]


class _OwnStore(_Store):
    """The engine's own stores: the lookup index, the TTL deadline and write versions in step
    (changes 4, 6, 7)."""

    def __setitem__(self, key: Any, val: Any) -> None:
        # mongomock's, filing under its writer lock (readers see the index and documents agree)
        with self._rwlock.writer():
            self._documents[key] = val
            self._filed(key, val)

    def __delitem__(self, key: Any) -> None:
        with self._rwlock.writer():
            del self._documents[key]
            lk = lookup(self, create=False)
            if lk is not None:
                lk.drop(key)

    def _filed(self, key: Any, doc: Any) -> None:
        """``doc`` (stored under ``key``) was written: index it, note its deadline, new version."""
        lk = lookup(self, create=False)
        if lk is not None:
            lk.put(key, doc)
        state = self.__dict__.get(TTL_ATTR)
        if state is None or not self._ttl_indexes:
            return
        now = engine_now()
        if not isinstance(now, datetime) or not _same_key(state[0], _ttl_state_key(self, now)):
            self.__dict__.pop(TTL_ATTR, None)
            return
        when = _doc_deadline(self, doc, now)
        try:
            if when is not None and (state[1] is None or when < state[1]):
                state[1] = when
        except TypeError:
            self.__dict__.pop(TTL_ATTR, None)

    def _remove_expired_documents(self) -> None:
        """Run the expiry scan only once the earliest deadline it could act on has come."""
        if not self._ttl_indexes:
            return
        now = engine_now()
        if not isinstance(now, datetime):
            self._expire(now)
            return
        key = _ttl_state_key(self, now)
        state = self.__dict__.get(TTL_ATTR)
        if state is not None and _same_key(state[0], key):
            try:
                if state[1] is None or now < state[1]:
                    return
            except TypeError:
                pass
        self._expire(now)
        earliest: datetime | None = None
        with self._rwlock.reader():
            docs = list(self._documents.values())
        for doc in docs:
            when = _doc_deadline(self, doc, now)
            if when is not None and (earliest is None or when < earliest):
                earliest = when
        self.__dict__[TTL_ATTR] = [key, earliest]


def _view(cls: type[_Store], raw: Any) -> _Store:
    view: _Store = cls.__new__(cls)
    view.__dict__ = raw.__dict__  # one state: mongomock's code and ours see the same documents
    return view


# --------------------------------------------------------------------------- collection, database, client


class _LinearCursor(mongomock.collection.Cursor):
    """mongomock's cursor, whose ``__next__`` takes the skipped and limited results once (8)."""

    _linear: tuple[Any, list[Any]] | None = None

    def __next__(self) -> Any:
        results = self._compute_results()
        if self._linear is None or self._linear[0] is not results:
            page = results[self._skip :]
            self._linear = (results, page[: abs(self._limit)] if self._limit else page)
        page = self._linear[1]
        if self._emitted >= len(page):
            raise StopIteration
        doc = page[self._emitted]
        self._emitted += 1
        return doc

    next = __next__


class EngineCollection(_MockCollection):
    """mongomock's ``Collection`` with the changes above; ``_own``: the engine's own data."""

    _own = False
    _views: tuple[Any, _Store] | None = None

    def find(self, *args: Any, **kwargs: Any) -> Any:
        cursor = super().find(*args, **kwargs)
        if type(cursor) is mongomock.collection.Cursor:
            cursor.__class__ = _LinearCursor  # our own cursor object, iterated in linear time
        return cursor

    @property
    def _store(self) -> _Store:
        raw = self._db_store[self._name]
        views = self._views
        if views is None or views[0] is not raw:
            views = self._views = (raw, _view(_OwnStore if self._own else _Store, raw))
        return views[1]

    def bulk_write(
        self, requests: Any, ordered: bool = True, bypass_document_validation: bool = False, session: Any = None
    ) -> Any:
        if bypass_document_validation or session:
            return super().bulk_write(requests, ordered, bypass_document_validation, session)  # mongomock's refusals
        bulk = BulkOperationBuilder(self, ordered=ordered)
        adder = _SortAware(bulk)
        for operation in requests:
            operation._add_to_bulk(adder)
        return _BULK_RESULT(bulk.execute(), True)

    def _apply_update_pipeline(self, existing_document: Any, pipeline: Any, session: Any) -> Any:
        try:
            return super()._apply_update_pipeline(existing_document, mongodb_expressions(pipeline), session)
        finally:
            self._refile(existing_document)

    def _apply_update_document(self, existing_document: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._apply_update_document(existing_document, *args, **kwargs)
        finally:
            self._refile(existing_document)

    def _refile(self, doc: Any) -> None:
        """A document was updated in place: file it again (an upsert's new one is not stored yet)."""
        if not self._own:
            return
        store = self._store
        _id = doc.get("_id") if isinstance(doc, dict) else None
        key = helpers.hashdict(_id) if isinstance(_id, dict) else _id
        if store._documents.get(key) is doc:
            assert isinstance(store, _OwnStore)
            store._filed(key, doc)

    def _iter_documents(self, filter: Any) -> Any:
        if not self._own or not isinstance(filter, dict) or not filter:
            return super()._iter_documents(filter)
        store = self._store
        store._remove_expired_documents()
        found = candidates(store, filter)
        if found is None:
            return super()._iter_documents(filter)
        if not found:
            _filter_applies(filter, {})  # validate the filter, as mongomock does on an empty collection
        return (doc for doc in found if _filter_applies(filter, doc))


class EngineDatabase(_MockDatabase):
    """mongomock's ``Database`` whose collections are ``EngineCollection``s (on the same data)."""

    _own = False

    def get_collection(
        self,
        name: Any,
        codec_options: Any = None,
        read_preference: Any = None,
        write_concern: Any = None,
        read_concern: Any = None,
    ) -> Any:
        options = (codec_options, read_preference, write_concern, read_concern)
        plain = super().get_collection(name, *options)  # mongomock's checks, and the options applied
        made: dict[str, EngineCollection] = self.__dict__.setdefault("_engine_collections", {})
        coll = made.get(name)
        if coll is not None and all(o is None for o in options):
            return coll
        coll = EngineCollection(
            self,
            name=name,
            _db_store=self._store,
            write_concern=plain.write_concern,
            read_concern=plain.read_concern,
            read_preference=plain.read_preference,
            codec_options=plain.codec_options,
        )
        coll._own = self._own
        if all(o is None for o in options):
            coll = made.setdefault(name, coll)
        return coll


class EngineClient(_MockClient):
    """The embedded engine's client: its collections are the engine's own (lookup index on)."""

    def get_database(
        self,
        name: Any = None,
        codec_options: Any = None,
        read_preference: Any = None,
        write_concern: Any = None,
        read_concern: Any = None,
    ) -> Any:
        options = (codec_options, read_preference, write_concern, read_concern)
        if name is None or any(o is not None for o in options):
            return super().get_database(name, *options)
        dbs: dict[str, EngineDatabase] = self.__dict__.setdefault("_engine_databases", {})
        db = dbs.get(name)
        if db is None:
            plain = super().get_database(name)
            db = EngineDatabase(
                self,
                name,
                _store=self._store[name],
                read_preference=plain.read_preference,
                codec_options=plain.codec_options,
            )
            db._own = True
            db = dbs.setdefault(name, db)
        return db


def new_client(**kwargs: Any) -> EngineClient:
    """A fresh client of the embedded engine (tz-aware, like the store's real clients)."""
    kwargs.setdefault("tz_aware", True)
    return EngineClient(**kwargs)


def adapt_sync(collection: Any) -> EngineCollection:
    """Our handle on a user's mongomock collection: the same data, our changes 1-4."""
    if isinstance(collection, EngineCollection):
        return collection
    db = collection.database
    engine_db = EngineDatabase(
        db.client,
        db.name,
        _store=db._store,
        read_preference=collection.read_preference,
        codec_options=collection.codec_options,
    )
    result: EngineCollection = engine_db.get_collection(collection.name)
    return result


def adapt_async(collection: Any) -> Any:
    """The same for a mongomock_motor or pymongo-async-mock collection: the embedded engine's
    async face (``embedded.asyncwrap``) over our handle on the mongomock collection beneath.

    Not a new wrapper of the user's library: pymongo-async-mock replaces
    ``BulkOperationBuilder.add_update`` class-wide each time one of its collections is made.
    """
    from mongostore.drivers.embedded.asyncwrap import AsyncCollection

    sync_db = collection.database.delegate  # the mongomock Database beneath (both libraries' public property)
    return AsyncCollection(adapt_sync(sync_db.get_collection(collection.name)))


@functools.lru_cache(maxsize=1)
def mongomock_classes() -> tuple[type, type, type]:
    """mongomock's client, database and collection classes (what ``drivers.backend`` recognises as emulated)."""
    return (_MockClient, _MockDatabase, _MockCollection)
