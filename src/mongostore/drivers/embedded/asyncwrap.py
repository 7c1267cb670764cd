"""The async face of a sync embedded collection (in-memory mongomock, or the local store's).

Over mongomock (``AsyncMongoStore.in_memory()``) each call runs to completion on the event
loop: in-process Python, no I/O. Over the local store (a ``LocalCollection``) every call runs on
the engine's own thread (``LocalDB.run``) and is awaited, so the loop never waits for
another process's lock or for the disk (an Agent Server refuses blocking calls on its loop).
One thread per engine, so the calls made inside an ``atransaction`` join it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mongostore.drivers.embedded.collection import CURSORS, LocalCollection, LocalDatabase

#: Runs a sync function off the loop and awaits it (``LocalDB.run``); None: run it here.
Runner = Callable[..., Awaitable[Any]] | None

_END = object()


async def _call(runner: Runner, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args) if runner is None else await runner(fn, *args)


class AsyncCursor:
    """Async iteration and ``to_list`` over a sync cursor (mongomock's, or a ``LocalCursor``: read on first use)."""

    def __init__(self, cursor: Any, runner: Runner) -> None:
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
        self._cursor.close()


class _AsyncFace:
    """Each method of the sync object, awaited: a cursor method gives an ``AsyncCursor``."""

    def __init__(self, sync: Any) -> None:
        self._sync = sync
        self._runner: Runner = sync.engine.run if isinstance(sync, (LocalCollection, LocalDatabase)) else None
        self.name = sync.name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        sync, runner = self._sync, self._runner
        if name in CURSORS:
            return lambda *args, **kwargs: AsyncCursor(getattr(sync, name)(*args, **kwargs), runner)
        if runner is None and not callable(attr := getattr(sync, name)):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await _call(runner, lambda: getattr(sync, name)(*args, **kwargs))

        return call


class AsyncDatabase(_AsyncFace):
    @property
    def client(self) -> Any:
        """The client underneath (no I/O)."""
        return self._sync.client

    def __getitem__(self, name: str) -> AsyncCollection:
        return AsyncCollection(self._sync[name])

    async def create_collection(self, name: str, **kwargs: Any) -> AsyncCollection:
        await _call(self._runner, lambda: self._sync.create_collection(name, **kwargs))
        return AsyncCollection(self._sync[name])


class AsyncCollection(_AsyncFace):
    """An ``AsyncCollection``-shaped wrapper over a sync embedded collection (see the module docstring)."""

    def __init__(self, collection: Any) -> None:
        super().__init__(collection)
        self.full_name = getattr(collection, "full_name", collection.name)

    @property
    def sync(self) -> Any:
        """The sync collection underneath."""
        return self._sync

    @property
    def backend(self) -> Any:
        """The sync collection's own ``Backend`` when it states one (the local store's), else None."""
        return getattr(self._sync, "backend", None)

    @property
    def database(self) -> AsyncDatabase:
        return AsyncDatabase(self._sync.database)

    def __repr__(self) -> str:
        return f"AsyncCollection({self._sync!r})"
