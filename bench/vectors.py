"""4. Local vector ranking: search at 1k, 10k and 100k vectors of 384 dims, vs InMemoryStore.

Without ``$vectorSearch`` (the embedded mongomock default, or MongoDB Community without
mongot) our store ranks locally: it reads the candidate items (ids and the text hashes
they list), ranks over its client-side float32 matrix of the stored embeddings
(``VectorCache``: filled by the first search under a prefix and by the store's own
writes, topped up with what other writers added), then fetches the page's items.
LangGraph's ``InMemoryStore`` ranks over the Python lists it keeps in memory. Both get
the same dense unit vectors (a seeded table, not a model) under one prefix and the
same query; their top-10 must agree.

One process per size; inside it every contender is timed in the same interleaved
rounds (``paired_rounds``), so load on a shared machine hits all alike, and each row
gives medians with [min-max] and the per-round ratios:

- ours client-side, warm and cold: the recorded answers of a server replayed from an
  instant double that decodes them from BSON (what the client pays against a
  Community server); cold is the first search of a fresh store (every vector under
  the prefix crosses the network), warm every later one;
- ours end to end on mongomock (warm): what ``MongoStore.in_memory()`` users see;
- the bare numpy anchor: float32 matmul + top-10 over the same matrix.

Memory held per vector is tracemalloc's count (ours: a ``VectorCache`` filled with the
vectors; theirs: InMemoryStore after loading).

    python bench/vectors.py [--quick] [--sizes 1000,10000,100000] [--e2e-max 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from _common import DIMS, Row, machine, save, table

QUERIES = 5
PREFIX = ("bench", "vectors")


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
        from _proxies import _LazyCursor
        from mongomock.filtering import filter_applies

        def run(_c: Any) -> list[dict[str, Any]]:
            return [self._project(d, projection) for d in self._docs if filter_applies(filter or {}, d)]

        return _LazyCursor(None, run)

    def aggregate(self, pipeline: list[dict[str, Any]], **_: Any) -> Any:
        """A ``$match`` over the list, then mongomock's own stages (the local search's
        unscored-items read)."""
        from _proxies import _ListCursor
        from mongomock.aggregate import process_pipeline
        from mongomock.filtering import filter_applies

        docs, rest = self._docs, pipeline
        if rest and "$match" in rest[0]:
            docs = [d for d in docs if filter_applies(rest[0]["$match"], d)]
            rest = rest[1:]
        return _ListCursor(list(process_pipeline(docs, self.database, rest, None)) if rest else docs)


def child(n: int, quick: bool, e2e: bool) -> dict[str, Any]:
    """Every contender for one size, in this one process, timed in interleaved rounds."""
    import numpy as np
    from _common import CallLog, CaptureCollection, SyncProxy, SyncReplay, Tape, Wiring, paired_rounds
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    from mongostore import MongoStore
    from mongostore.core.vectors import VectorCache
    from mongostore.drivers.mongomock_compat import in_memory_collection

    embed = _table_embeddings(n)
    index = {"dims": DIMS, "embed": embed, "fields": ["text"], "vector_search": "local"}
    backend = in_memory_collection(f"vec{os.getpid()}", "memories")
    db = backend.database
    items, vectors = CaptureCollection("memories", db), CaptureCollection("memories_vectors", db)
    loader = MongoStore(items, index=index, vectors_collection=vectors)  # type: ignore[arg-type]
    batches = [
        [PutOp(PREFIX, f"k{i}", {"text": f"doc {i}"}) for i in range(start, min(n, start + 1000))]
        for start in range(0, n, 1000)
    ]
    for b in batches:
        loader.batch(b)
    item_docs, vector_docs = items.documents(), vectors.documents()
    out: dict[str, Any] = {}

    # InMemoryStore, and what it holds per vector
    tracemalloc.start()
    mem = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    for b in batches:
        mem.batch(b)
    out["theirs_bytes_per_vector"] = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()

    # ours against a server: record a cold and a warm search (trips, bytes, answers) ...
    wiring = Wiring(CallLog(), tape=Tape())
    rec = MongoStore(
        SyncProxy(ListCollection("memories", item_docs, db), wiring),  # type: ignore[arg-type]
        index=index,
        vectors_collection=SyncProxy(ListCollection("memories_vectors", vector_docs, db), wiring),  # type: ignore[arg-type]
    )
    for phase in ("cold", "warm"):
        wiring.log.reset()
        out[f"top_{phase}"] = [r.key for r in rec.search(PREFIX, query="query 0", limit=10)]
        out[f"trips_{phase}"] = wiring.log.round_trips
        out[f"mb_{phase}"] = wiring.log.bytes_in / 2**20
    assert wiring.tape is not None
    player = wiring.tape.player(keyed=True)
    log = CallLog()

    def replay_store() -> MongoStore:
        return MongoStore(
            SyncReplay(player, log, name="memories", database=db),  # type: ignore[arg-type]
            index=index,
            vectors_collection=SyncReplay(player, log, name="memories_vectors", database=db),  # type: ignore[arg-type]
        )

    # ... and replay them: the client's own work on the server's answers (decoded from BSON)
    warm_store = replay_store()
    warm_store.search(PREFIX, query="query 0", limit=10)
    cache = warm_store._vector_cache
    assert cache is not None
    tracemalloc.start()
    probe = VectorCache(DIMS)
    probe.add_documents(vector_docs)
    out["ours_bytes_per_vector"] = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()
    del probe

    def ours_warm() -> list[Any]:
        player.rewind()
        return warm_store.search(PREFIX, query="query 0", limit=10)

    def ours_cold() -> list[Any]:
        player.rewind()
        return replay_store().search(PREFIX, query="query 0", limit=10)

    matrix = np.stack([np.frombuffer(d["embedding"], dtype="<f4", offset=2) for d in vector_docs])
    q32 = np.asarray(embed.embed_query("query 0"), dtype=np.float32)

    def bare_numpy() -> Any:
        scores = matrix @ q32
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    fns: dict[str, Any] = {
        "numpy": bare_numpy,
        "ours_warm": ours_warm,
        "ours_cold": ours_cold,
        "theirs": lambda: mem.search(PREFIX, query="query 0", limit=10),
    }
    if e2e:  # ours end to end on the embedded store (mongomock), warm
        db["memories"].insert_many(item_docs)
        db["memories_vectors"].insert_many(vector_docs)
        embedded = MongoStore(backend, index=index)
        embedded.setup()
        tracemalloc.start()
        out["top_e2e"] = [r.key for r in embedded.search(PREFIX, query="query 0", limit=10)]
        out["e2e_bytes_per_vector"] = tracemalloc.get_traced_memory()[0] / n  # the matrix + its bookkeeping
        tracemalloc.stop()
        fns["ours_e2e"] = lambda: embedded.search(PREFIX, query="query 0", limit=10)
    out["top_theirs"] = [r.key for r in mem.search(PREFIX, query="query 0", limit=10)]
    rounds = 3 if quick or n >= 100_000 else 7
    out["samples"] = paired_rounds(fns, rounds, warmup=1)
    out["cache_bytes_per_vector"] = cache.nbytes() / max(1, len(cache))
    out["n"] = n
    return out


def run_child(n: int, quick: bool, e2e: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(n)] + (["--quick"] if quick else [])
    cmd += [] if e2e else ["--no-e2e"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"vectors {n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def rows_for(res: dict[str, Any]) -> list[Row]:
    from _common import ratio_spread, spread

    sec = "local vectors vs InMemoryStore"
    k = f"{res['n'] // 1000}k vectors"
    s = res["samples"]
    med = {name: statistics.median(v) * 1000 for name, v in s.items()}
    agree = all(res[f"top_{p}"] == res["top_theirs"] for p in ("cold", "warm", "e2e") if f"top_{p}" in res)
    agreement = "top-10 identical to InMemoryStore's" if agree else "TOP-10 DIFFER"
    theirs = f"InMemoryStore {spread(s['theirs'], 1e3)} ms"
    out = [
        Row(
            sec,
            f"{k}: search, ours client-side, warm",
            med["ours_warm"],
            med["theirs"],
            "ms",
            f"ours {spread(s['ours_warm'], 1e3)} ms, {theirs}; per round {ratio_spread(s['theirs'], s['ours_warm'])}; "
            f"{ratio_spread(s['ours_warm'], s['numpy'])} the bare numpy top-10 ({spread(s['numpy'], 1e3)} ms); "
            + agreement,
        ),
        Row(
            sec,
            f"{k}: search, ours client-side, cold (first search of a store)",
            med["ours_cold"],
            med["theirs"],
            "ms",
            f"ours {spread(s['ours_cold'], 1e3)} ms; per round {ratio_spread(s['theirs'], s['ours_cold'])}",
        ),
    ]
    if "ours_e2e" in s:
        out.append(
            Row(
                sec,
                f"{k}: search, ours end to end on mongomock, warm",
                med["ours_e2e"],
                med["theirs"],
                "ms",
                f"ours {spread(s['ours_e2e'], 1e3)} ms; per round {ratio_spread(s['theirs'], s['ours_e2e'])}; "
                f"{ratio_spread(s['ours_e2e'], s['numpy'])} the bare numpy top-10",
            )
        )
    out += [
        Row(
            sec,
            f"{k}: MB from the server per search, warm (theirs column: the cold first search)",
            res["mb_warm"],
            res["mb_cold"],
            "MB",
            f"round trips: warm {res['trips_warm']}, cold {res['trips_cold']} (getMores included)",
        ),
        Row(
            sec,
            f"{k}: memory held per vector",
            res["ours_bytes_per_vector"],
            res["theirs_bytes_per_vector"],
            "bytes",
            f"tracemalloc; ours: the client-side matrix + bookkeeping "
            f"({res['cache_bytes_per_vector']:.0f} B/vector in arrays at capacity"
            + (
                f"; end to end on mongomock, the first search's allocations: {res['e2e_bytes_per_vector']:.0f} B/vector"
                if "e2e_bytes_per_vector" in res
                else ""
            )
            + "); theirs: InMemoryStore's data",
        ),
    ]
    return out


def rows(quick: bool = False, sizes: list[int] | None = None, e2e_max: int = 100_000) -> list[Row]:
    sizes = sizes or ([1_000, 10_000] if quick else [1_000, 10_000, 100_000])
    out: list[Row] = []
    for n in sizes:
        t0 = time.perf_counter()
        out += rows_for(run_child(n, quick, e2e=n <= e2e_max))
        print(f"  vectors {n}: {time.perf_counter() - t0:.0f}s", flush=True)
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k and 10k only, fewer repeats")
    ap.add_argument("--sizes", help="comma-separated vector counts, e.g. 1000,10000,100000")
    ap.add_argument(
        "--e2e-max",
        type=int,
        default=100_000,
        help="largest size searched end to end on mongomock (default 100000)",
    )
    ap.add_argument("--child", metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--no-e2e", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(int(args.child), args.quick, not args.no_e2e)))
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
