"""7. An agent step with realistic latency: round trips of 1-5 ms and embedding calls of 50-200 ms.

Issue 25 asks that an agent step, as a user feels it, is never slower than with
langgraph-store-mongodb on the same emulated backend, and faster where texts are
unchanged or agents run concurrently. One step here is what a memory-keeping agent does
per turn: search its memories for the user's message, then put 1-3 memories, some
texts unchanged (the agent re-saves what it already knew), some changed:

- ``1 changed``: search + 1 put of a new text under a stored key;
- ``1 changed + 2 unchanged``: search + 3 puts (unchanged, changed, unchanged);
- ``2 unchanged``: search + 2 puts whose texts are the stored ones;
- ``gathered``: search + 3 puts of new texts + 2 gets, the async calls issued together
  (``asyncio.gather``: one tick, one batch, one embedding call for the query and the texts).

Each runs as one agent making sync calls in turn (``MongoStore`` vs ``MongoDBStore``), and
as several agents at once, each awaiting its calls in turn (``AsyncMongoStore``, whose
calls of one event-loop tick coalesce into one batch, vs ``MongoDBStore``'s async API: its
sync store in the loop's default thread pool).

The backend is the one of the latency benchmark (``latency.py``): each workload is
recorded once on mongomock with the fake Atlas, then replayed from doubles that answer
instantly after a fixed delay per round trip (getMores included). The embedder is the
benchmark's (``HashingEmbeddings`` behind a cache) plus a fixed delay per call that has
texts (a call with none costs nothing, as with an API client): ``time.sleep`` in sync
code (theirs' async calls run in threads), ``asyncio.sleep`` in ours' async code. Both
stores run in the same process, in interleaved rounds; each row gives the medians, the
per-round ratio theirs/ours with its [min-max], the round trips and the embedding calls.

    python bench/agent_step.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from _common import MemoEmbeddings, Row, apaired_medians, machine, paired_medians, ratio_spread, save, table
from _replay import Replayer
from _timing import LAST_SAMPLES
from _workloads import (
    TOPICS,
    Recording,
    Workload,
    agent_ns,
    agent_step_async,
    agent_step_sync,
    default_layout,
    find,
    memory,
    record_all,
)
from langgraph.store.base import PutOp

# (ms per round trip, ms per embedding call)
SETTINGS_QUICK = ((2, 60),)
SETTINGS_FULL = ((1, 50), (2, 60), (5, 200))
AGENTS = 8  # concurrent agents, one step each
GATHERED = "agent_gathered"  # one agent's calls gathered in one tick (not several agents)


class DelayedEmbeddings(MemoEmbeddings):
    """The benchmark's embedder plus ``delay`` seconds per call that has texts (an API call)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = super().embed_documents(texts)
        if texts:
            time.sleep(self.delay)
        return out

    def embed_query(self, text: str) -> list[float]:
        out = super().embed_query(text)
        time.sleep(self.delay)
        return out

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        out = MemoEmbeddings.embed_documents(self, texts)
        if texts:
            await asyncio.sleep(self.delay)
        return out

    async def aembed_query(self, text: str) -> list[float]:
        out = MemoEmbeddings.embed_query(self, text)
        await asyncio.sleep(self.delay)
        return out


# variant -> puts as (key index, changed?): the agent namespaces hold k0..k9 (``default_layout``);
# each variant changes its own key, so the variants recorded in turn on one store do not interact.
VARIANTS: dict[str, tuple[str, list[tuple[int, bool]]]] = {
    "c1": ("1 changed", [(3, True)]),
    "c1u2": ("1 changed + 2 unchanged", [(0, False), (4, True), (1, False)]),
    "u2": ("2 unchanged", [(0, False), (2, False)]),
}


def _ops(j: int, variant: str) -> tuple[tuple[str, ...], str, list[PutOp]]:
    ns = agent_ns(j)
    query = f"user says: I'd like {TOPICS[j % 10]} tonight, or maybe {TOPICS[(j + 3) % 10]}"
    puts = [
        PutOp(ns, f"k{i}", memory(i, f"rev-{variant}-a{j}-" if changed else f"a{j}-"))
        for i, changed in VARIANTS[variant][1]
    ]
    return ns, query, puts


def step_sync(store: Any, j: int, variant: str) -> None:
    ns, query, puts = _ops(j, variant)
    store.search(ns, query=query, limit=5)
    for p in puts:
        store.put(p.namespace, p.key, p.value)


async def step_async(store: Any, j: int, variant: str) -> None:
    ns, query, puts = _ops(j, variant)
    await store.asearch(ns, query=query, limit=5)
    for p in puts:
        await store.aput(p.namespace, p.key, p.value)


async def agents_async(store: Any, n: int, variant: str) -> None:
    await asyncio.gather(*(step_async(store, j, variant) for j in range(n)))


