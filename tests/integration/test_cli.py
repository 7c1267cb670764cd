"""The ``mongostore`` CLI, run in-process with ``cli.main([...], store=...)``.

The embedded default is a fresh in-memory store per process, so commands that
must see each other's writes share one injected ``MongoStore`` on mongomock.
A few tests run the real console entry point in a subprocess.
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pymongo.errors import AutoReconnect

from mongostore import MongoStore
from mongostore.tools.cli import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, Progress, main, parse_namespace
from mongostore.tools.embeddings import HashingEmbeddings
from mongostore.tools.server import StoreSettings, redact_uri, resolve_embeddings


def make(embeddings: HashingEmbeddings | None = None, collection: Any = None) -> MongoStore:
    emb = embeddings or HashingEmbeddings(64)
    index = {"dims": emb.dims, "embed": emb, "fields": ["text"]}
    store = MongoStore(collection, index=index) if collection is not None else MongoStore.in_memory(index=index)
    store.setup()
    return store


@pytest.fixture
def store() -> Iterator[MongoStore]:
    yield make()


pytestmark = pytest.mark.usefixtures("clean_store_env")


class Run:
    def __init__(self, capsys: pytest.CaptureFixture[str], store: MongoStore | None) -> None:
        self.capsys = capsys
        self.store = store

    def __call__(self, *argv: str, store: MongoStore | None = None) -> tuple[int, str, str]:
        code = main(list(argv), store=store or self.store)
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *argv: str, store: MongoStore | None = None) -> Any:
        code, out, err = self(*argv, "--json", store=store)
        assert code == EXIT_OK, err
        return json.loads(out)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], store: MongoStore) -> Run:
    return Run(capsys, store)


def seed(run: Run) -> None:
    for ns, key, text, kind in [
        ("users.alice.memories", "k1", "I like pizza", "preference"),
        ("users.alice.memories", "k2", "I am allergic to peanuts", "health"),
        ("users.bob.memories", "k1", "I like hiking", "preference"),
        ("users.bob.notes", "n1", "call the dentist", "todo"),
    ]:
        code, _, err = run("put", ns, key, json.dumps({"text": text, "kind": kind}))
        assert code == EXIT_OK, err


# --------------------------------------------------------------------------- items


def test_put_get_rm(run: Run) -> None:
    code, out, _ = run("put", "users.alice.memories", "k1", '{"text": "I like pizza"}')
    assert (code, out) == (EXIT_OK, "stored users.alice.memories / k1 in the given store\n")
    code, out, _ = run("get", "users.alice.memories", "k1")
    assert code == EXIT_OK
    assert "namespace   users.alice.memories" in out and '"text": "I like pizza"' in out
    got = run.json("get", "users.alice.memories", "k1")["item"]
    assert got["namespace"] == ["users", "alice", "memories"] and got["value"] == {"text": "I like pizza"}
    assert datetime.fromisoformat(got["created_at"]).tzinfo is not None
    assert run.json("rm", "users.alice.memories", "k1") == {
        "ok": True,
        "command": "rm",
        "store": "the given store",
        "namespace": ["users", "alice", "memories"],
        "key": "k1",
        "deleted": True,
    }
    code, _, err = run("get", "users.alice.memories", "k1")
    assert code == EXIT_NOT_FOUND
    assert err == "mongostore: error: no item 'k1' in namespace users.alice.memories in the given store\n"
    code, _, err = run("rm", "users.alice.memories", "k1")
    assert code == EXIT_NOT_FOUND and "--force" in err
    code, out, _ = run("rm", "users.alice.memories", "k1", "--force")
    assert code == EXIT_OK and "nothing to delete" in out


def test_put_options_ttl_no_index_and_stdin(run: Run, store: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run("put", "a.b", "t", '{"text": "soon gone"}', "--ttl", "5")
    assert code == EXIT_OK and "expires in 5 min" in out
    doc = store.collection.find_one({"key": "t"})
    assert doc is not None and doc["ttl_minutes"] == 5.0
    run("put", "a.b", "plain", '{"text": "not embedded"}', "--no-index")
    assert store.vectors_collection is not None
    assert store.vectors_collection.count_documents({"item_id": {"$regex": "plain$"}}) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "from stdin", "when": {"$date": "2024-01-02T03:04:05Z"}}'))
    assert run("put", "a.b", "s", "-")[0] == EXIT_OK
    item = store.get(("a", "b"), "s")
    assert item is not None and item.value["when"] == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["put", "users..alice", "k", "{}"], "empty label"),
        (["put", "", "k", "{}"], "namespace is empty"),
        (["put", "langgraph.x", "k", "{}"], 'cannot be "langgraph"'),
        (["put", "a", "k", '{"a":'], "the value is not valid JSON"),
        (["put", "a", "k", "[1, 2]"], "must be a JSON object"),
        (["put", "a", "k", '{"$set": {"a\\u0000": 1}}'], "contains a NUL byte"),
        (["put", "a", "k", "{}", "--ttl", "0"], "--ttl must be a positive"),
        (["search", "--filter", "{nope"], "--filter is not valid JSON"),
        (["search", "--filter", "[1]"], "--filter must be a JSON object"),
        (["search", "--filter", '{"$where": "sleep(1000)"}'], "$where"),
        (["search", "--filter", '{"a": {"$regex": "x"}}'], "$regex"),
        (["search", "--limit", "-1"], "expected a number >= 0"),
        (["ls", "--max-depth", "0"], "--max-depth must be at least 1"),
        (["reindex", "--after", "nonsense"], "not a checkpoint"),
        (["frobnicate"], "invalid choice"),
        (["import", "/does/not/exist.jsonl"], "no such file"),
        (["stats", "--stale-days", "0"], "--stale-days must be positive"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run: Run, argv: list[str], message: str) -> None:
    code, out, err = run(*argv)
    assert code == EXIT_USAGE
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mongostore") and "error:" in lines[0] and message in lines[0], err


def test_no_command_prints_help(run: Run) -> None:
    code, _, err = run()
    assert code == EXIT_USAGE and "usage: mongostore" in err


# --------------------------------------------------------------------------- search and ls


def test_search_table_json_filter_and_paging(run: Run) -> None:
    seed(run)
    code, out, _ = run("search", "users", "--query", "what food do I like?")
    assert code == EXIT_OK
    header, rule, first, *_ = out.splitlines()
    assert header.split() == ["namespace", "key", "score", "updated", "value"]
    assert set(rule) <= {"-", " "}
    assert "I like pizza" in first or "I like hiking" in first  # both share the word "like"
    hits = run.json("search", "users.alice", "--query", "what food do I like?")["items"]
    assert hits[0]["value"]["text"] == "I like pizza"
    assert all(isinstance(h["score"], float) for h in hits)
    prefs = run.json("search", "users", "--filter", '{"kind": "preference"}')["items"]
    assert sorted(h["value"]["text"] for h in prefs) == ["I like hiking", "I like pizza"]
    everything = run.json("search", "--limit", "10")["items"]
    assert len(everything) == 4
    page = [h["key"] for h in run.json("search", "--limit", "2")["items"]] + [
        h["key"] for h in run.json("search", "--limit", "2", "--offset", "2")["items"]
    ]
    assert sorted(page) == sorted(h["key"] for h in everything)
    code, _, err = run("search", "--limit", "2")
    assert "more may follow (--offset 2)" in err
    code, out, err = run("search", "nobody")
    assert code == EXIT_OK and out == "" and "no items under nobody" in err


def test_ls_prefix_suffix_depth(run: Run) -> None:
    seed(run)
    _, out, _ = run("ls")
    assert out.splitlines() == ["users.alice.memories", "users.bob.memories", "users.bob.notes"]
    ls = run.json("ls", "--suffix", "memories", "--max-depth", "2")
    assert ls["namespaces"] == [["users", "alice"], ["users", "bob"]]
    assert run.json("ls", "--prefix", "users.*.notes")["namespaces"] == [["users", "bob", "notes"]]
    ls = run.json("ls", "--prefix", "users.bob")
    assert ls["namespaces"] == [["users", "bob", "memories"], ["users", "bob", "notes"]]
    assert run.json("ls", "--limit", "1", "--offset", "1")["namespaces"] == [["users", "bob", "memories"]]


def test_options_after_or_before_the_command(run: Run) -> None:
    seed(run)
    assert run.json("ls") == json.loads(run("--json", "ls")[1])


# --------------------------------------------------------------------------- export / import


def test_export_names_the_fields_of_the_vectors_the_item_lists(run: Run, store: MongoStore) -> None:
    """A re-put with other fields leaves the old field's vector for VECTOR_GRACE (issue 34): no item
    lists it, so export does not count it among the item's fields."""
    store.put(("u",), "k", {"text": "x", "alt": "y"}, index=["alt"])
    store.put(("u",), "k", {"text": "x", "alt": "y", "more": "z"}, index=["more"])
    assert store.status()["stale_vectors"] == 1
    code, out, _ = run("export", "u")
    assert code == EXIT_OK and json.loads(out)["index"] == ["more"]


