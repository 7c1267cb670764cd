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
    """A store's backend (the table in docs/architecture.md, "The backend seam").

    ``emulated``: an engine in this process, not a server: no server commands, no client-level
    ``bulk_write``, and a ``$vectorSearch`` it cannot run means "no vector search here".
    ``threads``: independent reads and writes may overlap in threads (pymongo is thread-safe).
    ``unit()``: held around a whole plan, so a store operation is one transaction of the engine;
    ``aunit()``: the same for the async driver where ``unit()`` would block the event loop.
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
    """The collection's own ``backend`` when it states one (the local store's); emulated when its client is
    mongomock's or an async double built on it (mongomock_motor's, pymongo_async_mock's), else a server.
    By class, never by name."""
    own = getattr(collection, "backend", None)
    if isinstance(own, Backend):
        return own
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
