"""What a store runs on (``Backend``): its capabilities, stated once, and its unit of work.

The drivers ask a store's ``Backend`` instead of guessing from the collection's type.
``backend_for`` gives the backend of a collection a user passed; the embedded stores build
theirs (``drivers.embedded``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Backend:
    """A store's backend.

    - ``emulated``: an engine in this process (mongomock, the local file), not a MongoDB server:
      no server commands (``hello``, ``buildInfo``), no client-level ``bulk_write``, and a
      ``$vectorSearch`` it cannot run means "no vector search here";
    - ``local_file``: the emulated engine keeps its data in a file (``drivers.embedded``);
    - ``threads``: independent reads and writes may run in threads at once (a pymongo client
      is thread-safe; an emulated engine is not);
    - ``unit()``: held around a whole plan, so that a store operation is one transaction of
      the engine (a lock; for the local file, its lock-load-save: one save per operation);
    - ``aunit()``: the same for the async driver where holding ``unit()`` would block the event
      loop (the local file: its lock and file I/O run on the engine's thread); None: ``unit()``.
    """

    emulated: bool = False
    local_file: bool = False
    threads: bool = True
    unit: Callable[[], AbstractContextManager[Any]] = field(default=contextlib.nullcontext, compare=False)
    aunit: Callable[[], AbstractAsyncContextManager[Any]] | None = field(default=None, compare=False)


SERVER = Backend()

_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def mongomock_backend(client: Any) -> Backend:
    """mongomock's engine is not thread-safe: each plan holds its client's one lock."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(client, threading.RLock())
    return Backend(emulated=True, threads=False, unit=lambda: lock)


def backend_for(collection: Any) -> Backend:
    """Emulated when the collection's client is mongomock's or an async double built on it
    (mongomock_motor's, pymongo_async_mock's), else a server. By class, never by name."""
    client = getattr(getattr(collection, "database", None), "client", None)
    return mongomock_backend(client) if isinstance(client, _emulated_clients()) else SERVER


@functools.cache
def _emulated_clients() -> tuple[type, ...]:
    found = []
    for module, name in (
        ("mongomock", "MongoClient"),
        ("mongomock_motor", "AsyncMongoMockClient"),
        ("pymongo_async_mock", "AsyncMongoMockClient"),
    ):
        with contextlib.suppress(ImportError, AttributeError):
            found.append(getattr(importlib.import_module(module), name))
    return tuple(found)
