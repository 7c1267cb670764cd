"""The change feed on each backend: a real server (``MONGODB_URI``: a change stream), the local store (its
change log) and the mongomock doubles (a clear error at once). One watcher store, another writer store on
the same collection; the watcher sees the writer's puts and deletes under its prefix, in order, and
nothing else. Every wait is bounded (``try_next`` until a deadline).

On a server without change streams (a standalone mongod; mongoeco's wire server, which .ci/wire runs,
answers "Unsupported aggregation stage: $changeStream") the real-server cases skip, saying so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import _async_collection, _sync_collection

from mongostore import AsyncMongoStore, Change, ChangeFeedUnavailableError, MongoStore

WAIT = 15.0
SYNC = ["sync-real", "sync-file"]
ASYNC = ["async-real", "async-file"]
NO_STREAMS = ["sync-mongomock", "async-embedded", "async-mock", "async-motor-mock"]


def _no_streams_skip(exc: ChangeFeedUnavailableError) -> None:
    pytest.skip(f"the server at MONGODB_URI has no change streams (a replica set, sharded cluster or Atlas has): {exc}")


def writes(store: Any) -> list[tuple[str, tuple[str, ...], str, dict[str, Any] | None]]:
    """The writes each case makes, and (the first four) what the watcher of ("w", "a") must see."""
    return [
        ("put", ("w", "a"), "k1", {"n": 1}),
        ("put", ("w", "a", "deep"), "k2", {"n": 2}),
        ("put", ("w", "a"), "k1", {"n": 3}),
        ("delete", ("w", "a"), "k1", None),
        ("put", ("w", "ab"), "k1", {"n": "sibling"}),  # not under ("w", "a")
        ("put", ("x",), "k1", {"n": "elsewhere"}),
    ]


EXPECTED = writes(None)[:4]


def short(changes: list[Change]) -> list[tuple[str, tuple[str, ...], str, Any]]:
    return [(c.op, c.namespace, c.key, c.value) for c in changes]


@pytest.mark.parametrize("backend", SYNC)
def test_a_watcher_sees_another_stores_changes_in_order(backend: str, request: pytest.FixtureRequest) -> None:
    coll = _sync_collection(backend, request, "memories")
    watcher, writer = MongoStore(coll), MongoStore(coll.database[coll.name])
    writer.setup()
    try:
        feed = watcher.watch(("w", "a"))
    except ChangeFeedUnavailableError as exc:
        _no_streams_skip(exc)
    with feed:
        for op, ns, key, value in writes(writer):
            if op == "put":
                assert value is not None
                writer.put(ns, key, value)
            else:
                writer.delete(ns, key)
        got: list[Change] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(EXPECTED) + 1 and time.monotonic() < deadline:  # one more: nothing else comes
            change = feed.try_next()
            if change is not None:
                got.append(change)
            elif len(got) == len(EXPECTED):
                break
    # On a server, updateLookup reads the item when the event is read: a put's value may be a later one,
    # or None once the item is gone; ops, namespaces and keys are exact.
    assert [(c.op, c.namespace, c.key) for c in got] == [e[:3] for e in EXPECTED]
    if backend == "sync-file":
        assert short(got) == EXPECTED  # the local log keeps each write's own post-image
    token = got[1].resume_token
    with watcher.watch(("w", "a"), start_after=token) as again:
        rest: list[Change] = []
        deadline = time.monotonic() + WAIT
        while len(rest) < 2 and time.monotonic() < deadline:
            if (change := again.try_next()) is not None:
                rest.append(change)
    assert [(c.op, c.key) for c in rest] == [("put", "k1"), ("delete", "k1")]


@pytest.mark.parametrize("backend", ASYNC)
async def test_async_a_watcher_sees_another_stores_changes_in_order(
    backend: str, request: pytest.FixtureRequest
) -> None:
    cleanups: list[Callable[[], Awaitable[None]]] = []
    coll = await _async_collection(backend, cleanups, "memories", request)
    try:
        watcher, writer = AsyncMongoStore(coll), AsyncMongoStore(coll.database[coll.name])
        await writer.setup()
        async with watcher.awatch(("w", "a")) as feed:
            try:
                await feed.try_next()  # opens the stream: the writes below come after it
            except ChangeFeedUnavailableError as exc:
                _no_streams_skip(exc)
            for op, ns, key, value in writes(writer):
                if op == "put":
                    assert value is not None
                    await writer.aput(ns, key, value)
                else:
                    await writer.adelete(ns, key)
            got: list[Change] = []

            async def read() -> None:
                async for change in feed:
                    got.append(change)
                    if len(got) == len(EXPECTED):
                        return

            await asyncio.wait_for(read(), WAIT)
            assert await feed.try_next() is None  # nothing else (a server waits a second for it)
        assert [(c.op, c.namespace, c.key) for c in got] == [e[:3] for e in EXPECTED]
        if backend == "async-file":
            assert short(got) == EXPECTED
    finally:
        for cleanup in cleanups:
            await cleanup()


@pytest.mark.parametrize("backend", NO_STREAMS)
async def test_the_mongomock_doubles_say_what_is_needed_at_once(backend: str, request: pytest.FixtureRequest) -> None:
    if backend.startswith("sync"):
        with pytest.raises(ChangeFeedUnavailableError, match="replica set"):
            MongoStore(_sync_collection(backend, request, "memories")).watch(("w",))
        return
    store = AsyncMongoStore(await _async_collection(backend, [], "memories", request))
    with pytest.raises(ChangeFeedUnavailableError, match="replica set"):
        store.awatch(("w",))
