"""The change feed (issue 36, part 3): ``store.watch()`` / ``awatch()``.

The pure half (``core.changes``: the pipeline, events read into ``Change`` s) is tested on its own; the
local store's log end to end, across store instances with their own engines (as processes have) and
across processes; the server path over a fake stream (the real one is in
tests/integration/test_change_feed_backends.py); mongomock's refusal. Every wait is bounded: a feed is read
with ``try_next`` until a deadline, never with a bare ``next``.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from bson.timestamp import Timestamp
from langgraph.store.base import InvalidNamespaceError
from pymongo.errors import OperationFailure

from mongostore import AsyncMongoStore, Change, ChangeFeedUnavailableError, ChangeHistoryLostError, MongoStore
from mongostore.core.changes import change_from_event, change_pipeline, split_item_id, streams_unsupported
from mongostore.drivers.embedded import LocalCollection, LocalDB
from mongostore.drivers.embedded import sqlite as local_sqlite

SRC = str(Path(__file__).resolve().parents[2] / "src")
WAIT = 10.0  # seconds any test waits for a change at most


def fresh(path: Path, **kw: Any) -> MongoStore:
    """A store on its own engine (as another process would have)."""
    engine = LocalDB(path, "mongostore")
    return MongoStore(LocalCollection(engine, "memories", include=("vectors",)), **kw)


def take(feed: Any, n: int, timeout: float = WAIT) -> list[Change]:
    """The next ``n`` changes, or fewer if they do not come within ``timeout`` seconds."""
    out: list[Change] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        change = feed.try_next()
        if change is not None:
            out.append(change)
        elif not feed.alive:
            break
    return out


def quiet(feed: Any, seconds: float = 0.3) -> list[Change]:
    """What the feed yields within ``seconds`` (nothing, when nothing else should come)."""
    return take(feed, 1_000, timeout=seconds)


def short(changes: list[Change]) -> list[tuple[str, tuple[str, ...], str, Any]]:
    return [(c.op, c.namespace, c.key, c.value) for c in changes]


# --------------------------------------------------------------------------- the pure half


def test_the_pipeline_matches_the_prefix_as_an_id_range_and_leaves_out_ttl_refreshes() -> None:
    assert change_pipeline(("users", "a$b", "x*")) == [
        {
            "$match": {
                "operationType": {"$in": ["insert", "update", "replace", "delete"]},
                # whole labels: ("users", "a$b", "x*y") is not in ["users.a$b.x*.", "users.a$b.x*/")
                "documentKey._id": {"$gte": "users.a$b.x*.", "$lt": "users.a$b.x*/"},
                "$nor": [
                    {
                        "operationType": "update",
                        "updateDescription.updatedFields.expires_at": {"$exists": True},
                        "updateDescription.updatedFields.updated_at": {"$exists": False},
                    }
                ],
            }
        }
    ]
    assert "documentKey._id" not in change_pipeline(())[0]["$match"]


def test_split_item_id_reads_namespace_and_key_back() -> None:
    assert split_item_id("users.alice.\x00k.1\x00x") == (("users", "alice"), "k.1\x00x")
    assert split_item_id("a.\x00") == (("a",), "")
    assert split_item_id("no-nul") is None and split_item_id(42) is None and split_item_id("a\x00k") is None


T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_events_read_into_changes() -> None:
    doc = {"_id": "a.b.\x00k", "namespace": ["a", "b"], "key": "k", "value": {"n": 1}, "updated_at": T0}
    put = {"_id": {"_data": "01"}, "operationType": "update", "documentKey": {"_id": "a.b.\x00k"}, "fullDocument": doc}
    assert change_from_event(put) == Change("put", ("a", "b"), "k", {"n": 1}, T0, {"_data": "01"})
    insert = {**put, "operationType": "insert"}
    assert change_from_event(insert) == Change("put", ("a", "b"), "k", {"n": 1}, T0, {"_data": "01"})
    gone = {**put, "fullDocument": None, "updateDescription": {"updatedFields": {"updated_at": T0}}}
    assert change_from_event(gone) == Change("put", ("a", "b"), "k", None, T0, {"_data": "01"})
    delete = {
        "_id": {"_data": "02"},
        "operationType": "delete",
        "documentKey": {"_id": "a.b.\x00k"},
        "clusterTime": Timestamp(int(T0.timestamp()), 1),
    }
    assert change_from_event(delete) == Change("delete", ("a", "b"), "k", None, T0, {"_data": "02"})
    assert change_from_event({**delete, "wallTime": T0.replace(tzinfo=None)}).updated_at == T0  # type: ignore[union-attr]
    assert change_from_event({"_id": {}, "operationType": "invalidate"}) is None
    assert change_from_event({**delete, "documentKey": {"_id": "not an item"}}) is None


def test_a_server_without_change_streams_is_recognised() -> None:
    assert streams_unsupported(40573, "The $changeStream stage is only supported on replica sets")
    assert streams_unsupported(None, "Unsupported aggregation stage: $changeStream")  # mongoeco
    assert not streams_unsupported(2, "bad resume token")


def test_a_prefix_label_with_a_dot_is_refused(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    with pytest.raises(InvalidNamespaceError):
        store.watch(("users.alice",))
    with pytest.raises(InvalidNamespaceError):
        store.watch("users")  # a str is not a tuple of labels


# --------------------------------------------------------------------------- mongomock: at once


def test_the_in_memory_store_says_what_is_needed_at_once() -> None:
    store = MongoStore.in_memory()
    with pytest.raises(ChangeFeedUnavailableError, match=r"replica set, a sharded cluster or Atlas.*MongoStore\.local"):
        store.watch(("users",))
    with pytest.raises(ChangeFeedUnavailableError):
        store.awatch()


async def test_the_async_in_memory_store_says_so_at_once() -> None:
    store = AsyncMongoStore.in_memory()
    with pytest.raises(ChangeFeedUnavailableError, match="mongomock"):
        store.awatch(("users",))


# --------------------------------------------------------------------------- the local store


def test_a_watcher_sees_another_instances_puts_and_deletes_under_its_prefix_in_order(tmp_path: Path) -> None:
    watcher, writer = fresh(tmp_path), fresh(tmp_path)
    with watcher.watch(("a",)) as feed:
        writer.put(("a", "x"), "k1", {"v": 1})
        writer.put(("ab",), "k1", {"v": "sibling"})  # ("ab",) is not under ("a",)
        writer.put(("b",), "k1", {"v": "other"})
        writer.put(("a",), "k2", {"v": 2})
        writer.put(("a", "x"), "k1", {"v": 3})
        writer.delete(("a", "x"), "k1")
        writer.delete(("ab",), "k1")
        got = take(feed, 4)
        assert short(got) == [
            ("put", ("a", "x"), "k1", {"v": 1}),
            ("put", ("a",), "k2", {"v": 2}),
            ("put", ("a", "x"), "k1", {"v": 3}),  # the post-image of each write, not the latest
            ("delete", ("a", "x"), "k1", None),
        ]
        assert quiet(feed) == []
    stored = writer.get(("a",), "k2")
    assert stored is not None and got[1].updated_at == stored.updated_at
    assert got[0].updated_at < got[2].updated_at <= got[3].updated_at


def test_the_whole_store_and_labels_with_regex_characters(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    with store.watch() as everything, store.watch(("u$", "a*")) as odd:
        store.put(("u$", "a*"), "k", {"v": 1})
        store.put(("u$", "a*b"), "k", {"v": 2})  # a sibling of ("u$", "a*")
        store.put(("uX", "aaa"), "k", {"v": 3})  # what a regex "u$.a*" would match
        assert [c.namespace for c in take(everything, 3)] == [("u$", "a*"), ("u$", "a*b"), ("uX", "aaa")]
        assert [c.namespace for c in take(odd, 1)] == [("u$", "a*")]
        assert quiet(odd) == []


def test_start_after_resumes_after_a_restart(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    with store.watch(("a",)) as feed:
        for i in range(3):
            store.put(("a",), f"k{i}", {"i": i})
        first = take(feed, 1)
    token = first[0].resume_token
    store.delete(("a",), "k0")  # while nobody watches
    with fresh(tmp_path).watch(("a",), start_after=token) as again:
        assert short(take(again, 3)) == [
            ("put", ("a",), "k1", {"i": 1}),
            ("put", ("a",), "k2", {"i": 2}),
            ("delete", ("a",), "k0", None),
        ]
        assert quiet(again) == []
        later = again.resume_token
    with store.watch(("a",), start_after=later) as resumed:
        assert quiet(resumed) == []  # nothing is repeated


def test_a_pruned_resume_point_fails_as_history_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_sqlite, "CHANGE_LOG_KEEP", 5)
    monkeypatch.setattr(local_sqlite, "CHANGE_LOG_PRUNE_EVERY", 2)
    store = fresh(tmp_path)
    with store.watch(("a",)) as feed:
        store.put(("a",), "k0", {})
        token = take(feed, 1)[0].resume_token
        for i in range(12):
            store.put(("a",), f"k{i}", {})
        with pytest.raises(ChangeHistoryLostError, match="no longer kept"):
            take(feed, 20)  # a reader that fell behind the log learns it lost changes
    with pytest.raises(ChangeHistoryLostError, match="read the current state again"):
        store.watch(("a",), start_after=token)
    with pytest.raises(OperationFailure, match="not a resume token"):
        store.watch(("a",), start_after={"_data": "8263"})


def test_ttl_refreshes_are_not_changes_and_expiry_deletes_are(tmp_path: Path) -> None:
    store = fresh(tmp_path, ttl={"default_ttl": 1.0, "refresh_on_read": True})
    store.setup()
    with store.watch(("t",)) as feed:
        store.put(("t",), "k", {"v": 1}, ttl=0.001)  # expires in 60 ms
        store.put(("t",), "stay", {"v": 2})
        store.get(("t",), "stay")  # moves expires_at only
        assert short(take(feed, 2)) == [("put", ("t",), "k", {"v": 1}), ("put", ("t",), "stay", {"v": 2})]
        time.sleep(0.1)
        # The local TTL monitor runs when a read starts, as the watcher's own reads do.
        assert short(take(feed, 1)) == [("delete", ("t",), "k", None)]
        assert quiet(feed) == []


def test_a_purge_reaches_a_watcher_as_deletes(tmp_path: Path) -> None:
    store, watcher = fresh(tmp_path), fresh(tmp_path)
    for key in ("k1", "k2"):
        store.put(("tenant", "a"), key, {"v": key})
    store.put(("tenant", "ab"), "k1", {"v": "sibling"})
    with watcher.watch(("tenant",)) as feed:
        store.purge(("tenant", "a"))
        got = take(feed, 2)
        assert sorted(short(got)) == [("delete", ("tenant", "a"), "k1", None), ("delete", ("tenant", "a"), "k2", None)]
        assert quiet(feed) == []  # the sibling ("tenant", "ab") is untouched


def test_dropping_the_collection_ends_the_feed(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    feed = store.watch()
    store.put(("a",), "k", {})
    store.collection.drop()
    assert [c.op for c in take(feed, 2)] == ["put"]  # nothing after the drop...
    assert not feed.alive
    assert list(feed) == []  # ...and a bare iteration ends at once


def test_the_watched_flag_and_log_survive_a_new_engine(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    store.watch().close()  # from now on the collection's writes are logged
    store.put(("a",), "k", {"v": 1})
    with fresh(tmp_path).watch(start_after={"_local": 0}) as feed:
        assert short(take(feed, 1)) == [("put", ("a",), "k", {"v": 1})]


def test_a_file_from_before_the_change_log_gets_it(tmp_path: Path) -> None:
    import sqlite3

    fresh(tmp_path).put(("a",), "k", {})
    conn = sqlite3.connect(tmp_path / "mongostore.sqlite")
    conn.execute("DROP TABLE _changes")
    conn.execute("ALTER TABLE _collections DROP COLUMN changes")
    conn.commit()
    conn.close()
    store = fresh(tmp_path)
    with store.watch(("a",)) as feed:
        store.put(("a",), "k2", {"v": 2})
        assert short(take(feed, 1)) == [("put", ("a",), "k2", {"v": 2})]


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {src!r})
    from mongostore import MongoStore
    store = MongoStore.local({path!r})
    store.put(("proc", "a"), "k1", {{"n": 1}})
    store.put(("proc", "ab"), "k1", {{"n": "sibling"}})
    store.put(("proc", "a", "deep"), "k2", {{"n": 2}})
    store.delete(("proc", "a"), "k1")
    """
)


