"""The local store's file under faults: refused saves, damaged files, killed writers.

- A save the disk refuses (an ``OSError`` at any one of its writes, a file-size limit,
  a read-only directory) raises, and the process drops what it could not save: every
  later read answers what the file holds, and no later save writes the failed put.
- A file that is not a whole store file (empty, 1-3 bytes, someone else's BSON, cut at
  any document boundary) raises one clear error naming the file and how to move it
  aside, and is never overwritten.
- ``<db>.bson.tmp-<pid>`` files of writers that no longer run are removed.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import bson
import pytest

from mongostore import AsyncMongoStore, DamagedStoreFileError, MongoStore
from mongostore.drivers.embedded import LocalCollection, LocalFile
from mongostore.drivers.embedded import file as file_mod
from mongostore.tools.embeddings import HashingEmbeddings

SRC = str(Path(__file__).resolve().parents[2] / "src")
NS = ("users", "alice")


def index() -> dict[str, object]:
    return {"dims": 16, "embed": HashingEmbeddings(16), "fields": ["text"]}


def fresh(path: Path, **kw: Any) -> MongoStore:
    """A store on its own engine (as another process would have)."""
    engine = LocalFile(path, "mongostore")
    items, vectors = LocalCollection(engine, "memories"), LocalCollection(engine, "memories_vectors")
    return MongoStore(items, vectors_collection=vectors, **kw)  # type: ignore[arg-type]


def engine_of(store: MongoStore) -> LocalFile:
    engine = store.collection.engine  # type: ignore[attr-defined]
    assert isinstance(engine, LocalFile)
    return engine


def keys(store: MongoStore) -> list[str]:
    return sorted(i.key for i in store.search(NS, limit=100))


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)


# --------------------------------------------------------------------------- the I/O edge


class Disk:
    """Counts the writes of a save (open, each write, flush, fsync, replace) and fails the ``fail_at``-th."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.fail_at: int | None = None
        self.error = OSError(errno.ENOSPC, "No space left on device (injected)")
        real_open, real_fsync, real_replace = file_mod._open_for_write, file_mod._fsync, file_mod._replace
        disk = self

        class Handle:
            def __init__(self, fh: IO[bytes]) -> None:
                self._fh = fh

            def __enter__(self) -> Handle:
                return self

            def __exit__(self, *exc: object) -> None:
                self._fh.close()

            def write(self, data: bytes) -> int:
                disk.hit("write")
                return self._fh.write(data)

            def flush(self) -> None:
                disk.hit("flush")
                self._fh.flush()

            def fileno(self) -> int:
                return self._fh.fileno()

        def open_for_write(path: Path) -> Any:
            self.hit("open")
            return Handle(real_open(path))

        def fsync(fd: int) -> None:
            self.hit("fsync")
            real_fsync(fd)

        def replace(src: Path, dst: Path) -> None:
            self.hit("replace")
            real_replace(src, dst)

        monkeypatch.setattr(file_mod, "_open_for_write", open_for_write)
        monkeypatch.setattr(file_mod, "_fsync", fsync)
        monkeypatch.setattr(file_mod, "_replace", replace)

    def hit(self, what: str) -> None:
        n = len(self.calls)
        self.calls.append(what)
        if self.fail_at == n:
            raise self.error


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    return Disk(monkeypatch)


def seeded(directory: Path) -> MongoStore:
    """``MongoStore.local``: every batch one transaction, one save."""
    store = MongoStore.local(directory, index=index())
    store.setup()
    store.put(NS, "k0", {"text": "I like pizza"})
    store.put(NS, "k1", {"text": "my sister lives in Lisbon"})
    return store


