"""The rules between the parts (docs/architecture.md), read from the source with ``ast``.

The core (``mongostore.core``) does no I/O: it imports no driver, no tool, no store, and
none of pymongo's, Motor's or mongomock's client classes. The tools use the public API
and the pure core builders, never a driver directly. Nothing is imported to check this:
a module that broke the rule at import time would still be caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "mongostore"

# What a core module may not import (a name, or anything under it).
CORE_FORBIDDEN = (
    "mongostore.drivers",
    "mongostore.tools",
    "mongostore.store",
    "mongostore.aio",
    # pymongo's I/O classes (pymongo.errors, bson: data only, allowed)
    "pymongo.MongoClient",
    "pymongo.AsyncMongoClient",
    "pymongo.mongo_client",
    "pymongo.collection",
    "pymongo.database",
    "pymongo.asynchronous",
    "pymongo.synchronous",
    "motor",
    "mongomock",
    "mongomock_motor",
    "pymongo_async_mock",
)
# The package itself: ``from mongostore import ...`` runs its __init__, which imports the stores.
CORE_FORBIDDEN_EXACT = ("mongostore",)
TOOLS_FORBIDDEN = ("mongostore.drivers",)
# Where the local store lives (env var, URI scheme, default directory): pure, no I/O, and
# what the CLI and the Agent Server settings must know before they open a store.
TOOLS_ALLOWED = ("mongostore.drivers.embedded.paths", "mongostore.drivers.connect")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every module (and ``module.name`` for each name of a ``from`` import) the source imports,
    at any depth (imports inside functions count), relative imports resolved against ``module``."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return names


def violations(
    source: str, module: str, forbidden: tuple[str, ...], exact: tuple[str, ...] = (), is_package: bool = False
) -> list[str]:
    """The imports of ``source`` that the rule forbids: a forbidden name or anything under it."""
    found: list[str] = []
    for name in imported_names(source, module, is_package):
        if name in exact or any(name == f or name.startswith(f + ".") for f in forbidden):
            found.append(name)
    return sorted(set(found))


def check_tree(folder: Path, forbidden: tuple[str, ...], exact: tuple[str, ...] = ()) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        name = module_name(path)
        found = violations(path.read_text(encoding="utf-8"), name, forbidden, exact, path.name == "__init__.py")
        if found:
            bad[name] = found
    return bad


def test_the_core_does_no_io_and_imports_no_driver_tool_or_store() -> None:
    modules = list((PACKAGE / "core").rglob("*.py"))
    assert len(modules) > 10  # the checker sees the core's modules, subpackages included
    assert check_tree(PACKAGE / "core", CORE_FORBIDDEN, CORE_FORBIDDEN_EXACT) == {}


def test_the_tools_do_not_import_the_drivers() -> None:
    assert list((PACKAGE / "tools").rglob("*.py"))
    bad = check_tree(PACKAGE / "tools", TOOLS_FORBIDDEN)
    allowed = {m: [n for n in names if not n.startswith(TOOLS_ALLOWED)] for m, names in bad.items()}
    assert {m: names for m, names in allowed.items() if names} == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from mongostore.drivers.io import run_sync", ["mongostore.drivers.io", "mongostore.drivers.io.run_sync"]),
        ("import mongostore.tools.cli", ["mongostore.tools.cli"]),
        ("from mongostore import store", ["mongostore", "mongostore.store"]),
        ("from mongostore import MongoStore", ["mongostore"]),
        ("from mongostore.aio import AsyncMongoStore", ["mongostore.aio", "mongostore.aio.AsyncMongoStore"]),
        ("from pymongo import MongoClient", ["pymongo.MongoClient"]),
        ("from pymongo.collection import Collection", ["pymongo.collection", "pymongo.collection.Collection"]),
        ("import pymongo.asynchronous.collection", ["pymongo.asynchronous.collection"]),
        ("import motor.motor_asyncio", ["motor.motor_asyncio"]),
        ("import mongomock", ["mongomock"]),
        ("def f():\n    from mongostore.tools import demo\n", ["mongostore.tools", "mongostore.tools.demo"]),
        ("from ...drivers import io", ["mongostore.drivers", "mongostore.drivers.io"]),
        ("from ...tools.cli import main", ["mongostore.tools.cli", "mongostore.tools.cli.main"]),
    ],
)
def test_the_checker_catches_a_forbidden_import(source: str, expected: list[str]) -> None:
    # as if written in mongostore/core/plan/batch.py
    assert violations(source, "mongostore.core.plan.batch", CORE_FORBIDDEN, CORE_FORBIDDEN_EXACT) == expected


@pytest.mark.parametrize(
    "source",
    [
        "from pymongo.errors import OperationFailure",
        "import bson",
        "from bson.binary import Binary",
        "from mongostore.config import IndexSettings",
        "from mongostore.errors import WriteError",
        "from mongostore.core import queries as q",
        "from . import state",
        "from .search import atlas_search_plan",
        "from mongostore.storehouse import x",  # a prefix of a name is not the name
    ],
)
def test_the_checker_allows_data_only_imports(source: str) -> None:
    assert violations(source, "mongostore.core.plan.batch", CORE_FORBIDDEN, CORE_FORBIDDEN_EXACT) == []


def test_the_checker_resolves_relative_imports_in_a_package_init() -> None:
    found = violations("from .drivers import io", "mongostore", TOOLS_FORBIDDEN, is_package=True)
    assert found == ["mongostore.drivers", "mongostore.drivers.io"]
    assert violations("from ...drivers import io", "mongostore.tools.cli", TOOLS_FORBIDDEN, is_package=True) == [
        "mongostore.drivers",
        "mongostore.drivers.io",
    ]
    # in mongostore/tools/cli/__init__.py ".." is mongostore.tools: not the drivers
    assert violations("from ..drivers import io", "mongostore.tools.cli", TOOLS_FORBIDDEN, is_package=True) == []


def test_a_tool_importing_a_driver_fails_the_tools_rule() -> None:
    source = "from mongostore.drivers.embedded import default_data_dir\n"
    assert violations(source, "mongostore.tools.settings", TOOLS_FORBIDDEN) == [
        "mongostore.drivers.embedded",
        "mongostore.drivers.embedded.default_data_dir",
    ]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazily and for type checking included), each
    with the packages Python runs on the way (``a.b.c`` imports ``a`` and ``a.b`` first)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for imported in imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py"):
            parts = imported.split(".")
            for i in range(2, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in paths and target != name and not name.startswith(target + "."):
                    found.add(target)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_counting_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert len(graph) > 50 and graph["mongostore.store"]  # the checker sees the package and its edges
    assert cycles(graph) == []


def test_the_cycle_checker_finds_a_lazy_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_only_the_offline_embedders_are_imported_from_the_tools_and_they_import_no_store() -> None:
    graph = import_graph()
    upward = {m: sorted(t for t in ts if t.startswith("mongostore.tools")) for m, ts in graph.items()}
    upward = {m: ts for m, ts in upward.items() if ts and not m.startswith("mongostore.tools")}
    # __main__ is the command's entry point: it runs the CLI, and nothing imports it.
    assert upward == {
        "mongostore.__main__": ["mongostore.tools", "mongostore.tools.cli"],
        "mongostore.config": ["mongostore.tools", "mongostore.tools.embeddings"],
    }
    assert graph["mongostore.tools.embeddings"] == {"mongostore.errors"}
    assert graph["mongostore.tools"] == set()


def private_langgraph_names(source: str, module: str) -> list[str]:
    """The private LangGraph names (``_x`` at any level) a source imports: code a LangGraph upgrade
    may change or remove without notice."""
    return sorted(
        {
            name
            for name in imported_names(source, module)
            if name.startswith("langgraph") and any(part.startswith("_") for part in name.split("."))
        }
    )


def test_the_product_uses_no_private_langgraph_name() -> None:
    """Issue 35: only LangGraph's public API (the batching included: ``AsyncMongoStore`` coalesces on
    its own queue), so a LangGraph upgrade cannot silently break the store."""
    bad = {
        module_name(path): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := private_langgraph_names(path.read_text(encoding="utf-8"), module_name(path)))
    }
    assert bad == {}


@pytest.mark.parametrize(
    "source",
    [
        "from langgraph.store.base import _validate_namespace",
        "from langgraph.store.base.batch import AsyncBatchedBaseStore, _dedupe_ops",
        "import langgraph.store.base._internal",
    ],
)
def test_the_private_name_checker_catches_them(source: str) -> None:
    assert private_langgraph_names(source, "mongostore.x")


def test_the_stores_need_no_type_ignore() -> None:
    """Issue 35: plans are typed by their result (``Plan[R]``, ``run_sync(plan: Plan[R]) -> R``), so
    the stores' methods are checked by mypy, not silenced."""
    for name in ("store.py", "aio.py"):
        assert "type: ignore" not in (PACKAGE / name).read_text(encoding="utf-8"), name