def test_a_watcher_sees_another_process(tmp_path: Path) -> None:
    with MongoStore.local(tmp_path).watch(("proc", "a")) as feed:
        subprocess.run([sys.executable, "-c", WRITER.format(src=SRC, path=str(tmp_path))], check=True, timeout=60)
        assert short(take(feed, 3)) == [
            ("put", ("proc", "a"), "k1", {"n": 1}),
            ("put", ("proc", "a", "deep"), "k2", {"n": 2}),
            ("delete", ("proc", "a"), "k1", None),
        ]
        assert quiet(feed) == []


# --------------------------------------------------------------------------- async


async def atake(feed: Any, n: int, timeout: float = WAIT) -> list[Change]:
    out: list[Change] = []

    async def read() -> None:
        async for change in feed:
            out.append(change)
            if len(out) == n:
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), timeout)
    return out


async def test_async_local_store_awatch(tmp_path: Path) -> None:
    store = AsyncMongoStore.local(tmp_path)
    writer = fresh(tmp_path)
    async with store.awatch(("a",)) as feed:
        assert await feed.try_next() is None  # opens the stream: what comes next is seen
        await store.aput(("a",), "k1", {"v": 1})
        await asyncio.to_thread(writer.put, ("ab",), "k", {"v": "sibling"})
        await asyncio.to_thread(writer.delete, ("a",), "k1")
        got = await atake(feed, 2)
        assert short(got) == [("put", ("a",), "k1", {"v": 1}), ("delete", ("a",), "k1", None)]
        token = got[0].resume_token
    async with store.awatch(("a",), start_after=token) as again:
        assert short(await atake(again, 1)) == [("delete", ("a",), "k1", None)]