def test_a_save_refused_at_each_write_in_turn_drops_the_unsaved_put(tmp_path: Path, disk: Disk) -> None:
    # A dry run counts the writes of one such save.
    probe = seeded(tmp_path / "probe")
    disk.calls.clear()
    probe.put(NS, "new", {"text": "I play the cello"})
    writes = len(disk.calls)
    assert disk.calls[0] == "open" and disk.calls[-3:] == ["flush", "fsync", "replace"] and writes >= 6
    assert writes < 40  # bounded: each one below is a test of its own

    for at in range(writes):
        directory = tmp_path / f"fail-{at}"
        store = seeded(directory)
        engine = engine_of(store)
        good = (directory / "mongostore.bson").read_bytes()
        disk.calls.clear()
        disk.fail_at = at
        with pytest.raises(OSError, match="injected"):
            store.put(NS, "new", {"text": "I play the cello"})
        failed_at = disk.calls[at]
        disk.fail_at = None
        where = f"failure at write {at} ({failed_at})"
        assert (directory / "mongostore.bson").read_bytes() == good, where
        assert temporaries(directory) == [], where

        # Reads answer what the file holds, and a read never saves the failed put.
        saves = engine.saves
        assert store.get(NS, "new") is None, where
        assert keys(store) == ["k0", "k1"], where
        assert [h.key for h in store.search(NS, query="cello", limit=1)] != ["new"], where
        assert engine.saves == saves and (directory / "mongostore.bson").read_bytes() == good, where

        # Later operations work, and another process never sees the failed put.
        store.put(NS, "k2", {"text": "I run on Sundays"})
        store.delete(NS, "k0")
        assert keys(store) == ["k1", "k2"], where
        assert keys(fresh(directory)) == ["k1", "k2"], where
        assert fresh(directory).get(NS, "new") is None, where


def test_a_refused_save_inside_a_transaction_drops_every_change_of_it(tmp_path: Path, disk: Disk) -> None:
    store = seeded(tmp_path)
    engine = engine_of(store)
    disk.calls.clear()
    disk.fail_at = 0
    with pytest.raises(OSError, match="injected"), engine.transaction():
        store.put(NS, "a", {"text": "one"})
        store.delete(NS, "k0")
        assert keys(store) == ["a", "k1"]  # inside: the transaction's own view
    disk.fail_at = None
    assert keys(store) == ["k0", "k1"]


async def test_the_async_store_drops_a_put_whose_save_failed(tmp_path: Path, disk: Disk) -> None:
    store = AsyncMongoStore.local(tmp_path, index=index())
    await store.setup()
    await store.aput(NS, "k0", {"text": "I like pizza"})
    disk.fail_at = len(disk.calls) + 1  # the first write of the next save
    with pytest.raises(OSError, match="injected"):
        await store.aput(NS, "new", {"text": "I play the cello"})
    disk.fail_at = None
    assert await store.aget(NS, "new") is None
    assert [i.key for i in await store.asearch(NS)] == ["k0"]
    await store.aput(NS, "k2", {"text": "I run"})
    assert keys(fresh(tmp_path)) == ["k0", "k2"]


