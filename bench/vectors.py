"""4. Local vector ranking: search at 1k, 10k and 100k vectors of 384 dims, vs InMemoryStore.

Without ``$vectorSearch`` (the embedded mongomock default, or MongoDB Community without
mongot) our store ranks locally: it reads the vectors under the namespace prefix and
their items' text hashes, ranks exactly with numpy, then fetches the page's items.
LangGraph's ``InMemoryStore`` ranks the same way over Python lists it keeps in memory.
Both get the same dense unit vectors (a seeded table, not a model) under one prefix
and the same queries; their top-10 must agree.

Each (store, size) runs in its own subprocess so that memory figures are its own:
``peak RSS`` is the process's high-water mark minus its size before loading (for ours
that includes mongomock holding the data: the embedded backend lives in-process).
Search figures are medians; throughput is searches per second for one client
searching back to back (1 / latency). Ours is measured twice:

- end to end on mongomock: what ``MongoStore.in_memory()`` users see; most of it is
  mongomock copying documents in pure Python;
- client-side only: the same search replayed from an instant double that decodes
  the recorded answers from BSON (what the client pays against a Community server,
  on top of the server's time and the transfer of every vector under the prefix).

    python bench/vectors.py [--quick] [--sizes 1000,10000,100000] [--e2e-max 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from _common import DIMS, Row, machine, save, table

QUERIES = 5
PREFIX = ("bench", "vectors")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _table_embeddings(n: int) -> Any:
    import numpy as np
    from langchain_core.embeddings import Embeddings

    rng = np.random.default_rng(42)
    data = rng.standard_normal((n, DIMS)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    picks = rng.integers(0, n, QUERIES)
    queries = data[picks] + 0.5 * rng.standard_normal((QUERIES, DIMS)).astype(np.float32)

    class TableEmbeddings(Embeddings):
        """``doc {i}`` -> row i of a seeded table of unit vectors; ``query {j}`` -> a query near one."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            out = []
            for t in texts:
                kind, i = t.split()
                out.append((data if kind == "doc" else queries)[int(i)].tolist())
            return out

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return TableEmbeddings()


def _repeats(n: int, quick: bool) -> int:
    """Timed end-to-end searches on mongomock (which takes ~2 s per 10k vectors)."""
    if n >= 100_000:
        return 2
    if n >= 10_000:
        return 1 if quick else 3
    return 3 if quick else 9


def _search_times(search: Any, repeats: int) -> list[float]:
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        search(r % QUERIES)
        times.append(time.perf_counter() - t0)
    return times


def child_inmemory(n: int, quick: bool) -> dict[str, Any]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    embed = _table_embeddings(n)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    store = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    for start in range(0, n, 1000):
        store.batch([PutOp(PREFIX, f"k{i}", {"text": f"doc {i}"}) for i in range(start, min(n, start + 1000))])
    load_s = time.perf_counter() - t0
    rss1 = _rss_mb()

    def search(j: int) -> list[Any]:
        return store.search(PREFIX, query=f"query {j}", limit=10)

    top = [r.key for r in search(0)]
    times = _search_times(search, _repeats(n, quick) + 1)[1:]
    tracemalloc.start()
    search(1)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "search_ms": statistics.median(times) * 1000,
        "load_s": load_s,
        "data_mb": rss1 - rss0,
        "peak_mb": _peak_mb() - rss0,
        "traced_mb": traced / 2**20,
        "top": top,
    }


