"""The persistent embedded store (``mongostore.drivers.embedded``): file format, locking, reloads.

The behaviour suite runs on it too (``sync-file`` / ``async-file`` in conftest); these
tests cover what only a file store has: persistence across processes, concurrent
writers, atomic saves, and where the data lives.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.embedded import (
    LocalCollection,
    LocalFile,
    default_data_dir,
    parse_local_uri,
)
from mongostore.tools.embeddings import HashingEmbeddings

SRC = str(Path(__file__).resolve().parents[2] / "src")


def index() -> dict[str, object]:
    emb = HashingEmbeddings(32)
    return {"dims": 32, "embed": emb, "fields": ["text"]}


def fresh(path: Path, **kw: object) -> MongoStore:
    """A store on its own engine (as another process would have)."""
    engine = LocalFile(path, "mongostore")
    items, vectors = LocalCollection(engine, "memories"), LocalCollection(engine, "memories_vectors")
    return MongoStore(items, vectors_collection=vectors, **kw)  # type: ignore[arg-type]


def test_data_survives_a_new_engine_with_ids_dates_and_vectors(tmp_path: Path) -> None:
    with fresh(tmp_path, index=index()) as store:
        store.setup()
        store.put(("users", "alice"), "k1", {"text": "I like pizza", "n": 1.5})
        before = store.get(("users", "alice"), "k1")
    again = fresh(tmp_path, index=index())
    item = again.get(("users", "alice"), "k1")
    assert item is not None and before is not None
    assert item.value == {"text": "I like pizza", "n": 1.5}
    assert item.created_at == before.created_at and item.created_at.tzinfo is not None
    hits = again.search(("users",), query="I like pizza")
    assert [h.key for h in hits] == ["k1"] and hits[0].score == pytest.approx(1.0)  # the vector came back
    assert "path_key" in again.collection.index_information()  # indexes are kept too
    assert (tmp_path / "mongostore.bson").is_file()


def test_another_engine_sees_writes_at_its_next_call(tmp_path: Path) -> None:
    a, b = fresh(tmp_path), fresh(tmp_path)
    a.setup()
    assert b.get(("x",), "k") is None
    a.put(("x",), "k", {"v": 1})
    got = b.get(("x",), "k")
    assert got is not None and got.value == {"v": 1}
    b.put(("x",), "k2", {"v": 2})
    assert [i.key for i in a.search(("x",))] == ["k2", "k"]


def test_reads_do_not_rewrite_the_file(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    store.setup()
    store.put(("x",), "k", {"v": 1})
    engine = store.collection.engine  # type: ignore[attr-defined]
    saves = engine.saves
    store.get(("x",), "k")
    store.search(("x",))
    store.list_namespaces()
    assert engine.saves == saves


def test_a_transaction_saves_once_at_the_end(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    engine = store.collection.engine  # type: ignore[attr-defined]
    with engine.transaction():
        store.setup()
        for i in range(5):
            store.put(("x",), str(i), {"v": i})
        assert engine.saves == 0
    assert engine.saves == 1
    assert len(fresh(tmp_path).search(("x",))) == 5


def test_a_failed_save_leaves_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = fresh(tmp_path)
    store.setup()
    store.put(("x",), "k", {"v": 1})
    good = (tmp_path / "mongostore.bson").read_bytes()

    def boom(*a: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("mongostore.drivers.embedded.file.os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.put(("x",), "k2", {"v": 2})
    assert (tmp_path / "mongostore.bson").read_bytes() == good
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_an_unreadable_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "mongostore.bson").write_bytes(b"\x10\x00\x00\x00garbage-garbage")
    with pytest.raises(RuntimeError, match="unreadable"):
        fresh(tmp_path).get(("x",), "k")


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {src!r})
    from mongostore import MongoStore
    store = MongoStore.local({path!r})
    for i in range({n}):
        store.put(("w", sys.argv[1]), str(i), {{"i": i}})
    """
)


def test_concurrent_processes_lose_no_write(tmp_path: Path) -> None:
    MongoStore.local(tmp_path).setup()
    n = 15
    script = WRITER.format(src=SRC, path=str(tmp_path), n=n)
    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("a", "b", "c")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    store = fresh(tmp_path)
    for name in ("a", "b", "c"):
        assert sorted(int(i.key) for i in store.search(("w", name), limit=100)) == list(range(n))