FSIZE = textwrap.dedent(
    """
    import errno, os, resource, signal, sys
    sys.path.insert(0, {src!r})
    from mongostore import MongoStore
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
    ns = ("users", "alice")
    store = MongoStore.local({path!r})
    store.setup()
    store.put(ns, "small", {{"text": "hello"}})
    path = {path!r} + "/mongostore.bson"
    good = open(path, "rb").read()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) + 4096, hard))
    try:
        store.put(ns, "big", {{"text": "x" * 200_000}})
    except OSError as exc:
        assert exc.errno == errno.EFBIG, exc
    else:
        raise AssertionError("the put over the file-size limit did not raise")
    assert open(path, "rb").read() == good
    assert store.get(ns, "big") is None
    assert [i.key for i in store.search(ns)] == ["small"]
    store.put(ns, "second", {{"text": "fits"}})  # under the limit: works
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    store.put(ns, "third", {{"text": "after"}})
    assert sorted(i.key for i in store.search(ns)) == ["second", "small", "third"]
    print("ok")
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_file_size_limit_refuses_the_save_and_the_put_is_dropped(tmp_path: Path) -> None:
    script = FSIZE.format(src=SRC, path=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
    again = fresh(tmp_path)
    assert again.get(NS, "big") is None and keys(again) == ["second", "small", "third"]


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_directory_refuses_the_save_and_the_put_is_dropped(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(PermissionError):
            store.put(NS, "new", {"text": "x"})
        assert store.get(NS, "new") is None and keys(store) == ["k0", "k1"]
    finally:
        tmp_path.chmod(0o700)
    store.put(NS, "k2", {"text": "y"})
    assert keys(fresh(tmp_path)) == ["k0", "k1", "k2"]


def test_a_directory_that_refuses_the_temporary_file_is_a_refused_save_too(tmp_path: Path, disk: Disk) -> None:
    """What a read-only directory does to a save (as root, chmod cannot show it): ``open`` fails."""
    store = seeded(tmp_path)
    good = (tmp_path / "mongostore.bson").read_bytes()
    disk.calls.clear()
    disk.error = PermissionError(errno.EACCES, "Permission denied (injected)")
    disk.fail_at = 0
    with pytest.raises(PermissionError):
        store.put(NS, "new", {"text": "x"})
    disk.fail_at = None
    assert store.get(NS, "new") is None and keys(store) == ["k0", "k1"]
    assert (tmp_path / "mongostore.bson").read_bytes() == good
    store.put(NS, "k2", {"text": "y"})
    assert keys(fresh(tmp_path)) == ["k0", "k1", "k2"]


# --------------------------------------------------------------------------- damaged files


def written_store(directory: Path) -> bytes:
    seeded(directory)
    return (directory / "mongostore.bson").read_bytes()


def boundaries(data: bytes) -> list[int]:
    """The offsets where each BSON document of ``data`` ends (the last is the file's end)."""
    ends, at = [], 0
    while at < len(data):
        at += int.from_bytes(data[at : at + 4], "little")
        ends.append(at)
    assert at == len(data)
    return ends


def damaged_cases(tmp_path: Path) -> Iterator[tuple[str, bytes]]:
    yield "empty", b""
    for n in (1, 2, 3):
        yield f"{n} bytes", b"\x05\x00\x00"[:n]
    yield "someone else's BSON", bson.encode({"name": "not ours"}) + bson.encode({"x": 1})
    yield "a BSON document without a token", bson.encode({"format": "mongostore-embedded", "version": 2})
    whole = written_store(tmp_path / "whole")
    for end in boundaries(whole)[:-1]:
        yield f"cut at byte {end} of {len(whole)} (a document boundary)", whole[:end]
    yield "something after the trailer", whole + bson.encode({"x": 1})


def assert_refused(directory: Path, data: bytes, what: str) -> None:
    path = directory / "mongostore.bson"
    with pytest.raises(DamagedStoreFileError) as info:
        fresh(directory).get(NS, "k0")
    message = str(info.value)
    assert str(path) in message and f"mv {path} {path}.damaged" in message, what
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(DamagedStoreFileError):
        fresh(directory).put(NS, "k9", {"text": "would overwrite"})
    with pytest.raises(DamagedStoreFileError):
        MongoStore.local(directory).setup()
    assert path.read_bytes() == data, f"{what}: the damaged file was rewritten"


def test_a_damaged_file_raises_one_clear_error_and_is_never_overwritten(tmp_path: Path) -> None:
    cases = list(damaged_cases(tmp_path))
    assert len(cases) >= 12
    for n, (what, data) in enumerate(cases):
        directory = tmp_path / f"case-{n}"
        directory.mkdir()
        (directory / "mongostore.bson").write_bytes(data)
        assert_refused(directory, data, what)


async def test_the_async_store_refuses_a_damaged_file_too(tmp_path: Path) -> None:
    (tmp_path / "mongostore.bson").write_bytes(b"")
    store = AsyncMongoStore.local(tmp_path)
    for _ in range(2):  # and again: the failed call left nothing held
        with pytest.raises(DamagedStoreFileError, match=r"mongostore\.bson"):
            await store.aput(NS, "k", {"v": 1})
    with pytest.raises(DamagedStoreFileError):
        MongoStore.local(tmp_path).get(NS, "k")  # on the loop: no async transaction is open
    assert (tmp_path / "mongostore.bson").read_bytes() == b""
    # Moved aside, as the message says: a new, empty store.
    (tmp_path / "mongostore.bson").rename(tmp_path / "mongostore.bson.damaged")
    await store.aput(NS, "k", {"v": 1})
    got = await store.aget(NS, "k")
    assert got is not None and got.value == {"v": 1}


def test_a_file_damaged_after_loading_is_refused_not_replaced(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    path = tmp_path / "mongostore.bson"
    cut = path.read_bytes()[: boundaries(path.read_bytes())[-2]]  # the trailer is gone
    path.write_bytes(cut)
    with pytest.raises(DamagedStoreFileError):
        store.put(NS, "k2", {"text": "z"})
    assert path.read_bytes() == cut


def test_a_whole_file_of_format_version_1_is_still_read_and_then_upgraded(tmp_path: Path) -> None:
    whole = written_store(tmp_path / "v2")
    ends = boundaries(whole)
    header = bson.decode(whole[: ends[0]])
    assert header["version"] == 2
    header["version"] = 1
    v1 = bson.encode(header) + whole[ends[0] : ends[-2]]  # version 1: no trailer
    (tmp_path / "mongostore.bson").write_bytes(v1)
    store = fresh(tmp_path, index=index())
    assert keys(store) == ["k0", "k1"]
    assert [h.key for h in store.search(NS, query="Lisbon sister", limit=1)] == ["k1"]
    store.put(NS, "k2", {"text": "new"})
    upgraded = (tmp_path / "mongostore.bson").read_bytes()
    assert bson.decode(upgraded[: boundaries(upgraded)[0]])["version"] == 2
    assert keys(fresh(tmp_path)) == ["k0", "k1", "k2"]


def test_a_newer_format_version_says_to_upgrade(tmp_path: Path) -> None:
    (tmp_path / "mongostore.bson").write_bytes(
        bson.encode({"format": "mongostore-embedded", "version": 9, "token": "t"})
    )
    with pytest.raises(RuntimeError, match=r"format version 9.*upgrade mongostore"):
        fresh(tmp_path).get(NS, "k")


# --------------------------------------------------------------------------- killed writers


def test_stale_temporary_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    seeded(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / f"mongostore.bson.tmp-{dead.pid}"
        running = tmp_path / f"mongostore.bson.tmp-{alive.pid}"
        other_db = tmp_path / f"other.bson.tmp-{dead.pid}"
        not_ours = tmp_path / "mongostore.bson.tmp-notes"
        for p in (stale, running, other_db, not_ours):
            p.write_bytes(b"half a save")
        store = fresh(tmp_path)
        assert keys(store) == ["k0", "k1"]
        assert not stale.exists()
        assert running.exists() and other_db.exists() and not_ours.exists()
    finally:
        alive.kill()
        alive.wait(timeout=60)


def test_the_cli_says_it_in_one_line_not_as_an_unexpected_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mongostore.errors import MongoStoreError
    from mongostore.tools.cli import main

    (tmp_path / "mongostore.bson").write_bytes(b"\x00")
    monkeypatch.setenv("MONGOSTORE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MONGODB_URI", raising=False)
    assert issubclass(DamagedStoreFileError, MongoStoreError)
    assert main(["search", "users"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("mongostore: error: the local store file") and "unexpected" not in err
    assert f"mv {tmp_path / 'mongostore.bson'}" in err
    assert (tmp_path / "mongostore.bson").read_bytes() == b"\x00"


def test_a_writer_killed_while_an_engine_runs_is_cleaned_after_its_next_save(tmp_path: Path) -> None:
    store = seeded(tmp_path)  # the engine has looked already
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    stale = tmp_path / f"mongostore.bson.tmp-{dead.pid}"
    stale.write_bytes(b"half a save")
    store.put(NS, "k2", {"text": "z"})
    store.get(NS, "k2")
    assert not stale.exists()
