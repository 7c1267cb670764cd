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

from mongostore.drivers.embedded.paths import check_db_name
from mongostore.drivers.mongomock_compat import new_client

FORMAT = "mongostore-embedded"
FORMAT_VERSION = 1
_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=timezone.utc)


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
        return new_client()

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
