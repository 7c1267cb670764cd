"""``purge`` (issue 36.1): every item under a prefix goes, with its vectors; nothing beside it, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeStore, StoreAPI
from langgraph.store.base import InvalidNamespaceError

from mongostore import MongoStore, PurgeReport
from mongostore.core.plan import purge as purge_module
from mongostore.tools.embeddings import HashingEmbeddings

NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("ab", "a"), ("b", "a"), ("aa",)]


def index() -> dict[str, Any]:
    return {"dims": 16, "embed": HashingEmbeddings(16), "fields": ["text"]}


async def purge(api: StoreAPI, prefix: Any, **kw: Any) -> PurgeReport:
    return await api._call("purge", prefix, **kw)  # type: ignore[no-any-return]


async def filled(make: MakeStore, **kw: Any) -> StoreAPI:
    api = await make(**kw)
    for ns in NAMESPACES:
        await api.batch([_put(ns, f"k{i}") for i in range(3)])
    await api.put(("a", "b"), "plain", {"text": "not embedded"}, index=False)
    return api


def _put(ns: tuple[str, ...], key: str) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(ns, key, {"text": f"{'.'.join(ns)} {key}"})


async def test_purge_deletes_the_prefix_and_its_vectors_and_nothing_beside(make_store: MakeStore) -> None:
    api = await filled(make_store, index=index())
    before_vectors = len(await api.docs("vectors"))
    would = await purge(api, ("a",), dry_run=True)
    assert would == PurgeReport(("a",), items=10, vectors=9, dry_run=True)
    assert len(await api.docs("items")) == 22 and len(await api.docs("vectors")) == before_vectors  # nothing went
    done = await purge(api, ("a",))
    assert done == PurgeReport(("a",), items=10, vectors=9)
    assert sorted(await api.list_namespaces()) == [("aa",), ("ab",), ("ab", "a"), ("b", "a")]
    assert not [d for d in await api.docs("vectors") if d["item_id"].startswith("a.")]
    assert len(await api.docs("vectors")) == before_vectors - 9
    assert [i.key for i in await api.search(("a",))] == []
    assert await api.get(("ab", "a"), "k1") is not None
    again = await purge(api, ("a",))
    assert again == PurgeReport(("a",), items=0, vectors=0)


async def test_purge_without_an_index_and_of_a_deeper_prefix(make_store: MakeStore) -> None:
    api = await filled(make_store)
    assert await purge(api, ["a", "b"]) == PurgeReport(("a", "b"), items=7, vectors=0)  # a list is taken too
    assert sorted(await api.list_namespaces()) == [("a",), ("aa",), ("ab",), ("ab", "a"), ("b", "a")]


@pytest.mark.parametrize("prefix", [(), ("a", ""), ("a.b",), "a"], ids=["empty", "empty-label", "dot", "str"])
async def test_a_bad_prefix_is_refused_before_any_io(make_store: MakeStore, prefix: Any) -> None:
    api = await make_store(setup=False)
    with pytest.raises(InvalidNamespaceError):
        await purge(api, prefix)
    with pytest.raises(TypeError, match="dry_run"):
        await purge(api, ("a",), dry_run="yes")


def test_a_large_tenant_goes_in_bounded_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round deletes at most ``PURGE_BATCH`` items by ``_id`` (a bounded ``$in``), their vectors after."""
    store = MongoStore.in_memory(index=index())
    store.batch([_put(("t", str(i % 3)), f"k{i}") for i in range(25)])
    store.put(("u",), "k", {"text": "stays"})
    monkeypatch.setattr(purge_module, "PURGE_BATCH", 10)
    from mongostore.core import steps

    seen: list[Any] = []
    original = steps.Write.__init__

    def record(self: Any, requests: Any) -> None:
        seen.extend(r for r in requests if r.role == "items")
        original(self, requests)

    monkeypatch.setattr(steps.Write, "__init__", record)
    assert store.purge(("t",)) == PurgeReport(("t",), items=25, vectors=25)
    assert [len(r.filter["_id"]["$in"]) for r in seen] == [10, 10, 5]
    assert [i.key for i in store.search((), query="stays")] == ["k"]


def test_purged_items_leave_the_vector_cache() -> None:
    store = MongoStore.in_memory(index=index())
    store.batch([_put(("t",), f"k{i}") for i in range(5)] + [_put(("u",), "k")])
    assert len(store.search((), query="t k1", limit=10)) == 6  # the cache now holds every vector
    store.purge(("t",))
    assert store._vector_cache is not None and len(store._vector_cache) == 1
    assert [i.key for i in store.search((), query="t k1", limit=10)] == ["k"]
