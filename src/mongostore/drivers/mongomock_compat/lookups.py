# mongomock is untyped: its functions are called as Any.
# mypy: disable-error-code="no-untyped-call"
"""The store's own mongomock classes: every change the store makes to mongomock lives here.

Nothing of mongomock's is replaced: these are subclasses, and only the store's objects are
instances of them: the engine's own clients (``new_client``: ``MongoStore.in_memory``, the
local file) and the handles ``drivers.embedded.adapt_collection`` makes over a user's mongomock
collection (same data; the user's objects untouched, ``tests/unit/test_mongomock_compat.py``).
Each change is guarded by a test showing unpatched mongomock differs from MongoDB (or
pymongo) and ours matches.

On every collection the store uses:

1. ``bulk_write`` accepts the ``sort=`` pymongo 4.11+ passes for every ``UpdateOne``/``ReplaceOne``
   (``pymongo/operations.py`` ``_add_to_bulk``; changelog 4.11); mongomock 4.3's builder raises
   ``TypeError``. ``None`` is dropped; a real sort raises ``NotImplementedError``.
2. ``_apply_update_pipeline``: ``{$add: [<date expr>, <numbers>...]}`` adds milliseconds to the
   date (manual, ``$add`` (aggregation)); mongomock asserts numbers. Rewritten to
   ``{$subtract: [<expr>, -sum]}``, the same for a date, a number and null in both
   (``mongodb_expressions``).
3. The TTL clock: mongomock reads ``datetime.utcnow()``, deprecated since Python 3.12 (a warning
   on every access to a collection with a TTL index). Ours reads ``datetime.now(timezone.utc)``
   (naive, as mongomock stores dates), or ``mongomock.utcnow`` when a test replaced it
   (mongomock's README, "utcnow"); mongomock's ``_value_meets_expiry`` decides.

Only on the engine's own stores, which nothing else writes: the lookup index (``index``). A get at
10k items took ~45 ms and a put ~60 ms without it (mongomock tests every document against every
filter, and a unique index by another scan per write); with it 0.04 ms, and 10k indexed puts in one
batch ~4 s (the targets: 2 ms and 5 s).

4. ``_iter_documents`` answers equality and ``$in`` on ``_id`` and indexed top-level fields from the
   index, then applies the whole filter to those candidates: same documents, order and errors.
   The expiry scan runs only once the earliest TTL deadline has come.
5. ``CollectionStore.__setitem__`` and 6. ``__delitem__`` keep the index and that deadline in step;
7. ``_apply_update_document`` (and 2.) re-file a document mongomock updated in place.
8. On every collection, ``find``'s cursors iterate in linear time: mongomock's ``Cursor.__next__`` slices
   the whole result list again per document (a 100k-item read: ~25 s, ~1.5 s with this).

Plumbing: ``Collection._store`` gives mongomock's code our view of the same ``CollectionStore``
state; ``Database.get_collection`` / ``MongoClient.get_database`` make their new objects ours.
Not changed any more (each replaced an attribute every mongomock user saw): mongomock's date walk
and its ``packaging.version.parse`` per field (~15% of a put), and ``create_index(keys=)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import mongomock
from mongomock import filtering, helpers, results
from mongomock.collection import BulkOperationBuilder
from mongomock.collection import Collection as _MockCollection
from mongomock.database import Database as _MockDatabase
from mongomock.mongo_client import MongoClient as _MockClient
from mongomock.store import CollectionStore, _get_min_datetime_from_value

from mongostore.drivers.mongomock_compat.index import TTL_ATTR, candidates, lookup

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
    """mongomock's bulk builder, taking pymongo 4.11+'s ``sort=`` on every ``add_*`` (change 1)."""

    def __init__(self, bulk: BulkOperationBuilder) -> None:
        self._bulk = bulk

    def __getattr__(self, name: str) -> Any:
        add = getattr(self._bulk, name)

        def call(*args: Any, sort: Any = None, **kwargs: Any) -> Any:
            if sort:
                raise NotImplementedError(
                    "mongomock cannot apply an UpdateOne/ReplaceOne sort=; the store never sends one"
                )
            return add(*args, **kwargs)

        return call


# --------------------------------------------------------------------------- the collection store


def _ttl_state_key(store: Any, now: datetime) -> tuple[Any, ...]:
    # Objects, not ids: a dropped collection's dicts are replaced, and never mistaken for the new.
    return (store._documents, store._ttl_indexes, tuple(store._ttl_indexes), now.tzinfo is None)


def _same_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a[0] is b[0] and a[1] is b[1] and a[2] == b[2] and a[3] == b[3]


def _ttl_fields(store: Any) -> Iterator[tuple[str, int]]:
    """(field, seconds) of each TTL index mongomock's expiry acts on: an integer expiry, one field."""
    for index in list(store._ttl_indexes.values()):
        try:
            expiry = int(index["expireAfterSeconds"])
        except (TypeError, ValueError):
            continue
        if len(index["key"]) == 1:
            yield next(iter(index["key"]))[0], expiry


