"""pymongo-shaped handles on a :class:`~mongostore.drivers.embedded.file.LocalFile`: every call one transaction.

``LocalCollection`` / ``LocalDatabase`` stand where the sync driver expects a pymongo
``Collection`` / ``Database``; a cursor records its options and runs the query (in a
transaction) on its first read. ``open_local`` keeps one engine per ``(directory, db)``
in a process, so its stores share one lock and one copy.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.paths import default_data_dir

#: The methods that return a cursor: it reads on first use, in a transaction of its own.
CURSORS = frozenset({"find", "aggregate", "list_indexes", "list_search_indexes"})
#: The methods that only read; every other method's transaction saves.
_READS = frozenset(
    {
        "find_one",
        "count_documents",
        "estimated_document_count",
        "distinct",
        "index_information",
        "list_collection_names",
        "command",
    }
)
#: Attributes that are options, not methods: read as they are.
_OPTIONS = frozenset({"codec_options", "read_preference", "write_concern", "read_concern"})


class LocalCursor:
    """A cursor: options are recorded; the first read runs the query in a transaction."""

    def __init__(self, handle: LocalHandle, method: str, *args: Any, **kwargs: Any) -> None:
        self._handle = handle
        self._call = (method, args, kwargs)
        self._chain: list[tuple[str, tuple[Any, ...]]] = []
        self._docs: Iterator[Any] | None = None

    def _option(self, name: str, *args: Any) -> LocalCursor:
        self._chain.append((name, args))
        return self

    def sort(self, *args: Any) -> LocalCursor:
        return self._option("sort", *args)

    def skip(self, *args: Any) -> LocalCursor:
        return self._option("skip", *args)

    def limit(self, *args: Any) -> LocalCursor:
        return self._option("limit", *args)

    def batch_size(self, *args: Any) -> LocalCursor:
        return self

    def _read(self) -> Iterator[Any]:
        if self._docs is None:
            method, args, kwargs = self._call
            with self._handle.engine.transaction() as client:
                cur = getattr(self._handle.beneath(client), method)(*args, **kwargs)
                for name, options in self._chain:
                    cur = getattr(cur, name)(*options)
                self._docs = iter(list(cur))
        return self._docs

    def __iter__(self) -> LocalCursor:
        return self

    def __next__(self) -> Any:
        return next(self._read())

    def close(self) -> None:
        self._docs = iter(())

    def to_list(self, length: int | None = None) -> list[Any]:
        rest = list(self._read())
        return rest if length is None else rest[:length]


class LocalHandle:
    """A handle on one mongomock object of a :class:`LocalFile`: each method call is one transaction."""

    def __init__(self, engine: LocalFile, name: str) -> None:
        self.engine = engine
        self.name = name

    def beneath(self, client: Any) -> Any:
        """The mongomock object this handle stands for in ``client``."""
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in CURSORS:
            return functools.partial(LocalCursor, self, name)
        if name in _OPTIONS:
            with self.engine.transaction() as client:
                return getattr(self.beneath(client), name)
        write = name not in _READS

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.engine.transaction(write=write) as client:
                return getattr(self.beneath(client), name)(*args, **kwargs)

        return call


class LocalCollection(LocalHandle):
    """A pymongo-``Collection``-shaped handle on one collection of a :class:`LocalFile`."""

    def __init__(self, engine: LocalFile, name: str) -> None:
        super().__init__(engine, name)
        self.full_name = f"{engine.db_name}.{name}"

    def beneath(self, client: Any) -> Any:
        return client[self.engine.db_name][self.name]

    @property
    def database(self) -> LocalDatabase:
        return LocalDatabase(self.engine)

    def __repr__(self) -> str:
        return f"LocalCollection({str(self.engine.path)!r}, {self.name!r})"


class LocalDatabase(LocalHandle):
    """The ``database`` of a :class:`LocalCollection` (what the store's drivers ask of it)."""

    def __init__(self, engine: LocalFile) -> None:
        super().__init__(engine, engine.db_name)

    def beneath(self, client: Any) -> Any:
        return client[self.name]

    @property
    def client(self) -> Any:
        return self.engine.client

    def __getitem__(self, name: str) -> LocalCollection:
        return LocalCollection(self.engine, name)

    def get_collection(self, name: str, **_: Any) -> LocalCollection:
        return LocalCollection(self.engine, name)

    def create_collection(self, name: str, **kwargs: Any) -> LocalCollection:
        with self.engine.transaction(write=True) as client:
            client[self.name].create_collection(name, **kwargs)
        return LocalCollection(self.engine, name)


_ENGINES: dict[tuple[str, str], LocalFile] = {}
_ENGINES_LOCK = threading.Lock()


def open_local(path: str | os.PathLike[str] | None, db_name: str) -> LocalFile:
    """The engine for ``(directory, db)``: one per process, so its stores share one lock and one copy."""
    directory = (Path(path).expanduser() if path is not None else default_data_dir()).absolute()
    key = (str(directory), db_name)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = LocalFile(directory, db_name)
        return engine
