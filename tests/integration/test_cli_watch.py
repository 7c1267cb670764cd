"""``mongostore watch``: the change feed printed like ``tail -f``. In-process runs stop on ``--count`` /
``--seconds``; the Ctrl-C run is a subprocess with timeouts on every wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mongostore import MongoStore
from mongostore.tools.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_watch_prints_the_changes_under_its_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = MongoStore.local(tmp_path)
    with store.watch() as feed:  # from here on the local store keeps a change log
        start = dict(feed.resume_token or {})
    store.put(("users", "alice"), "k1", {"text": "hi"})
    store.put(("usersX",), "k1", {"text": "sibling"})
    store.delete(("users", "alice"), "k1")
    token = json.dumps(start)
    assert main(["watch", "users", "--start-after", token, "--count", "2", "--seconds", "20"], store=store) == EXIT_OK
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].split()[2:] == ["put", "users.alice", "k1", '{"text":', '"hi"}']
    assert lines[1].split()[2:] == ["delete", "users.alice", "k1"]
    assert "stopped after 2 change(s)" in err and "--start-after" in err

    assert (
        main(["watch", "users", "--json", "--start-after", token, "--count", "2", "--seconds", "20"], store=store) == 0
    )
    out, _ = capsys.readouterr()
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["op"], d["namespace"], d["key"]) for d in docs] == [
        ("put", ["users", "alice"], "k1"),
        ("delete", ["users", "alice"], "k1"),
    ]
    assert docs[0]["value"] == {"text": "hi"} and "value" not in docs[1]
    # The printed token resumes after its change.
    after = json.dumps(docs[0]["resume_token"])
    assert (
        main(["watch", "users", "--json", "--start-after", after, "--count", "1", "--seconds", "20"], store=store) == 0
    )
    assert [json.loads(line)["op"] for line in capsys.readouterr()[0].splitlines()] == ["delete"]


def test_watch_stops_after_seconds_with_nothing_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = MongoStore.local(tmp_path)
    started = time.monotonic()
    assert main(["watch", "users", "--seconds", "0.5"], store=store) == EXIT_OK
    assert time.monotonic() - started < 10
    out, err = capsys.readouterr()
    assert out == "" and "stopped after 0 change(s)" in err


def test_watch_on_the_in_memory_store_says_what_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--uri", "mongomock://", "watch", "users"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "replica set, a sharded cluster or Atlas" in err and "MongoStore.local()" in err


def test_watch_refuses_a_token_that_is_not_a_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = MongoStore.local(tmp_path)
    assert main(["watch", "users", "--start-after", "[1]"], store=store) == EXIT_USAGE
    assert main(["watch", "users", "--start-after", "{nope"], store=store) == EXIT_USAGE
    assert "--start-after" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_ctrl_c_stops_watch_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "MONGOSTORE_DATA_DIR": str(tmp_path)}
    env.pop("MONGODB_URI", None)
    err_path = tmp_path / "watch.err"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mongostore", "watch", "users", "--json"],
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 30
            while "watching" not in err_path.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, err_path.read_text()
                time.sleep(0.05)
            assert "watching" in err_path.read_text()
            MongoStore.local(tmp_path).put(("users", "alice"), "k1", {"text": "hi"})
            time.sleep(1.0)  # the watcher looks every 50 ms
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert proc.returncode == EXIT_OK
    assert [json.loads(line)["key"] for line in out.splitlines()] == ["k1"]
    err = err_path.read_text()
    assert "stopped after 1 change(s)" in err and "Traceback" not in err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt, on purpose
def test_ctrl_c_is_also_a_flag_the_watch_loop_reads() -> None:
    """Python drops a KeyboardInterrupt raised inside a finalizer ("Exception ignored in ..."); the watch
    loop also reads a flag the handler sets, so a Ctrl-C landing there still stops it. The handler is put
    back afterwards."""
    from mongostore.tools.cli.watch import _CtrlC

    before = signal.getsignal(signal.SIGINT)
    flag = _CtrlC()
    assert not flag.is_set()

    class Finalized:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # delivered while this finalizer runs: its exception is dropped
            time.sleep(0.05)

    try:
        Finalized()
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    assert flag.is_set()
    flag.restore()
    assert signal.getsignal(signal.SIGINT) is before
