"""Issue 12: a newcomer's first hour without a server.

The CLI's default store is the local one (a file under ``MONGOSTORE_DATA_DIR``, pointed at a
fresh directory by ``clean_store_env``), so these tests run ``cli.main`` without an injected
store, one call per command, as separate processes would, and a few real subprocesses.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Run

from mongostore.drivers.embedded import LocalCollection, LocalDB
from mongostore.tools import cli
from mongostore.tools.cli import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    output,
    transfer,
)
from mongostore.tools.server import redact_uri

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("clean_store_env")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(capsys)


@pytest.fixture
def data_dir(clean_store_env: Path) -> Path:
    return clean_store_env


def file_docs(data_dir: Path, name: str = "memories", db: str = "mongostore") -> list[dict[str, Any]]:
    """What is in the file, read by a new engine (as the next process would)."""
    return list(LocalCollection(LocalDB(data_dir, db), name).find({}))


# --------------------------------------------------------------------------- the local store


def test_the_local_store_keeps_data_between_commands_and_says_where(run: Run, data_dir: Path) -> None:
    code, out, err = run("put", "users.alice.memories", "pizza", '{"text": "I like pizza"}')
    where = f"local store {data_dir / 'mongostore.sqlite'}"
    assert code == EXIT_OK and out == "stored users.alice.memories / pizza in the local store\n"
    assert f"mongostore: {where} (no --uri or MONGODB_URI: kept between commands)" in err  # the path, once
    assert [d["key"] for d in file_docs(data_dir)] == ["pizza"]  # on disk, for the next process
    code, out, _ = run("get", "users.alice.memories", "pizza")
    assert code == EXIT_OK and '"text": "I like pizza"' in out
    code, _, err = run("get", "users.alice.memories", "nope")
    assert code == EXIT_NOT_FOUND and "no item 'nope' in namespace users.alice.memories in the local store" in err
    assert err.count(str(data_dir)) == 1
    doctor = run.json("doctor")
    assert doctor["data_file"] == str(data_dir / "mongostore.sqlite") and str(data_dir) in doctor["store"]
    code, out, _ = run("doctor")
    assert f"data file          {data_dir / 'mongostore.sqlite'} (" in out
    assert "server             none: the local store" in out
    assert run.json("put", "a", "k", "{}")["store"] == where


def test_data_dir_flag_and_local_uri(run: Run, data_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    assert run("put", "a", "k", '{"v": 1}', "--data-dir", str(other))[0] == EXIT_OK
    assert (other / "mongostore.sqlite").is_file() and not (data_dir / "mongostore.sqlite").exists()
    code, out, _ = run("--uri", f"mongostore-local://{other}", "get", "a", "k")
    assert code == EXIT_OK and '"v": 1' in out
    code, _, err = run("--uri", "mongostore-local://relative/dir", "get", "a", "k")
    assert code == EXIT_USAGE and "absolute path" in err
    code, _, err = run("--db", "no/slashes", "get", "a", "k")
    assert code == EXIT_USAGE and "database name 'no/slashes'" in err


def test_two_commands_at_once_lose_no_write(data_dir: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "mongostore", "--embed", "none", "put", "users.many", f"k{i}", f'{{"i": {i}}}'],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(d["key"] for d in file_docs(data_dir)) == [f"k{i}" for i in range(6)]


# --------------------------------------------------------------------------- --json: one document, errors too


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (["get", "users.alice", "missing"], EXIT_NOT_FOUND, "no item 'missing'"),
        (["--uri", "mongodb://127.0.0.1:1/", "doctor"], EXIT_FAILURE, "connection refused"),
        (["put", "users.alice", "k"], EXIT_USAGE, "required: value"),
        (["search", "users", "--filter", "[1]"], EXIT_USAGE, "--filter must be a JSON object"),
        (["put", "users.alice", "k", '{"v": NaN}'], EXIT_USAGE, "NaN"),
        ([], EXIT_USAGE, "no command"),
    ],
)
def test_json_errors_are_one_json_document(run: Run, argv: list[str], code: int, fragment: str) -> None:
    got, out, err = run(*argv, "--json")
    assert got == code
    doc = json.loads(out)  # exactly one document: json.loads refuses trailing data
    assert doc["ok"] is False and doc["exit_code"] == code and fragment in doc["error"]
    assert fragment in err


# --------------------------------------------------------------------------- fail fast, say why


def test_a_refused_connection_fails_at_once(run: Run) -> None:
    started = time.monotonic()
    code, out, err = run("--uri", "mongodb://user:s3cret@127.0.0.1:1/", "--timeout", "20", "doctor")
    assert time.monotonic() - started < 5  # not the 20 s server-selection timeout
    assert code == EXIT_FAILURE and out == ""
    assert err.startswith("mongostore: error: cannot connect to MongoDB at 127.0.0.1:1 (connection refused)")
    assert "s3cret" not in err and err.count("\n") == 1


def test_an_unresolvable_srv_host_is_a_failure_not_bad_input(run: Run) -> None:
    code, _, err = run("--uri", "mongodb+srv://user:s3cret@nonexistent.invalid/", "--timeout", "3", "doctor")
    assert code == EXIT_FAILURE
    assert "cannot resolve the mongodb+srv host nonexistent.invalid" in err and "s3cret" not in err
    code, _, err = run("--uri", "mongodb+srv://host.example.com:27017/", "doctor")  # an SRV URI takes no port
    assert code == EXIT_USAGE and "bad connection settings" in err


def test_error_lines_keep_whole_sentences() -> None:
    three = RuntimeError("Could not load embeddings.\nInstall LangChain with: pip install x.\nOr pass a function.")
    whole = "Could not load embeddings. Install LangChain with: pip install x. Or pass a function."
    assert output._one_line(three) == whole
    long = RuntimeError("First sentence. " * 60)
    cut = output._one_line(long)
    assert len(cut) <= 600 and cut.endswith("sentence.")


# --------------------------------------------------------------------------- import / export


def test_export_import_round_trip_keeps_index_choices_and_empty_keys(run: Run, data_dir: Path, tmp_path: Path) -> None:
    assert run("put", "a.b", "", '{"text": "empty key"}', "--fields", "text")[0] == EXIT_OK
    assert run("put", "a.b", "plain", '{"text": "no vectors"}', "--fields", "text", "--no-index")[0] == EXIT_OK
    assert run("put", "a.b", "own", '{"text": "x", "other": "y"}', "--fields", "text", "--index", "other")[0] == 0
    dump = tmp_path / "out.jsonl"
    assert run("export", "a", "-o", str(dump), "--fields", "text")[0] == EXIT_OK
    lines = {r["key"]: r for r in map(json.loads, dump.read_text().splitlines())}
    assert lines["plain"]["index"] is False and lines["own"]["index"] == ["other"] and "index" not in lines[""]
    fresh = tmp_path / "fresh"
    code, out, _ = run("import", str(dump), "--fields", "text", "--data-dir", str(fresh))
    assert code == EXIT_OK and "3 item(s) written, 0 rejected" in out
    vectors = file_docs(fresh, "memories_vectors")
    by_item = {(v["item_id"].split("\x00")[-1], v["field"]) for v in vectors}
    assert by_item == {("", "text"), ("own", "other")}  # index=False stayed unembedded


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_bytes(("\ufeff" + "\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


def test_every_bad_line_is_reported_and_the_rest_imported(run: Run, data_dir: Path, tmp_path: Path) -> None:
    good = '{"namespace": ["n"], "key": "g%d", "value": {"v": %d}}'
    bad = [
        ('{"namespace": ["n"], "key": "t1", "value": {}, "ttl": 1e400}', "bad number"),
        ('{"namespace": ["n"], "key": "t2", "value": {"v": NaN}}', "bad number"),
        ('{"namespace": ["n"], "key": "t3", "value": {}, "ttl": 1e10}', "bad ttl"),
        ('{"namespace": ["n"], "key": "t4", "value": {"v": "\\ud800"}}', "bad text"),
        ('{"namespace": ["n", "\\udc00"], "key": "t5", "value": {}}', "bad text"),
        ('{"namespace": ["n"], "key": "\\ud800", "value": {}}', "bad text"),
        ('{"namespace": ["n"], "key": "t7", "value": {"v": {"$oid": "zzz"}}}', "bad JSON"),
        ('{"namespace": ["n"], "key": "t8", "value": {"v": {"$numberDecimal": "x"}}}', "bad JSON"),
        ('{"namespace": ["n"], "key": "t9", "value": {"v": {"$date": 1e300}}}', "bad JSON"),
        ('{"namespace": ["n"], "key": "t10", "value": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}", "bad JSON"),
        ('{"namespace": ["n"], "key": "t11", "value": {}, "index": ["text["]}', "bad index"),
    ]
    lines = [good % (0, 0)]  # line 1 starts with a UTF-8 BOM
    for i, (line, _) in enumerate(bad, start=1):
        lines += [line, good % (i, i)]
    path = tmp_path / "in.jsonl"
    _write_lines(path, lines)
    summary = json.loads(run("import", str(path), "--batch-size", "4", "--json")[1])
    assert summary["written"] == len(bad) + 1 and summary["rejected"] == len(bad)
    assert [(r["line"], r["reason"]) for r in summary["rejections"]] == [
        (2 * i, reason) for i, (_, reason) in enumerate(bad, start=1)
    ]
    assert all(r["error"] for r in summary["rejections"])
    assert sorted(d["key"] for d in file_docs(data_dir)) == sorted(f"g{i}" for i in range(len(bad) + 1))


def test_an_interrupted_import_keeps_what_it_wrote(
    run: Run, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(f'{{"namespace": ["n"], "key": "k{i}", "value": {{}}}}\n' for i in range(10)))
    real = transfer._write_batch
    calls: list[int] = []

    def interrupted(ctx: Any, batch: Any, summary: Any, keep: bool) -> None:
        calls.append(len(batch))
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(ctx, batch, summary, keep)

    monkeypatch.setattr(transfer, "_write_batch", interrupted)
    code, _, err = run("import", str(path), "--batch-size", "4")
    assert code == EXIT_INTERRUPTED
    assert "import interrupted at line 8: 4 item(s) written" in err and "rerun the same command" in err
    assert len(file_docs(data_dir)) == 4  # the first batch was saved on the way out


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("uri", "secret"),
    [
        ("mongodb://user:pa55@host/", "pa55"),
        ("mongodb://user:pa/ss@host:27017/db", "pa/ss"),
        ("mongodb://user:p@ss@host/", "p@ss"),
        ("mongodb://user:p@s/s@h1,h2/?replicaSet=rs", "p@s/s"),
        ("mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok3n", "tok3n"),
        ("mongodb://h/?tls=true&tlsCertificateKeyFilePassword=k3ypass", "k3ypass"),
        ("mongodb+srv://u:s3cret@cluster.example.com/?retryWrites=true&appName=x", "s3cret"),
    ],
)
def test_redaction_hides_every_credential(uri: str, secret: str, run: Run) -> None:
    shown = redact_uri(uri)
    assert secret not in shown and "***" in shown
    assert shown.startswith(uri.split("://")[0] + "://")


def test_labels_are_redacted_in_setup_and_doctor(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from mongostore.tools.server import StoreSettings

    uri = "mongodb://user:p@ss/word@127.0.0.1:1/?authMechanismProperties=AWS_SESSION_TOKEN:tok3n"
    label = StoreSettings(uri=uri).label()
    assert "p@ss" not in label and "word" not in label and "tok3n" not in label
    code, out, err = run("--uri", uri, "doctor", "--json")
    assert code == EXIT_FAILURE and "tok3n" not in out + err and "word@" not in out + err


# --------------------------------------------------------------------------- small things


def test_stale_tables_are_dotted_and_limited(run: Run, data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "namespace": ["users", "carol", "memories"],
                    "key": f"k{i:02d}",
                    "value": {"kind": "x"},
                    "created_at": "2020-01-01T00:00:00+00:00",
                    "updated_at": "2020-01-01T00:00:00+00:00",
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    assert run("import", str(path))[0] == EXIT_OK  # timestamps kept by default
    code, out, _ = run("stats", "users", "--limit", "8")
    assert code == EXIT_OK and "users/carol" not in out
    assert len(re.findall(r"^users\.carol\.memories\s+k\d\d\s", out, re.M)) == 8


def test_limits_timeouts_fields_and_index_are_checked(run: Run) -> None:
    for argv, message in [
        (["search", "users", "--limit", "0"], "argument --limit: expected a number >= 1"),
        (["ls", "--limit", "0"], "argument --limit: expected a number >= 1"),
        (["doctor", "--timeout", "-1"], "argument --timeout: expected a positive number of seconds"),
        (["doctor", "--timeout", "nan"], "argument --timeout: expected a positive number of seconds"),
        (["doctor", "--fields", "text["], "--fields: the path 'text[' is not a field path"),
        (["put", "a", "k", "{}", "--index", ""], "--index '' has an empty field"),
        (["put", "a", "k", "{}", "--index", "x[y]"], "the path 'x[y]' is not a field path"),
        (["put", "a", "k", '{"v": NaN}'], "the value holds NaN, which is not a JSON number"),
        (["put", "a", "k", '{"v": 1e999}'], "the value holds 1e999, a number too large for a double"),
        (["put", "a", "k", "{}", "--ttl", "inf"], "--ttl must be a positive number of minutes"),
    ]:
        code, _, err = run(*argv)
        assert code == EXIT_USAGE and message in err, (argv, err)


def test_a_key_starting_with_a_dash_gets_a_hint(run: Run) -> None:
    code, _, err = run("put", "users.alice", "-k1", '{"a": 1}')
    assert code == EXIT_USAGE and "goes after --, e.g. mongostore put users.alice -- -k1" in err
    assert run("put", "users.alice", "--", "-k1", '{"a": 1}')[0] == EXIT_OK


def test_help_texts(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    def help_of(*argv: str) -> str:
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args([*argv, "--help"])
        return capsys.readouterr().out

    top = help_of()
    assert "connection (also after the command)" in top and "--data-dir DIR" in top and "output" in top
    for command in ("put", "get", "rm"):
        text = help_of(command)
        assert "the item's key within the namespace" in text
        assert "MongoDB URI (default" not in text  # connection options: listed once, in mongostore --help
        assert "--uri --data-dir --db" in text
    assert "'mongostore_demo'" in help_of("demo")


def test_examples_run_from_the_root_and_their_snippet_is_a_script() -> None:
    config = json.loads((ROOT / "examples" / "langgraph.json").read_text())
    assert config["graphs"]["memory"] == "mongostore.tools.agent_graph:graph"  # a module: any working directory
    assert "examples/.langgraph_api/" in (ROOT / ".gitignore").read_text().splitlines()
    readme = (ROOT / "examples" / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", readme, re.S)
    assert snippet is not None
    ast.parse(snippet.group(1))  # top-level await would be a SyntaxError
    assert "langgraph dev --config examples/langgraph.json" in readme


def test_piping_between_commands_on_the_local_store_does_not_deadlock(data_dir: Path, tmp_path: Path) -> None:
    """``export | import -`` and ``get --json | put -`` on one store: more than a pipe buffer."""
    path = tmp_path / "many.jsonl"
    rows = ({"namespace": ["src"], "key": f"k{i}", "value": {"pad": "x" * 400}} for i in range(300))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = [sys.executable, "-m", "mongostore", "--embed", "none"]
    assert subprocess.run([*base, "import", str(path)], capture_output=True, timeout=120, check=False).returncode == 0
    shell = (
        f'{shlex.join([*base, "export", "src"])} | sed \'s/"src"/"dst"/\' | {shlex.join([*base, "import", "-"])}'
        f" && {shlex.join([*base, 'get', 'src', 'k1', '--json'])} | {shlex.join([*base, 'put', 'dst', 'copy', '-'])}"
    )
    proc = subprocess.run(shell, shell=True, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    keys = [d["key"] for d in file_docs(data_dir) if d["namespace"] == ["dst"]]
    assert len(keys) == 301 and "copy" in keys


def test_the_demo_can_keep_its_memories_in_the_local_store(data_dir: Path) -> None:
    """The demo's graph runs nodes on worker threads: the store must not be locked for the whole command."""
    base = [sys.executable, "-m", "mongostore", "--embed", "hashing"]
    demo = subprocess.run(
        [*base, "demo", "--uri", "mongostore-local://"], capture_output=True, text=True, timeout=120, check=False
    )
    assert demo.returncode == 0, demo.stderr
    assert "The memories stay in database 'mongostore_demo'" in demo.stdout
    found = subprocess.run(
        [*base, "--db", "mongostore_demo", "search", "alice.memories", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert found.returncode == 0, found.stderr
    assert "I like pizza" in {i["value"]["text"] for i in json.loads(found.stdout)["items"]}
    assert (data_dir / "mongostore_demo.sqlite").is_file()