def test_export_import_round_trip(run: Run, store: MongoStore, tmp_path: Path) -> None:
    seed(run)
    when = datetime(2024, 5, 1, tzinfo=timezone.utc)
    store.put(("users", "alice", "memories"), "ttl", {"text": "short lived", "when": when}, ttl=30)
    out_file = tmp_path / "dump.jsonl"
    code, out, err = run("export", "users.alice", "-o", str(out_file))
    assert code == EXIT_OK and out == "" and "exported 3 item(s) under users.alice" in err
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [(r["namespace"], r["key"]) for r in lines] == [
        (["users", "alice", "memories"], "k1"),
        (["users", "alice", "memories"], "k2"),
        (["users", "alice", "memories"], "ttl"),
    ]
    assert set(lines[0]) == {"namespace", "key", "value", "created_at", "updated_at"}
    assert lines[2]["ttl"] == 30.0 and lines[2]["value"]["when"] == {"$date": "2024-05-01T00:00:00Z"}
    datetime.fromisoformat(lines[0]["created_at"])
    # stdout export is pure JSON Lines
    code, out, _ = run("export")
    assert code == EXIT_OK and len(out.splitlines()) == 5

    target = make()
    summary = run.json("import", str(out_file), store=target)
    assert summary == {
        "ok": True,
        "command": "import",
        "store": "the given store",
        **{"lines": 3, "written": 3, "rejected": 0, "by_reason": {}, "rejections": []},
    }
    for rec in lines:
        item = target.get(tuple(rec["namespace"]), rec["key"])
        assert item is not None and item.value == store.get(tuple(rec["namespace"]), rec["key"]).value  # type: ignore[union-attr]
    doc = target.collection.find_one({"key": "ttl"})
    assert doc is not None and doc["ttl_minutes"] == 30.0 and "expires_at" in doc
    # semantic search works on the imported items (they were embedded on import)
    hits = target.search(("users",), query="pizza please")
    assert hits[0].key == "k1" and hits[0].score is not None


