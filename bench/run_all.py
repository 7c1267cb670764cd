"""Run every benchmark side by side and print one table of ratios.

    python bench/run_all.py            # everything, under 10 minutes on 2 cores
    python bench/run_all.py --quick    # about two minutes: fewer repeats, smaller sizes
    MONGODB_URI=mongodb://... python bench/run_all.py   # round trips and latency on a real server

A section that raises is reported (with its traceback) and the others still run; the
exit status is then 1, so CI sees a script that no longer runs.

Ours is mongostore; "theirs" is langgraph-store-mongodb 0.4.0 (for local vector ranking:
LangGraph's InMemoryStore; for the local store: LangGraph's SqliteStore). Every figure is
"lower is better", so a ratio theirs/ours above 1 means ours costs less. Results are also
written to bench/results/ (JSON per section, ``summary.md`` with the final table in Markdown).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable

import agent_step
import embedded
import latency
import local_store
import overhead
import roundtrips
import scaling
import vectors
from _common import RESULTS, Row, machine, real_server, save, table
from _workloads import Recording, default_layout, record_all, workloads

FINAL_SECTIONS = (
    "round trips",
    "texts embedded",
    "latency",
    "agent step",
    "client us",
    "local vectors",
    "scaling",
    "embedded",
    "local store",
)
SECTIONS = "roundtrips,latency,agent,overhead,vectors,scaling,embedded,local_store"
FINAL_VECTOR_ROWS = ("search, ours", "MB from the server", "memory held per vector")
FINAL_LOCAL_ROWS = ("indexed", "3. one get", "6. warm semantic")  # not the CLI's, nor the unindexed stores'


def _final(rows: list[Row]) -> list[Row]:
    out = []
    for r in rows:
        if not r.section.startswith(FINAL_SECTIONS):
            continue
        if r.section.startswith("local vectors") and not any(k in r.workload for k in FINAL_VECTOR_ROWS):
            continue
        if r.section.startswith("local store") and not any(k in r.workload for k in FINAL_LOCAL_ROWS):
            continue
        out.append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="about two minutes: fewer repeats, smaller sizes")
    ap.add_argument(
        "--only",
        default=SECTIONS,
        help=f"comma-separated sections to run (default: all of {SECTIONS})",
    )
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    t_start = time.perf_counter()
    print(f"mongostore vs langgraph-store-mongodb: {machine()}")
    print(
        "backend:", "MONGODB_URI (real server)" if real_server() else "mongomock + fake Atlas, in-process", flush=True
    )
    all_rows: list[Row] = []
    failed: list[str] = []

    def section(name: str, fn: Callable[[], list[Row]], title: str) -> None:
        t0 = time.perf_counter()
        try:
            rows = fn()
        except Exception:
            traceback.print_exc()
            print(f"\n!! section {name} FAILED after {time.perf_counter() - t0:.0f}s", flush=True)
            failed.append(name)
            return
        print(f"\n{table(rows, title)}\n[{name}: {time.perf_counter() - t0:.0f}s]", flush=True)
        save(name, rows)
        all_rows.extend(rows)

    recs: list[Recording] = []
    if only & {"roundtrips", "latency", "overhead"}:
        t0 = time.perf_counter()
        try:
            recs = record_all(default_layout, workloads(), repeats=latency.direct_repeats(args.quick))
        except Exception:
            traceback.print_exc()
            print("\n!! recording the workloads FAILED: no round trips, latency or overhead", flush=True)
            failed.append("record")
        print(f"[recorded {len(recs)} workload runs: {time.perf_counter() - t0:.0f}s]", flush=True)
    if recs:
        if "roundtrips" in only:
            section("roundtrips", lambda: roundtrips.rows(recs), "1. Round trips, embedding calls, bytes")
        if "latency" in only:
            section("latency", lambda: latency.rows(recs, args.quick), "2. Latency, median ms")
        if "overhead" in only:
            section("overhead", lambda: overhead.rows(recs, args.quick), "3. Client-side overhead, median us/op")
    if "agent" in only and not real_server():
        section(
            "agent_step",
            lambda: agent_step.rows(args.quick),
            "7. An agent step with realistic latency (ms per round trip, ms per embedding call), median ms",
        )
    if "vectors" in only:
        section("vectors", lambda: vectors.rows(args.quick), "4. Local vector ranking vs InMemoryStore")
    if "embedded" in only:
        section("embedded", lambda: embedded.rows(args.quick), "6. The embedded store vs InMemoryStore")
    if "scaling" in only:

        def run_scaling() -> list[Row]:
            results, rows = scaling.run(args.quick)
            print("\n5. Scaling, each cell 'ours | theirs'\n" + scaling.matrix(results))
            return rows

        section("scaling", run_scaling, "5. Scaling, largest sizes")
    if "local_store" in only:
        section(
            "local_store",
            lambda: local_store.rows(args.quick),
            "8. The local store vs SqliteStore (theirs) and InMemoryStore (in the note)",
        )

    final = _final(all_rows)
    total = time.perf_counter() - t_start
    title = (
        "Summary: ours = mongostore, theirs = langgraph-store-mongodb 0.4.0 / InMemoryStore"
        f" / SqliteStore (local store rows) ({machine()})"
    )
    print("\n" + "=" * 100)
    print(table(final, title + "\nlower is better everywhere; theirs/ours > 1 means ours costs less"))
    print(f"\ntotal: {total:.0f}s")
    save("all", all_rows, {"machine": machine(), "seconds": total, "quick": args.quick})
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "summary.md").write_text(
        table(final, title, markdown=True)
        + f"\n\nTotal runtime: {total:.0f}s ({'--quick' if args.quick else 'full'}).\n"
    )
    if failed:
        print(f"\nFAILED sections: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
