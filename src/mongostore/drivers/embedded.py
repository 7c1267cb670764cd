"""The persistent embedded store: mongomock's data kept in a file, safe across processes.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the CLI without ``--uri`` run
on it. One database is one file, ``<dir>/<db>.bson``: a header document, then for each
collection a section document (name and index definitions) followed by its documents,
all BSON (``bson.decode_file_iter`` reads it back; ``_id`` strings holding NUL, dates
and float32 vectors round-trip exactly).

Every collection call is one transaction (what MongoDB guarantees per operation):

1. take an exclusive lock on ``<dir>/<db>.lock`` (``fcntl.flock``; ``msvcrt`` on
   Windows), and a thread lock for the threads of this process;
2. reload the file if another process saved it since we last read it (the header
   carries a random token written by every save);
3. run the call on the in-memory mongomock client;
4. if it could have written, save: write ``<db>.bson.tmp-<pid>``, fsync, ``os.replace``
   over the file (atomic: a reader sees the old file or the new one, never half), then
   release the lock.

``transaction()`` holds the lock across many calls (the CLI wraps each command in
one): nested calls neither reload nor save, the outermost saves once. A process
killed before the save loses only that transaction's writes; the file is never torn.

This is a development default, not a database: each save rewrites the whole file
(about 1.5 kB per item with a 384-dim vector), and every query scans in Python as
mongomock does. Run on MongoDB for anything real.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timezone
from pathlib import Path
from typing import IO, Any

import bson
from bson.codec_options import CodecOptions

from mongostore.drivers.mongomock_compat import patch_mongomock

__all__ = [
    "ENV_DATA_DIR",
    "LOCAL_SCHEME",
    "AsyncCollection",
    "LocalFile",
    "default_data_dir",
    "local_collections",
    "open_local",
    "parse_local_uri",
]

#: The environment variable that moves the local store (``--data-dir`` on the command line).
ENV_DATA_DIR = "MONGOSTORE_DATA_DIR"
#: ``mongostore-local://`` (the default directory) or ``mongostore-local:///abs/path``.
LOCAL_SCHEME = "mongostore-local://"
FORMAT = "mongostore-embedded"
FORMAT_VERSION = 1
_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=timezone.utc)
_BAD_DB_CHARS = set('/\\. "$*<>:|?\x00')


def default_data_dir(environ: Any = None) -> Path:
    """Where the local store lives when nothing else is said.

    ``$MONGOSTORE_DATA_DIR`` if set; else ``$XDG_DATA_HOME/mongostore`` (an absolute
    ``XDG_DATA_HOME`` only, as the XDG spec says), else ``~/.local/share/mongostore``;
    on Windows ``%LOCALAPPDATA%\\mongostore``, on macOS ``~/Library/Application Support/mongostore``.
    """
    env = os.environ if environ is None else environ
    explicit = (env.get(ENV_DATA_DIR) or "").strip()
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "mongostore"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "mongostore"
    xdg = (env.get("XDG_DATA_HOME") or "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "mongostore"
    return Path.home() / ".local" / "share" / "mongostore"


def parse_local_uri(uri: str) -> Path | None:
    """``mongostore-local://`` -> the default directory; ``mongostore-local:///x/y`` -> ``/x/y``."""
    if not uri.startswith(LOCAL_SCHEME):
        raise ValueError(f"not a {LOCAL_SCHEME} URI: {uri!r}")
    rest = uri[len(LOCAL_SCHEME) :]
    if not rest:
        return None
    if not rest.startswith("/"):
        raise ValueError(
            f"{uri!r}: give an absolute path after {LOCAL_SCHEME} (e.g. {LOCAL_SCHEME}/home/me/data), "
            f"or nothing for the default directory"
        )
    return Path(rest)


def check_db_name(db_name: str) -> str:
    if not db_name or any(c in _BAD_DB_CHARS for c in db_name) or len(db_name) > 63:
        raise ValueError(
            f"database name {db_name!r} cannot be a local store file name: use letters, digits, - and _ (at most 63)"
        )
    return db_name


# --------------------------------------------------------------------------- file lock


