"""The change feeds behind ``store.watch()`` (``ChangeFeed``) and ``awatch()`` (``AsyncChangeFeed``): a change
stream opened on the items collection with ``core.changes.change_pipeline``, its events read into ``Change`` s.

On MongoDB it is the server's change stream (pymongo's ``watch``; an ``AsyncCollection``'s or Motor's for
the async store); on the local store the file's change log (``embedded.changelog``), read off the event
loop by the async feed. mongomock has no change streams, so a feed on it fails at once, as one on a server
without them (a standalone mongod: code 40573) fails when it opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pymongo.errors import OperationFailure

from mongostore.core.changes import HISTORY_LOST, Change, change_from_event, change_pipeline, streams_unsupported
from mongostore.drivers.backend import Backend
from mongostore.errors import ChangeFeedUnavailableError, ChangeHistoryLostError

#: How long one read of a server's change stream waits for a change (``maxAwaitTimeMS``).
MAX_AWAIT_MS = 1000
#: The async feed's pause between two looks at the local store's log.
LOCAL_POLL_SECONDS = 0.05

NEEDED = (
    "change streams need a replica set, a sharded cluster or Atlas (a single-node replica set will do: "
    "start mongod with --replSet rs0 and run rs.initiate() once); without a server, MongoStore.local() "
    "keeps a change log that works across processes"
)


def _check_backend(backend: Backend) -> None:
    """mongomock has no change streams: said at once, before anything is opened."""
    if backend.emulated and not backend.local_file:
        raise ChangeFeedUnavailableError(f"the in-memory store (mongomock) has no change feed: {NEEDED}")


def _translated(exc: OperationFailure) -> Exception:
    """A server's refusal as the error that says what to do; any other failure as it is."""
    if exc.code == HISTORY_LOST:
        return ChangeHistoryLostError(
            f"start_after names a change no longer kept ({exc}): read the current state again and watch "
            "without start_after"
        )
    if streams_unsupported(exc.code, str(exc)):
        return ChangeFeedUnavailableError(f"the server refused a change stream ({exc}): {NEEDED}")
    return exc


def _watch_options(
    namespace_prefix: tuple[str, ...], start_after: Mapping[str, Any] | None, wait_ms: int
) -> dict[str, Any]:
    # updateLookup: a put is an update (a pipeline upsert), whose event carries no document; the
    # lookup reads the item as it is when the event is read (docs/decisions.md says what that means).
    options: dict[str, Any] = {
        "pipeline": change_pipeline(namespace_prefix),
        "full_document": "updateLookup",
        "max_await_time_ms": wait_ms,
    }
    if start_after is not None:
        options["start_after"] = dict(start_after)
    return options


class ChangeFeed:
    """``store.watch()``: an iterator of ``Change`` s that waits for the next one (like ``tail -f``); a
    context manager, closed by ``close()``. ``try_next()`` returns None when no change came within about a
    second; ``resume_token`` resumes after the last change returned (or looked at, when none waits)."""

    def __init__(
        self,
        collection: Any,
        backend: Backend,
        namespace_prefix: tuple[str, ...],
        start_after: Mapping[str, Any] | None,
    ) -> None:
        _check_backend(backend)
        try:
            self._stream = collection.watch(**_watch_options(namespace_prefix, start_after, MAX_AWAIT_MS))
        except OperationFailure as exc:
            raise _translated(exc) from exc

    @property
    def alive(self) -> bool:
        return bool(self._stream.alive)

    @property
    def resume_token(self) -> Mapping[str, Any] | None:
        token: Mapping[str, Any] | None = self._stream.resume_token
        return token

    def try_next(self) -> Change | None:
        while self._stream.alive:
            try:
                event = self._stream.try_next()
            except OperationFailure as exc:
                raise _translated(exc) from exc
            if event is None:
                return None
            change = change_from_event(event)
            if change is not None:
                return change
        return None

    def __iter__(self) -> ChangeFeed:
        return self

    def __next__(self) -> Change:
        while self._stream.alive:
            change = self.try_next()
            if change is not None:
                return change
        raise StopIteration

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> ChangeFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChangeFeed:
    """``awatch()``: an async iterator of ``Change`` s (``async for``), an async context manager, closed by
    ``aclose()``. The stream opens on the first read. ``threaded``: a blocking stream (the local store's log,
    or the sync store's pymongo stream), each call of which runs in a thread, never on the event loop."""

    def __init__(
        self,
        collection: Any,
        backend: Backend,
        namespace_prefix: tuple[str, ...],
        start_after: Mapping[str, Any] | None,
        *,
        threaded: bool,
    ) -> None:
        _check_backend(backend)
        self._threaded = threaded
        self._poll = LOCAL_POLL_SECONDS if backend.local_file else 0.0
        # The local log's read in a thread looks once; a server's waits up to MAX_AWAIT_MS for a change.
        wait = 0 if backend.local_file else MAX_AWAIT_MS
        options = _watch_options(namespace_prefix, start_after, wait)
        self._open: Callable[[], Any] = lambda: collection.watch(**options)
        self._stream: Any = None
        self._pending: asyncio.Future[Any] | None = None  # a threaded call still running
        self._closed = False

    async def _call(self, fn: Callable[[], Any]) -> Any:
        if not self._threaded:
            result = fn()
            return await result if inspect.isawaitable(result) else result
        self._pending = asyncio.get_running_loop().run_in_executor(None, fn)
        # Shielded: cancelled, the thread still ends its call, and aclose() waits for it before closing.
        return await asyncio.shield(self._pending)

    async def _opened(self) -> Any:
        if self._stream is None:
            if self._closed:
                raise StopAsyncIteration
            try:
                self._stream = await self._call(self._open)
            except OperationFailure as exc:
                raise _translated(exc) from exc
        return self._stream

    @property
    def resume_token(self) -> Mapping[str, Any] | None:
        return None if self._stream is None else self._stream.resume_token

    async def try_next(self) -> Change | None:
        """The next change, or None when none came within the wait (about a second on a server)."""
        stream = await self._opened()
        while getattr(stream, "alive", True):
            try:
                event = await self._call(stream.try_next)
            except OperationFailure as exc:
                raise _translated(exc) from exc
            if event is None:
                return None
            change = change_from_event(event)
            if change is not None:
                return change
        return None

    def __aiter__(self) -> AsyncChangeFeed:
        return self

    async def __anext__(self) -> Change:
        stream = await self._opened()
        while getattr(stream, "alive", True) and not self._closed:
            change = await self.try_next()
            if change is not None:
                return change
            if self._poll:
                await asyncio.sleep(self._poll)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is None:
            return
        if self._pending is not None and not self._pending.done():
            with contextlib.suppress(Exception):
                await asyncio.wait([self._pending])
        await self._call(stream.close)

    async def __aenter__(self) -> AsyncChangeFeed:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
