"""The local store (``mongostore.drivers.embedded``: MongoDB collections in one SQLite file).

The behaviour suite runs on it too (``sync-file`` / ``async-file`` in conftest); these tests cover
what only the local store has: persistence across engines and processes, SQLite's transactions
(one per store operation, WAL readers beside a writer, a killed writer, three writers at once),
a damaged file, the access paths its SQL takes, and where the data lives.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langgraph.store.base import PutOp

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.embedded import (
    LocalCollection,
    LocalDB,
    default_data_dir,
    parse_local_uri,
)
from mongostore.errors import DamagedStoreFileError
from mongostore.tools.embeddings import HashingEmbeddings

SRC = str(Path(__file__).resolve().parents[2] / "src")


def index() -> dict[str, object]:
    emb = HashingEmbeddings(32)
    return {"dims": 32, "embed": emb, "fields": ["text"]}


def fresh(path: Path, **kw: object) -> MongoStore:
    """A store on its own engine (as another process would have)."""
    engine = LocalDB(path, "mongostore")
    items = LocalCollection(engine, "memories", include=("vectors",))
    vectors = LocalCollection(engine, "memories_vectors")
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
    assert (tmp_path / "mongostore.sqlite").is_file()


def test_another_engine_sees_writes_at_its_next_call(tmp_path: Path) -> None:
    a, b = fresh(tmp_path), fresh(tmp_path)
    a.setup()
    assert b.get(("x",), "k") is None
    a.put(("x",), "k", {"v": 1})
    got = b.get(("x",), "k")
    assert got is not None and got.value == {"v": 1}
    b.put(("x",), "k2", {"v": 2})
    assert sorted(i.key for i in a.search(("x",))) == ["k", "k2"]  # (both may land in one millisecond)


def _statements(engine: LocalDB) -> list[str]:
    """The SQL this thread's connection runs from now on (sqlite3's public trace callback)."""
    seen: list[str] = []
    engine._thread().conn.set_trace_callback(seen.append)
    return seen


def test_one_write_transaction_per_put_and_none_for_reads(tmp_path: Path) -> None:
    store = fresh(tmp_path, index=index())
    store.setup()
    store.put(("x",), "k", {"text": "one"})
    seen = _statements(store.collection.engine)  # type: ignore[attr-defined]
    store.get(("x",), "k")
    store.search(("x",))
    store.search(("x",), query="one")
    store.list_namespaces()
    assert not [s for s in seen if s.startswith("BEGIN IMMEDIATE")]
    seen.clear()
    store.batch([PutOp(("x",), str(i), {"text": f"text {i}"}) for i in range(5)])
    assert [s for s in seen if s.startswith(("BEGIN", "COMMIT"))] == ["BEGIN IMMEDIATE", "COMMIT"]


def _plans(engine: LocalDB, statements: list[str]) -> dict[str, str]:
    """EXPLAIN QUERY PLAN of each data read among ``statements`` (the catalogue's reads left out)."""
    conn = engine._thread().conn
    conn.set_trace_callback(None)
    out = {}
    for sql in statements:
        if sql.startswith("SELECT") and '"c' in sql and "sqlite_master" not in sql:
            out[sql] = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    return out


def test_the_stores_reads_use_the_indexes_and_opening_reads_no_document(tmp_path: Path) -> None:
    """Gets by primary key, a prefix as the ``_id`` range, a listing by skipping through the path index,
    vectors by ``item_id``: no read scans a whole table; opening and ``setup()`` read no document."""
    store = fresh(tmp_path, index=index())
    store.setup()
    store.batch([PutOp(("t", f"n{i % 3}"), f"k{i}", {"text": f"memory {i}", "kind": i % 2}) for i in range(30)])
    engine = LocalDB(tmp_path, "mongostore")
    opened = MongoStore(
        LocalCollection(engine, "memories"),
        index=index(),
        vectors_collection=LocalCollection(engine, "memories_vectors"),
    )  # type: ignore[arg-type]
    seen = _statements(engine)
    opened.setup()
    assert not [s for s in seen if "SELECT doc" in s or "SELECT inc" in s]
    opened.get(("t", "n1"), "k1")
    opened.search(("t", "n1"), filter={"kind": 1}, limit=3)
    opened.search(("t",), query="memory 4", limit=3)
    opened.list_namespaces(prefix=("t",))
    opened.list_namespaces()
    plans = _plans(engine, seen)
    assert plans and not [f"{sql} -> {plan}" for sql, plan in plans.items() if "SCAN c" in plan]


def test_a_damaged_file_is_refused_by_name_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "mongostore.sqlite"
    path.write_bytes(b"\x10\x00\x00\x00garbage-garbage" * 100)
    before = path.read_bytes()
    with pytest.raises(DamagedStoreFileError) as caught:
        fresh(tmp_path).get(("x",), "k")
    assert str(path) in str(caught.value) and "mv " in str(caught.value)
    assert path.read_bytes() == before


def test_another_applications_sqlite_file_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "mongostore.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE notes (t TEXT)")
    with pytest.raises(DamagedStoreFileError, match="another application"):
        fresh(tmp_path).get(("x",), "k")