async def test_the_sync_stores_awatch_reads_in_a_thread(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    async with store.awatch(("a",)) as feed:
        assert await feed.try_next() is None
        await asyncio.to_thread(store.put, ("a",), "k", {"v": 1})
        assert short(await atake(feed, 1)) == [("put", ("a",), "k", {"v": 1})]
    # Cancelled mid-read, it still closes cleanly.
    feed = store.awatch(("a",))
    task = asyncio.ensure_future(atake(feed, 1, timeout=5))
    await asyncio.sleep(0.2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await feed.aclose()


# --------------------------------------------------------------------------- a server's stream (a fake)


class FakeStream:
    """pymongo's ``ChangeStream`` surface over canned events; records how it was opened."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = list(events)
        self.alive = True
        self.resume_token: Any = None
        self.closed = False

    def try_next(self) -> dict[str, Any] | None:
        if not self.events:
            return None
        event = self.events.pop(0)
        self.resume_token = event["_id"]
        if event["operationType"] == "invalidate":
            self.alive = False
        return event

    def close(self) -> None:
        self.closed = True


class FakeServerCollection:
    """A server's collection for the sync store: ``watch`` gives a ``FakeStream`` or fails as told."""

    name = "memories"

    def __init__(self, events: list[dict[str, Any]] | None = None, error: OperationFailure | None = None) -> None:
        self.stream = FakeStream(events or [])
        self.error = error
        self.calls: list[dict[str, Any]] = []

    @property
    def database(self) -> Any:
        return type("Db", (), {"name": "db", "client": object()})()

    def watch(self, **kwargs: Any) -> FakeStream:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.stream


def event(op: str, doc_id: str, n: int, value: Any = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"_id": {"_data": f"{n:04d}"}, "operationType": op, "documentKey": {"_id": doc_id}}
    if value is not None:
        ns, key = split_item_id(doc_id)  # type: ignore[misc]
        ev["fullDocument"] = {"_id": doc_id, "namespace": list(ns), "key": key, "value": value, "updated_at": T0}
    ev["wallTime"] = T0
    return ev


def test_on_a_server_the_feed_is_a_change_stream_with_update_lookup() -> None:
    coll = FakeServerCollection(
        [
            event("insert", "a.\x00k", 1, {"v": 1}),
            event("delete", "a.\x00k", 2),
            {"_id": {"_data": "3"}, "operationType": "invalidate"},
        ]
    )
    feed = MongoStore(coll).watch(("a",), start_after={"_data": "0000"})
    assert coll.calls == [
        {
            "pipeline": change_pipeline(("a",)),
            "full_document": "updateLookup",
            "max_await_time_ms": 1000,
            "start_after": {"_data": "0000"},
        }
    ]
    assert short(list(feed)) == [("put", ("a",), "k", {"v": 1}), ("delete", ("a",), "k", None)]  # ends at invalidate
    feed.close()
    assert coll.stream.closed


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            OperationFailure("The $changeStream stage is only supported on replica sets", 40573),
            ChangeFeedUnavailableError,
        ),
        (OperationFailure("Unsupported aggregation stage: $changeStream"), ChangeFeedUnavailableError),
        (OperationFailure("Resume of change stream was not possible", 286), ChangeHistoryLostError),
        (OperationFailure("not authorized", 13), OperationFailure),
    ],
)
def test_a_servers_refusal_says_what_is_needed(error: OperationFailure, expected: type[Exception]) -> None:
    with pytest.raises(expected) as info:
        MongoStore(FakeServerCollection(error=error)).watch(("a",))
    if expected is ChangeFeedUnavailableError:
        assert "replica set" in str(info.value) and str(error) in str(info.value)


