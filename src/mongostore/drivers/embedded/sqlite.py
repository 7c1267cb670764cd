"""One database of the local store in one SQLite file, ``<dir>/<db>.sqlite`` (Python's ``sqlite3``).

Each collection is a table ``(id PRIMARY KEY, doc BLOB)`` holding its documents as BSON, a few
top-level fields again in ``inc`` (what a covered read returns without decoding the document), one
column per indexed field (``sqlquery``: its value when plain, for SQL to select and sort by), with an
SQLite index per MongoDB index. Three small tables describe them: ``_collections``, ``_indexes`` and
``_columns`` (with, per column, how many documents hold a value that is not plain there).

Transactions come from SQLite: WAL, so readers in other processes are not blocked by a writer, and
``synchronous=NORMAL`` (a committed write survives the writer being killed; a power cut may lose the
last ones, never the file). Each thread has its own connection. ``unit()``, held by the drivers around
a whole store operation, makes its writes one transaction: its first write takes the write lock
(``BEGIN IMMEDIATE``) until the operation ends, so a batch's items and vectors are committed together
(an interrupt rolls it back). Reads before it take no lock and see the latest committed state, as a
server's separate reads do (WAL: a writer in another process never blocks them). A call outside a unit is a
transaction of its own. ``atransaction`` / ``run`` are the same for async code, on one thread per engine.

The change log (``_changes``, read by ``changelog.LocalChangeStream``): once a collection has been watched
(``_collections.changes``), each write to it adds a row in the same transaction (sequence number, op,
document key, post-image), so a watcher in any process sees each committed change once, in commit order.
The log keeps the last ``CHANGE_LOG_KEEP`` changes of the file.

Expired documents (a TTL index's field past its deadline) are deleted when a read starts (at most once
a second per process, and never waiting for another writer), as MongoDB's TTL monitor would within a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from mongostore.drivers.embedded.paths import check_db_name
from mongostore.drivers.embedded.sqlquery import date_key, date_string
from mongostore.errors import DamagedStoreFileError

#: A new file's page size: 8 KB holds several 2 KB vector documents per page of a rowid table (4 KB held
#: one) and an item up to 2 KB in place in its clustered table (``collection._table_sql``).
PAGE_SIZE = 8192
#: ``PRAGMA application_id`` of a local store file ("MSTO"), and its format version (``user_version``).
APPLICATION_ID = 0x4D53544F
FORMAT_VERSION = 1
SUFFIX = ".sqlite"
#: How long a writer waits for another one's transaction, in seconds.
LOCK_WAIT = 60.0
#: Seconds between two looks for expired documents (MongoDB's TTL monitor runs every 60).
EXPIRY_CHECK = 1.0
#: The change log keeps this many of the newest changes (of every watched collection of the file)...
CHANGE_LOG_KEEP = 10_000
#: ...pruned by every write whose sequence number is a multiple of this.
CHANGE_LOG_PRUNE_EVERY = 256
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_T = TypeVar("_T")

# ``seq`` (the resume token) is the rowid: the next is the largest + 1, never used twice because pruning
# keeps the newest rows (no AUTOINCREMENT: its sqlite_sequence row would be one more page per commit).
_CHANGES_SCHEMA = """
CREATE TABLE IF NOT EXISTS _changes (seq INTEGER PRIMARY KEY, collection TEXT NOT NULL,
                                     op TEXT NOT NULL, id NOT NULL, doc BLOB, fields TEXT, at INTEGER NOT NULL);
"""

_SCHEMA = (
    """
CREATE TABLE _collections (name TEXT PRIMARY KEY, tbl TEXT NOT NULL UNIQUE, include TEXT NOT NULL DEFAULT '[]',
                           changes INTEGER NOT NULL DEFAULT 0);
CREATE TABLE _indexes (collection TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,
                       PRIMARY KEY (collection, name));
CREATE TABLE _columns (collection TEXT NOT NULL, field TEXT NOT NULL, col TEXT NOT NULL,
                       nonplain INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (collection, field));
"""
    + _CHANGES_SCHEMA
)


@dataclass
class Table:
    """A collection as this transaction sees it: its table, columns (field -> column), the columns that
    hold only plain values (usable by SQL), its indexes (name -> spec), TTL fields (field -> seconds), and
    the top-level fields also kept in the row's ``inc`` column (read without decoding the document), and
    whether its writes are logged (``changes``)."""

    name: str
    tbl: str
    include: tuple[str, ...] = ()
    columns: dict[str, str] = field(default_factory=dict)
    usable: dict[str, str] = field(default_factory=dict)
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)
    ttl: dict[str, float] = field(default_factory=dict)
    changes: bool = False  # its writes go to the change log (it has been watched)


class _Thread:
    """A thread's connection and where its transaction stands."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.depth = 0  # units entered
        self.txn: str | None = None  # None, "read" (a snapshot of one read) or "write" (the unit's write lock)
        self.tables: dict[str, Table] | None = None  # the catalogue as last read...
        self.data_version = -1  # ...and PRAGMA data_version then (it moves when another connection commits)


