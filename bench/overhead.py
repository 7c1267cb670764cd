"""3. Client-side overhead per operation: microseconds spent in the client, with no server.

Each workload's recorded answers are replayed by a collection double that answers
instantly, in recorded order, decoded from BSON as pymongo would decode them (so the
cost of decoding what a store asked for, e.g. a stored embedding it did not need, is
in; the server's time and the network are out). Each request is BSON-encoded as the
driver would encode it before sending (so a vector sent as 384 doubles costs what it
costs the client: ~29 us, against ~3 us as packed BinData). The embedder is a cached one that
costs ~nothing and is the same for both stores. What remains is the store's own
code: validation, planning, building queries and write models, turning documents
into Items, and, for async, the event loop or thread-pool hop.

    python bench/overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from _common import Row, apaired_medians, machine, paired_medians, save, table
from _replay import Replayer
from _workloads import Recording, default_layout, find, record_all, workloads

SYNC = [
    "get1",
    "get100",
    "put1",
    "put1_idx",
    "reput1_idx",
    "put100",
    "put100_idx",
    "search_page",
    "semantic",
    "list_ns",
]
ASYNC = ["get1", "put1_idx", "reput1_idx", "semantic", "get100"]


def _inner(rec: Recording) -> int:
    return 50 if rec.workload.ops == 1 and rec.workload.name != "list_ns" else 5


def _pair(recs: Sequence[Recording], mode: str, name: str) -> tuple[Recording, Recording] | None:
    o, t = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
    return (o, t) if o is not None and t is not None else None


def _label(rec: Recording) -> str:
    w = rec.workload
    return w.label + (f" (per op, of {w.ops})" if w.ops > 1 else "")


def sync_rows(recs: Sequence[Recording], repeats: int) -> list[Row]:
    out: list[Row] = []
    for name in SYNC:
        pair = _pair(recs, "sync", name)
        if pair is None:
            continue
        o, t = (Replayer(r, 0.0, keyed=False) for r in pair)
        o.build_sync()
        t.build_sync()
        inner = _inner(pair[0])
        med = paired_medians({"o": o.run_sync, "t": t.run_sync}, repeats, warmup=2, inner=inner)
        ops = pair[0].workload.ops
        out.append(Row("client us/op, sync", _label(pair[0]), med["o"] * 1e6 / ops, med["t"] * 1e6 / ops, "us"))
    return out


async def _async_rows(recs: Sequence[Recording], repeats: int) -> list[Row]:
    out: list[Row] = []
    for name in ASYNC:
        pair = _pair(recs, "async", name)
        if pair is None:
            continue
        o, t = (Replayer(r, 0.0, keyed=False) for r in pair)
        await o.build_async()
        await t.build_async()
        inner = _inner(pair[0])
        med = await apaired_medians({"o": o.run_async, "t": t.run_async}, repeats, warmup=2, inner=inner)
        ops = pair[0].workload.ops
        note = "theirs: sync store in a worker thread"
        out.append(Row("client us/op, async", _label(pair[0]), med["o"] * 1e6 / ops, med["t"] * 1e6 / ops, "us", note))
    return out


def rows(recs: Sequence[Recording], quick: bool = False) -> list[Row]:
    repeats = 5 if quick else 15
    return sync_rows(recs, repeats) + asyncio.run(_async_rows(recs, repeats))


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    recs = record_all(default_layout, [w for w in workloads() if w.name in set(SYNC) | set(ASYNC)])
    out = rows(recs, args.quick)
    print(table(out, f"Client-side overhead, median microseconds per operation ({machine()})"))
    save("overhead", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