class _FileLock:
    """An exclusive advisory lock on a file, across processes (not reentrant: see LocalFile)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None

    def acquire(self, on_wait: Callable[[], None] | None = None) -> None:
        fh = open(self.path, "a+b")  # noqa: SIM115 - held until release()
        try:
            if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
                import msvcrt

                try:
                    msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
                except OSError:
                    if on_wait is not None:
                        on_wait()
                    while True:
                        try:
                            msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                            break
                        except OSError:
                            continue
            else:
                import fcntl

                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if on_wait is not None:
                        on_wait()
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except BaseException:
            fh.close()
            raise
        self._fh = fh

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            if sys.platform == "win32":  # pragma: no cover
                import msvcrt

                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
            else:
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        finally:
            fh.close()


# --------------------------------------------------------------------------- the engine


class LocalFile:
    """One database of the local store: an in-memory mongomock client backed by one file."""

    def __init__(self, directory: str | os.PathLike[str], db_name: str) -> None:
        self.directory = Path(directory).expanduser()
        self.db_name = check_db_name(db_name)
        self.path = self.directory / f"{db_name}.bson"
        self._lock = _FileLock(self.directory / f"{db_name}.lock")
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._dirty = False
        self._token: str | None = None  # the header token of the data we hold
        self._client: Any = None
        #: Called once when another process holds the lock and we wait for it.
        self.on_wait: Callable[[str], None] | None = None
        self.saves = 0
        self.loads = 0

    @property
    def client(self) -> Any:
        """The mongomock client holding the data as last loaded (use inside a transaction)."""
        if self._client is None:
            with self.transaction():
                pass
        return self._client

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Any]:
        """Hold the lock: load if the file changed, run, and save at the outermost exit if written."""
        with self._thread_lock:
            if self._depth == 0:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._lock.acquire(self._waiting)
                try:
                    self._refresh()
                except BaseException:
                    self._lock.release()
                    raise
            self._depth += 1
            if write:
                self._dirty = True  # before the call: a partly applied bulk write is still a write
            try:
                yield self._client
            finally:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        if self._dirty:
                            self._save()
                    finally:
                        self._lock.release()

    def _waiting(self) -> None:
        if self.on_wait is not None:
            self.on_wait(f"waiting for another process using {self.path}")

    # ------------------------------------------------------------------ load / save

    def _read_token(self) -> str | None:
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(4)
                if len(head) < 4:
                    return None
                size = int.from_bytes(head, "little")
                doc = bson.decode(head + fh.read(size - 4), codec_options=_CODEC)
        except FileNotFoundError:
            return None
        except (OSError, bson.errors.BSONError, ValueError) as exc:
            raise RuntimeError(f"the local store file {self.path} is unreadable: {exc}") from None
        token = doc.get("token")
        return token if isinstance(token, str) else None

    def _refresh(self) -> None:
        token = self._read_token()
        if self._client is not None and token == self._token:
            return
        self._client = self._load() if token is not None else self._new_client()
        self._token = token
        self._dirty = False

    def _new_client(self) -> Any:
        import mongomock

        patch_mongomock()
        return mongomock.MongoClient(tz_aware=True)

    def _load(self) -> Any:
        client = self._new_client()
        db = client[self.db_name]
        try:
            with open(self.path, "rb") as fh:
                docs = bson.decode_file_iter(fh, codec_options=_CODEC)
                header = next(docs)
                if header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
                    raise RuntimeError(
                        f"{self.path} is not a mongostore local store (format {header.get('format')!r}, "
                        f"version {header.get('version')!r})"
                    )
                for section in docs:
                    coll = db.create_collection(section["collection"])
                    count = int(section["count"])
                    _restore(coll, [next(docs) for _ in range(count)])
                    for index in section.get("indexes", []):
                        coll.create_index(
                            [(k, v) for k, v in index["key"]],
                            **{k: v for k, v in index.items() if k not in ("key", "v", "ns")},
                        )
        except StopIteration:
            raise RuntimeError(f"the local store file {self.path} is truncated") from None
        except (bson.errors.BSONError, KeyError, TypeError, ValueError) as exc:
            raise RuntimeError(f"the local store file {self.path} is unreadable: {exc!r}") from None
        self.loads += 1
        return client

    def _save(self) -> None:
        token = secrets.token_hex(8)
        db = self._client[self.db_name]
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(bson.encode({"format": FORMAT, "version": FORMAT_VERSION, "token": token}))
                for name in sorted(db.list_collection_names()):
                    coll = db[name]
                    indexes = [
                        {"name": idx_name, **{k: (list(map(list, v)) if k == "key" else v) for k, v in info.items()}}
                        for idx_name, info in coll.index_information().items()
                        if idx_name != "_id_"
                    ]
                    docs = _documents(coll)
                    fh.write(bson.encode({"collection": name, "count": len(docs), "indexes": indexes}))
                    for doc in docs:
                        fh.write(bson.encode(doc, codec_options=_CODEC))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        if sys.platform != "win32":
            with contextlib.suppress(OSError):
                dir_fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        self._token = token
        self._dirty = False
        self.saves += 1


def _restore(coll: Any, docs: list[dict[str, Any]]) -> None:
    """Put saved documents back, before the indexes: mongomock checks a unique index by a
    scan per insert (quadratic); the file came from a store that enforced them already."""
    store = getattr(coll, "_store", None)
    if not isinstance(getattr(store, "_documents", None), dict):
        if docs:
            coll.insert_many(docs)
        return
    from mongomock import helpers

    for doc in docs:
        store[doc["_id"]] = helpers.patch_datetime_awareness_in_document(doc)  # type: ignore[index, no-untyped-call]


def _documents(coll: Any) -> list[Any]:
    """Every stored document, uncopied: mongomock 4.3's own store when it is there, else ``find``."""
    store = getattr(coll, "_store", None)
    docs = getattr(store, "_documents", None)
    if isinstance(docs, dict):
        return list(docs.values())
    return list(coll.find({}))


# --------------------------------------------------------------------------- pymongo-shaped proxies

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
    return LocalCollection(engine, collection_name), LocalCollection(engine, f"{collection_name}_vectors")


# --------------------------------------------------------------------------- async wrapper


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


# --------------------------------------------------------------------------- the stores


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

    The lock is a blocking one: while another process holds it (a long CLI import),
    the event loop waits. A development store: fine; a server is MongoDB.
    """
    items, vectors = local_collections(path, db_name, collection_name)
    return _async_local_store_class()(AsyncCollection(items), vectors_collection=AsyncCollection(vectors), **kwargs)


@functools.cache
def _async_local_store_class() -> Any:
    from mongostore.aio import AsyncMongoStore

    class LocalAsyncMongoStore(AsyncMongoStore):
        async def abatch(self, ops: Any) -> Any:
            with self.engine.transaction():
                return await super().abatch(ops)

        async def setup(self) -> None:
            with self.engine.transaction():
                await super().setup()

        async def status(self) -> Any:
            with self.engine.transaction():
                return await super().status()

        async def aaggregate(self, *args: Any) -> Any:
            with self.engine.transaction():
                return await super().aaggregate(*args)

        async def sweep_ttl(self) -> int:
            with self.engine.transaction():
                return await super().sweep_ttl()

        @property
        def engine(self) -> LocalFile:
            engine = _engine_of(self.collection)
            assert engine is not None
            return engine

    return LocalAsyncMongoStore
