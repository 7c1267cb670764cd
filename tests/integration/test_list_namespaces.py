"""list_namespaces: conditions, wildcards, max_depth, paging on namespaces; InMemoryStore as the oracle."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeStore, StoreAPI
from langgraph.store.base import ListNamespacesOp, MatchCondition, PutOp
from langgraph.store.memory import InMemoryStore

# The data of the list_namespaces docstring and of the contract's section 3 (M3).
NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("x", "y"),
    ("a",),
    ("a", "c", "b"),
]


async def loaded(make_store: MakeStore, namespaces: list[tuple[str, ...]] = NAMESPACES) -> StoreAPI:
    api = await make_store()
    await api.batch([PutOp(ns, "k", {"v": 1}) for ns in namespaces])
    return api


async def test_everything_sorted(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    assert await api.list_namespaces() == sorted(NAMESPACES)


async def test_prefix(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    assert await api.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert await api.list_namespaces(prefix=("a", "b", "d", "e")) == [("a", "b", "d", "e")]
    assert await api.list_namespaces(prefix=("a", "b", "d", "e", "z")) == []
    assert await api.list_namespaces(prefix=("nope",)) == []


async def test_suffix(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    assert await api.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert await api.list_namespaces(suffix=("a", "f")) == [("b", "a", "f")]
    assert await api.list_namespaces(suffix=("a",)) == [("a",)]


async def test_prefix_wildcard_needs_exactly_one_label(make_store: MakeStore) -> None:
    """``("a", "*")`` does not return ``("a",)`` (the existing MongoDB store does: M3)."""
    api = await loaded(make_store)
    got = await api.list_namespaces(prefix=("a", "*"))
    assert ("a",) not in got
    assert got == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "b"),
        ("a", "c", "f"),
    ]
    assert await api.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert await api.list_namespaces(prefix=("*", "*", "*", "*")) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert await api.list_namespaces(prefix=("*", "*", "*", "*", "*")) == []


async def test_suffix_wildcards(make_store: MakeStore) -> None:
    """The two suffixes the existing MongoDB store answers wrongly (contract M3)."""
    api = await loaded(make_store)
    assert await api.list_namespaces(suffix=("d", "*")) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert await api.list_namespaces(suffix=("*", "b", "c")) == [("a", "b", "c")]
    assert await api.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert await api.list_namespaces(suffix=("*", "*", "a")) == []


async def test_prefix_and_suffix_together(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    assert await api.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert await api.list_namespaces(prefix=("a", "c"), suffix=("b",)) == [("a", "c", "b")]


async def test_several_conditions_through_batch_are_anded(make_store: MakeStore) -> None:
    """The existing MongoDB store keeps only the last prefix condition (M3)."""
    api = await loaded(make_store)
    two_prefixes = ListNamespacesOp(
        match_conditions=(MatchCondition("prefix", ("a",)), MatchCondition("prefix", ("x",)))
    )
    two_suffixes = ListNamespacesOp(
        match_conditions=(MatchCondition("suffix", ("f",)), MatchCondition("suffix", ("b", "*")))
    )
    assert await api.batch([two_prefixes, two_suffixes]) == [[], [("a", "b", "f")]]


async def test_max_depth_truncates_dedups_and_sorts(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    assert await api.list_namespaces(max_depth=1) == [("a",), ("b",), ("users",), ("x",)]
    assert await api.list_namespaces(max_depth=2) == [
        ("a",),
        ("a", "b"),
        ("a", "c"),
        ("b", "a"),
        ("users", "123"),
        ("x", "y"),
    ]
    assert await api.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await api.list_namespaces(max_depth=10) == sorted(NAMESPACES)


async def test_max_depth_zero_is_the_root(make_store: MakeStore) -> None:
    """InMemoryStore answers ``[()]``; the existing MongoDB store treats 0 as no truncation (M2)."""
    api = await loaded(make_store)
    assert await api.list_namespaces(max_depth=0) == [()]
    assert InMemoryStore().batch([ListNamespacesOp(max_depth=0)]) == [[]]  # nothing stored: nothing listed
    empty = await make_store()
    assert await empty.list_namespaces(max_depth=0) == []


async def test_limit_and_offset_apply_to_namespaces(make_store: MakeStore) -> None:
    """5 namespaces of 10 items each, limit=5: 5 namespaces (M2 gives 1)."""
    api = await make_store()
    await api.batch([PutOp(("user", f"u{i}"), f"k{k}", {"v": k}) for i in range(5) for k in range(10)])
    assert await api.list_namespaces(limit=5) == [("user", f"u{i}") for i in range(5)]
    assert await api.list_namespaces(limit=3) == [("user", f"u{i}") for i in range(3)]
    assert await api.list_namespaces(limit=2, offset=1) == [("user", "u1"), ("user", "u2")]
    assert await api.list_namespaces(limit=2, offset=4) == [("user", "u4")]
    assert await api.list_namespaces(offset=5) == []
    assert await api.list_namespaces(limit=0) == []
    assert await api.list_namespaces(max_depth=1, limit=5) == [("user",)]


async def test_paging_covers_every_namespace_once(make_store: MakeStore) -> None:
    api = await loaded(make_store)
    pages = [await api.list_namespaces(limit=3, offset=o) for o in range(0, 12, 3)]
    flat = [ns for page in pages for ns in page]
    assert flat == sorted(NAMESPACES)


async def test_deleted_namespaces_disappear(make_store: MakeStore) -> None:
    """Only namespaces that hold items are listed (InMemoryStore also lists emptied ones)."""
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    await api.put(("b",), "k", {"v": 1})
    await api.get(("ghost",), "k")
    await api.delete(("a",), "k")
    assert await api.list_namespaces() == [("b",)]


# --------------------------------------------------------------------------- parity with InMemoryStore

PARITY_NAMESPACES = [
    *NAMESPACES,
    ("(", "x"),
    ("[", "a*b", "f"),
    ("^", "$"),
    ("a|b", "f"),
    ("a+", "?"),
    ("\\", "d", "z"),
    ("ünïcødé", "日本"),
    ("🦜", "f"),
    ("naïve café",),
    ("*", "f"),
]

PARITY_CALLS: list[dict[str, Any]] = [
    {},
    {"prefix": ("a",)},
    {"prefix": ("a", "*")},
    {"prefix": ("*",)},
    {"prefix": ("*", "f")},
    {"prefix": ("(",)},
    {"prefix": ("[", "a*b")},
    {"prefix": ("ünïcødé",)},
    {"suffix": ("f",)},
    {"suffix": ("*", "f")},
    {"suffix": ("d", "*")},
    {"suffix": ("*", "b", "c")},
    {"suffix": ("$",)},
    {"suffix": ("日本",)},
    {"suffix": ("*",)},
    {"prefix": ("a",), "suffix": ("f",)},
    {"max_depth": 0},
    {"max_depth": 1},
    {"max_depth": 2},
    {"prefix": ("a",), "max_depth": 2},
    {"suffix": ("f",), "max_depth": 1},
    {"limit": 4},
    {"limit": 4, "offset": 3},
    {"max_depth": 2, "limit": 3, "offset": 2},
    {"offset": 100},
    {"limit": 0},
]


async def test_parity_with_inmemorystore(make_store: MakeStore) -> None:
    """Same data, same calls: the same namespaces in the same (sorted) order."""
    api = await loaded(make_store, PARITY_NAMESPACES)
    ref = InMemoryStore()
    ref.batch([PutOp(ns, "k", {"v": 1}) for ns in PARITY_NAMESPACES])
    for kwargs in PARITY_CALLS:
        assert await api.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs), kwargs


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_parity_with_many_items_per_namespace(make_store: MakeStore, limit: int) -> None:
    namespaces = [("t", f"n{i}") for i in range(4)]
    ops = [PutOp(ns, f"k{k}", {"k": k}) for ns in namespaces for k in range(6)]
    api = await make_store()
    await api.batch(ops)
    ref = InMemoryStore()
    ref.batch(ops)
    assert await api.list_namespaces(limit=limit) == ref.list_namespaces(limit=limit) == namespaces[:limit]


# Labels whose order as tuples differs from the order of their '.'-joined paths.
TRICKY = [
    ("a",),
    ("a", "b"),
    ("a-b",),
    ("a b", "c"),
    ("ab",),
    ("a!", "z"),
    ("a", "b", "c", "d"),
    ("a", "b-c"),
    ("é",),
    ("Z", "a"),
    ("\U0001f600",),
    ("a", "~"),
]
TRICKY_CALLS: list[dict[str, Any]] = [
    {},
    {"max_depth": 1},
    {"max_depth": 2},
    {"max_depth": 3, "limit": 4},
    {"max_depth": 2, "offset": 2, "limit": 3},
    {"prefix": ("a",), "max_depth": 2},
    {"offset": 5, "limit": 2},
    {"limit": 1},
]


async def test_server_side_order_is_tuple_order_for_tricky_labels(make_store: MakeStore) -> None:
    api = await loaded(make_store, TRICKY)
    ref = InMemoryStore()
    ref.batch([PutOp(ns, "k", {"v": 1}) for ns in TRICKY])
    for kwargs in TRICKY_CALLS:
        assert await api.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs), kwargs
