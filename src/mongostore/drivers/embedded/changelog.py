"""Change streams on the local store: ``LocalChangeStream``, a pymongo-``ChangeStream``-shaped reader of
the file's change log (``sqlite``: the ``_changes`` table, written in each write's transaction).

Its events have MongoDB's shape (``_id`` the resume token, ``operationType``, ``ns``, ``documentKey``,
``fullDocument``, ``updateDescription`` by top-level field, ``wallTime``), so the store reads them as it
reads a server's. It polls: each look asks SQLite's ``PRAGMA data_version`` (which moves only when
another connection commits) and reads the log only then, every ``POLL_SECONDS`` at most. A resume point
the log no longer holds fails as MongoDB's does: ``OperationFailure`` code 286 (ChangeStreamHistoryLost).
"""

from __future__ import annotations

import collections
import json
import sqlite3
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from pymongo.errors import OperationFailure

from mongostore.drivers.embedded.sqlite import LocalDB

#: Seconds between two looks at the log while waiting for a change.
POLL_SECONDS = 0.05
#: Log rows read at once.
_BATCH = 500
HISTORY_LOST, INVALID_RESUME_TOKEN = 286, 260
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_POST_IMAGE_MODES = frozenset({"updateLookup", "whenAvailable", "required"})


class Watched(Protocol):
    """What a stream needs of the ``LocalCollection`` it watches (that module opens streams: no import back)."""

    engine: LocalDB
    name: str

    def log_changes(self) -> int: ...

    def decode_row(self, blob: bytes) -> dict[str, Any]: ...

    def id_of(self, key: Any) -> Any: ...

    def matches(self, filt: Any, doc: Any) -> bool: ...


def token_seq(token: Mapping[str, Any]) -> int:
    """The log's sequence number in a local resume token (``{"_local": n}``)."""
    seq = token.get("_local") if isinstance(token, Mapping) else None
    if type(seq) is not int or seq < 0:
        raise OperationFailure(
            f"{token!r} is not a resume token of the local store (those are {{'_local': <n>}})",
            code=INVALID_RESUME_TOKEN,
        )
    return seq


