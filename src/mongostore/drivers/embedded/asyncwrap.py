"""An ``AsyncCollection``-shaped wrapper over a sync embedded collection (mongomock or a local file).

Over an in-memory mongomock collection (``AsyncMongoStore.in_memory()``) each call runs
to completion on the event loop: in-process Python, no I/O, as fast as in a thread.

Over the local store's file (``AsyncMongoStore.local()``, a ``LocalCollection``) every
call that may touch the lock or the disk runs on the engine's own thread
(``LocalFile.run``) and is awaited, so the event loop never blocks: not on another
process holding the lock, not on reading, writing or fsyncing the file (an Agent Server
refuses blocking calls on its loop). One thread per engine, so the calls made inside
an ``atransaction`` join it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.proxy import LocalCollection, LocalDatabase

#: Runs a sync function off the loop and awaits it (``LocalFile.run``); None: run it here.
Runner = Callable[..., Awaitable[Any]] | None

_END = object()


async def _call(runner: Runner, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if runner is None:
        return fn(*args, **kwargs)
    return await runner(fn, *args, **kwargs)


class _Deferred:
    """A command cursor (aggregate, list_search_indexes) that runs on its first read, where the runner says."""

    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce: Callable[[], Any] | None = produce
        self._it: Iterator[Any] = iter(())

    def _start(self) -> None:
        if self._produce is not None:
            produce, self._produce = self._produce, None
            self._it = iter(list(produce()))

    def __iter__(self) -> _Deferred:
        return self

    def __next__(self) -> Any:
        self._start()
        return next(self._it)

    def close(self) -> None:
        self._produce = None
        self._it = iter(())


class AsyncCursor:
    """Async iteration and ``to_list`` over a sync cursor (mongomock's or ours)."""

    def __init__(self, cursor: Any, runner: Runner = None) -> None:
        self._cursor = cursor
        self._runner = runner

    def sort(self, *args: Any) -> AsyncCursor:
        self._cursor = self._cursor.sort(*args)
        return self

    def skip(self, *args: Any) -> AsyncCursor:
        self._cursor = self._cursor.skip(*args)
        return self

    def limit(self, *args: Any) -> AsyncCursor:
        self._cursor = self._cursor.limit(*args)
        return self

    def batch_size(self, *args: Any) -> AsyncCursor:
        return self

    def __aiter__(self) -> AsyncCursor:
        return self

    async def __anext__(self) -> Any:
        doc = await _call(self._runner, next, self._cursor, _END)
        if doc is _END:
            raise StopAsyncIteration
        return doc

    async def to_list(self, length: int | None = None) -> list[Any]:
        docs: list[Any] = await _call(self._runner, list, self._cursor)
        return docs if length is None else docs[:length]

    async def close(self) -> None:
        close = getattr(self._cursor, "close", None)
        if close is not None:
            close()


def _engine(obj: Any) -> LocalFile | None:
    return obj.engine if isinstance(obj, LocalCollection) else None


class AsyncDatabase:
    def __init__(self, database: Any, runner: Runner = None) -> None:
        self._database = database
        self._runner = runner
        self.name = database.name

    @property
    def client(self) -> Any:
        """The client underneath. For the local store: its mongomock client when loaded, else an
        empty one of the same kind (what it is, not what it holds: no I/O on the loop)."""
        if isinstance(self._database, LocalDatabase):
            return self._database.engine.client_nowait()
        return self._database.client

    def __getitem__(self, name: str) -> AsyncCollection:
        return AsyncCollection(self._database[name])

    async def list_collection_names(self, **kwargs: Any) -> list[str]:
        return list(await _call(self._runner, self._database.list_collection_names, **kwargs))

    async def create_collection(self, name: str, **kwargs: Any) -> AsyncCollection:
        await _call(self._runner, self._database.create_collection, name, **kwargs)
        return AsyncCollection(self._database[name])

    async def command(self, *args: Any, **kwargs: Any) -> Any:
        return await _call(self._runner, self._database.command, *args, **kwargs)


class AsyncCollection:
    """An ``AsyncCollection``-shaped wrapper over a sync embedded collection.

    In-memory mongomock: each call runs on the event loop. The local store's file: each
    call runs on the engine's thread, awaited (see the module docstring).
    """

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.name = collection.name
        self.full_name = getattr(collection, "full_name", collection.name)
        engine = _engine(collection)
        self._engine = engine
        self._runner: Runner = engine.run if engine is not None else None

    @property
    def sync(self) -> Any:
        """The sync collection underneath."""
        return self._collection

    @property
    def database(self) -> AsyncDatabase:
        return AsyncDatabase(self._collection.database, self._runner)

    def find(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(self._collection.find(*args, **kwargs), self._runner)

    def aggregate(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(_Deferred(lambda: self._collection.aggregate(*args, **kwargs)), self._runner)

    def list_search_indexes(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(_Deferred(lambda: self._collection.list_search_indexes(*args, **kwargs)), self._runner)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._runner is not None:
            runner, coll = self._runner, self._collection

            async def run_local(*args: Any, **kwargs: Any) -> Any:
                return await runner(lambda: getattr(coll, name)(*args, **kwargs))

            return run_local
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"AsyncCollection({self._collection!r})"
