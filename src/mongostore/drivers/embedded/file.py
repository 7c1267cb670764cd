"""One database of the local store in one file, ``<dir>/<db>.bson``, safe across processes.

The file is BSON: a header (format, version, a token each save renews), then per collection a
section (name, document count, index definitions) and its documents, then a trailer counting
sections and documents (version 2: it tells a whole file from one cut at a document boundary;
version 1 files, without it, are still read). A file that is not whole raises
:class:`DamagedStoreFileError` and is never read as a smaller store nor overwritten.

Every call is one transaction (what MongoDB guarantees per operation): take ``<db>.lock``
(``flock``; ``msvcrt`` on Windows) and a thread lock; reload if another process saved since
(token, inode, size, mtime); run on the in-memory mongomock client; if it could have written,
save: write ``<db>.bson.tmp-<pid>``, fsync, ``os.replace`` (a reader sees the old file or the
new). Nested transactions save once, at the outermost. A save the disk refuses raises and
drops the unsaved changes (the next call reloads): what we answer is what the file holds.
``atransaction`` is the same for async code, on one thread per engine. A development default:
each save rewrites the whole file, and every query scans as mongomock does.
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
    if pid == os.getpid() or sys.platform == "win32":  # os.kill(pid, 0) would terminate it on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as someone else
        pass
    return True


def _lock(path: Path, on_wait: Callable[[], None]) -> IO[bytes]:
    """An exclusive advisory lock on ``path`` across processes (not reentrant): the open file holding it."""
    fh = open(path, "a+b")  # noqa: SIM115 - held until _unlock()
    try:
        if not _take(fh, blocking=False):
            on_wait()
            _take(fh, blocking=True)
    except BaseException:
        fh.close()
        raise
    return fh


def _take(fh: IO[bytes], blocking: bool) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        while True:
            try:
                msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not blocking:
                    return False
    else:
        import fcntl

        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True


def _unlock(fh: IO[bytes]) -> None:
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


class LocalFile:
    """One database of the local store: an in-memory mongomock client backed by one file."""

    def __init__(self, directory: str | os.PathLike[str], db_name: str) -> None:
        self.directory = Path(directory).expanduser()
        self.db_name = check_db_name(db_name)
        self.path = self.directory / f"{db_name}.bson"
        self._lock_path = self.directory / f"{db_name}.lock"
        self._lock_file: IO[bytes] | None = None
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

    @property
    def client(self) -> Any:
        """The mongomock client holding the data as last loaded (use inside a transaction)."""
        if self._client is None:
            with self.transaction():
                pass
        return self._client

    def client_nowait(self) -> Any:
        """The loaded mongomock client, else an empty one of the same kind: what the store's
        client is (its type), never what it holds. No I/O: safe on an event loop."""
        client = self._client
        if client is not None:
            return client
        if self._standin is None:
            self._standin = new_client()
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
                lock_file = _lock(self._lock_path, self._waiting)
                try:
                    self._sweep_stale_temporaries()
                    self._refresh()
                except BaseException:
                    _unlock(lock_file)
                    raise
                self._lock_file = lock_file
            self._depth += 1
            if write:
                self._dirty = True  # before the call: a partly applied bulk write is still a write
            try:
                yield self._client
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._close()
        finally:
            self._thread_lock.release()

    def _close(self) -> None:
        """Save if written, and unlock. A failed save drops the unsaved data: the next transaction reloads the file."""
        try:
            if self._dirty:
                self._save()
        except BaseException:
            self._client = self._held = None
            self._dirty = False
            raise
        finally:
            assert self._lock_file is not None
            _unlock(self._lock_file)
            self._lock_file = None

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
        self._client = self._load() if found is not None else new_client()
        self._held = found
        self._dirty = False

    def _load(self) -> Any:
        from mongomock.helpers import patch_datetime_awareness_in_document

        db = new_client()[self.db_name]
        sections = documents = 0
        trailer: dict[str, Any] | None = None
        try:
            with open(self.path, "rb") as fh:
                docs = bson.decode_file_iter(fh, codec_options=_CODEC)
                has_trailer = next(docs).get("version") != 1
                for section in docs:
                    if has_trailer and "end" in section:
                        trailer = section
                        break
                    coll = db.create_collection(section["collection"])
                    # Documents straight into mongomock's store, before the indexes: mongomock checks a
                    # unique index by a scan per insert (quadratic); the file's came from a store enforcing them.
                    store = coll._store
                    for _ in range(int(section["count"])):
                        doc = next(docs)
                        store[doc["_id"]] = patch_datetime_awareness_in_document(doc)  # type: ignore[no-untyped-call]
                        documents += 1
                    sections += 1
                    for index in section.get("indexes", []):
                        coll.create_index(
                            [(k, v) for k, v in index["key"]],
                            **{k: v for k, v in index.items() if k not in ("key", "v", "ns")},
                        )
                if has_trailer:
                    if trailer is None:
                        raise self._damaged("it ends before its trailer: cut short")
                    if trailer != {"end": FORMAT, "collections": sections, "documents": documents}:
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
        return db.client

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
                    docs = list(coll._store._documents.values())
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
