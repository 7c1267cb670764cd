"""``MongoStore.local`` / ``AsyncMongoStore.local``: stores whose every method is one transaction of the file."""

from __future__ import annotations

import functools
import os
from typing import Any

from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.proxy import LocalCollection, local_collections


def _engine_of(collection: Any) -> LocalFile | None:
    inner = collection.sync if isinstance(collection, AsyncCollection) else collection
    return inner.engine if isinstance(inner, LocalCollection) else None


def local_store(path: str | os.PathLike[str] | None, db_name: str, collection_name: str, **kwargs: Any) -> Any:
    """``MongoStore.local``: a ``MongoStore`` whose every method is one transaction of the file."""
    items, vectors = local_collections(path, db_name, collection_name)
    return _local_store_class()(items, vectors_collection=vectors, **kwargs)


@functools.cache
def _local_store_class() -> Any:
    """Defined on first use: ``mongostore.store`` imports this module lazily, and this one it."""
    from mongostore.store import MongoStore

    class LocalMongoStore(MongoStore):
        """A ``MongoStore`` on the local file: a whole batch (items and vectors) is one transaction."""

        def batch(self, ops: Any) -> Any:
            with self.engine.transaction():
                return super().batch(ops)

        def setup(self) -> None:
            with self.engine.transaction():
                super().setup()

        def status(self) -> Any:
            with self.engine.transaction():
                return super().status()

        def aggregate(self, *args: Any) -> Any:
            with self.engine.transaction():
                return super().aggregate(*args)

        def sweep_ttl(self) -> int:
            with self.engine.transaction():
                return super().sweep_ttl()

        @property
        def engine(self) -> LocalFile:
            engine = _engine_of(self.collection)
            assert engine is not None
            return engine

    return LocalMongoStore


def async_local_store(path: str | os.PathLike[str] | None, db_name: str, collection_name: str, **kwargs: Any) -> Any:
    """``AsyncMongoStore.local``: each ``abatch`` is one transaction of the file.

    The transaction (the lock, the file I/O) and every engine call run on the engine's
    thread (``LocalFile.atransaction``): the event loop never blocks, even while another
    process holds the lock (a long CLI import).
    """
    items, vectors = local_collections(path, db_name, collection_name)
    return _async_local_store_class()(AsyncCollection(items), vectors_collection=AsyncCollection(vectors), **kwargs)


@functools.cache
def _async_local_store_class() -> Any:
    from mongostore.aio import AsyncMongoStore

    class LocalAsyncMongoStore(AsyncMongoStore):
        async def abatch(self, ops: Any) -> Any:
            async with self.engine.atransaction():
                return await super().abatch(ops)

        async def setup(self) -> None:
            async with self.engine.atransaction():
                await super().setup()

        async def status(self) -> Any:
            async with self.engine.atransaction():
                return await super().status()

        async def aaggregate(self, *args: Any) -> Any:
            async with self.engine.atransaction():
                return await super().aaggregate(*args)

        async def sweep_ttl(self) -> int:
            async with self.engine.atransaction():
                return await super().sweep_ttl()

        @property
        def engine(self) -> LocalFile:
            engine = _engine_of(self.collection)
            assert engine is not None
            return engine

    return LocalAsyncMongoStore
