"""Which engine for the persistent embedded store (issue 12)? Our store, on each candidate.

For each engine: open a store in a fresh directory, ``setup()``, N single puts with a
hashing index (each a separate call, as a CLI user or an agent makes them), one batch of
N puts, a semantic search, a filtered search, ``list_namespaces``, then reopen (as the
next command would) and read one item back. Prints one line per engine with the time
of each step, or the first error. Candidates not installed are skipped.

    python bench/embedded_engines.py [--n 200] [--extra-path DIR]

``--extra-path`` appends a folder of packages to ``sys.path`` (after the venv's own), so
candidates can be measured without installing them into the project's environment:
``pip install --target /tmp/engpkgs montydb tinymongo litemongo``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def ours(path: Path) -> tuple[Any, Any]:
    """``MongoStore.local``'s collections on a new engine (what the next process gets)."""
    from mongostore.drivers.embedded import LocalCollection, LocalFile

    engine = LocalFile(path, "bench")
    return LocalCollection(engine, "memories"), LocalCollection(engine, "memories_vectors")


def ours_store(path: Path, index: Any) -> Any:
    """``MongoStore.local`` itself: one file transaction (one save) per batch."""
    from mongostore import MongoStore
    from mongostore.drivers.embedded import proxy

    proxy._ENGINES.clear()  # a fresh engine, as in a new process
    return MongoStore.local(path, db_name="bench", index=index)


def mongomock_memory(path: Path) -> tuple[Any, Any]:
    """The baseline: mongomock in memory, no file (reopen finds nothing: expected to fail there)."""
    from mongostore.drivers.mongomock_compat import in_memory_collection

    items = in_memory_collection("bench", "memories")
    return items, items.database["memories_vectors"]


def montydb_sqlite(path: Path) -> tuple[Any, Any]:
    from montydb import MontyClient, set_storage

    set_storage(str(path), storage="sqlite")
    db = MontyClient(str(path))["bench"]
    return db["memories"], db["memories_vectors"]


def litemongo_sqlite(path: Path) -> tuple[Any, Any]:
    import litemongo

    db = litemongo.connect(str(path / "bench.sqlite"), tz_aware=True)["bench"]
    return db["memories"], db["memories_vectors"]


def tinymongo_default(path: Path) -> tuple[Any, Any]:
    from tinymongo import TinyMongoClient

    db = TinyMongoClient(str(path))["bench"]
    return db["memories"], db["memories_vectors"]


ENGINES: dict[str, Callable[..., Any]] = {
    "ours: MongoStore.local (one transaction per batch)": ours_store,
    "ours: its collections, one transaction per call": ours,
    "baseline: mongomock in memory (no persistence)": mongomock_memory,
    "montydb 2.5.6 (sqlite)": montydb_sqlite,
    "litemongo 0.2.0 (sqlite)": litemongo_sqlite,
    "tinymongo 1.3.1 (default)": tinymongo_default,
}


def run(name: str, opener: Callable[..., Any], n: int) -> str:
    from mongostore.tools.embeddings import HashingEmbeddings

    emb = HashingEmbeddings(384)
    index = {"dims": 384, "embed": emb, "fields": ["text"]}
    path = Path(tempfile.mkdtemp(prefix="engine-"))
    times: list[str] = []
    step = "open"
    try:
        t = time.perf_counter()

        def lap(label: str) -> None:
            nonlocal t
            now = time.perf_counter()
            times.append(f"{label} {now - t:.2f}s")
            t = now

        store = _open(opener, path, index)
        step = "setup"
        store.setup()
        lap("setup")
        step = "single puts"
        for i in range(n):
            store.put(("users", f"u{i % 10}", "memories"), f"k{i}", {"text": f"memory number {i} about pizza", "i": i})
        lap(f"{n} single puts")
        step = "batch put"
        from langgraph.store.base import PutOp

        store.batch([PutOp(("users", "batch"), f"b{i}", {"text": f"batch item {i}", "i": i}) for i in range(n)])
        lap(f"batch of {n}")
        step = "semantic search"
        hits = store.search(("users",), query="memory number 7 about pizza", limit=5)
        assert hits and hits[0].key == "k7", [h.key for h in hits]
        lap("search")
        step = "filtered search"
        found = store.search(("users",), filter={"i": {"$gte": n - 5}}, limit=100)
        assert len(found) == 10, len(found)
        lap("filter")
        step = "list_namespaces"
        assert len(store.list_namespaces(prefix=("users",))) == 11
        lap("ls")
        step = "reopen"
        again = _open(opener, path, index)
        got = again.get(("users", "u3", "memories"), "k3")
        assert got is not None and got.value["i"] == 3
        lap("reopen+get")
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return f"{name}: OK  " + ", ".join(times) + f", {size / 1e6:.1f} MB on disk"
    except Exception as exc:
        first = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return f"{name}: FAILED at {step} ({', '.join(times)}): {first[:300]}"
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _open(opener: Callable[..., Any], path: Path, index: Any) -> Any:
    from mongostore import MongoStore

    if opener is ours_store:
        return opener(path, index)
    items, vectors = opener(path)
    return MongoStore(items, index=index, vectors_collection=vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--extra-path", action="append", default=[])
    args = parser.parse_args()
    sys.path.extend(args.extra_path)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    print(f"python {sys.version.split()[0]}, n={args.n}")
    for name, opener in ENGINES.items():
        print(run(name, opener, args.n), flush=True)


if __name__ == "__main__":
    main()
