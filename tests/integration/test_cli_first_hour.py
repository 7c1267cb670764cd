"""The first hour, third pass: what a new user hits on the command line.

Arguments are checked before the store opens (nothing is made on disk, no server is asked),
``get`` shows an item's TTL and expiry, an unusable ``--data-dir`` is one line, ``--help``
names ``$XDG_DATA_HOME``.
Every test runs ``cli.main`` without an injected store, on a fresh local store directory.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import Run

from mongostore.tools import cli
from mongostore.tools.cli import EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.usefixtures("clean_store_env")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(capsys)


# --------------------------------------------------------------------------- arguments first

BAD_ARGUMENTS = [
    (["put", "users.alice", "k", '{"text": '], "the value is not valid JSON"),
    (["put", "users.alice", "k", "[1]"], "the value must be a JSON object"),
    (["put", "users..alice", "k", "{}"], "has an empty label"),
    (["put", "langgraph.x", "k", "{}"], 'cannot be "langgraph"'),
    (["put", "users.alice", "k", '{"a\\u0000": 1}'], "contains a NUL byte"),
    (["put", "users.alice", "k", "{}", "--ttl", "-1"], "--ttl must be a positive number"),
    (["put", "users.alice", "k", "{}", "--index", "text["], "is not a field path"),
    (["get", "users..alice", "k"], "has an empty label"),
    (["rm", "", "k"], "namespace is empty"),
    (["search", "users", "--filter", "{nope"], "--filter is not valid JSON"),
    (["search", "users", "--filter", '{"$where": "sleep(1)"}'], "$where"),
    (["ls", "--max-depth", "0"], "--max-depth must be at least 1"),
    (["ls", "--prefix", "a..b"], "has an empty label"),
    (["export", "users..x"], "has an empty label"),
    (["reindex", "--after", "nonsense"], "not a checkpoint"),
    (["stats", "--stale-days", "0"], "--stale-days must be positive"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused_before_the_store_opens(
    run: Run, clean_store_env: Path, argv: list[str], message: str
) -> None:
    code, out, err = run(*argv)
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("mongostore: error: ") and message in err, err
    assert not clean_store_env.exists()  # the local store was not opened: no directory, no lock, no file


def test_files_named_by_arguments_are_checked_before_the_store_opens(
    run: Run, clean_store_env: Path, tmp_path: Path
) -> None:
    for argv, message in [
        (["export", "-o", str(tmp_path)], "is a directory: give a file name"),
        (["export", "-o", str(tmp_path / "nowhere" / "x.jsonl")], "no such directory"),
        (["report", "--out", str(tmp_path / "nowhere" / "r.html")], "no such directory"),
        (["import", str(tmp_path)], "is a directory"),
        (["import", str(tmp_path / "missing.jsonl")], "no such file"),
    ]:
        code, _, err = run(*argv)
        assert code == EXIT_USAGE and err.count("\n") == 1 and message in err, (argv, err)
    assert not clean_store_env.exists()


def test_bad_arguments_are_bad_input_even_when_the_server_is_down(run: Run) -> None:
    """Checked before the server is asked: exit 2 naming the value, not exit 1 "cannot connect"."""
    code, _, err = run("--uri", "mongodb://127.0.0.1:1/", "put", "users.alice", "k", "{oops}")
    assert code == EXIT_USAGE and "the value is not valid JSON" in err and "cannot connect" not in err


def test_an_unknown_embedder_is_refused_before_the_store_is_named(run: Run, clean_store_env: Path) -> None:
    code, _, err = run("--embed", "minlm", "get", "a", "k")
    assert code == EXIT_USAGE and err.count("\n") == 1
    assert "unknown embedder 'minlm' (did you mean 'minilm'?)" in err
    assert not clean_store_env.exists()


# --------------------------------------------------------------------------- get shows the TTL


def test_get_shows_the_ttl_and_the_expiry_without_moving_it(run: Run) -> None:
    assert run("put", "users.alice", "soon", '{"text": "x"}', "--ttl", "90")[0] == EXIT_OK
    assert run("put", "users.alice", "kept", '{"text": "y"}')[0] == EXIT_OK
    code, out, _ = run("get", "users.alice", "soon")
    assert code == EXIT_OK
    assert "\nttl         90 min " in out
    line = next(x for x in out.splitlines() if x.startswith("expires_at  "))
    assert line.endswith("(in 1.5 h)")
    first = run.json("get", "users.alice", "soon")["item"]
    assert first["ttl"] == 90.0
    expires = datetime.fromisoformat(first["expires_at"])
    assert 89 * 60 < (expires - datetime.now(timezone.utc)).total_seconds() <= 90 * 60
    assert run.json("get", "users.alice", "soon")["item"]["expires_at"] == first["expires_at"]  # looking is no read
    code, out, _ = run("get", "users.alice", "kept")
    assert code == EXIT_OK and "\nttl         none: never expires\n" in out and "expires_at" not in out
    kept = run.json("get", "users.alice", "kept")["item"]
    assert kept["ttl"] is None and kept["expires_at"] is None


# --------------------------------------------------------------------------- an unusable --data-dir


def test_a_data_dir_that_is_a_file_is_one_line(run: Run, tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("not a directory")
    for given, says in [
        (afile, f"the local store's directory {afile} is a file, not a directory"),
        (afile / "sub", f"the local store's directory {afile / 'sub'} cannot be made: {afile} is a file"),
    ]:
        for argv in (["get", "a", "k"], ["put", "a", "k", "{}"], ["doctor"]):
            code, out, err = run("--data-dir", str(given), *argv)
            assert code == EXIT_USAGE and out == "", err
            assert err.count("\n") == 1 and err.startswith("mongostore: error: ") and says in err, err
            assert "--data-dir or MONGOSTORE_DATA_DIR" in err and "unexpected" not in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_a_data_dir_without_permission_is_one_line(run: Run, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for given, says in [
            (locked, "no permission to write in it"),
            (locked / "sub", f"no permission to make it in {locked}"),
        ]:
            code, _, err = run("--data-dir", str(given), "put", "a", "k", "{}")
            assert code == EXIT_USAGE and err.count("\n") == 1 and says in err, err
    finally:
        locked.chmod(0o700)


def test_a_data_dir_without_permission_is_refused_by_name_whoever_runs(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same check as above, run as root too: the permission as ``os.access`` reports it."""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    code, _, err = run("--data-dir", str(tmp_path / "sub"), "get", "a", "k")
    assert code == EXIT_USAGE and err.count("\n") == 1
    assert f"{tmp_path / 'sub'} is not usable: no permission to make it in {tmp_path}" in err
    assert not (tmp_path / "sub").exists()


def test_a_directory_the_system_refuses_is_one_line(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What only making the directory can tell (a read-only mount, a permission the check cannot
    see, as root): the store's own error, in one line naming the directory, not "unexpected"."""
    target = tmp_path / "refused" / "data"
    real_mkdir = os.mkdir

    def refuse(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        if str(path).startswith(str(tmp_path / "refused")):
            raise PermissionError(13, "Permission denied", str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", refuse)
    code, out, err = run("--data-dir", str(target), "put", "a", "k", "{}")
    assert code == EXIT_USAGE and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"mongostore: error: cannot use the local store's directory {target}: Permission denied")
    assert "unexpected" not in err and "Traceback" not in err


# --------------------------------------------------------------------------- --help


def test_help_names_xdg_data_home(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    if os.name == "posix" and os.uname().sysname != "Darwin":
        assert "(default: $MONGOSTORE_DATA_DIR, else $XDG_DATA_HOME/mongostore, else ~/.local/share/mongostore)" in text
    else:
        assert "$MONGOSTORE_DATA_DIR" in text
