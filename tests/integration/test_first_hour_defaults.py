"""Issue 29, the first hour, second pass: one set of defaults for the tools.

Run like ``test_cli_newcomer``: ``cli.main`` on the local store in a fresh directory
(``clean_store_env``), one call per command, as separate processes would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Run

from mongostore.drivers.embedded import LocalCollection, LocalDB
from mongostore.tools.cli import EXIT_OK, main
from mongostore.tools.server import StoreSettings

pytestmark = pytest.mark.usefixtures("clean_store_env")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(capsys)


def vector_fields(data_dir: Path) -> list[str]:
    vectors = LocalCollection(LocalDB(data_dir, "mongostore"), "memories_vectors")
    return sorted(str(d["field"]) for d in vectors.find({}))


# ------------------------------------------------------------------- item 3: what is embedded


def test_the_cli_and_the_agent_server_embed_text_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONGOSTORE_FIELDS", raising=False)
    index, _ = StoreSettings.from_env({"MONGOSTORE_EMBED": "hashing"}).index()  # make_store's settings
    assert index is not None and index["fields"] == ["text"]
    examples = json.loads((Path(__file__).resolve().parents[2] / "examples" / "langgraph.json").read_text())
    assert examples["env"].get("MONGOSTORE_FIELDS", "text") == "text"  # the Agent Server example agrees


def test_a_cli_put_embeds_the_text_field_and_says_when_there_is_none(run: Run, clean_store_env: Path) -> None:
    code, _, err = run("put", "users.alice.memories", "pizza", '{"text": "I like pizza", "kind": "preference"}')
    assert code == EXIT_OK and "no text" not in err
    assert vector_fields(clean_store_env) == ["text"]  # not "$": the whole value as JSON
    code, _, err = run("put", "users.alice.memories", "plain", '{"note": "no text field"}')
    assert code == EXIT_OK
    assert "no text at text" in err and "--fields $" in err
    code, _, err = run("put", "users.alice.memories", "whole", '{"note": "x"}', "--fields", "$")
    assert code == EXIT_OK and "no text" not in err
    assert vector_fields(clean_store_env) == ["$", "text"]


def test_search_scores_as_the_demo_does(run: Run) -> None:
    run("put", "users.alice.memories", "pizza", '{"text": "I like pizza", "kind": "preference"}')
    code, out, _ = run("search", "users.alice", "--query", "I like pizza", "--json")
    assert code == EXIT_OK
    data: Any = json.loads(out)
    results = data["items"] if isinstance(data, dict) else data
    assert results[0]["score"] == pytest.approx(1.0, abs=1e-6)  # the text alone, not the value's JSON


# ------------------------------------------------------------------- item 8: the local store's cost


def test_doctor_shows_the_local_files_size(run: Run, clean_store_env: Path) -> None:
    run("put", "users.alice.memories", "pizza", '{"text": "I like pizza"}')
    code, out, _ = run("doctor")
    assert code == EXIT_OK
    line = next(r for r in out.splitlines() if r.startswith("data file"))
    size = (clean_store_env / "mongostore.sqlite").stat().st_size
    assert f"{size:,} bytes" in line
    code, out, _ = run("doctor", "--json")
    data = json.loads(out)
    assert data["data_file_bytes"] == size


# ------------------------------------------------------------------- item 9: small things


def test_the_local_stores_path_is_printed_once_per_command(run: Run, clean_store_env: Path) -> None:
    path = str(clean_store_env)
    for argv in (
        ("put", "users.alice.memories", "pizza", '{"text": "I like pizza"}'),
        ("get", "users.alice.memories", "pizza"),
        ("get", "users.alice.memories", "nope"),
        ("search", "users"),
        ("stats", "users"),
        ("doctor",),
        ("setup",),
        ("rm", "users.alice.memories", "pizza"),
    ):
        _, out, err = run(*argv)
        assert (out + err).count(path) == 1, (argv, out, err)


def test_dash_v_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    from mongostore import __version__

    assert main(["-V"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.strip() == f"mongostore {__version__}" and "--" not in err


def test_an_unknown_option_does_not_suggest_dash_dash(run: Run) -> None:
    code, _, err = run("-X")
    assert code != EXIT_OK and "goes after --" not in err
    _, _, err = run("get", "users.alice", "-k1")
    assert "goes after --" in err  # where a key may start with "-", the hint stays


def test_counts_are_in_the_right_number(run: Run) -> None:
    from mongostore.tools.analytics import NamespaceCount, NamespaceCountsReport
    from mongostore.tools.report import count, namespaces_svg

    assert (count(1, "item"), count(2, "item"), count(1_000, "namespace")) == ("1 item", "2 items", "1,000 namespaces")
    report = NamespaceCountsReport(
        prefix=("users",),
        level=2,
        rows=(NamespaceCount("alice", 1, 1),),
        total_items=1,
        total_namespaces=1,
        total_labels=1,
    )
    svg = namespaces_svg(report)
    assert "1 item \u00b7 1 namespace" in svg and "1 items" not in svg and "1 ns" not in svg
    run("put", "users.alice.memories", "pizza", '{"text": "I like pizza"}')
    _, out, _ = run("stats", "users")
    assert "1 item in 1 namespace" in out


def test_postgres_index_keys_point_to_ours() -> None:
    from mongostore import ConfigurationError, MongoStore
    from mongostore.tools.embeddings import HashingEmbeddings

    base: dict[str, Any] = {"dims": 8, "embed": HashingEmbeddings(8)}
    with pytest.raises(ConfigurationError, match=r"use index\['similarity'\].*similarity='euclidean'"):
        MongoStore.in_memory(index={**base, "distance_type": "l2"})
    with pytest.raises(ConfigurationError, match=r"similarity='dotProduct'"):
        MongoStore.in_memory(index={**base, "distance_type": "inner_product"})
    with pytest.raises(ConfigurationError, match=r"ann_index_config.*remove it"):
        MongoStore.in_memory(index={**base, "ann_index_config": {"kind": "hnsw"}})


def test_every_command_answers_json_in_one_envelope(run: Run, tmp_path: Path) -> None:
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"namespace": ["users", "bob"], "key": "k", "value": {"text": "I like hiking"}}\n')
    commands: list[tuple[str, ...]] = [
        ("setup",),
        ("doctor",),
        ("put", "users.alice.memories", "pizza", '{"text": "I like pizza"}'),
        ("get", "users.alice.memories", "pizza"),
        ("search", "users"),
        ("ls",),
        ("export", "users", "-o", str(tmp_path / "out.jsonl")),
        ("import", str(jsonl)),
        ("reindex",),
        ("stats", "users"),
        ("report", "users", "--out", str(tmp_path / "r.html")),
        ("rm", "users.alice.memories", "pizza"),
        ("demo", "--uri", "mongomock://"),
    ]
    for argv in commands:
        code, out, err = run(*argv, "--json")
        assert code == EXIT_OK, (argv, err)
        doc = json.loads(out)
        assert isinstance(doc, dict), argv
        assert doc["ok"] is True and doc["command"] == argv[0] and isinstance(doc["store"], str), (argv, doc)
    for argv, expected in ((("get", "users.alice.memories", "gone"), 3), (("search", "--limit", "x"), 2)):
        code, out, _ = run(*argv, "--json")
        doc = json.loads(out)
        assert code == expected and doc["ok"] is False and doc["exit_code"] == expected
        assert doc["command"] == argv[0] and doc["error"]
    search = json.loads(run("search", "users", "--json")[1])
    assert [i["key"] for i in search["items"]] == ["k"]
    assert json.loads(run("ls", "--json")[1])["namespaces"] == [["users", "bob"]]
    assert json.loads(run("get", "users.bob", "k", "--json")[1])["item"]["value"] == {"text": "I like hiking"}