def test_default_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    assert default_data_dir({"MONGOSTORE_DATA_DIR": str(tmp_path)}) == tmp_path
    assert default_data_dir({"XDG_DATA_HOME": "/data/x"}) == Path("/data/x/mongostore")
    # A relative XDG_DATA_HOME is ignored, as the XDG spec says.
    assert default_data_dir({"XDG_DATA_HOME": "rel"}) == Path.home() / ".local/share/mongostore"
    assert default_data_dir({}) == Path.home() / ".local/share/mongostore"


def test_local_uri() -> None:
    assert parse_local_uri("mongostore-local://") is None
    assert parse_local_uri("mongostore-local:///srv/data") == Path("/srv/data")
    with pytest.raises(ValueError, match="absolute path"):
        parse_local_uri("mongostore-local://relative")


def test_bad_database_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="database name"):
        MongoStore.local(tmp_path, db_name="../evil")


def test_from_conn_string_local(tmp_path: Path) -> None:
    with MongoStore.from_conn_string(f"mongostore-local://{tmp_path}", db_name="d1") as store:
        store.setup()
        store.put(("a",), "k", {"v": 1})
    assert (tmp_path / "d1.bson").is_file()


async def test_async_local_and_in_memory(tmp_path: Path) -> None:
    async with AsyncMongoStore.from_conn_string(f"mongostore-local://{tmp_path}", index=index()) as store:
        await store.setup()
        await store.aput(("a",), "k", {"text": "hello there"})
    got = fresh(tmp_path).get(("a",), "k")
    assert got is not None and got.value == {"text": "hello there"}
    async with AsyncMongoStore.in_memory(index=index()) as mem:
        await mem.setup()
        await mem.aput(("a",), "k", {"text": "hi"})
        assert [i.key for i in await mem.asearch(("a",), query="hi")] == ["k"]


def test_sync_context_manager_closes_the_client_it_owns() -> None:
    closed: list[bool] = []

    class Client:
        def close(self) -> None:
            closed.append(True)

    store = MongoStore.in_memory()
    store._owned_client = Client()  # type: ignore[assignment]
    with store as same:
        assert same is store
    assert closed == [True]


async def test_async_context_manager_closes_the_client_it_owns_and_stops_the_sweeper() -> None:
    closed: list[bool] = []

    class Client:
        async def close(self) -> None:
            closed.append(True)

    store = AsyncMongoStore.in_memory()
    store._owned_client = Client()
    async with store as same:
        assert same is store
        sweeper = await store.start_ttl_sweeper(60)
    assert closed == [True] and sweeper.cancelled()


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {src!r})
    from mongostore.drivers.embedded import LocalFile
    engine = LocalFile({path!r}, "mongostore")
    with engine.transaction(write=True):
        print("locked", flush=True)
        time.sleep(1.5)
    """
)


def test_a_second_process_waits_for_the_lock_and_says_so(tmp_path: Path) -> None:
    import time

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(src=SRC, path=str(tmp_path))], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    engine = LocalFile(tmp_path, "mongostore")
    said: list[str] = []
    engine.on_wait = said.append
    started = time.monotonic()
    with engine.transaction():
        waited = time.monotonic() - started
    assert holder.wait(timeout=30) == 0
    holder.stdout.close()
    assert waited > 0.5 and said == [f"waiting for another process using {tmp_path / 'mongostore.bson'}"]


async def test_status_names_the_local_store_not_an_in_memory_mongomock(tmp_path: Path) -> None:
    """``status()["server_version"]`` says where the data is: a file, or memory only."""
    local = "the local store (mongomock's engine, data in one file, for development)"
    memory = "mongomock (in-memory, for development)"
    assert MongoStore.local(tmp_path).status()["server_version"] == local
    assert (await AsyncMongoStore.local(tmp_path).status())["server_version"] == local
    assert MongoStore.in_memory().status()["server_version"] == memory
    assert (await AsyncMongoStore.in_memory().status())["server_version"] == memory
