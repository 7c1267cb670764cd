"""The persistent embedded store: mongomock's data kept in a file, safe across processes.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the CLI without ``--uri`` run
on it. One database is one file, ``<dir>/<db>.bson``: a header document, then for each
collection a section document (name, document count, index definitions) followed by
its documents, then a trailer document counting the sections and documents, all BSON
(``bson.decode_file_iter`` reads it back; ``_id`` strings holding NUL, dates and
float32 vectors round-trip exactly). The trailer (format version 2) is what tells a
whole file from one cut at a document boundary; version 1 files (no trailer) are still
read, and the next save writes version 2.

A file that is not whole (empty, shorter than a header, without the store's header,
cut anywhere, or garbage) raises :class:`DamagedStoreFileError`, naming the file and
how to move it aside; it is never read as an empty or smaller store and never
overwritten. Temporary files left by killed writers (``<db>.bson.tmp-<pid>`` of a
process that no longer runs) are removed when an engine first takes the lock, and
again after each of its saves.

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
A save the disk refuses (full, a file-size limit, a read-only directory) raises, and
the unsaved changes are dropped: the next call reloads the file, so every read answers
what the file holds and a later save never writes what was reported failed.

``atransaction()`` is the same transaction for async code: the lock, the file I/O and
every engine call run on one thread per engine (``run``), never on the event loop.

This is a development default, not a database: each save rewrites the whole file
(about 1.5 kB per item with a 384-dim vector), and every query scans in Python as
mongomock does. Run on MongoDB for anything real.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from datetime import timezone
from pathlib import Path
from typing import IO, Any, TypeVar

import bson
from bson.codec_options import CodecOptions

from mongostore.drivers.embedded.paths import check_db_name
from mongostore.drivers.mongomock_compat import new_client
from mongostore.errors import DamagedStoreFileError

FORMAT = "mongostore-embedded"
#: 2: a trailer ends the file (``{"end": FORMAT, "collections": n, "documents": n}``); 1: none.
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=timezone.utc)
_TMP_MARK = ".tmp-"
_T = TypeVar("_T")


# --------------------------------------------------------------------------- the disk (I/O edge)
# Every write of a save goes through these three: tests inject faults here, one call at a time.


def _open_for_write(path: Path) -> IO[bytes]:
    return open(path, "wb")


def _fsync(fd: int) -> None:
    os.fsync(fd)


def _replace(src: Path, dst: Path) -> None:
    os.replace(src, dst)


_Signature = tuple[int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    """What tells one file from another at one path: inode, size, modification time."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (on Windows only our own pid is known to)."""
    if pid == os.getpid():
        return True
    if sys.platform == "win32":  # pragma: no cover - os.kill(pid, 0) would terminate it there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as someone else
        return True
    return True


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
        #: The header token and the identity of the file whose data we hold (None: no file).
        self._held: tuple[str, _Signature] | None = None
        self._client: Any = None
        self._standin: Any = None  # client_nowait's empty client, before the data is loaded
        self._swept = False  # stale temporary files looked for since the last save
        self._async_open = 0  # atransactions entered (on the engine's thread) and not yet closed
        # The thread of async callers (started on first use, idle threads cost nothing).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mongostore-local-{db_name}")
        self._async_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
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

    @property
    def loaded_client(self) -> Any:
        """The mongomock client if the data is loaded, else None (no I/O: safe on an event loop)."""
        return self._client

    def client_nowait(self) -> Any:
        """The loaded mongomock client, else an empty one of the same kind: what the store's
        client is (its type), never what it holds. No I/O: safe on an event loop."""
        client = self._client
        if client is not None:
            return client
        if self._standin is None:
            self._standin = self._new_client()
        return self._standin

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Any]:
        """Hold the lock: load if the file changed, run, and save at the outermost exit if written.

        A failed save raises and drops the changes it could not save (the next transaction
        reloads the file): what this process answers is what the file holds.
        """
        if not self._thread_lock.acquire(blocking=False):
            if self._async_open and _on_event_loop():
                raise RuntimeError(
                    f"a synchronous call to the local store {self.path} on the event loop would wait forever "
                    "for an async call of the same store that this loop runs: use the async store's methods "
                    "there, or make the synchronous call from a thread (asyncio.to_thread)"
                )
            self._thread_lock.acquire()
        try:
            if self._depth == 0:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._lock.acquire(self._waiting)
                try:
                    self._sweep_stale_temporaries()
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
                            try:
                                self._save()
                            except BaseException:
                                self._forget_unsaved()
                                raise
                    finally:
                        self._lock.release()
        finally:
            self._thread_lock.release()

    def _forget_unsaved(self) -> None:
        """Drop the in-memory data: the next transaction reloads what the file holds."""
        self._client = None
        self._held = None
        self._dirty = False

    def _waiting(self) -> None:
        if self.on_wait is not None:
            self.on_wait(f"waiting for another process using {self.path}")

    # ------------------------------------------------------------------ async: one thread per engine

    async def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` on this engine's own thread, awaited: the event loop never
        waits for the lock or the disk. One thread, so a transaction it holds is its own."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    @asynccontextmanager
    async def atransaction(self, *, write: bool = False) -> AsyncIterator[None]:
        """``transaction()`` for async code: taken, held and saved on the engine's thread.

        Engine calls made inside it through ``run`` (``AsyncCollection`` does) join it.
        Coroutines take it one at a time (an asyncio lock per loop, never the thread
        lock on the loop); a nested ``atransaction`` in the same task, or in a task it
        started, joins the outer one.
        """
        held = _HELD.get()
        if self in held:
            yield
            return
        loop = asyncio.get_running_loop()
        gate = self._async_locks.get(loop)
        if gate is None:
            gate = self._async_locks[loop] = asyncio.Lock()
        async with gate:
            self._async_open += 1
            try:
                stack = ExitStack()
                entered = loop.run_in_executor(self._executor, stack.enter_context, self.transaction(write=write))
                try:
                    await asyncio.shield(entered)
                except asyncio.CancelledError:
                    # The thread still takes the transaction: release it right after (one thread, in order).
                    self._executor.submit(stack.close)
                    raise
                token = _HELD.set(held | {self})
                try:
                    yield
                finally:
                    _HELD.reset(token)
                    await asyncio.shield(self.run(stack.close))
            finally:
                self._async_open -= 1

    def in_atransaction(self) -> bool:
        """True inside this engine's ``atransaction`` (the data is loaded and locked for us)."""
        return self in _HELD.get()

    # ------------------------------------------------------------------ load / save

    def _damaged(self, reason: str) -> DamagedStoreFileError:
        return DamagedStoreFileError(self.path, reason)

    def _read_token(self) -> tuple[str, _Signature] | None:
        """The token of the file's header, and the file's identity (inode, size, mtime); None
        when there is no file. Anything but a store file's header (empty, short, someone
        else's BSON) raises ``DamagedStoreFileError``."""
        try:
            with open(self.path, "rb") as fh:
                signature = _signature(os.fstat(fh.fileno()))
                head = fh.read(4)
                if len(head) < 4:
                    raise self._damaged(f"{len(head)} bytes, shorter than a header")
                size = int.from_bytes(head, "little")
                if size < 5 or size > 1 << 20:
                    raise self._damaged("it does not start with a header document")
                body = fh.read(size - 4)
                if len(body) < size - 4:
                    raise self._damaged("cut inside its header")
                doc = bson.decode(head + body, codec_options=_CODEC)
        except FileNotFoundError:
            return None
        except (bson.errors.BSONError, ValueError) as exc:
            raise self._damaged(f"its header is unreadable: {exc}") from None
        except OSError as exc:
            raise RuntimeError(f"cannot read the local store file {self.path}: {exc}") from None
        token = doc.get("token")
        if doc.get("format") != FORMAT or not isinstance(token, str):
            raise self._damaged(f"its first document is not a mongostore header (format {doc.get('format')!r})")
        if doc.get("version") not in _READABLE_VERSIONS:
            raise RuntimeError(
                f"the local store file {self.path} has format version {doc.get('version')!r}; this mongostore "
                f"reads versions {', '.join(map(str, _READABLE_VERSIONS))}: upgrade mongostore to open it"
            )
        return token, signature

    def _refresh(self) -> None:
        """Reload unless the file is the one we hold: same header token, same inode, size and
        mtime (a file replaced or cut behind our back is read again, and refused if damaged)."""
        found = self._read_token()
        if self._client is not None and found == self._held:
            return
        self._client = self._load() if found is not None else self._new_client()
        self._held = found
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
                version = header.get("version")
                sections = documents = 0
                trailer: dict[str, Any] | None = None
                for section in docs:
                    if version != 1 and "end" in section:
                        trailer = section
                        break
                    coll = db.create_collection(section["collection"])
                    count = int(section["count"])
                    _restore(coll, [next(docs) for _ in range(count)])
                    sections += 1
                    documents += count
                    for index in section.get("indexes", []):
                        coll.create_index(
                            [(k, v) for k, v in index["key"]],
                            **{k: v for k, v in index.items() if k not in ("key", "v", "ns")},
                        )
                if version != 1:
                    if trailer is None:
                        raise self._damaged("it ends before its trailer: cut short")
                    if trailer.get("end") != FORMAT or (trailer.get("collections"), trailer.get("documents")) != (
                        sections,
                        documents,
                    ):
                        raise self._damaged(
                            f"its trailer counts {trailer.get('collections')!r} collections and "
                            f"{trailer.get('documents')!r} documents, the file holds {sections} and {documents}"
                        )
                    if next(docs, None) is not None:
                        raise self._damaged("it goes on after its trailer")
        except StopIteration:
            raise self._damaged("cut short inside a collection") from None
        except (bson.errors.BSONError, KeyError, TypeError, ValueError) as exc:
            raise self._damaged(f"unreadable: {exc!r}") from None
        self.loads += 1
        return client

    def _save(self) -> None:
        token = secrets.token_hex(8)
        db = self._client[self.db_name]
        tmp = self.path.with_name(f"{self.path.name}{_TMP_MARK}{os.getpid()}")
        try:
            with _open_for_write(tmp) as fh:
                fh.write(bson.encode({"format": FORMAT, "version": FORMAT_VERSION, "token": token}))
                sections = documents = 0
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
                    sections += 1
                    documents += len(docs)
                fh.write(bson.encode({"end": FORMAT, "collections": sections, "documents": documents}))
                fh.flush()
                _fsync(fh.fileno())
            _replace(tmp, self.path)
            signature = _signature(os.stat(self.path))
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
        self._held = (token, signature)
        self._dirty = False
        self._swept = False  # a writer killed since then is looked for at the next lock
        self.saves += 1

    def _sweep_stale_temporaries(self) -> None:
        """Remove ``<db>.bson.tmp-<pid>`` files of writers that no longer run: at an engine's
        first lock, then at its first lock after each of its saves (a directory listing).

        Called with the lock held: no writer of this file is between its write and its
        replace, so a temporary file of a process that is gone is a killed writer's.
        """
        if self._swept:
            return
        self._swept = True
        prefix = f"{self.path.name}{_TMP_MARK}"
        try:
            names = [entry.name for entry in os.scandir(self.directory) if entry.name.startswith(prefix)]
        except OSError:
            return
        for name in names:
            pid = name[len(prefix) :]
            if pid.isdigit() and not _pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_HELD: ContextVar[frozenset[LocalFile]] = ContextVar("mongostore_local_transactions", default=frozenset())


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
