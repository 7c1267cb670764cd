"""5. Scaling: how round trips, bytes and per-call cost grow with the data.

Two sweeps over the same workloads, each at 1, 100 and 10,000:

- items per namespace: one namespace holding N items;
- namespaces: N namespaces of one item each.

For each cell both stores are loaded with the data (in their own formats) and each
workload is recorded on mongomock + the fake Atlas (round trips incl. getMores, KB
from the server), then replayed from an instant double: ``client`` is the client's
own time per call, and ``@1ms`` the modelled latency, client time + round trips x
1 ms. What does not show here: the server's own work, which on mongomock is a linear
scan for everything (see the README: index use needs a real server).

    python bench/scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from _common import Row, machine, paired_medians, save
from _replay import Replayer
from _workloads import SEMANTIC_QUERY, USER, Workload, find, grid_layout, record_all
from langgraph.store.base import PutOp

BENCH = ("bench",)
SIZES = [1, 100, 10_000]
QUICK_SIZES = [1, 100, 1_000]
SWEEPS: dict[str, Callable[[int], list[PutOp]]] = {
    "items per namespace": lambda n: grid_layout(1, n),
    "namespaces": lambda n: grid_layout(n, 1),
}


def scaling_workloads() -> list[Workload]:
    return [
        Workload("get1", "get", True, 1, lambda s: s.get(USER, "k0"), None),
        Workload("search_page", "search page under ('bench',)", True, 1, lambda s: s.search(BENCH, limit=10), None),
        Workload(
            "list_ns",
            "list_namespaces ('bench',), limit 100",
            True,
            1,
            lambda s: s.list_namespaces(prefix=BENCH, limit=100),
            None,
        ),
        Workload(
            "semantic",
            "semantic search under ('bench',)",
            True,
            1,
            lambda s: s.search(BENCH, query=SEMANTIC_QUERY, limit=10),
            None,
        ),
    ]


Cell = dict[str, dict[str, float]]  # workload -> figure -> value


def measure_cell(puts: list[PutOp], repeats: int) -> Cell:
    recs = record_all(lambda _ix: puts, scaling_workloads(), modes=("sync",))
    cell: Cell = {}
    for w in scaling_workloads():
        o, t = find(recs, "ours", "sync", w.name), find(recs, "theirs", "sync", w.name)
        assert o is not None and t is not None
        ro, rt = Replayer(o, 0.0, keyed=False), Replayer(t, 0.0, keyed=False)
        ro.build_sync()
        rt.build_sync()
        inner = 3 if max(o.log.docs_in, t.log.docs_in) > 1000 else 20
        med = paired_medians({"o": ro.run_sync, "t": rt.run_sync}, repeats, warmup=1, inner=inner)
        cell[w.name] = {
            "trips_o": o.log.round_trips,
            "trips_t": t.log.round_trips,
            "kb_o": o.log.bytes_in / 1024,
            "kb_t": t.log.bytes_in / 1024,
            "us_o": med["o"] * 1e6,
            "us_t": med["t"] * 1e6,
            "ms1_o": med["o"] * 1e3 + o.log.round_trips,
            "ms1_t": med["t"] * 1e3 + t.log.round_trips,
            "n_o": float(len(o.result or [])) if isinstance(o.result, list) else -1,
            "n_t": float(len(t.result or [])) if isinstance(t.result, list) else -1,
        }
    return cell


FIGURES = [
    ("round trips", "trips", "{:.0f}"),
    ("KB from server", "kb", "{:.1f}"),
    ("client us", "us", "{:.0f}"),
    ("latency @1ms, ms", "ms1", "{:.2f}"),
]


def matrix(results: dict[str, dict[int, Cell]]) -> str:
    """One block per sweep: rows workload x figure, columns sizes, cells 'ours | theirs'."""
    out: list[str] = []
    for sweep, by_size in results.items():
        sizes = sorted(by_size)
        head = [f"{sweep} ->", *[f"{s:,}" for s in sizes]]
        body: list[list[str]] = []
        for w in scaling_workloads():
            for label, key, f in FIGURES:
                cells = []
                for s in sizes:
                    c = by_size[s][w.name]
                    cells.append(f"{f.format(c[key + '_o'])} | {f.format(c[key + '_t'])}")
                body.append([f"{w.label}: {label}", *cells])
            if w.name == "list_ns":
                body.append(
                    [
                        f"{w.label}: namespaces returned",
                        *[f"{by_size[s][w.name]['n_o']:.0f} | {by_size[s][w.name]['n_t']:.0f}" for s in sizes],
                    ]
                )
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        out.append("  ".join(h.ljust(wd) for h, wd in zip(head, widths, strict=True)))
        out.append("  ".join("-" * wd for wd in widths))
        out += ["  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)) for r in body]
        out.append("")
    return "\n".join(out)


def summary_rows(results: dict[str, dict[int, Cell]]) -> list[Row]:
    """Rows for the final table: the largest size of each sweep, latency @1 ms and KB."""
    rows: list[Row] = []
    for sweep, by_size in results.items():
        s = max(by_size)
        for w in scaling_workloads():
            c = by_size[s][w.name]
            small = by_size[min(by_size)][w.name]
            note = (
                f"trips {c['trips_o']:.0f} vs {c['trips_t']:.0f}; KB {c['kb_o']:.1f} vs {c['kb_t']:.1f}; "
                f"at {min(by_size):,}: {small['ms1_o']:.2f} vs {small['ms1_t']:.2f} ms"
            )
            if w.name == "list_ns":
                note += f"; namespaces returned {c['n_o']:.0f} vs {c['n_t']:.0f}"
            rows.append(Row(f"scaling, {s:,} {sweep}", f"{w.label} @1ms/trip", c["ms1_o"], c["ms1_t"], "ms", note))
    return rows


def run(quick: bool = False) -> tuple[dict[str, dict[int, Cell]], list[Row]]:
    sizes = QUICK_SIZES if quick else SIZES
    repeats = 3 if quick else 5
    results: dict[str, dict[int, Cell]] = {}
    for sweep, layout in SWEEPS.items():
        results[sweep] = {}
        for n in sizes:
            t0 = time.perf_counter()
            results[sweep][n] = measure_cell(layout(n), repeats)
            print(f"  scaling {sweep} = {n:,}: {time.perf_counter() - t0:.0f}s", flush=True)
    return results, summary_rows(results)


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes 1, 100, 1,000 and fewer repeats")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results, rows = run(args.quick)
    print(f"Scaling, each cell 'ours | theirs' ({machine()})\n")
    print(matrix(results))
    extra: dict[str, Any] = {"matrix": {sw: {str(n): c for n, c in by.items()} for sw, by in results.items()}}
    save("scaling", rows, extra)
    print(f"[{time.perf_counter() - t0:.0f}s]")
    return rows


if __name__ == "__main__":
    main()