def agent_workloads(agents: int = AGENTS) -> list[Workload]:
    out = []
    for v, (label, puts) in VARIANTS.items():
        out.append(
            Workload(
                f"agent_{v}",
                f"search + {label} put{'s' if len(puts) > 1 else ''}",
                True,
                1 + len(puts),
                lambda s, v=v: step_sync(s, 0, v),
                lambda s, v=v: agents_async(s, agents, v),
                writes=True,
            )
        )
    # Issue 35: one agent's six calls (a search, three puts of new texts, two gets) gathered in one
    # loop tick: one batch, whose query and new texts now share one embedding call.
    out.append(
        Workload(
            GATHERED,
            "search + 3 puts of new texts + 2 gets",
            True,
            6,
            lambda s: agent_step_sync(s, 0, "gathered"),
            lambda s: agent_step_async(s, 0, "gathered"),
            writes=True,
        )
    )
    return out


def _notes(o: Recording, t: Recording, checked: list[str]) -> str:
    def calls(r: Recording) -> int:
        return r.embed_calls - r.embed_empty

    return "; ".join(
        [
            f"per round {ratio_spread(LAST_SAMPLES['t'], LAST_SAMPLES['o'])}",
            f"trips {o.log.round_trips} vs {t.log.round_trips}",
            f"embedding calls {calls(o)} vs {calls(t)} (texts {o.embed_texts} vs {t.embed_texts})",
            *checked,
        ]
    )


def _check(rp: Replayer, replayed: int) -> list[str]:
    if replayed != rp.rec.log.round_trips:
        return [f"{rp.rec.side} replayed {replayed} trips, recorded {rp.rec.log.round_trips}"]
    return []


def _pair(recs: Sequence[Recording], mode: str, name: str, trip: float, embed: float) -> tuple[Replayer, Replayer]:
    o, t = find(recs, "ours", mode, name), find(recs, "theirs", mode, name)
    assert o is not None and t is not None, f"{name} ({mode}) was not recorded for both stores"
    return (
        Replayer(o, trip, keyed=True, embed=DelayedEmbeddings(embed)),
        Replayer(t, trip, keyed=True, embed=DelayedEmbeddings(embed)),
    )


def sync_rows(
    recs: Sequence[Recording], wls: Sequence[Workload], trip_ms: int, embed_ms: int, rounds: int
) -> list[Row]:
    out = []
    for w in wls:
        o, t = _pair(recs, "sync", w.name, trip_ms / 1000, embed_ms / 1000)
        checked = []
        for rp in (o, t):  # one checked run (also the warm-up): the recorded round trips
            rp.build_sync()
            rp.log.reset()
            rp.run_sync()
            checked += _check(rp, rp.log.round_trips)
        med = paired_medians({"o": o.run_sync, "t": t.run_sync}, rounds, warmup=0)
        out.append(
            Row(
                f"agent step, {trip_ms} ms/trip, {embed_ms} ms/embedding",
                f"1 agent, sync calls in turn: {w.label}",
                med["o"] * 1000,
                med["t"] * 1000,
                "ms",
                _notes(o.rec, t.rec, checked),
            )
        )
    return out


async def _async_rows(
    recs: Sequence[Recording], wls: Sequence[Workload], trip_ms: int, embed_ms: int, rounds: int, agents: int
) -> list[Row]:
    out = []
    for w in wls:
        o, t = _pair(recs, "async", w.name, trip_ms / 1000, embed_ms / 1000)
        checked = []
        for rp in (o, t):
            await rp.build_async()
            rp.log.reset()
            await rp.run_async()
            checked += _check(rp, rp.log.round_trips)
        med = await apaired_medians({"o": o.run_async, "t": t.run_async}, rounds, warmup=0)
        out.append(
            Row(
                f"agent step, {trip_ms} ms/trip, {embed_ms} ms/embedding",
                (
                    f"1 agent, its async calls gathered in one tick: {w.label}"
                    if w.name == GATHERED
                    else f"{agents} concurrent agents, async calls in turn: {w.label}"
                ),
                med["o"] * 1000,
                med["t"] * 1000,
                "ms",
                _notes(o.rec, t.rec, checked) + "; theirs: sync store in the loop's thread pool",
            )
        )
    return out


def rows(quick: bool = False, agents: int = AGENTS) -> list[Row]:
    wls = agent_workloads(agents)
    recs = record_all(default_layout, wls)
    rounds = 3 if quick else 5
    out: list[Row] = []
    for trip_ms, embed_ms in SETTINGS_QUICK if quick else SETTINGS_FULL:
        out += sync_rows(recs, wls, trip_ms, embed_ms, rounds)
        out += asyncio.run(_async_rows(recs, wls, trip_ms, embed_ms, rounds, agents))
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one latency setting (2 ms/trip, 60 ms/embedding), 3 rounds")
    ap.add_argument("--agents", type=int, default=AGENTS, help=f"concurrent agents (default {AGENTS})")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = rows(args.quick, args.agents)
    print(table(out, f"An agent step with realistic latency, median ms ({machine()})"))
    save("agent_step", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