def test_import_is_idempotent_and_reports_rejections(run: Run, tmp_path: Path) -> None:
    good = [{"namespace": ["n", str(i % 3)], "key": f"k{i}", "value": {"text": f"item {i}"}} for i in range(7)]
    lines = [json.dumps(r) for r in good]
    lines.insert(2, "{not json")
    lines.insert(4, "")
    lines.insert(5, '["a list"]')
    lines.append('{"namespace": ["langgraph"], "key": "x", "value": {}}')
    lines.append('{"namespace": "n.0", "key": "bad", "value": {"$inc": {"a\\u0000": 1}}}')
    lines.append('{"namespace": ["n"], "key": 7, "value": {}}')
    lines.append('{"namespace": ["n"], "key": "t", "value": {}, "ttl": "soon"}')
    lines.append('{"namespace": "n.0", "key": "dotted", "value": {"text": "dotted namespace"}}')
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    target = make()
    code, out, err = run("import", str(path), "--batch-size", "3", store=target)
    assert code == EXIT_USAGE
    assert "8 item(s) written, 6 rejected" in out
    assert "line 3: bad JSON:" in out and "line 6: bad record: expected a JSON object" in out
    assert "bad namespace" in out and "bad key" in out
    assert "invalid value: field name 'a\\x00' in value.$inc contains a NUL" in out
    assert "bad ttl" in out
    assert "6 line(s) rejected; every other line was written" in err
    assert target.collection.count_documents({}) == 8
    summary = json.loads(run("import", str(path), "--json", store=target)[1])
    assert summary["written"] == 8 and summary["rejected"] == 6
    assert [r["line"] for r in summary["rejections"]] == [3, 6, 11, 12, 13, 14]
    assert summary["by_reason"] == {
        "bad JSON": 1,
        "bad record": 1,
        "bad namespace": 1,
        "invalid value": 1,
        "bad key": 1,
        "bad ttl": 1,
    }
    assert target.collection.count_documents({}) == 8  # no duplicates on a rerun
    assert target.get(("n", "0"), "dotted") is not None