def _doc_deadline(store: Any, doc: Any, now: datetime) -> datetime | None:
    """The earliest moment mongomock's expiry test could remove ``doc`` (None: never, on this clock)."""
    best: datetime | None = None
    if not isinstance(doc, dict):
        return None
    for field, expiry in _ttl_fields(store):
        value = _get_min_datetime_from_value(doc.get(field))
        try:
            _ = now - value  # mongomock's own test; a TypeError there means never
            when = value + timedelta(seconds=expiry) - _TTL_MARGIN
        except (TypeError, OverflowError):
            continue
        if best is None or when < best:
            best = when
    return best


class _Store(CollectionStore):
    """A view of a ``CollectionStore``: the same ``__dict__``, our clock (change 3)."""

    def _remove_expired_documents(self) -> None:
        if self._ttl_indexes:
            self._expire(engine_now())

    def _expire(self, now: Any) -> None:
        # mongomock's _expire_documents, on the clock given.
        for field, expiry in _ttl_fields(self):
            with self._rwlock.reader():
                expired = [
                    doc["_id"]
                    for doc in self._documents.values()
                    if self._value_meets_expiry(doc.get(field), expiry, now)
                ]
            for _id in expired:
                del self[_id]


class _OwnStore(_Store):
    """The engine's own stores: the lookup index and the earliest TTL deadline in step (changes 4-7)."""

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
        """``doc`` (stored under ``key``) was written: index it, note its deadline."""
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
        if when is not None and (state[1] is None or when < state[1]):
            state[1] = when  # same clock kind as the key's: comparable

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
        if state is not None and _same_key(state[0], key) and (state[1] is None or now < state[1]):
            return
        self._expire(now)
        with self._rwlock.reader():
            docs = list(self._documents.values())
        deadlines = [when for doc in docs if (when := _doc_deadline(self, doc, now)) is not None]
        self.__dict__[TTL_ATTR] = [key, min(deadlines, default=None)]


def _view(cls: type[_Store], raw: Any) -> _Store:
    view: _Store = cls.__new__(cls)
    view.__dict__ = raw.__dict__  # one state: mongomock's code and ours see the same documents
    return view


# --------------------------------------------------------------------------- collection, database, client


class _LinearCursor(mongomock.collection.Cursor):
    """mongomock's cursor, whose ``__next__`` takes the skipped and limited results once (change 8)."""

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

    def get_collection(self, *args: Any, **kwargs: Any) -> Any:
        coll = super().get_collection(*args, **kwargs)
        if not isinstance(coll, EngineCollection):  # made just now by mongomock, for this database of ours
            coll.__class__ = EngineCollection
            coll._own = self._own
        return coll


class EngineClient(_MockClient):
    """The embedded engine's client: its collections are the engine's own (lookup index on)."""

    def get_database(self, *args: Any, **kwargs: Any) -> Any:
        db = super().get_database(*args, **kwargs)
        if not isinstance(db, EngineDatabase):  # made just now by mongomock, for this client of ours
            db.__class__ = EngineDatabase
            db._own = True
        return db


def new_client(**kwargs: Any) -> EngineClient:
    """A fresh client of the embedded engine (tz-aware, like the store's real clients)."""
    kwargs.setdefault("tz_aware", True)
    return EngineClient(**kwargs)


def adapt_sync(collection: Any) -> EngineCollection:
    """Our handle on a user's mongomock collection: the same data, our changes 1-3."""
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


# --------------------------------------------------------------------------- MongoDB's expressions


def mongodb_expressions(pipeline: Any) -> Any:
    """``pipeline`` with ``$add`` of a date, which mongomock 4.3 evaluates unlike MongoDB,
    rewritten into an expression it evaluates as MongoDB does (``lookups``, change 2); the
    same object when there is none. ``$literal`` values are never looked into."""
    if not isinstance(pipeline, list):
        return pipeline
    out = _rewrite(pipeline)
    return pipeline if out is _UNCHANGED else out


_UNCHANGED: Any = object()


def _number(v: Any) -> bool:
    return type(v) in (int, float)


def _rewrite(value: Any) -> Any:
    """The rewritten ``value``, or ``_UNCHANGED`` (copied only where it changes, leaves never
    called on: one put's pipeline costs a few microseconds)."""
    if type(value) is dict:
        if "$literal" in value:
            return _UNCHANGED
        if len(value) == 1 and type(arg := value.get("$add")) is list and len(arg) > 1:
            exprs = [v for v in arg if not _number(v)]
            if len(exprs) == 1:
                inner = _rewrite(exprs[0])
                expr = exprs[0] if inner is _UNCHANGED else inner
                return {"$subtract": [expr, -sum(v for v in arg if _number(v))]}
        items: Any = value.items()
    elif type(value) is list:
        items = enumerate(value)
    else:
        return _UNCHANGED
    out = None
    for k, v in items:
        if type(v) is dict or type(v) is list:
            r = _rewrite(v)
            if r is not _UNCHANGED:
                if out is None:
                    out = type(value)(value)
                out[k] = r
    return _UNCHANGED if out is None else out