class ListCollection:
    """A minimal in-process server for the local search's reads: mongomock's own matcher over a
    plain list, and top-level projections, without mongomock's per-document deep copies.

    Used where mongomock is too slow to record a search in the time budget (100k vectors:
    ~70 s per search); the answers are the same, the client's work on them is identical.
    """

    def __init__(self, name: str, docs: list[dict[str, Any]], database: Any) -> None:
        self.name = name
        self.full_name = f"{database.name}.{name}"
        self.database = database
        self._docs = docs

    @staticmethod
    def _project(doc: dict[str, Any], projection: dict[str, Any] | None) -> dict[str, Any]:
        if not projection:
            return doc
        keep = {k for k, v in projection.items() if v}
        if projection.get("_id", 1):
            keep.add("_id")
        return {k: doc[k] for k in keep if k in doc}

    def find(self, filter: dict[str, Any] | None = None, projection: dict[str, Any] | None = None) -> Any:
        from _common import _LazyCursor
        from mongomock.filtering import filter_applies

        def run(_c: Any) -> list[dict[str, Any]]:
            return [self._project(d, projection) for d in self._docs if filter_applies(filter or {}, d)]

        return _LazyCursor(None, run)


def child_ours(n: int, quick: bool, e2e: bool) -> dict[str, Any]:
    from _common import CallLog, CaptureCollection, SyncProxy, SyncReplay, Tape, Wiring
    from langgraph.store.base import PutOp

    from mongostore import MongoStore
    from mongostore._mongomock import in_memory_collection

    embed = _table_embeddings(n)
    index = {"dims": DIMS, "embed": embed, "fields": ["text"], "vector_search": "local"}
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    backend = in_memory_collection(f"vec{os.getpid()}", "memories")
    db = backend.database
    items, vectors = CaptureCollection("memories", db), CaptureCollection("memories_vectors", db)
    loader = MongoStore(items, index=index, vectors_collection=vectors)  # type: ignore[arg-type]
    for start in range(0, n, 1000):
        loader.batch([PutOp(PREFIX, f"k{i}", {"text": f"doc {i}"}) for i in range(start, min(n, start + 1000))])
    item_docs, vector_docs = items.documents(), vectors.documents()
    del loader, items, vectors
    wiring = Wiring(CallLog(), tape=Tape())
    if e2e:
        db["memories"].insert_many(item_docs)
        db["memories_vectors"].insert_many(vector_docs)
        del item_docs, vector_docs
        store = MongoStore(SyncProxy(backend, wiring), index=index)  # type: ignore[arg-type]
        store.setup()
    else:
        store = MongoStore(
            SyncProxy(ListCollection("memories", item_docs, db), wiring),  # type: ignore[arg-type]
            index=index,
            vectors_collection=SyncProxy(ListCollection("memories_vectors", vector_docs, db), wiring),  # type: ignore[arg-type]
        )
    load_s = time.perf_counter() - t0
    rss1 = _rss_mb()

    # 1. the first search is recorded (round trips, bytes, answers for the replay)
    wiring.log.reset()
    top = [r.key for r in store.search(PREFIX, query="query 0", limit=10)]
    tape, rec_log = wiring.tape, wiring.log
    assert tape is not None
    result: dict[str, Any] = {
        "trips": rec_log.round_trips,
        "docs_in": rec_log.docs_in,
        "mb_in": rec_log.bytes_in / 2**20,
    }
    # 2. end to end on mongomock
    repeats = _repeats(n, quick)
    if e2e:
        wiring.tape, wiring.measure, wiring.log = None, False, CallLog()
        times = _search_times(lambda j: store.search(PREFIX, query=f"query {j}", limit=10), repeats)
        result["search_ms"] = statistics.median(times) * 1000
        result["backend_share"] = wiring.log.backend_seconds / sum(times)
    # 3. client side only: the recorded answers, replayed instantly (decoded from BSON)
    player = tape.player(keyed=False)
    log = CallLog()
    replay_store = MongoStore(
        SyncReplay(player, log, name="memories", database=db),  # type: ignore[arg-type]
        index=index,
        vectors_collection=SyncReplay(player, log, name="memories_vectors", database=db),  # type: ignore[arg-type]
    )

    def replay(_j: int) -> None:
        player.rewind()
        replay_store.search(PREFIX, query="query 0", limit=10)

    client = _search_times(replay, max(2, repeats) + 1)[1:]
    tracemalloc.start()
    replay(0)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result.update(
        client_ms=statistics.median(client) * 1000,
        load_s=load_s,
        data_mb=rss1 - rss0,
        peak_mb=_peak_mb() - rss0,
        traced_mb=traced / 2**20,
        top=top,
        backend="mongomock" if e2e else "a plain list (mongomock too slow)",
    )
    return result


