"""A sync store shared by threads: LangGraph runs a sync graph's parallel branches on a
thread pool, so nodes call one store from several threads at once (issue 26.1).

Each thread works on keys of its own under a shared prefix while the others write and
search there too, so every answer about its own keys is known exactly; searches over the
shared prefix must never raise, never list a key twice, and rank only what is stored.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, TypedDict

import pytest

from mongostore import MongoStore
from mongostore.tools.embeddings import HashingEmbeddings

THREADS = 12
ROUNDS = 150
WORDS = ["pizza", "lisbon", "nursing", "peanuts", "tea", "jazz", "rain"]


def _store(indexed: bool) -> MongoStore:
    index = {"dims": 64, "embed": HashingEmbeddings(64), "fields": ["text"]} if indexed else None
    store = MongoStore.in_memory(index=index)
    store.setup()
    return store


def _worker(store: MongoStore, n: int, start: threading.Barrier, indexed: bool) -> int:
    mine: dict[str, str] = {}
    start.wait()
    calls = 0
    for r in range(ROUNDS):
        key = f"t{n}-{r % 9}"
        word = WORDS[(n + r) % len(WORDS)]
        if r % 5 == 4:
            store.delete(("shared",), key)
            mine.pop(key, None)
        else:
            store.put(("shared",), key, {"text": f"{word} {n} {r}", "owner": n})
            mine[key] = f"{word} {n} {r}"
        got = store.get(("shared",), key)
        assert (got.value["text"] if got else None) == mine.get(key)
        kwargs: dict[str, Any] = {"query": word} if indexed else {}
        page = store.search(("shared",), limit=20, **kwargs)
        keys = [i.key for i in page]
        assert len(keys) == len(set(keys)), keys
        own = store.search(("shared",), filter={"owner": n}, limit=50, **kwargs)
        assert {i.key: i.value["text"] for i in own} == mine
        calls += 5
    return calls


@pytest.mark.parametrize("indexed", [True, False], ids=["semantic", "plain"])
def test_many_threads_share_one_sync_store(indexed: bool) -> None:
    store = _store(indexed)
    start = threading.Barrier(THREADS)
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(_worker, store, n, start, indexed) for n in range(THREADS)]
        done = [f.result(timeout=300) for f in futures]
    assert sum(done) == THREADS * ROUNDS * 5
    # What is stored agrees with a fresh store on the same collection (nothing cached wrongly).
    fresh = MongoStore(store.collection, index=store.index_config)
    for word in WORDS[:3]:
        kwargs: dict[str, Any] = {"query": word} if indexed else {}
        want = [(i.key, i.score) for i in fresh.search(("shared",), limit=100, **kwargs)]
        assert [(i.key, i.score) for i in store.search(("shared",), limit=100, **kwargs)] == want


def test_a_graph_whose_parallel_branches_use_the_store() -> None:
    """A real StateGraph fanning out to four nodes that each put, get and search."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    class State(TypedDict, total=False):
        run: int
        seen: list[str]

    store = _store(indexed=True)

    def branch(name: str) -> Any:
        def node(state: State, runtime: Runtime[None]) -> dict[str, Any]:
            s = runtime.store
            assert s is not None
            run = state["run"]
            for i in range(10):
                s.put(("users", name), f"m{run}-{i}", {"text": f"{name} likes pizza {run} {i}"})
                assert s.get(("users", name), f"m{run}-{i}") is not None
                hits = s.search(("users",), query=f"{name} pizza", limit=10)
                assert len({(h.namespace, h.key) for h in hits}) == len(hits)
            return {}

        return node

    builder = StateGraph(State)
    names = ["ana", "bo", "cy", "di"]
    for name in names:
        builder.add_node(name, branch(name))
        builder.add_edge(START, name)
        builder.add_edge(name, END)
    graph = builder.compile(store=store)
    for run in range(25):
        graph.invoke({"run": run})
    for name in names:
        assert len(store.search(("users", name), limit=1000)) == 250
