"""Imported first by every bench module: this checkout's ``src/`` and ``tests/`` go first on
``sys.path`` (so the benchmarks measure this copy, not an installed one), and mongomock is
patched for langgraph-store-mongodb's bare index keys (the store needs no patch of mongomock)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
for _p in (ROOT / "src", ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def _patch_bare_index_keys() -> None:
    """langgraph-store-mongodb calls ``create_index(keys=["namespace_str", "key"])``: pymongo
    reads bare names as ascending keys, mongomock 4.3 does not. Bench-only shim."""
    from mongomock.collection import Collection

    original = Collection.create_index
    if getattr(original, "_bench_bare_keys", False):
        return

    def create_index(self: Any, key_or_list: Any = None, *args: Any, **kwargs: Any) -> Any:
        if "keys" in kwargs and key_or_list is None:
            key_or_list = kwargs.pop("keys")
        if isinstance(key_or_list, (list, tuple)):
            key_or_list = [(k, 1) if isinstance(k, str) else k for k in key_or_list]
        return original(self, key_or_list, *args, **kwargs)

    create_index._bench_bare_keys = True  # type: ignore[attr-defined]
    Collection.create_index = create_index  # type: ignore[method-assign]


_patch_bare_index_keys()