def test_a_newer_format_version_says_to_upgrade(tmp_path: Path) -> None:
    import sqlite3

    fresh(tmp_path).setup()
    with contextlib.closing(sqlite3.connect(tmp_path / "mongostore.sqlite")) as conn, conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(RuntimeError, match="upgrade mongostore"):
        fresh(tmp_path).get(("x",), "k")


def test_a_file_cut_short_is_refused(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    store.setup()
    store.batch([PutOp(("x",), str(i), {"v": "x" * 500}) for i in range(200)])
    LocalDB(tmp_path, "mongostore")  # nothing open on it in this thread but the store's engine
    store.collection.engine.close()  # type: ignore[attr-defined]
    path = tmp_path / "mongostore.sqlite"
    for wal in tmp_path.glob("mongostore.sqlite-*"):
        wal.unlink()
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DamagedStoreFileError):
        fresh(tmp_path).search(("x",), limit=500)


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


def test_three_writer_processes_lose_no_write(tmp_path: Path) -> None:
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
    assert (tmp_path / "d1.sqlite").is_file()


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
    from mongostore import MongoStore
    store = MongoStore.local({path!r})
    store.put(("x",), "k", {{"v": 1}})
    engine = store.collection.engine
    with engine.unit(), engine.writing():
        print("locked", flush=True)
        time.sleep(1.5)
    """
)


def test_a_reader_is_not_blocked_by_a_writer_and_a_writer_waits_saying_so(tmp_path: Path) -> None:
    import time

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(src=SRC, path=str(tmp_path))], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    store = MongoStore.local(tmp_path, db_name="mongostore")
    engine = LocalDB(tmp_path, "mongostore")
    reader = MongoStore(LocalCollection(engine, "memories"))  # type: ignore[arg-type]
    started = time.monotonic()
    got = reader.get(("x",), "k")
    assert got is not None and time.monotonic() - started < 0.5  # WAL: the writer does not block readers
    said: list[str] = []
    engine.on_wait = said.append
    started = time.monotonic()
    reader.put(("x",), "k2", {"v": 2})
    waited = time.monotonic() - started
    assert holder.wait(timeout=30) == 0
    holder.stdout.close()
    assert waited > 0.5 and said == [f"waiting for another process writing {tmp_path / 'mongostore.sqlite'}"]
    assert store.get(("x",), "k2") is not None


KILLED = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {src!r})
    from mongostore import MongoStore
    store = MongoStore.local({path!r})
    i = 0
    while True:
        store.put(("k",), str(i), {{"i": i}})
        print(i, flush=True)
        i += 1
    """
)


