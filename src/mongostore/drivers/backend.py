"""What a store runs on (``Backend``): its capabilities, stated once, and its unit of work.

A store's driver asks its ``Backend`` instead of guessing from the collection's type.
``backend_for`` gives the backend of a collection a user passed (pymongo or Motor: a server;
mongomock: emulated, serialised by one lock per client); the embedded stores build theirs
(``drivers.embedded``).
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
      it answers no server commands (``hello``, ``buildInfo``), has no client-level
      ``bulk_write``, and a ``$vectorSearch`` it cannot run means "no vector search here";
    - ``local_file``: the emulated engine keeps its data in a file (``drivers.embedded``);
    - ``threads``: independent reads and writes may run in threads at once (a pymongo client
      is thread-safe; an emulated engine is not);
    - ``unit()``: held around a whole plan, so that a store operation is one transaction of
      the engine: a lock for an engine that is not thread-safe, the file's lock-load-save for
      the local store (one save per operation);
    - ``aunit()``: the same for the async driver, when holding ``unit()`` would block the event
      loop (the local file: its lock and file I/O run on the engine's thread); None: ``unit()``.
    """

    name: str = "mongodb"
    emulated: bool = False
    local_file: bool = False
    threads: bool = True
    unit: Callable[[], AbstractContextManager[Any]] = field(default=contextlib.nullcontext, compare=False)
    aunit: Callable[[], AbstractAsyncContextManager[Any]] | None = field(default=None, compare=False)


SERVER = Backend()

_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def mongomock_backend(client: Any) -> Backend:
    """An in-process mongomock engine: not thread-safe, so each plan holds its client's one
    lock (every store on the client takes the same one)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(client, threading.RLock())
    return Backend(name="mongomock", emulated=True, threads=False, unit=lambda: lock)


def backend_for(collection: Any) -> Backend:
    """The backend of a collection the user gave: emulated when its client is one of the
    in-process engines' clients (mongomock's, and the async doubles built on it:
    mongomock_motor's, pymongo_async_mock's), else a server. By class, never by name."""
    clients = _emulated_clients()
    client = getattr(getattr(collection, "database", None), "client", None)
    if clients and isinstance(client, clients):
        return mongomock_backend(client)
    return SERVER


@functools.cache
def _emulated_clients() -> tuple[type, ...]:
    found: list[type] = []
    for module, name in (
        ("mongomock", "MongoClient"),
        ("mongomock_motor", "AsyncMongoMockClient"),
        ("pymongo_async_mock", "AsyncMongoMockClient"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)
