"""An ``AsyncCollection``-shaped wrapper over a sync embedded collection (mongomock or a local file).

No threads: the embedded engines are in-process Python, so each call runs to completion
on the event loop. ``AsyncMongoStore.in_memory()`` / ``.local()`` run on it.
"""

from __future__ import annotations

from typing import Any


class AsyncCursor:
    """Async iteration and ``to_list`` over a sync cursor (mongomock's or ours)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

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
        try:
            return next(self._cursor)
        except StopIteration:
            raise StopAsyncIteration from None

    async def to_list(self, length: int | None = None) -> list[Any]:
        docs = list(self._cursor)
        return docs if length is None else docs[:length]

    async def close(self) -> None:
        close = getattr(self._cursor, "close", None)
        if close is not None:
            close()


class AsyncDatabase:
    def __init__(self, database: Any) -> None:
        self._database = database
        self.name = database.name

    @property
    def client(self) -> Any:
        return self._database.client

    def __getitem__(self, name: str) -> AsyncCollection:
        return AsyncCollection(self._database[name])

    async def list_collection_names(self, **kwargs: Any) -> list[str]:
        return list(self._database.list_collection_names(**kwargs))

    async def create_collection(self, name: str, **kwargs: Any) -> AsyncCollection:
        self._database.create_collection(name, **kwargs)
        return AsyncCollection(self._database[name])

    async def command(self, *args: Any, **kwargs: Any) -> Any:
        return self._database.command(*args, **kwargs)


class AsyncCollection:
    """An ``AsyncCollection``-shaped wrapper over a sync embedded collection (no threads).

    The embedded engines are in-process Python: each call runs to completion on the
    event loop, as fast as it would in a thread, without one. This is what
    ``AsyncMongoStore.in_memory()`` / ``.local()`` run on in the base install.
    """

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.name = collection.name
        self.full_name = getattr(collection, "full_name", collection.name)

    @property
    def sync(self) -> Any:
        """The sync collection underneath."""
        return self._collection

    @property
    def database(self) -> AsyncDatabase:
        return AsyncDatabase(self._collection.database)

    def find(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(self._collection.find(*args, **kwargs))

    def aggregate(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(iter(list(self._collection.aggregate(*args, **kwargs))))

    def list_search_indexes(self, *args: Any, **kwargs: Any) -> AsyncCursor:
        return AsyncCursor(iter(list(self._collection.list_search_indexes(*args, **kwargs))))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"AsyncCollection({self._collection!r})"
