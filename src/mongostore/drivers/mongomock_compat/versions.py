"""Write versions of mongomock collections: a token that changes whenever a document does,
and which documents changed since a given version.

Every change to a stored document goes through the ``CollectionStore`` patches of
``lookups`` (set, delete, drop, in-place update, and the TTL expiry, which deletes);
each gives the store a new version from one process-wide counter and notes the key
it changed in a bounded log. A store seen for the first time (a new collection, or the
persistent local store reloaded after another process saved it) gets a fresh version
and an empty log, so a version is never reused: equal versions mean the documents have
not changed since, and a version older than the log means "unknown" (read everything).

Local semantic search uses this to keep its candidates between searches and, after a
write, to re-read only the documents that changed (``core.vectors.VectorCache``). On
a real server the driver cannot tell: ``write_state`` says None and every search reads
its candidates.
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from typing import Any

VERSION_ATTR = "_mongostore_version"
LOG_ATTR = "_mongostore_changes"
LOG_SIZE = 4096  # changed keys remembered per collection
_counter = itertools.count(1)
_RESET = object()

WriteState = tuple[int, list[tuple[int, Any]] | None]


def bump(store: Any, key: Any = _RESET) -> None:
    """The store's document ``key`` changed (no key: all of them may have): a new version."""
    version = next(_counter)
    log = store.__dict__.get(LOG_ATTR)
    if log is None or key is _RESET:
        store.__dict__[LOG_ATTR] = [version, deque(maxlen=LOG_SIZE)]  # [floor, entries]: changes after floor
    else:
        entries = log[1]
        if len(entries) == LOG_SIZE:
            log[0] = entries[0][0]  # the oldest entry is dropped: changes after it are still known
        entries.append((version, key))
    store.__dict__[VERSION_ATTR] = version


def store_state(store: Any, since: int | None = None) -> WriteState:
    """The store's version, and the (version, key) changes after ``since`` (None: not asked, or
    no longer known)."""
    version = store.__dict__.get(VERSION_ATTR)
    if version is None:
        bump(store)
        version = store.__dict__[VERSION_ATTR]
    if since is None:
        return int(version), None
    floor, entries = store.__dict__[LOG_ATTR]
    if since < floor:
        return int(version), None
    return int(version), [(v, k) for v, k in list(entries) if v > since]


def write_state(collection: Any, since: int | None = None) -> WriteState | None:
    """``store_state`` of a mongomock-backed collection, or None when it cannot tell.

    Knows mongomock's ``Collection``, the embedded store's handles (which define
    ``write_state``), and the async mongomock doubles (pymongo-async-mock,
    mongomock_motor) over a mongomock collection. Anything else (a real server, a
    recording double) is None.
    """
    module = sys.modules.get("mongomock.collection")  # not imported: nothing here is mongomock's
    mongomock_collection = getattr(module, "Collection", None)
    for _ in range(4):
        if mongomock_collection is not None and isinstance(collection, mongomock_collection):
            return store_state(collection._store, since)
        own = getattr(type(collection), "write_state", None)
        if callable(own):
            result: WriteState | None = own(collection, since)
            return result
        inner = getattr(collection, "_AsyncMongoMockCollection__collection", None)
        if inner is None:
            return None
        collection = inner
    return None


def write_version(collection: Any) -> int | None:
    """The collection's write version alone (None when it cannot tell)."""
    state = write_state(collection)
    return None if state is None else state[0]