def test_the_readme_snippet_runs_as_written(tmp_path: Path) -> None:
    """README "Change feed": its block, on a local store whose collection a writer drops at the end (the
    feed then ends, as a change stream does on an invalidate), in a thread joined with a timeout."""
    import re
    import threading

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", readme.split("## Change feed", 1)[1], re.S)
    assert block is not None
    store = fresh(tmp_path)
    store.watch().close()  # the log is kept from here

    class FromTheStart:
        """The store, whose ``watch`` starts at the log's beginning: the writer may finish before it opens."""

        def watch(self, prefix: Any, start_after: Any = None) -> Any:
            return store.watch(prefix, start_after=start_after or {"_local": 0})

    printed: list[str] = []
    scope: dict[str, Any] = {"store": FromTheStart(), "print": lambda *a: printed.append(" ".join(map(str, a)))}

    def write() -> None:
        writer = fresh(tmp_path)
        writer.put(("users", "alice"), "k1", {"text": "hi"})
        writer.put(("users", "bob"), "k1", {"text": "not alice"})
        writer.delete(("users", "alice"), "k1")
        writer.collection.drop()

    threading.Thread(target=write, daemon=True).start()
    runner = threading.Thread(target=exec, args=(block.group(1), scope), daemon=True)
    runner.start()
    runner.join(WAIT)
    assert not runner.is_alive()
    assert printed == ["put ('users', 'alice') k1 {'text': 'hi'}", "delete ('users', 'alice') k1 None"]
    assert scope["token"] == {"_local": 3}