def test_import_rerun_after_a_failure_completes(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(json.dumps({"namespace": ["n"], "key": f"k{i}", "value": {"text": f"t{i}"}}) + "\n" for i in range(10))
    )
    target = make()
    real_batch = target.batch
    calls = {"n": 0}

    def flaky(ops: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise AutoReconnect("connection reset by peer")
        return real_batch(ops)

    monkeypatch.setattr(target, "batch", flaky)
    code, _, err = run("import", str(path), "--batch-size", "3", store=target)
    assert code == EXIT_FAILURE
    assert err.count("\n") == 1 and "after writing 6 item(s)" in err and "Rerun the same command" in err
    assert target.collection.count_documents({}) == 6
    monkeypatch.setattr(target, "batch", real_batch)
    assert run.json("import", str(path), store=target)["written"] == 10
    assert target.collection.count_documents({}) == 10


def test_import_from_stdin_keeps_timestamps_unless_reset(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    # An import of an export restores the history stats and report show (issue 29, item 4).
    old = "2020-01-02T03:04:05+00:00"
    rec = {"namespace": ["n"], "key": "k", "value": {"text": "x"}, "created_at": old, "updated_at": old}
    target = make()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((json.dumps(rec) + "\n").encode())))
    assert run.json("import", "-", store=target)["written"] == 1
    item = target.get(("n",), "k")
    assert item is not None
    assert item.created_at == item.updated_at == datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)  # by default
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((json.dumps(rec) + "\n").encode())))
    fresh = make()
    assert run.json("import", "-", "--reset-timestamps", store=fresh)["written"] == 1
    item = fresh.get(("n",), "k")
    assert item is not None and item.created_at.year >= 2025  # the import time, as for any put
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((json.dumps(rec) + "\n").encode())))
    assert run.json("import", "-", "--keep-timestamps", store=target)["written"] == 1  # still accepted
    item = target.get(("n",), "k")
    assert item is not None and item.created_at.year == 2020


