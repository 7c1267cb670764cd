"""Namespace validation (LangGraph's rules, also for ops given straight to ``batch``) and
literal matching of labels that hold regex metacharacters or unicode."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeStore
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

BAD_LABELS: list[Any] = [
    pytest.param(("a", ""), id="empty-label"),
    pytest.param(("",), id="only-empty-label"),
    pytest.param(("a.b",), id="period"),
    pytest.param(("a", "b.c"), id="period-deep"),
    pytest.param((".",), id="only-period"),
    pytest.param(("a\x00b",), id="nul"),
    pytest.param(("a", 1), id="int-label"),
    pytest.param((None,), id="none-label"),
    pytest.param(("a", ("b",)), id="tuple-label"),
]


async def test_put_rejects_the_empty_namespace(make_store: MakeStore) -> None:
    api = await make_store()
    with pytest.raises(InvalidNamespaceError, match="empty"):
        await api.put((), "k", {"v": 1})
    assert await api.docs() == []


@pytest.mark.parametrize("namespace", [("langgraph",), ("langgraph", "x")])
async def test_put_rejects_the_langgraph_root(make_store: MakeStore, namespace: tuple[str, ...]) -> None:
    api = await make_store()
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        await api.put(namespace, "k", {"v": 1})
    assert await api.docs() == []


async def test_langgraph_is_fine_below_the_root(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("x", "langgraph"), "k", {"v": 1})
    assert (await api.get(("x", "langgraph"), "k")).value == {"v": 1}


async def test_reads_of_the_empty_or_langgraph_namespace_are_allowed(make_store: MakeStore) -> None:
    """As in LangGraph: only puts check the root; reads just find nothing."""
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    assert await api.get((), "k") is None
    assert await api.get(("langgraph",), "k") is None
    assert await api.search(("langgraph",)) == []
    assert [i.key for i in await api.search(())] == ["k"]


@pytest.mark.parametrize("namespace", BAD_LABELS)
async def test_every_method_rejects_bad_labels(make_store: MakeStore, namespace: tuple[Any, ...]) -> None:
    api = await make_store()
    with pytest.raises(InvalidNamespaceError):
        await api.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await api.get(namespace, "k")
    with pytest.raises(InvalidNamespaceError):
        await api.delete(namespace, "k")
    with pytest.raises(InvalidNamespaceError):
        await api.search(namespace)
    with pytest.raises(InvalidNamespaceError):
        await api.list_namespaces(prefix=namespace)
    with pytest.raises(InvalidNamespaceError):
        await api.list_namespaces(suffix=namespace)
    assert await api.docs() == []


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(PutOp(("a.b",), "k", {"v": 1}), id="put-period"),
        pytest.param(PutOp(("a", ""), "k", {"v": 1}), id="put-empty-label"),
        pytest.param(PutOp(("a\x00",), "k", {"v": 1}), id="put-nul"),
        pytest.param(PutOp(("a", 1), "k", {"v": 1}), id="put-int"),  # type: ignore[arg-type]
        pytest.param(PutOp(("a.b",), "k", None), id="delete-period"),
        pytest.param(GetOp(("a.b",), "k"), id="get-period"),
        pytest.param(GetOp(("a", ""), "k"), id="get-empty-label"),
        pytest.param(SearchOp(("a.b",)), id="search-period"),
        pytest.param(SearchOp(("a", 2)), id="search-int"),  # type: ignore[arg-type]
        pytest.param(ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),)), id="list-prefix"),
        pytest.param(ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("*", "")),)), id="list-suffix"),
    ],
)
async def test_batch_validates_ops_given_directly(make_store: MakeStore, op: Any) -> None:
    """Ops passed straight to batch skip BaseStore's checks; the store checks them itself,
    before anything of the batch runs."""
    api = await make_store()
    with pytest.raises(InvalidNamespaceError):
        await api.batch([PutOp(("ok",), "first", {"v": 1}), op, PutOp(("ok",), "last", {"v": 2})])
    assert await api.docs() == []


# --------------------------------------------------------------------------- literal labels

LITERAL_LABELS = ["(", "[", "\\", "^", "$", "|", "+", "?", "a*b", "x{2}", "ünïcødé", "日本", "🦜", "naïve café"]


@pytest.mark.parametrize("label", LITERAL_LABELS)
async def test_labels_are_matched_literally(make_store: MakeStore, label: str) -> None:
    """A label read as a regex would match other namespaces (or break the query): it must not."""
    api = await make_store()
    await api.put((label, "in"), "k1", {"v": 1})
    await api.put(("p", label), "k2", {"v": 2})
    # Namespaces that an unescaped or case-folded pattern would catch.
    for decoy in ("aab", "b", "xx", "zzz", "other", label + "z", "z" + label, label.upper() + "Z"):
        if decoy != label:
            await api.put((decoy, "out"), "decoy", {"v": 0})
            await api.put(("p", decoy), "decoy", {"v": 0})

    assert [(i.namespace, i.key) for i in await api.search((label,))] == [((label, "in"), "k1")]
    assert [(i.namespace, i.key) for i in await api.search(("p", label))] == [(("p", label), "k2")]
    assert await api.list_namespaces(prefix=(label,)) == [(label, "in")]
    assert await api.list_namespaces(suffix=(label,)) == [("p", label)]
    assert await api.list_namespaces(prefix=("*", label)) == [("p", label)]
    assert await api.list_namespaces(suffix=(label, "*")) == [(label, "in")]
    assert (await api.get((label, "in"), "k1")).namespace == (label, "in")


async def test_prefix_stops_at_a_label_boundary(make_store: MakeStore) -> None:
    api = await make_store()
    for ns in [("a",), ("a", "b"), ("ab",), ("users", "alice"), ("users", "alice", "memories"), ("users", "alicex")]:
        await api.put(ns, "k", {"ns": list(ns)})

    assert {i.namespace for i in await api.search(("a",))} == {("a",), ("a", "b")}
    assert {i.namespace for i in await api.search(("users", "alice"))} == {
        ("users", "alice"),
        ("users", "alice", "memories"),
    }
    assert await api.list_namespaces(prefix=("a",)) == [("a",), ("a", "b")]
    assert await api.list_namespaces(prefix=("users", "alice")) == [("users", "alice"), ("users", "alice", "memories")]
    assert await api.list_namespaces(suffix=("b",)) == [("a", "b")]
    assert await api.get(("users", "alicex"), "k") is not None


async def test_a_stored_star_label(make_store: MakeStore) -> None:
    """``*`` is a wildcard in list_namespaces conditions only; a search prefix is literal.
    InMemoryStore behaves the same, and is checked on the same data."""
    api = await make_store()
    ref = InMemoryStore()
    for ns in [("*", "x"), ("a", "x"), ("a*", "x")]:
        await api.put(ns, "k", {"v": 1})
        ref.put(ns, "k", {"v": 1})

    assert [i.namespace for i in await api.search(("*",))] == [("*", "x")]
    assert [i.namespace for i in ref.search(("*",))] == [("*", "x")]
    assert await api.list_namespaces(prefix=("*",)) == [("*", "x"), ("a", "x"), ("a*", "x")]
    assert await api.list_namespaces(prefix=("*",)) == ref.list_namespaces(prefix=("*",))
    assert await api.list_namespaces(prefix=("a*",)) == [("a*", "x")]
