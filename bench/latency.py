"""2. Modelled latency: the workloads with a fixed delay per round trip (1 ms and 5 ms).

Also the round trips of *wall time* of a few writes: how many of a workload's requests
wait in turn, measured as (its time at 50 ms per trip - its time at 0) / 50 ms.

Each workload's recorded answers are replayed by a collection double that answers
instantly and waits ``delay`` per round trip (getMores included): ``time.sleep`` for
sync calls; for async ones the reply lands from a network thread that wakes the event
loop as a socket would (``_wire.network_delay``: an ``asyncio.sleep`` timer fires up to
1 ms late, since epoll waits whole milliseconds). Wall time is the client's own work
plus the network and server time the delay stands for, as to an Atlas cluster in the
same region. Nothing of mongomock's speed is in these numbers.

Ours: ``MongoStore`` (sync) and ``AsyncMongoStore`` (native asyncio, concurrent calls
coalesced into one batch). Theirs: ``MongoDBStore``; its async API runs the sync
store in the event loop's default thread pool (``min(32, cores + 4)`` threads).

With ``MONGODB_URI`` set, nothing is modelled: the workloads run against that server
and the wall times of direct runs are reported.

    python bench/latency.py [--quick]
    MONGODB_URI=mongodb://localhost:27017/?directConnection=true python bench/latency.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Sequence

from _common import Row, apaired_medians, machine, paired_medians, ratio_spread, real_server, save, table
from _replay import Replayer
from _timing import LAST_SAMPLES
from _workloads import Recording, default_layout, find, record_all, workloads

SYNC = [
    "get100",
    "put100",
    "put100_idx",
    "reput100_idx",
    "search_page",
    "list_ns",
    "semantic",
    "agent_step",
    "agent_step_update",
    "agent_step_batch",
]
ASYNC = ["get100", "put100_idx", "search_page", "semantic", "agent_step", "agent_step_update", "agents20", "agents50"]
DELAYS = (0.001, 0.005)
# Calls per timed sample: one call at 1 ms/trip lasts ~2 ms, where one scheduler hiccup
# decides a sample; the mean of 5 calls does not hang on one.
INNER = 5


def _per_round() -> str:
    """theirs/ours per round of the last paired run, with its [min-max]."""
    return f"per round {ratio_spread(LAST_SAMPLES['t'], LAST_SAMPLES['o'])}"


def _pair(recs: Sequence[Recording], mode: str, name: str) -> tuple[Recording, Recording] | None:
    o, t = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
    return (o, t) if o is not None and t is not None else None


def sync_rows(recs: Sequence[Recording], delays: Sequence[float], repeats: int) -> list[Row]:
    out: list[Row] = []
    for d in delays:
        for name in SYNC:
            pair = _pair(recs, "sync", name)
            if pair is None:
                continue
            o, t = (Replayer(r, d, keyed=True) for r in pair)
            o.build_sync()
            t.build_sync()
            # one checked run: the replay must make the recorded round trips
            notes = []
            for rp in (o, t):
                rp.log.reset()
                rp.run_sync()
                if rp.log.round_trips != rp.rec.log.round_trips:
                    notes.append(
                        f"{rp.rec.side} replayed {rp.log.round_trips} trips, recorded {rp.rec.log.round_trips}"
                    )
            med = paired_medians({"o": o.run_sync, "t": t.run_sync}, repeats, warmup=0, inner=INNER)
            note = f"trips {pair[0].log.round_trips} vs {pair[1].log.round_trips}; {_per_round()}"
            out.append(
                Row(
                    f"latency sync, {d * 1000:.0f} ms/trip",
                    pair[0].workload.label,
                    med["o"] * 1000,
                    med["t"] * 1000,
                    "ms",
                    "; ".join([note, *notes]),
                )
            )
    return out


async def _async_rows(recs: Sequence[Recording], delays: Sequence[float], repeats: int) -> list[Row]:
    out: list[Row] = []
    for d in delays:
        for name in ASYNC:
            pair = _pair(recs, "async", name)
            if pair is None:
                continue
            o, t = (Replayer(r, d, keyed=True) for r in pair)
            await o.build_async()
            await t.build_async()
            notes = []
            for rp in (o, t):
                rp.log.reset()
                await rp.run_async()
                if rp.log.round_trips != rp.rec.log.round_trips:
                    notes.append(
                        f"{rp.rec.side} replayed {rp.log.round_trips} trips, recorded {rp.rec.log.round_trips}"
                    )
            med = await apaired_medians({"o": o.run_async, "t": t.run_async}, repeats, warmup=0, inner=INNER)
            note = f"trips {pair[0].log.round_trips} vs {pair[1].log.round_trips}; {_per_round()}"
            out.append(
                Row(
                    f"latency async, {d * 1000:.0f} ms/trip",
                    pair[0].workload.label,
                    med["o"] * 1000,
                    med["t"] * 1000,
                    "ms",
                    "; ".join([note, *notes]),
                )
            )
    return out


def async_rows(recs: Sequence[Recording], delays: Sequence[float], repeats: int) -> list[Row]:
    return asyncio.run(_async_rows(recs, delays, repeats))


# Round trips of wall time: (time at WALL_DELAY per trip - time at 0) / WALL_DELAY. A delay
# far above the client's own work makes what overlaps (parallel reads, the two bulk writes)
# plain to see; it is rounded to a tenth.
WALL = [
    ("put1_idx", "sync"),
    ("put1_idx", "async"),
    ("put100_idx", "sync"),
    ("put100_idx", "async"),
    ("agent_step_batch", "sync"),
    ("agent_step", "async"),
]
WALL_DELAY = 0.05


def _wall(rec: Recording, repeats: int) -> float:
    async def run_async() -> float:
        times = []
        for d in (0.0, WALL_DELAY):
            rp = Replayer(rec, d, keyed=True)
            await rp.build_async()
            await rp.run_async()
            t = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                await rp.run_async()
                t.append(time.perf_counter() - t0)
            times.append(statistics.median(t))
        return (times[1] - times[0]) / WALL_DELAY

    if rec.mode == "async":
        return asyncio.run(run_async())
    times = []
    for d in (0.0, WALL_DELAY):
        rp = Replayer(rec, d, keyed=True)
        rp.build_sync()
        rp.run_sync()
        t = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            rp.run_sync()
            t.append(time.perf_counter() - t0)
        times.append(statistics.median(t))
    return (times[1] - times[0]) / WALL_DELAY


def wall_rows(recs: Sequence[Recording], repeats: int = 3) -> list[Row]:
    out = []
    for name, mode in WALL:
        pair = _pair(recs, mode, name)
        if pair is None:
            continue
        o, t = (round(_wall(r, repeats), 1) for r in pair)
        out.append(
            Row(
                f"round trips of wall time, {mode}",
                pair[0].workload.label,
                o,
                t,
                "trips",
                f"{o:.1f} vs {t:.1f} of wall time; requests {pair[0].log.round_trips} vs {pair[1].log.round_trips}; "
                f"(wall time at {WALL_DELAY * 1000:.0f} ms/trip - at 0) / {WALL_DELAY * 1000:.0f} ms",
            )
        )
    return out


def rows(recs: Sequence[Recording], quick: bool = False) -> list[Row]:
    if real_server():
        return direct_rows(recs)
    repeats = 3 if quick else 7
    return sync_rows(recs, DELAYS, repeats) + async_rows(recs, DELAYS, repeats) + wall_rows(recs)


def direct_repeats(quick: bool) -> int:
    """Timed direct runs per workload on a real server (0 on mongomock: replays are used)."""
    return (3 if quick else 7) if real_server() else 0


def direct_rows(recs: Sequence[Recording]) -> list[Row]:
    """Real-server mode: wall times of direct runs, no modelled delay (the network is real)."""
    out: list[Row] = []
    for mode, names in (("sync", SYNC), ("async", ASYNC)):
        for name in names:
            pair = _pair(recs, mode, name)
            if pair is None or pair[0].wall_ms is None or pair[1].wall_ms is None:
                continue
            note = f"trips {pair[0].log.round_trips} vs {pair[1].log.round_trips}"
            if pair[0].workload.writes:
                note += "; runs after the first rewrite the same keys"
            out.append(
                Row(
                    f"latency {mode}, real server", pair[0].workload.label, pair[0].wall_ms, pair[1].wall_ms, "ms", note
                )
            )
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    recs = record_all(default_layout, workloads(), repeats=direct_repeats(args.quick))
    out = rows(recs, args.quick)
    threads = min(32, (os.cpu_count() or 1) + 4)
    print(table(out, f"Modelled latency, median ms ({machine()}; theirs' async thread pool: {threads} threads)"))
    save("latency", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
