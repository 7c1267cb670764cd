"""Every read under a namespace prefix reaches only the shards that hold it (issue 34, part 2):
the hybrid mode's local fusion, ``mongostore export`` (count and cursor) and ``mongostore reindex``
(count and every page), on the mongos double (``tests/fakes/mongos.py``): items ranged on ``_id``,
vectors on ``item_id``, ``users.alice``/``users.bob`` on shard0, ``carol``/``dave`` on shard1,
``erin``/``frank`` on shard2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.mongos import Cluster, OpRecord, key_bounds

from mongostore import MongoStore
from mongostore.core import queries as q
from mongostore.tools.cli import main
from mongostore.tools.embeddings import HashingEmbeddings

SPLITS = ["users.c", "users.e"]
TENANTS = ["alice", "bob", "carol", "dave", "erin", "frank"]
TEXTS = ["pizza with olives", "hiking in the alps", "jazz records", "green tea", "chess openings", "sailing boats"]
DATA_OPS = {"find", "count", "aggregate", "distinct", "update", "delete", "insert"}


def hybrid_store(version: str) -> tuple[Cluster, MongoStore]:
    cluster = Cluster(version)
    cluster.shard_collection("app.memories", {"_id": 1}, SPLITS)
    cluster.shard_collection("app.memories_vectors", {"item_id": 1}, SPLITS)
    index = {"dims": 64, "embed": HashingEmbeddings(64), "fields": ["text"], "hybrid": {}}
    store = MongoStore(cluster.client()["app"]["memories"], index=index)
    store.setup()
    for i, tenant in enumerate(TENANTS):
        for j in range(3):
            store.put(("users", tenant, "memories"), f"m{j}", {"text": f"{TEXTS[(i + j) % 6]} {j}", "n": j})
    return cluster, store


def prefix_shards(cluster: Cluster, ns: str, prefix: tuple[str, ...]) -> set[str]:
    sns = cluster.sharded[ns]
    return sns.shards_for(key_bounds({sns.field: q.prefix_range(prefix)}, sns.field))


def data_reads(records: list[OpRecord]) -> list[OpRecord]:
    return [r for r in records if r.op in DATA_OPS and not r.ns.startswith("config.")]


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_hybrid_local_fusion_reaches_only_the_prefix_shards(version: str) -> None:
    cluster, store = hybrid_store(version)
    assert store.status()["search_path"] == "local"  # no mongot: the hybrid mode fuses locally
    for prefix, shards in [(("users", "alice"), {"shard0"}), (("users", "erin", "memories"), {"shard2"})]:
        mark = cluster.mark()
        found = store.search(prefix, query="pizza olives", filter={"n": 0})
        assert found and all(item.namespace[: len(prefix)] == prefix for item in found)
        recs = data_reads(cluster.since(mark))
        assert {r.ns for r in recs} == {"app.memories", "app.memories_vectors"}
        for r in recs:
            assert r.targeted and r.shards == shards, r
            assert r.shards <= prefix_shards(cluster, r.ns, prefix)
        # no read of every text of the vectors collection (it used to take BM25's statistics there)
        assert not any(r.ns == "app.memories_vectors" and r.filter == {"text": {"$exists": True}} for r in recs)
        assert len(recs) == 3  # candidates, the texts in scope, the page


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_export_reaches_only_the_prefix_shards(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fakes.mongos

    # export closes its cursor; the double's cursor is a plain list (nothing to close)
    monkeypatch.setattr(fakes.mongos._Cursor, "close", lambda self: None, raising=False)
    cluster, store = hybrid_store(version)
    out = tmp_path / "carol.jsonl"
    mark = cluster.mark()
    assert main(["export", "users.carol", "-o", str(out)], store=store) == 0
    recs = data_reads(cluster.since(mark))
    assert {r.op for r in recs if r.ns == "app.memories"} == {"count", "find"}
    for r in recs:
        assert r.targeted and r.shards == {"shard1"}, r
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize("version", ["7.0.12", "8.0.4"])
def test_reindex_reaches_only_the_prefix_shards(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, store = hybrid_store(version)
    marks: list[int] = []
    setup = store.setup

    def setup_then_mark() -> None:  # reindex runs setup() first: store-wide, not a prefix read
        setup()
        marks.append(cluster.mark())

    store.setup = setup_then_mark  # type: ignore[method-assign]
    assert main(["reindex", "users.frank", "--batch-size", "2"], store=store) == 0
    assert "reindexed 3 item(s)" in capsys.readouterr().out
    recs: list[Any] = data_reads(cluster.since(marks[0]))
    pages = [r for r in recs if r.op == "find" and r.ns == "app.memories"]
    assert [r.op for r in recs if r.ns == "app.memories"].count("count") == 1 and len(pages) == 3  # 2 + 1 + empty
    for r in recs:
        assert r.targeted and r.shards == {"shard2"}, r
    assert store.search(("users", "frank"), query="chess")[0].score is not None
