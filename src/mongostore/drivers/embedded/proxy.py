"""pymongo-shaped handles on a :class:`~mongostore.drivers.embedded.file.LocalFile`: every call one transaction.

``LocalCollection`` / ``LocalDatabase`` stand where the sync driver expects a pymongo
``Collection`` / ``Database``; a ``find`` cursor records its options and runs the query
(in a transaction) on its first read. ``open_local`` keeps one engine per
``(directory, db)`` in a process, so its stores share one lock and one copy.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mongostore.core.codec import vectors_name
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.paths import default_data_dir

_COLLECTION_READS = frozenset(
    {
        "find_one",
        "count_documents",
        "estimated_document_count",
        "distinct",
        "index_information",
        "list_indexes",
        "list_search_indexes",
        "aggregate",
    }
)
_COLLECTION_WRITES = frozenset(
    {
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "bulk_write",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
        "create_index",
        "create_indexes",
        "drop_index",
        "drop_indexes",
        "drop",
        "create_search_index",
        "update_search_index",
    }
)


def _materialize(value: Any) -> Any:
    """Command cursors (aggregate, list_indexes) read inside the transaction."""
    if hasattr(value, "__next__") and not isinstance(value, dict):
        return _ListCursor(list(value))
    return value


class _ListCursor:
    """A cursor over results read already: iterable, and ``to_list`` for the async wrapper."""

    def __init__(self, docs: list[Any]) -> None:
        self._docs = docs
        self._it = iter(docs)

    def __iter__(self) -> _ListCursor:
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        self._it = iter(())

    def to_list(self, length: int | None = None) -> list[Any]:
        rest = list(self._it)
        return rest if length is None else rest[:length]


class _Cursor:
    """``find``'s cursor: options are recorded; the first read runs the query in a transaction."""

    def __init__(self, engine: LocalFile, coll: LocalCollection, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self._engine = engine
        self._coll = coll
        self._args = args
        self._kwargs = kwargs
        self._chain: list[tuple[str, tuple[Any, ...]]] = []
        self._it: Iterator[Any] | None = None

    def _option(self, name: str, *args: Any) -> _Cursor:
        self._chain.append((name, args))
        return self

    def sort(self, *args: Any) -> _Cursor:
        return self._option("sort", *args)

    def skip(self, *args: Any) -> _Cursor:
        return self._option("skip", *args)

    def limit(self, *args: Any) -> _Cursor:
        return self._option("limit", *args)

    def batch_size(self, *args: Any) -> _Cursor:
        return self

    def _run(self) -> Iterator[Any]:
        if self._it is None:
            with self._engine.transaction() as client:
                cur = client[self._engine.db_name][self._coll.name].find(*self._args, **self._kwargs)
                for name, args in self._chain:
                    cur = getattr(cur, name)(*args)
                self._it = iter(list(cur))
        return self._it

    def __iter__(self) -> _Cursor:
        return self

    def __next__(self) -> Any:
        return next(self._run())

    def close(self) -> None:
        self._it = iter(())

    def to_list(self, length: int | None = None) -> list[Any]:
        rest = list(self._run())
        return rest if length is None else rest[:length]


class LocalCollection:
    """A pymongo-``Collection``-shaped handle on one collection of a :class:`LocalFile`."""

    def __init__(self, engine: LocalFile, name: str) -> None:
        self._engine = engine
        self.name = name
        self.full_name = f"{engine.db_name}.{name}"

    @property
    def engine(self) -> LocalFile:
        return self._engine

    @property
    def database(self) -> LocalDatabase:
        return LocalDatabase(self._engine)

    def find(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._engine, self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        write = name in _COLLECTION_WRITES
        if not write and name not in _COLLECTION_READS:
            with self._engine.transaction() as client:
                return getattr(client[self._engine.db_name][self.name], name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._engine.transaction(write=write) as client:
                return _materialize(getattr(client[self._engine.db_name][self.name], name)(*args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"LocalCollection({str(self._engine.path)!r}, {self.name!r})"


class LocalDatabase:
    """The ``database`` of a :class:`LocalCollection` (what the store's drivers ask of it)."""

    def __init__(self, engine: LocalFile) -> None:
        self._engine = engine
        self.name = engine.db_name

    @property
    def engine(self) -> LocalFile:
        return self._engine

    @property
    def client(self) -> Any:
        return self._engine.client

    def __getitem__(self, name: str) -> LocalCollection:
        return LocalCollection(self._engine, name)

    def get_collection(self, name: str, **_: Any) -> LocalCollection:
        return LocalCollection(self._engine, name)

    def list_collection_names(self, **kwargs: Any) -> list[str]:
        with self._engine.transaction() as client:
            return list(client[self.name].list_collection_names(**kwargs))

    def create_collection(self, name: str, **kwargs: Any) -> LocalCollection:
        with self._engine.transaction(write=True) as client:
            client[self.name].create_collection(name, **kwargs)
        return LocalCollection(self._engine, name)

    def drop_collection(self, name: str, **kwargs: Any) -> Any:
        with self._engine.transaction(write=True) as client:
            return client[self.name].drop_collection(name, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        with self._engine.transaction() as client:
            return client[self.name].command(*args, **kwargs)


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


def local_collections(
    path: str | os.PathLike[str] | None, db_name: str, collection_name: str
) -> tuple[LocalCollection, LocalCollection]:
    """The items collection and its ``_vectors`` sidecar in the local store at ``path``."""
    engine = open_local(path, db_name)
    return LocalCollection(engine, collection_name), LocalCollection(engine, vectors_name(collection_name))
