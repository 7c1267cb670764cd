"""The embedded engines a store can be built on, each as (items, vectors, ``Backend``).

``MongoStore.in_memory`` / ``.local`` and their async twins build a plain store whose
``Backend`` carries the engine's unit of work, which the drivers hold around each plan:
one lock per mongomock client (``memory_engine``), or one SQLite transaction, taken on the
engine's thread by the async driver (``local_engine``).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from mongostore.core.codec import vectors_name
from mongostore.drivers.backend import Backend, mongomock_backend
from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.embedded.collection import LocalCollection
from mongostore.drivers.embedded.paths import default_data_dir
from mongostore.drivers.embedded.sqlite import LocalDB
from mongostore.drivers.mongomock_compat import in_memory_collection

Engine = tuple[Any, Any, Backend]  # items collection, vectors collection, backend

_ENGINES: dict[tuple[str, str], LocalDB] = {}
_ENGINES_LOCK = threading.Lock()


def open_local(path: str | os.PathLike[str] | None, db_name: str) -> LocalDB:
    """The engine for ``(directory, db)``: one per process, so its stores share its connections and thread."""
    directory = (Path(path).expanduser() if path is not None else default_data_dir()).absolute()
    key = (str(directory), db_name)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = LocalDB(directory, db_name)
        return engine


def local_engine(path: str | os.PathLike[str] | None, db_name: str, collection_name: str) -> Engine:
    """The local store's collections in ``<path>/<db_name>.sqlite``, and its backend."""
    engine = open_local(path, db_name)
    # What the store reads of every item or vector under a prefix (local ranking, its checks, status):
    # kept in each row's ``inc`` too, so those reads decode no document. (Not ``updated_at``, which only
    # recency ranking reads: every covered read would decode a date per row, and project it away.)
    # In columns as indexed fields are: ``created_at``, which the growth report groups by, and ``value.kind``,
    # which the value breakdown of ``mongostore stats`` groups by (its default ``--breakdown``): counted in
    # SQL, not by decoding every item.
    items = LocalCollection(engine, collection_name, include=("vectors",), columns=("created_at", "value.kind"))
    # Vectors in a rowid table: their documents hold their embeddings (``collection._table_sql``).
    vectors = LocalCollection(engine, vectors_name(collection_name), include=("item_id", "text_hash"), clustered=False)
    return items, vectors, items.backend


def memory_engine(db_name: str, collection_name: str) -> Engine:
    """A fresh in-memory engine's collections, and its backend."""
    items = in_memory_collection(db_name, collection_name)
    return items, items.database[vectors_name(collection_name)], mongomock_backend(items.database.client)


def _instance(obj: Any, module_name: str, class_name: str) -> bool:
    """Is ``obj`` of that class? (By class; a module not imported has no objects yet.)"""
    cls = getattr(sys.modules.get(module_name), class_name, None)
    return isinstance(cls, type) and isinstance(obj, cls)


def adapt_collection(collection: Any) -> Any:
    """The collection the store uses for ``collection``: itself, unless it is mongomock's.

    A mongomock collection (sync, or mongomock_motor's / pymongo-async-mock's) becomes a
    handle of the same kind on the same data whose calls behave as pymongo 4.11+ and
    MongoDB expect (``mongomock_compat.lookups``); the given object, its client and
    mongomock's classes are untouched. An async one gets the engine's own async face over
    that handle, not a new wrapper of the user's library (pymongo-async-mock replaces
    ``BulkOperationBuilder.add_update`` class-wide each time one of its collections is
    made). Anything else (pymongo, Motor, the local store's collections, wrappers and test
    doubles) is returned as it is. None stays None.
    """
    if _instance(collection, "mongomock.collection", "Collection"):
        from mongostore.drivers.mongomock_compat import lookups

        return collection if isinstance(collection, lookups.EngineCollection) else lookups.adapt_sync(collection)
    if any(_instance(collection, m, "AsyncMongoMockCollection") for m in ("mongomock_motor", "pymongo_async_mock")):
        from mongostore.drivers.mongomock_compat import lookups

        sync_db = collection.database.delegate  # the mongomock Database beneath (both libraries' public property)
        return AsyncCollection(lookups.adapt_sync(sync_db.get_collection(collection.name)))
    return collection
