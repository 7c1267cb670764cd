"""6. The embedded store (``MongoStore.in_memory()``, mongomock) against LangGraph's InMemoryStore.

Side by side in one process, in interleaved rounds: a batch of N puts (no index and
indexed), one get in a store holding N items, and ``mongostore import`` of an export
of N lines (ours only: InMemoryStore has no import; the figure that matters is
that the time per line stays flat as N grows). The embedder is the same hashing
embedder behind a cache for both stores, warmed first, so embedding costs nothing.

    python bench/embedded.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import DIMS, MemoEmbeddings, Row, machine, paired_rounds, ratio_spread, save, spread, table
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from mongostore import MongoStore
from mongostore.tools import cli

NS = ("bench", "embedded")
SEC = "embedded store vs InMemoryStore"


def _ops(n: int, salt: str = "") -> list[PutOp]:
    return [PutOp(NS, f"k{i}", {"text": f"memory {salt}{i} about topic {i % 37}", "n": i}) for i in range(n)]


def _ours(embed: Any, indexed: bool) -> MongoStore:
    store = MongoStore.in_memory(
        index={"dims": DIMS, "embed": embed, "fields": ["text"]} if indexed else None,
        collection_name=f"c{time.perf_counter_ns()}",
    )
    store.setup()
    return store


def _theirs(embed: Any, indexed: bool) -> InMemoryStore:
    return InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]} if indexed else None)


def put_rows(n: int, rounds: int, embed: Any) -> list[Row]:
    out = []
    ops = _ops(n)
    embed.embed_documents([op.value["text"] for op in ops])  # type: ignore[index]
    for indexed in (False, True):
        samples = paired_rounds(
            {
                "ours": lambda: _ours(embed, indexed).batch(ops),  # noqa: B023
                "theirs": lambda: _theirs(embed, indexed).batch(ops),  # noqa: B023
            },
            rounds,
            warmup=0,
        )
        o, t = samples["ours"], samples["theirs"]
        out.append(
            Row(
                SEC,
                f"{n:,} puts in one batch, {'indexed' if indexed else 'no index'}",
                statistics.median(o) * 1e3,
                statistics.median(t) * 1e3,
                "ms",
                f"ours {spread(o, 1e3)} ms, theirs {spread(t, 1e3)} ms; theirs/ours per round {ratio_spread(t, o)}",
            )
        )
    return out


def get_rows(n: int, rounds: int, embed: Any) -> list[Row]:
    ops = _ops(n)
    ours, theirs = _ours(embed, True), _theirs(embed, True)
    ours.batch(ops)
    theirs.batch(ops)
    keys = [f"k{(i * 7919) % n}" for i in range(200)]

    def many(store: Any) -> None:
        for k in keys:
            store.get(NS, k)

    samples = paired_rounds({"ours": lambda: many(ours), "theirs": lambda: many(theirs)}, rounds)
    o = [s / len(keys) for s in samples["ours"]]
    t = [s / len(keys) for s in samples["theirs"]]
    return [
        Row(
            SEC,
            f"one get, store holding {n:,} items",
            statistics.median(o) * 1e6,
            statistics.median(t) * 1e6,
            "us",
            f"ours {spread(o, 1e6)} us, theirs {spread(t, 1e6)} us (medians of 200 gets per round)",
        )
    ]


def _export(n: int, path: Path) -> None:
    with path.open("w") as f:
        for i in range(n):
            rec = {"namespace": list(NS), "key": f"k{i}", "value": {"text": f"memory {i} about topic {i % 37}"}}
            f.write(json.dumps(rec) + "\n")


def import_rows(sizes: list[int], rounds: int, embed: Any) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for n in sizes:
            files[n] = Path(tmp) / f"export{n}.jsonl"
            _export(n, files[n])
            embed.embed_documents([f"memory {i} about topic {i % 37}" for i in range(n)])

        def run(n: int) -> None:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = cli.main(["import", str(files[n])], store=_ours(embed, True))
            assert code == 0

        samples = paired_rounds({str(n): (lambda n=n: run(n)) for n in sizes}, rounds, warmup=1)  # type: ignore[misc]
    small, big = min(sizes), max(sizes)
    per_small = [s / small * 1000 for s in samples[str(small)]]
    per_big = [s / big * 1000 for s in samples[str(big)]]
    return [
        Row(
            SEC,
            f"mongostore import, s per 1,000 lines: {big:,} lines (theirs column: {small:,} lines)",
            statistics.median(per_big),
            statistics.median(per_small),
            "s",
            f"indexed, embedded; {big:,} lines: {spread(samples[str(big)])} s in all, "
            f"{small:,}: {spread(samples[str(small)])} s; "
            f"linear when the ratio is ~1: {ratio_spread(per_small, per_big)}",
        )
    ]


def rows(quick: bool = False) -> list[Row]:
    embed = MemoEmbeddings()
    rounds = 2 if quick else 3
    n_puts = 1_000 if quick else 5_000
    out = put_rows(n_puts, rounds, embed)
    if not quick:
        out += put_rows(10_000, 1, embed)
    out += get_rows(1_000 if quick else 5_100, 5, embed)
    if not quick:
        out += get_rows(10_000, 5, embed)
    out += import_rows([500, 2_000] if quick else [1_000, 5_000], rounds, embed)
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = rows(args.quick)
    print(table(out, f"Embedded store vs InMemoryStore ({machine()})"))
    save("embedded", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