def test_a_killed_writer_loses_no_acknowledged_write(tmp_path: Path) -> None:
    import signal

    MongoStore.local(tmp_path).setup()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED.format(src=SRC, path=str(tmp_path))], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    acked = -1
    for line in proc.stdout:
        acked = int(line)
        if acked >= 50:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    keys = {int(i.key) for i in fresh(tmp_path).search(("k",), limit=100_000)}
    assert set(range(acked + 1)) <= keys


async def test_status_names_the_local_store_not_an_in_memory_mongomock(tmp_path: Path) -> None:
    """``status()["server_version"]`` says where the data is: a file, or memory only."""
    local = "the local store (SQLite, one file)"
    memory = "mongomock (in-memory, for development)"
    assert MongoStore.local(tmp_path).status()["server_version"] == local
    assert (await AsyncMongoStore.local(tmp_path).status())["server_version"] == local
    assert MongoStore.in_memory().status()["server_version"] == memory
    assert (await AsyncMongoStore.in_memory().status())["server_version"] == memory


def test_reads_of_included_fields_decode_no_document_and_answer_alike(tmp_path: Path) -> None:
    """Projections and filters on the fields kept in each row's ``inc`` (the items' ``vectors``, the
    vectors' ``item_id`` / ``text_hash``) read no document, and answer as a full read does."""
    store = fresh(tmp_path, index=index())
    store.setup()
    store.batch([PutOp(("t",), f"k{i}", {"text": f"memory {i}"} if i % 3 else {"n": i}) for i in range(12)])
    items = store.collection
    seen = _statements(items.engine)  # type: ignore[attr-defined]
    with_vectors = list(items.find({"vectors": {"$exists": True}}, {"_id": 1, "vectors": 1}))
    without = items.count_documents({"vectors": {"$exists": False}})
    only_ids = list(items.find({}, {"_id": 1}))
    assert not [s for s in seen if s.startswith("SELECT doc")]
    full = list(items.find({}))
    assert sorted(d["_id"] for d in with_vectors) == sorted(d["_id"] for d in full if "vectors" in d)
    assert all(set(d) == {"_id", "vectors"} for d in with_vectors)
    assert without == sum(1 for d in full if "vectors" not in d) == 4
    assert only_ids == [{"_id": d["_id"]} for d in full]


def test_expired_items_are_deleted_when_a_read_starts(tmp_path: Path) -> None:
    """MongoDB's TTL monitor, emulated: an item past its ``expires_at`` is gone at the next read
    (with its vectors), without ``sweep_ttl()``; one that has not expired stays."""
    import datetime as dt

    store = fresh(tmp_path, index=index())
    store.setup()
    store.put(("t",), "old", {"text": "expired"}, ttl=1)
    store.put(("t",), "new", {"text": "kept"}, ttl=60)
    past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    store.collection.update_many({"key": "old"}, {"$set": {"expires_at": past}})
    store.vectors_collection.update_many({"item_id": {"$regex": "old$"}}, {"$set": {"expires_at": past}})
    engine = store.collection.engine  # type: ignore[attr-defined]
    engine._expiry_due = 0.0  # the once-a-second look is due
    assert [i.key for i in store.search(("t",))] == ["new"]
    assert store.collection.count_documents({}) == 1
    assert store.vectors_collection.count_documents({}) == 1  # type: ignore[union-attr]


def test_recency_on_the_local_store_ranks_the_newer_of_two_equals_first(tmp_path: Path) -> None:
    """Issue 36.4 on SQLite: the newer of two equal memories ranks first (the candidates' ages are read
    from their documents: only recency needs them, so the rows' ``inc`` does not carry them)."""
    store = MongoStore.local(tmp_path, index={**index(), "recency": {"half_life_days": 1, "weight": 0.5}})
    store.setup()
    store.put(("x",), "a-old", {"text": "same words"})
    time.sleep(0.01)
    store.put(("x",), "b-new", {"text": "same words"})
    store.put(("x",), "c-far", {"text": "other things entirely"})
    found = store.search(("x",), query="same words")
    assert [i.key for i in found][:2] == ["b-new", "a-old"]
    plain = MongoStore.local(tmp_path / "plain", index=index())
    plain.put(("x",), "a-old", {"text": "same words"})
    plain.put(("x",), "b-new", {"text": "same words"})
    assert [i.key for i in plain.search(("x",), query="same words")][:2] == ["a-old", "b-new"]  # ties by key


