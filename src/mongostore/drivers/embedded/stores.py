"""The embedded engines a store can be built on, each as (items, vectors, ``Backend``).

``MongoStore.in_memory`` / ``.local`` and their async twins build a plain store whose
``Backend`` carries the engine's unit of work, which the drivers hold around each plan:
one lock per mongomock client (``memory_engine``), or the file's transaction, taken on the
engine's thread by the async driver (``local_engine``).
"""

from __future__ import annotations

import os
from typing import Any

from mongostore.core.codec import vectors_name
from mongostore.drivers.backend import Backend, mongomock_backend
from mongostore.drivers.embedded.proxy import LocalCollection, open_local
from mongostore.drivers.mongomock_compat import in_memory_collection

Engine = tuple[Any, Any, Backend]  # items collection, vectors collection, backend


def local_engine(path: str | os.PathLike[str] | None, db_name: str, collection_name: str) -> Engine:
    """The local store's collections in ``<path>/<db_name>.bson``, and its backend."""
    engine = open_local(path, db_name)
    backend = Backend(emulated=True, local_file=True, threads=False, unit=engine.transaction, aunit=engine.atransaction)
    return LocalCollection(engine, collection_name), LocalCollection(engine, vectors_name(collection_name)), backend


def memory_engine(db_name: str, collection_name: str) -> Engine:
    """A fresh in-memory engine's collections, and its backend."""
    items = in_memory_collection(db_name, collection_name)
    return items, items.database[vectors_name(collection_name)], mongomock_backend(items.database.client)
