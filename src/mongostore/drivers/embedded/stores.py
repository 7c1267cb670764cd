"""The embedded engines a store can be built on, each as (items, vectors, ``Backend``).

``MongoStore.in_memory`` / ``.local`` and their async twins take these: the store is a
plain one whose ``Backend`` carries the engine's unit of work, which the drivers hold
around each whole plan, sync and async alike.

- ``memory_engine``: a fresh mongomock engine (``mongomock_compat``); its unit is one lock
  per client (mongomock is not thread-safe).
- ``local_engine``: the local file (``file``, ``proxy``); its unit is the file's transaction
  (lock, reload if changed, run, save once if written), and the async driver holds
  ``atransaction``, which does all of it on the engine's thread.

Replacing the embedded engine means a function like these and the constructor that calls it.
"""

from __future__ import annotations

import os
from typing import Any

from mongostore.core.codec import vectors_name
from mongostore.drivers.backend import Backend, mongomock_backend
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.proxy import local_collections
from mongostore.drivers.mongomock_compat import in_memory_collection

Engine = tuple[Any, Any, Backend]  # items collection, vectors collection, backend


def local_backend(engine: LocalFile) -> Backend:
    return Backend(
        name="local file",
        emulated=True,
        local_file=True,
        threads=False,
        unit=engine.transaction,
        aunit=engine.atransaction,
    )


def local_engine(path: str | os.PathLike[str] | None, db_name: str, collection_name: str) -> Engine:
    """The local store's collections in ``<path>/<db_name>.bson``, and its backend."""
    items, vectors = local_collections(path, db_name, collection_name)
    return items, vectors, local_backend(items.engine)


def memory_engine(db_name: str, collection_name: str) -> Engine:
    """A fresh in-memory engine's collections, and its backend."""
    items = in_memory_collection(db_name, collection_name)
    return items, items.database[vectors_name(collection_name)], mongomock_backend(items.database.client)