def test_export_streams_with_a_cursor(run: Run, store: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph.store.base import PutOp

    # (mongomock's bulk upserts are quadratic: 300 items keep this fast)
    store.batch([PutOp(("big",), f"k{i:05d}", {"text": f"item {i}"}) for i in range(300)])
    seen: dict[str, Any] = {}
    real_find = store.collection.find

    def find(*args: Any, **kwargs: Any) -> Any:
        cursor = real_find(*args, **kwargs)
        seen["cursor"] = cursor
        return cursor

    monkeypatch.setattr(store.collection, "find", find)
    code, out, _ = run("export", "big")
    assert code == EXIT_OK and len(out.splitlines()) == 300
    # export iterated a cursor (read in batches), never a list of the whole collection
    assert "cursor" in seen and type(seen["cursor"]).__name__.endswith("Cursor")


# --------------------------------------------------------------------------- reindex


def test_reindex_after_a_model_change_keeps_timestamps(run: Run, store: MongoStore) -> None:
    seed(run)
    before = {d["_id"]: d["updated_at"] for d in store.collection.find({})}
    new_model = HashingEmbeddings(32)
    changed = make(new_model, collection=store.collection)
    assert changed.vectors_collection is not None
    # The old 64-dim vectors are still there: a search with the new model cannot use them.
    assert {len(v["embedding"].as_vector().data) for v in changed.vectors_collection.find({})} == {64}
    result = run.json("reindex", "--batch-size", "3", store=changed)
    assert result["reindexed"] == 4 and result["batches"] == 2
    assert new_model.texts_embedded == 4
    assert {len(v["embedding"].as_vector().data) for v in changed.vectors_collection.find({})} == {32}
    assert {d["_id"]: d["updated_at"] for d in changed.collection.find({})} == before
    hits = changed.search(("users",), query="peanuts")
    assert hits[0].key == "k2" and hits[0].score is not None and hits[0].score > 0.3


def test_reindex_is_resumable(run: Run, store: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph.store.base import PutOp

    store.batch([PutOp(("n",), f"k{i}", {"text": f"item number {i}"}) for i in range(10)])
    model = HashingEmbeddings(64)
    again = make(model, collection=store.collection)
    real_batch = again.batch
    calls = {"n": 0}

    def flaky(ops: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise AutoReconnect("primary stepped down")
        return real_batch(ops)

    monkeypatch.setattr(again, "batch", flaky)
    code, _, err = run("reindex", "--batch-size", "4", store=again)
    assert code == EXIT_FAILURE
    assert "reindex stopped after 8 item(s); resume with: mongostore reindex --after" in err
    assert "mongostore: error: reindex failed: primary stepped down" in err
    hint = next(line for line in err.splitlines() if "resume with" in line)
    argv = shlex.split(hint.split("resume with: ", 1)[1].replace(" (same options)", ""))
    assert argv[:3] == ["mongostore", "reindex", "--after"]
    monkeypatch.setattr(again, "batch", real_batch)
    model.reset_counters()
    result = run.json(*argv[1:], store=again)
    assert result["reindexed"] == 2
    assert model.texts_embedded == 2  # only the two items after the checkpoint


def test_reindex_skips_unindexed_items_unless_all(run: Run, store: MongoStore) -> None:
    store.put(("n",), "a", {"text": "indexed"})
    store.put(("n",), "b", {"text": "not indexed"}, index=False)
    assert run.json("reindex")["reindexed"] == 1
    assert run.json("reindex", "--all")["reindexed"] == 2
    assert store.vectors_collection is not None
    assert store.vectors_collection.count_documents({}) == 2


def test_reindex_needs_an_index(run: Run) -> None:
    bare = MongoStore.in_memory()
    code, _, err = run("reindex", store=bare)
    assert code == EXIT_USAGE and "reindex needs an index" in err


# --------------------------------------------------------------------------- setup, doctor, stats, report


def test_setup_and_doctor(run: Run) -> None:
    fresh = make()
    code, out, _ = run("setup", store=fresh)
    assert code == EXIT_OK and "path_key" in out and "exact ranking" in out
    seed(run)
    report = run.json("doctor")
    assert report["ok"] is True and report["problems"] == []
    assert report["items"] == 4 and report["vectors"] == 4 and report["search_path"] == "local"
    assert report["vector_search_available"] is False
    assert "path_key" in report["item_indexes"]
    code, out, _ = run("doctor")
    assert code == EXIT_OK and out.rstrip().endswith("ok") and "vectors            4" in out


def test_doctor_counts_items_whose_vectors_are_missing_and_reindex_repairs_them(run: Run, store: MongoStore) -> None:
    seed(run)
    assert store.vectors_collection is not None
    store.vectors_collection.delete_many({"item_id": {"$regex": "bob"}})  # as a raced delete would leave it
    report = run.json("doctor")
    assert report["items_missing_vectors"] == 2
    assert any("2 item(s) list texts whose vectors are missing" in line for line in report["info"])
    code, _, err = run("reindex")
    assert code == EXIT_OK, err
    assert run.json("doctor")["items_missing_vectors"] == 0


def test_doctor_reports_missing_indexes(run: Run) -> None:
    emb = HashingEmbeddings(16)
    bare = MongoStore.in_memory(index={"dims": 16, "embed": emb})
    code, out, _ = run("doctor", store=bare)
    assert code == EXIT_FAILURE and "PROBLEM: items collection lacks indexes" in out and "mongostore setup" in out


def test_stats_and_report(run: Run, tmp_path: Path) -> None:
    seed(run)
    code, out, _ = run("stats", "users")
    assert code == EXIT_OK and "Items per namespace" in out and "alice" in out and "preference" in out
    data = run.json("stats", "users", "--period", "day", "--no-breakdown")
    assert data["prefix"] == ["users"] and data["breakdown"] is None and data["namespaces"]["total_items"] == 4
    page = tmp_path / "r.html"
    code, out, _ = run("report", "users", "--out", str(page), "--title", "Memories <test>")
    assert code == EXIT_OK and str(page) in out
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "Memories &lt;test&gt;" in html and "<script" not in html


# --------------------------------------------------------------------------- connection and settings


def test_in_memory_store_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    r = Run(capsys, None)
    code, out, err = r("--embed", "hashing", "--uri", "mongomock://", "doctor")
    assert code == EXIT_OK
    assert "embedded in-memory store (mongomock)" in err and "lost when this command exits" in err
    assert "embedded in-memory store" in out and "temporary" in out
    code, out, err = r("get", "a", "k", "--embed", "none", "--uri", "mongomock://")
    assert code == EXIT_NOT_FOUND and "starts empty" in err and "leave out --uri for the local store" in err


def test_settings_from_env(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    r = Run(capsys, None)
    monkeypatch.setenv("MONGODB_URI", "mongomock://")
    monkeypatch.setenv("MONGOSTORE_EMBED", "hashing")
    monkeypatch.setenv("MONGOSTORE_DIMS", "48")
    monkeypatch.setenv("MONGOSTORE_FIELDS", "text, tags[*]")
    monkeypatch.setenv("MONGOSTORE_DB", "envdb")
    report = r.json("doctor")
    assert report["index"] == "dims=48, fields=text,tags[*]"
    assert "envdb" in report["store"]
    assert r.json("doctor", "--dims", "24", "--db", "clidb")["index"].startswith("dims=24")
    monkeypatch.setenv("MONGOSTORE_DIMS", "lots")
    code, _, err = r("doctor")
    assert code == EXIT_USAGE and "MONGOSTORE_DIMS must be a positive integer" in err


@pytest.mark.parametrize(
    ("embed", "message"),
    [
        ("nope", "unknown embedder 'nope'"),
        ("acme:some-model", "set the vector size of 'acme:some-model' with --dims"),
        ("openai:text-embedding-3-small", "index['embed'] is not usable"),
    ],
)
def test_bad_embedder_is_exit_2(capsys: pytest.CaptureFixture[str], embed: str, message: str) -> None:
    code, _, err = Run(capsys, None)("--embed", embed, "doctor")
    assert code == EXIT_USAGE and message in err


def test_unreachable_server_is_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = Run(capsys, None)(
        "--uri", "mongodb://user:s3cret@127.0.0.1:1/", "--timeout", "0.3", "--embed", "hashing", "doctor"
    )
    assert code == EXIT_FAILURE and out == ""
    assert err.count("\n") == 1
    assert err.startswith("mongostore: error: cannot connect to MongoDB at 127.0.0.1:1 (connection refused)")
    assert "s3cret" not in err


def test_resolve_embeddings_and_redaction() -> None:
    assert resolve_embeddings("none") is None
    emb, dims, desc = resolve_embeddings("hashing", 12)  # type: ignore[misc]
    assert isinstance(emb, HashingEmbeddings) and dims == 12 and "word-overlap" in desc
    assert resolve_embeddings("openai:text-embedding-3-small")[1] == 1536  # type: ignore[index]
    assert redact_uri("mongodb+srv://bob:pw@x.example.net/db") == "mongodb+srv://bob:***@x.example.net/db"
    assert redact_uri("mongodb://localhost") == "mongodb://localhost"
    settings = StoreSettings.from_env({"MONGODB_URI": "mongodb://a:b@h", "MONGOSTORE_COLLECTION": "c"})
    assert settings.collection == "c" and not settings.in_memory and "a:***@h" in settings.label()


def test_parse_namespace() -> None:
    assert parse_namespace("users.alice.memories") == ("users", "alice", "memories")
    assert parse_namespace("users.alice.") == ("users", "alice")
    assert parse_namespace("", allow_empty=True) == ()
    assert parse_namespace("a b.c:d") == ("a b", "c:d")


def test_progress_bar_rendering() -> None:
    sink = io.StringIO()
    bar = Progress("import", 200, stream=sink, enabled=True)
    bar.update(50, force=True)
    bar.update(200)
    bar.close()
    text = sink.getvalue()
    assert "\rimport [#######.......................]  25% 50/200" in text
    assert "100% 200/200" in text and text.endswith("\n")
    quiet = io.StringIO()
    off = Progress("x", 10, stream=quiet)  # not a TTY: disabled
    off.update(5)
    off.close()
    assert quiet.getvalue() == ""
    counter = Progress("lines", None, stream=io.StringIO(), enabled=True)
    counter.update(1234, force=True)
    assert counter.render() == "lines 1,234"


# --------------------------------------------------------------------------- real processes


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mongostore", *argv], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_python_dash_m_entry_point() -> None:
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("mongostore ")
    proc = _cli("put", "a..b", "k", "{}")
    assert proc.returncode == EXIT_USAGE
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("mongostore: error: namespace 'a..b' has an empty label")


def test_unexpected_errors_are_one_line(run: Run, store: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(store, "get", boom)
    code, _, err = run("get", "a", "k")
    assert code == EXIT_FAILURE
    assert err == (  # every line of the message, on one line: never cut mid-sentence
        "mongostore: error: unexpected RuntimeError: disk on fire second line "
        "(set MONGOSTORE_DEBUG=1 for the traceback)\n"
    )


def test_expired_items_are_not_exported(run: Run, store: MongoStore) -> None:
    store.put(("n",), "old", {"text": "x"}, ttl=1)
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    store.collection.update_one({"key": "old"}, {"$set": {"expires_at": past}})
    store.put(("n",), "new", {"text": "y"})
    _, out, _ = run("export")
    assert [json.loads(line)["key"] for line in out.splitlines()] == ["new"]


def test_reindex_logs_checkpoints_without_a_bar(run: Run, store: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from mongostore.tools.cli import admin

    seed(run)
    monkeypatch.setattr(admin, "CHECKPOINT_EVERY", 0.0)
    code, out, err = run("reindex", "--batch-size", "2")
    assert code == EXIT_OK and "reindexed 4 item(s)" in out
    lines = [line for line in err.splitlines() if "checkpoint --after" in line]
    assert len(lines) == 2 and lines[0].startswith("mongostore: reindex: 2/4 item(s); checkpoint --after ")
    token = shlex.split(lines[0].split("checkpoint ", 1)[1])[1]
    assert run.json("reindex", "--after", token)["reindexed"] == 2


def test_progress_suffix() -> None:
    bar = Progress("import", 1000, stream=io.StringIO(), enabled=True)
    bar.update(500, suffix="12 lines")
    assert bar.render().endswith(" 50% 12 lines")


def test_the_cli_knows_the_demo_database_without_importing_the_demo() -> None:
    from mongostore.tools import demo
    from mongostore.tools.cli import parser

    assert parser.DEMO_DB == demo.DEMO_DB
    probe = (
        "import sys, mongostore.tools.cli; mongostore.tools.cli.build_parser(); "
        "print('mongostore.tools.demo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