def run_child(kind: str, n: int, quick: bool, e2e: bool = True) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", kind, str(n)] + (["--quick"] if quick else [])
    cmd += [] if e2e else ["--no-e2e"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def rows_for(n: int, ours: dict[str, Any], mem: dict[str, Any]) -> list[Row]:
    sec = "local vectors vs InMemoryStore"
    k = f"{n // 1000}k vectors"
    agree = "top-10 identical" if ours["top"] == mem["top"] else f"top-10 differ: {ours['top']} vs {mem['top']}"
    wire = f"{ours['trips']} round trips, {ours['docs_in']} docs, {ours['mb_in']:.1f} MB from the server per search"
    e2e = ours.get("search_ms")
    e2e_note = (
        f"{ours['backend_share']:.0%} of ours is mongomock; {agree}"
        if e2e is not None
        else f"not run at this size (about 70 s per search on mongomock; see --e2e-max); {agree}"
    )
    return [
        Row(sec, f"{k}: search, ours end to end on mongomock", e2e, mem["search_ms"], "ms", e2e_note),
        Row(sec, f"{k}: search, ours client-side only", ours["client_ms"], mem["search_ms"], "ms", wire),
        Row(
            sec,
            f"{k}: searches/s, one client (ours client-side)",
            1000 / ours["client_ms"],
            1000 / mem["search_ms"],
            "q/s",
            "higher is better here" + (f"; ours end to end on mongomock: {1000 / e2e:.2f} q/s" if e2e else ""),
        ),
        Row(
            sec,
            f"{k}: memory held after load",
            ours["data_mb"],
            mem["data_mb"],
            "MB",
            f"RSS growth while loading; ours: the data in {ours['backend']}",
        ),
        Row(
            sec,
            f"{k}: memory allocated by one search",
            ours["traced_mb"],
            mem["traced_mb"],
            "MB",
            "tracemalloc peak; ours client-side: the decoded answers + the numpy matrix",
        ),
        Row(
            sec,
            f"{k}: peak RSS above start",
            ours["peak_mb"],
            mem["peak_mb"],
            "MB",
            "ours also holds the benchmark's recorded answers (BSON) and mongomock's copies",
        ),
    ]


def rows(quick: bool = False, sizes: list[int] | None = None, e2e_max: int = 10_000) -> list[Row]:
    sizes = sizes or ([1_000, 10_000] if quick else [1_000, 10_000, 100_000])
    out: list[Row] = []
    for n in sizes:
        t0 = time.perf_counter()
        mem = run_child("inmemory", n, quick)
        ours = run_child("ours", n, quick, e2e=n <= e2e_max)
        out += rows_for(n, ours, mem)
        print(f"  vectors {n}: {time.perf_counter() - t0:.0f}s (load ours {ours['load_s']:.0f}s)", flush=True)
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k and 10k only, fewer repeats")
    ap.add_argument("--sizes", help="comma-separated vector counts, e.g. 1000,10000,100000")
    ap.add_argument(
        "--e2e-max",
        type=int,
        default=10_000,
        help="largest size searched end to end on mongomock (default 10000; 100k takes ~7 min)",
    )
    ap.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--no-e2e", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, n = args.child[0], int(args.child[1])
        result = child_ours(n, args.quick, not args.no_e2e) if kind == "ours" else child_inmemory(n, args.quick)
        print(json.dumps(result))
        return []
    t0 = time.perf_counter()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    out = rows(args.quick, sizes, args.e2e_max)
    print(table(out, f"Local vector ranking: ours vs InMemoryStore (the 'theirs' column) ({machine()})"))
    save("vectors", out)
    print(f"\n[{time.perf_counter() - t0:.0f}s]")
    return out


if __name__ == "__main__":
    main()