def test_a_status_without_consistency_counts_reads_no_item(tmp_path: Path) -> None:
    """``status(consistency=False)`` (what ``mongostore setup`` and the demo print) leaves out the two
    counts that read every item and vector: a quick look at a large store."""
    store = MongoStore.local(tmp_path, index=index())
    store.setup()
    store.batch([PutOp(("t",), f"k{i}", {"text": f"memory {i}"}) for i in range(20)])
    store.put(("t",), "plain", {"text": "not embedded"}, index=False)
    seen = _statements(store.collection.engine)  # type: ignore[attr-defined]
    quick = store.status(consistency=False)
    assert (quick["items"], quick["vectors"]) == (21, 20)
    assert quick["items_missing_vectors"] is None and quick["stale_vectors"] is None
    assert quick["items_without_vectors"] is None
    assert not [s for s in seen if s.startswith("SELECT") and ("inc" in s or "doc" in s)]
    full = store.status()
    assert (full["items_missing_vectors"], full["stale_vectors"], full["items_without_vectors"]) == (0, 0, 1)


def test_vectors_take_about_their_size_on_disk(tmp_path: Path) -> None:
    """A vector document (its embedding inside: 3 KB at 768 dimensions) stays in place in a rowid table
    of 8 KB pages, two to a page; in the clustered layout of the items, SQLite kept a quarter of a page of
    it in place and the rest on an overflow page of its own (at 384 dimensions on 4 KB pages, the file was
    2.7x SqliteStore's)."""
    import sqlite3

    dims, n = 768, 400
    index = {"dims": dims, "embed": HashingEmbeddings(dims), "fields": ["text"]}
    with MongoStore.local(tmp_path, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.batch([PutOp(("users", f"u{i % 7}"), f"k{i}", {"text": f"memory number {i}"}) for i in range(n)])
        files = list(tmp_path.glob("*.sqlite"))
        assert len(files) == 1
        conn = sqlite3.connect(files[0])
        try:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
            tables = dict(conn.execute("SELECT name, tbl FROM _collections"))
            made = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
            assert "WITHOUT ROWID" in made[tables["memories"]]  # items: an _id range is contiguous
            assert "WITHOUT ROWID" not in made[tables["memories_vectors"]]
            vector_bytes = conn.execute(f'SELECT sum(length(doc)) FROM "{tables["memories_vectors"]}"').fetchone()[0]
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
        finally:
            conn.close()
    assert vector_bytes > n * 4 * dims
    # the whole file (items, indexes, catalogue): well under twice its vector documents
    assert pages * 8192 < 2 * vector_bytes


def test_a_column_added_later_keeps_the_tables_layout(tmp_path: Path) -> None:
    engine = LocalDB(tmp_path, "q")
    heap = LocalCollection(engine, "heap", clustered=False)
    heap.insert_one({"_id": "a", "v": {"kind": "x"}})
    widened = LocalCollection(engine, "heap", columns=("v.kind",), clustered=True)  # (a later handle's wish)
    widened.insert_one({"_id": "b", "v": {"kind": "y"}})
    with engine.reading() as state:
        tbl = engine.tables(state)["heap"].tbl
        (made,) = state.conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (tbl,)).fetchone()
    assert "WITHOUT ROWID" not in made
    assert sorted(d["_id"] for d in widened.find({"v.kind": {"$in": ["x", "y"]}})) == ["a", "b"]