class LocalChangeStream:
    """The changes of one collection committed after a point, by any connection or process, in commit
    order (one writer at a time: a sequence number's order is the commits' order).

    ``pipeline``: ``$match`` stages only, applied to each event. ``full_document``: as pymongo's; an
    update's event holds its own post-image (exact, not looked up later) with any of ``updateLookup``,
    ``whenAvailable`` or ``required``. ``max_await_time_ms``: how long ``try_next`` waits for a change
    (default 1000; 0: one look).
    """

    def __init__(
        self,
        coll: Watched,
        pipeline: Sequence[Mapping[str, Any]] | None,
        full_document: str | None,
        start_after: Mapping[str, Any] | None,
        max_await_time_ms: int | None,
    ) -> None:
        self._filters = []
        for stage in pipeline or ():
            if list(stage) != ["$match"]:
                raise NotImplementedError(f"the local store's change streams take $match stages only, not {stage}")
            self._filters.append(stage["$match"])
        if full_document not in (None, "default", *_POST_IMAGE_MODES):
            raise OperationFailure(f"unknown full_document {full_document!r}", code=2)
        self._coll = coll
        self._post_images = full_document in _POST_IMAGE_MODES
        self._wait = (1000 if max_await_time_ms is None else max_await_time_ms) / 1000
        self._buffer: collections.deque[dict[str, Any]] = collections.deque()
        self._version: int | None = None
        self._ending = False  # a drop was read: an invalidate event follows, then the stream ends
        latest = coll.log_changes()  # from now on, every write to the collection is logged
        self._conn: sqlite3.Connection | None = coll.engine.connect()
        # A stream dropped unclosed closes its connection when collected (Python 3.13 warns of any
        # connection collected open).
        self._closer = weakref.finalize(self, self._conn.close)
        self.alive = True
        if start_after is None:
            self._seen = latest
        else:
            self._seen = token_seq(start_after)
            try:
                self._check_history(latest)
            except BaseException:
                self.close()
                raise
        self._token: dict[str, Any] = {"_local": self._seen}

    # ------------------------------------------------------------------ pymongo's ChangeStream surface

    @property
    def resume_token(self) -> dict[str, Any]:
        """Resumes after the last event returned, or, with none waiting, after the last change looked at."""
        return dict(self._token) if self._buffer else {"_local": self._seen}

    def try_next(self) -> dict[str, Any] | None:
        """The next event, waiting up to ``max_await_time_ms`` for one; None if none came."""
        deadline = time.monotonic() + self._wait
        while True:
            if not self._buffer and self.alive:
                self._read()
            if self._buffer:
                event = self._buffer.popleft()
                self._token = event["_id"]
                if event["operationType"] == "invalidate":
                    self.close()
                return event
            left = deadline - time.monotonic()
            if not self.alive or left <= 0:
                return None
            time.sleep(min(POLL_SECONDS, left))

    def next(self) -> dict[str, Any]:
        while self.alive:
            event = self.try_next()
            if event is not None:
                return event
        raise StopIteration

    __next__ = next

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def close(self) -> None:
        self.alive = False
        self._conn = None
        self._closer()  # closes the connection, once

    def __enter__(self) -> LocalChangeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the log

    def _check_history(self, latest: int) -> None:
        assert self._conn is not None
        if self._seen > latest:
            raise OperationFailure(
                f"resume token {{'_local': {self._seen}}} is ahead of this store's change log (at {latest}): "
                "it is from another store file",
                code=INVALID_RESUME_TOKEN,
            )
        (oldest,) = self._conn.execute("SELECT min(seq) FROM _changes").fetchone()
        if self._seen < latest and (oldest is None or oldest > self._seen + 1):
            raise self._lost()

    def _lost(self) -> OperationFailure:
        return OperationFailure(
            f"the local store's change log no longer holds the change after {{'_local': {self._seen}}} (it keeps "
            f"the newest changes only): ChangeStreamHistoryLost",
            code=HISTORY_LOST,
        )

    def _read(self) -> None:
        """The next rows of the log, if another connection committed since the last look."""
        conn = self._conn
        if conn is None:
            return
        with self._coll.engine.reading():
            pass  # a read starts the TTL monitor's deletes (at most once a second): they reach us as deletes
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version == self._version:
                return
            conn.execute("BEGIN")  # one snapshot: the rows, and that none before them were pruned
            try:
                rows = conn.execute(
                    "SELECT seq, op, id, doc, fields, at FROM _changes WHERE seq > ? AND collection = ? "
                    "ORDER BY seq LIMIT ?",
                    (self._seen, self._coll.name, _BATCH),
                ).fetchall()
                (oldest,) = conn.execute("SELECT min(seq) FROM _changes").fetchone()
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._coll.engine.translate_error(exc) from None
        if oldest is not None and oldest > self._seen + 1:  # sequence numbers have no gaps but pruned ones
            raise self._lost()
        if len(rows) < _BATCH:
            self._version = version
        for row in rows:
            self._add(*row)
            self._seen = row[0]
            if self._ending:
                break

    def _add(self, seq: int, op: str, key: Any, blob: bytes | None, fields: str | None, at: int) -> None:
        event: dict[str, Any] = {
            "_id": {"_local": seq},
            "operationType": op,
            "wallTime": _EPOCH + timedelta(milliseconds=at),
            "ns": {"db": self._coll.engine.db_name, "coll": self._coll.name},
        }
        if op == "drop":
            self._ending = True
        else:
            event["documentKey"] = {"_id": self._coll.id_of(key)}
        if blob is not None:
            doc = self._coll.decode_row(blob)
            if op != "update" or self._post_images:
                event["fullDocument"] = doc
            if op == "update":
                names = json.loads(fields or "[]")
                event["updateDescription"] = {
                    "updatedFields": {n: doc[n] for n in names if n in doc},
                    "removedFields": [n for n in names if n not in doc],
                    "truncatedArrays": [],
                }
        if all(self._coll.matches(f, event) for f in self._filters):
            self._buffer.append(event)
        if self._ending:
            self._buffer.append({"_id": {"_local": seq}, "operationType": "invalidate", "wallTime": event["wallTime"]})
