"""``MongoStore.local`` / ``AsyncMongoStore.local``: plain stores whose backend is the local file.

Their ``Backend``'s unit of work is the file's transaction (lock, reload if changed, run,
save once if written): the drivers hold it around each whole plan, sync and async alike;
the async driver holds ``atransaction``, which does all of it on the engine's thread.
"""

from __future__ import annotations

import os
from typing import Any

from mongostore.drivers.backend import Backend
from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.proxy import local_collections


def local_backend(engine: LocalFile) -> Backend:
    return Backend(
        name="local file",
        emulated=True,
        local_file=True,
        threads=False,
        unit=engine.transaction,
        aunit=engine.atransaction,
    )


def local_store(path: str | os.PathLike[str] | None, db_name: str, collection_name: str, **kwargs: Any) -> Any:
    """``MongoStore.local``: a ``MongoStore`` whose every operation is one transaction of the file."""
    from mongostore.store import MongoStore

    items, vectors = local_collections(path, db_name, collection_name)
    backend = local_backend(items.engine)
    return MongoStore(items, vectors_collection=vectors, backend=backend, **kwargs)  # type: ignore[arg-type]


def async_local_store(path: str | os.PathLike[str] | None, db_name: str, collection_name: str, **kwargs: Any) -> Any:
    """``AsyncMongoStore.local``: each operation is one transaction of the file.

    The lock, the file I/O and every engine call run on the engine's thread: the event
    loop never blocks, even while another process holds the lock (a long CLI import).
    """
    from mongostore.aio import AsyncMongoStore

    items, vectors = local_collections(path, db_name, collection_name)
    return AsyncMongoStore(
        AsyncCollection(items),
        vectors_collection=AsyncCollection(vectors),
        backend=local_backend(items.engine),
        **kwargs,
    )