class FakeAsyncServerCollection(FakeServerCollection):
    """pymongo's ``AsyncCollection`` surface: ``watch`` is a coroutine, so are the stream's reads."""

    async def watch(self, **kwargs: Any) -> Any:  # type: ignore[override]
        stream = super().watch(**kwargs)

        class Async:
            alive = property(lambda _: stream.alive)
            resume_token = property(lambda _: stream.resume_token)

            async def try_next(self) -> dict[str, Any] | None:
                return stream.try_next()

            async def close(self) -> None:
                stream.close()

        return Async()


async def test_the_async_store_reads_a_servers_stream_natively() -> None:
    coll = FakeAsyncServerCollection(
        [
            event("insert", "a.\x00k", 1, {"v": 1}),
            event("delete", "a.\x00k", 2),
            {"_id": {}, "operationType": "invalidate"},
        ]
    )
    store = AsyncMongoStore(coll)
    feed = store.awatch(("a",))
    assert coll.calls == []  # opened on the first read
    async with feed:
        got = [change async for change in feed]
    assert short(got) == [("put", ("a",), "k", {"v": 1}), ("delete", ("a",), "k", None)]
    assert coll.calls[0]["max_await_time_ms"] == 1000 and coll.stream.closed


async def test_the_async_store_translates_a_refusal_on_the_first_read() -> None:
    error = OperationFailure("The $changeStream stage is only supported on replica sets", 40573)
    feed = AsyncMongoStore(FakeAsyncServerCollection(error=error)).awatch(("a",))
    with pytest.raises(ChangeFeedUnavailableError, match="replica set"):
        await feed.try_next()