class LocalDB:
    """One database of the local store: its file, a connection per thread, its transactions."""

    def __init__(self, directory: str | os.PathLike[str], db_name: str) -> None:
        self.directory = Path(directory).expanduser()
        self.db_name = check_db_name(db_name)
        self.path = self.directory / f"{db_name}{SUFFIX}"
        self._local = threading.local()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mongostore-local-{db_name}")
        self._async_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._expiry_due = 0.0  # time.monotonic() of the next look for expired documents
        self._async_units = 0  # atransactions entered and not yet ended
        #: Called once when another process holds the write lock and this one waits for it.
        self.on_wait: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ connections

    def damaged(self, reason: str) -> DamagedStoreFileError:
        return DamagedStoreFileError(self.path, reason)

    def translate_error(self, exc: sqlite3.Error) -> Exception:
        """A corrupt file as ``DamagedStoreFileError``, anything else as it is."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in str(exc) or "not a database" in str(exc):
            return self.damaged(str(exc))
        return exc

    def _thread(self) -> _Thread:
        state: _Thread | None = getattr(self._local, "state", None)
        if state is None:
            conn = self._connect()
            state = self._local.state = _Thread(conn)
            # Closed when its thread ends or the engine goes (the thread-local state goes with them).
            weakref.finalize(state, conn.close)
        return state

    def _connect(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)  # an OSError names the directory
        try:
            conn = sqlite3.connect(self.path, timeout=LOCK_WAIT, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise RuntimeError(f"cannot open the local store file {self.path}: {exc}") from None
        conn.create_function("mongo_date_string", 2, date_string, deterministic=True)
        try:
            self._prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self.translate_error(exc) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Check the file is a local store of a version this code reads (creating it when empty)."""
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        if app == 0:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # (a new file's; no effect on one with tables)
            conn.execute("BEGIN IMMEDIATE")
            try:
                app = conn.execute("PRAGMA application_id").fetchone()[0]
                tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if app == 0 and tables == 0:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
                    app = APPLICATION_ID
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        if app != APPLICATION_ID:
            raise self.damaged(f"a SQLite database of another application (application_id {app:#x})")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > FORMAT_VERSION:
            raise RuntimeError(
                f"the local store file {self.path} has format version {version}; this mongostore reads "
                f"version {FORMAT_VERSION}: upgrade mongostore to open it"
            )
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_changes'").fetchone():
            self._add_change_log(conn)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")

    @staticmethod
    def _add_change_log(conn: sqlite3.Connection) -> None:
        """A file made before the change log gets it (the same format version: older code reads the file
        as before, and writes it without logging, so a watcher misses only what older code writes)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            columns = [row[1] for row in conn.execute("PRAGMA table_info(_collections)")]
            if "changes" not in columns:
                conn.execute("ALTER TABLE _collections ADD COLUMN changes INTEGER NOT NULL DEFAULT 0")
            conn.execute(_CHANGES_SCHEMA)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def connect(self) -> sqlite3.Connection:
        """A connection of its own (not the thread's), for a reader that keeps its own snapshot state:
        a change stream. The caller closes it."""
        return self._connect()

    def close(self) -> None:
        """Close this thread's connection (it reconnects on its next use); other threads' close with them."""
        state: _Thread | None = getattr(self._local, "state", None)
        if state is not None and state.depth == 0:
            self._end(state, commit=False)
            with contextlib.suppress(sqlite3.Error):
                state.conn.close()
            self._local.state = None

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def unit(self) -> Iterator[None]:
        """One store operation: one transaction, committed at its end. Also when the operation raises an
        ``Exception``: each write request it made is whole (``bulk_write``), and the store reports a
        batch's failed writes by raising after the others landed, as on MongoDB. An interrupt
        (``KeyboardInterrupt``, a cancelled task) rolls it back."""
        state = self._thread()
        state.depth += 1
        try:
            yield
        except Exception:
            if state.depth == 1:
                self._end(state, commit=True)
            raise
        except BaseException:
            if state.depth == 1:
                self._end(state, commit=False)
            raise
        else:
            if state.depth == 1:
                self._end(state, commit=True)
        finally:
            state.depth -= 1

    @contextmanager
    def reading(self) -> Iterator[_Thread]:
        """The thread's connection for a read: each statement sees the latest committed state (as each
        read of a server does), or, after the unit's first write, the unit's own writes too."""
        state = self._thread()
        if state.txn is None:
            self._expire(state)
        yield state

    @contextmanager
    def snapshot(self, state: _Thread) -> Iterator[None]:
        """Several statements of one read seeing one state (a read transaction), unless a write holds one."""
        if state.txn is not None:
            yield
            return
        self._exec(state, "BEGIN")
        state.txn = "read"
        try:
            yield
        finally:
            self._end(state, commit=True)

    @contextmanager
    def writing(self) -> Iterator[_Thread]:
        """The write lock: held from the unit's first write to its end, or for this call."""
        state = self._thread()
        own = state.txn is None and state.depth == 0
        if state.txn is None:
            self._begin_write(state)
        try:
            yield state
        except BaseException:
            if own:
                self._end(state, commit=False)
            raise
        if own:
            self._end(state, commit=True)

    def _begin_write(self, state: _Thread) -> None:
        if self._async_units and _on_event_loop():  # (the engine's own thread runs no loop)
            raise RuntimeError(
                f"a synchronous write to the local store {self.path} on the event loop would wait forever for "
                "an async operation of the same store that this loop runs: use the async store's methods "
                "there, or make the synchronous call from a thread (asyncio.to_thread)"
            )
        try:
            if not self._take_write_lock(state):
                if self.on_wait is not None:
                    self.on_wait(f"waiting for another process writing {self.path}")
                state.conn.execute("BEGIN IMMEDIATE")  # waits up to LOCK_WAIT (the connection's busy timeout)
        except sqlite3.Error as exc:
            raise self.translate_error(exc) from None
        state.txn = "write"

    @staticmethod
    def _take_write_lock(state: _Thread) -> bool:
        """``BEGIN IMMEDIATE`` if no other connection writes now, without waiting; False if one does."""
        conn = state.conn
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT * 1000)}")
        return True

    def _exec(self, state: _Thread, sql: str) -> None:
        try:
            state.conn.execute(sql)
        except sqlite3.Error as exc:
            raise self.translate_error(exc) from None

    def _end(self, state: _Thread, commit: bool) -> None:
        txn, state.txn = state.txn, None
        if txn is None:
            return
        if commit:
            try:
                state.conn.execute("COMMIT")
                return
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    state.conn.execute("ROLLBACK")
                raise self.translate_error(exc) from None
        with contextlib.suppress(sqlite3.Error):
            state.conn.execute("ROLLBACK")

    # ------------------------------------------------------------------ the catalogue

    def tables(self, state: _Thread) -> dict[str, Table]:
        """Every collection's ``Table``: read again when another connection committed since (SQLite's
        ``data_version``) or this one changed the catalogue (``state.tables = None``)."""
        conn = state.conn
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if state.tables is None or version != state.data_version:
            state.data_version = version
            found = {
                name: Table(name, tbl, tuple(json.loads(inc)), changes=bool(logged))
                for name, tbl, inc, logged in conn.execute("SELECT name, tbl, include, changes FROM _collections")
            }
            for coll, fld, col, nonplain in conn.execute("SELECT collection, field, col, nonplain FROM _columns"):
                if coll in found:
                    found[coll].columns[fld] = col
                    if not nonplain:
                        found[coll].usable[fld] = col
            for coll, name, spec in conn.execute("SELECT collection, name, spec FROM _indexes"):
                if coll in found:
                    parsed = json.loads(spec)
                    found[coll].indexes[name] = parsed
                    if parsed.get("expireAfterSeconds") is not None and len(parsed["key"]) == 1:
                        found[coll].ttl[parsed["key"][0][0]] = float(parsed["expireAfterSeconds"])
            state.tables = found
        return state.tables

    def _expire(self, state: _Thread) -> None:
        """Delete documents past a TTL index's deadline (MongoDB's TTL monitor), in a write of its own;
        looked for at most once per ``EXPIRY_CHECK`` seconds per process."""
        now_mono = time.monotonic()
        if now_mono < self._expiry_due:
            return
        self._expiry_due = now_mono + EXPIRY_CHECK
        try:
            tables = self.tables(state)
            now = datetime.now(timezone.utc)
            due = []
            for t in tables.values():
                for fld, seconds in t.ttl.items():
                    col = t.columns.get(fld)
                    if col is None:
                        continue
                    cutoff = date_key(now - timedelta(seconds=seconds))
                    where = f'"{col}" >= X\'09\' AND "{col}" <= ?'
                    if state.conn.execute(f'SELECT 1 FROM "{t.tbl}" WHERE {where} LIMIT 1', (cutoff,)).fetchone():
                        due.append((t.name, where, cutoff))
        except sqlite3.Error as exc:
            raise self.translate_error(exc) from None
        if not due:
            return
        try:  # never waits: a read is not held up by another process's write (it deletes next time)
            taken = self._take_write_lock(state)
        except sqlite3.Error as exc:
            raise self.translate_error(exc) from None
        if not taken:
            self._expiry_due = 0.0
            return
        state.txn = "write"
        try:
            for name, where, cutoff in due:
                table = self.tables(state).get(name)
                if table is not None:
                    delete_rows(state, table, where, [cutoff])
        except BaseException:
            self._end(state, commit=False)
            raise
        self._end(state, commit=True)

    # ------------------------------------------------------------------ async: one thread per engine

    async def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` on this engine's own thread, awaited: the event loop never waits for
        the lock or the disk. One thread, so the transaction an ``atransaction`` holds is its own."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    @asynccontextmanager
    async def atransaction(self) -> AsyncIterator[None]:
        """``unit()`` for async code, entered and ended on the engine's thread; engine calls made inside
        it through ``run`` join it. Coroutines take it one at a time (an asyncio lock per loop); a nested
        ``atransaction`` in the same task, or in a task it started, joins the outer one."""
        held = _HELD.get()
        if self in held:
            yield
            return
        loop = asyncio.get_running_loop()
        gate = self._async_locks.get(loop)
        if gate is None:
            gate = self._async_locks[loop] = asyncio.Lock()
        async with gate:
            self._async_units += 1
            try:
                async with self._unit_on_engine_thread(loop, held):
                    yield
            finally:
                self._async_units -= 1

    @asynccontextmanager
    async def _unit_on_engine_thread(
        self, loop: asyncio.AbstractEventLoop, held: frozenset[LocalDB]
    ) -> AsyncIterator[None]:
        stack = ExitStack()
        entered = loop.run_in_executor(self._executor, stack.enter_context, self.unit())
        try:
            await asyncio.shield(entered)
        except asyncio.CancelledError:
            self._executor.submit(stack.close)  # the thread still enters it: end it right after
            raise
        token = _HELD.set(held | {self})
        failed: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _HELD.reset(token)
            if failed is None:
                await asyncio.shield(self.run(stack.close))
            else:
                exc_info = (type(failed), failed, failed.__traceback__)
                await asyncio.shield(self.run(stack.__exit__, *exc_info))

    def in_atransaction(self) -> bool:
        """True inside this engine's ``atransaction``."""
        return self in _HELD.get()


def count_nonplain(state: _Thread, table: Table, deltas: Mapping[str, int]) -> None:
    """Apply changes to the columns' counts of documents not plain there; a column that starts or stops
    having any changes what SQL may decide, so the catalogue is read again."""
    for fld, delta in deltas.items():
        if not delta:
            continue
        row = state.conn.execute(
            "UPDATE _columns SET nonplain = nonplain + ? WHERE collection = ? AND field = ? RETURNING nonplain",
            (delta, table.name, fld),
        ).fetchone()
        if row is not None and (row[0] == 0) != (row[0] - delta == 0):
            state.tables = None


def log_change(
    state: _Thread, table: Table, op: str, key: Any, doc: bytes | None = None, fields: str | None = None
) -> None:
    """Add one change of ``table`` to the change log, in the write's transaction (``key``: the ``id``
    column's value; ``doc``: the post-image as BSON; ``fields``: an update's changed top-level fields, as
    JSON), pruning the oldest now and then."""
    seq = state.conn.execute(
        "INSERT INTO _changes (collection, op, id, doc, fields, at) VALUES (?, ?, ?, ?, ?, ?)",
        (table.name, op, key, doc, fields, time.time_ns() // 1_000_000),
    ).lastrowid
    if seq is not None and seq % CHANGE_LOG_PRUNE_EVERY == 0:
        state.conn.execute("DELETE FROM _changes WHERE seq <= ?", (seq - CHANGE_LOG_KEEP,))


def delete_rows(state: _Thread, table: Table, where: str, params: Sequence[Any]) -> int:
    """Delete the rows ``where`` selects, keeping the not-plain counts (and logging each delete of a
    watched collection: the TTL monitor's deletes reach a watcher as deletes); how many went."""
    if table.changes:
        for (key,) in state.conn.execute(f'SELECT id FROM "{table.tbl}" WHERE {where}', list(params)).fetchall():
            log_change(state, table, "delete", key)
    deltas: dict[str, int] = {}
    for (np_fields,) in state.conn.execute(
        f'SELECT np FROM "{table.tbl}" WHERE ({where}) AND np IS NOT NULL', list(params)
    ).fetchall():
        for fld in json.loads(np_fields):
            deltas[fld] = deltas.get(fld, 0) - 1
    n = state.conn.execute(f'DELETE FROM "{table.tbl}" WHERE {where}', list(params)).rowcount
    count_nonplain(state, table, deltas)
    return int(n)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_HELD: ContextVar[frozenset[LocalDB]] = ContextVar("mongostore_local_transactions", default=frozenset())
