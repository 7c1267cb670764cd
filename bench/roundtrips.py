"""1. Round trips per workload, and embedding calls, against mongomock + the fake Atlas.

A counting proxy around the collections counts every call that reaches the server
(a cursor longer than one batch counts its getMores too), the documents and BSON
bytes that come back and the bytes sent; the embedder counts its calls and texts.
Counts are deterministic: one run per workload.

    python bench/roundtrips.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from _common import Row, machine, save, table
from _workloads import Recording, default_layout, find, record_all, workloads

# (workload, mode, label override or None)
SHOWN: list[tuple[str, str, str | None]] = [
    ("get100", "sync", None),
    ("put100", "sync", None),
    ("put100_idx", "sync", None),
    ("reput100_idx", "sync", None),
    ("search_page", "sync", None),
    ("list_ns", "sync", None),
    ("semantic", "sync", None),
    ("agent_step", "sync", "agent step, 6 sync calls"),
    ("agent_step", "async", "agent step, 6 async calls (gather)"),
    ("agent_step_update", "sync", "agent step revising 3 stored memories, 6 sync calls"),
    ("agent_step_update", "async", "agent step revising 3 stored memories, 6 async calls (gather)"),
    ("agent_step_batch", "sync", "agent step as one batch()"),
    ("agents20", "async", None),
    ("agents50", "async", None),
]


def _calls(rec: Recording) -> str:
    return " + ".join(f"{n} {k}" for k, n in sorted(rec.log.calls.items()))


def rows(recs: Sequence[Recording]) -> list[Row]:
    out: list[Row] = []
    for name, mode, label in SHOWN:
        ours, theirs = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
        if ours is None or theirs is None:
            continue
        lab = label or ours.workload.label
        note = f"ours: {_calls(ours)}; theirs: {_calls(theirs)}"
        if name == "list_ns":
            got_o = len(ours.result or [])
            got_t = len(theirs.result or [])
            note += f"; namespaces returned: ours {got_o}, theirs {got_t} (of 100 asked)"
        out.append(Row("round trips", lab, ours.log.round_trips, theirs.log.round_trips, "trips", note))
    for name, mode, label in SHOWN:
        ours, theirs = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
        if ours is None or theirs is None:
            continue
        lab = label or ours.workload.label
        if ours.embed_calls or theirs.embed_calls:
            note = ""
            if theirs.embed_empty or ours.embed_empty:
                note = f"calls with no text: ours {ours.embed_empty}, theirs {theirs.embed_empty}"
            out.append(Row("embedding calls", lab, ours.embed_calls, theirs.embed_calls, "calls", note))
        if ours.embed_texts or theirs.embed_texts:
            out.append(Row("texts embedded", lab, ours.embed_texts, theirs.embed_texts, "texts"))
    for name, mode, label in SHOWN:
        ours, theirs = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
        if ours is None or theirs is None:
            continue
        lab = label or ours.workload.label
        note = f"sent: ours {ours.log.bytes_out / 1024:.1f} KB, theirs {theirs.log.bytes_out / 1024:.1f} KB"
        out.append(Row("KB from server", lab, ours.log.bytes_in / 1024, theirs.log.bytes_in / 1024, "KB", note))
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    t0 = time.perf_counter()
    recs = record_all(default_layout, workloads())
    out = rows(recs)
    print(table(out, f"Round trips per workload ({machine()})"))
    save("roundtrips", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
