"""The embedded engine's own clients: ``new_client`` and ``in_memory_collection``.

mongomock itself is imported only when one is made (it costs a quarter of a second):
``lookups`` holds the classes, and its docstring lists every change they make.
"""

from __future__ import annotations

from typing import Any


def new_client(**kwargs: Any) -> Any:
    """A fresh client of the embedded engine: mongomock with the store's changes, tz-aware."""
    from mongostore.drivers.mongomock_compat import lookups

    return lookups.new_client(**kwargs)


def in_memory_collection(db_name: str = "mongostore", collection_name: str = "memories") -> Any:
    """A collection of a fresh embedded engine (tz-aware, like the store's real clients)."""
    return new_client()[db_name][collection_name]
