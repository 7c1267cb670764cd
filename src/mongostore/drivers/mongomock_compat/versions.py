"""Write versions of mongomock collections: a token that changes whenever a document does.

Every change to a stored document goes through the ``CollectionStore`` patches of
``lookups`` (set, delete, drop, in-place update, and the TTL expiry, which deletes);
each gives the store a new version from one process-wide counter. A store seen for
the first time (a new collection, or the persistent local store reloaded after
another process saved it) gets a fresh version too, so a version is never reused:
equal versions mean the documents have not changed since.

Local semantic search uses this to keep its candidates between searches
(``core.vectors.VectorCache.recall``): on a real server the driver cannot tell, and
``write_version`` says None (the candidates are read every time).
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

VERSION_ATTR = "_mongostore_version"
_counter = itertools.count(1)


def bump(store: Any) -> None:
    """The store's documents changed: give it a new version."""
    store.__dict__[VERSION_ATTR] = next(_counter)


def store_version(store: Any) -> int:
    """The store's current version (a fresh one the first time it is asked)."""
    version = store.__dict__.get(VERSION_ATTR)
    if version is None:
        version = next(_counter)
        store.__dict__.setdefault(VERSION_ATTR, version)
        version = store.__dict__[VERSION_ATTR]
    return int(version)


def write_version(collection: Any) -> int | None:
    """The write version of a mongomock-backed collection, or None when it cannot tell.

    Knows mongomock's ``Collection``, the embedded store's handles (which define
    ``write_version``), and the async mongomock doubles (pymongo-async-mock,
    mongomock_motor) over a mongomock collection. Anything else (a real server, a
    recording double) is None.
    """
    module = sys.modules.get("mongomock.collection")  # not imported: nothing here is mongomock's
    Collection = getattr(module, "Collection", None)
    for _ in range(4):
        if Collection is not None and isinstance(collection, Collection):
            return store_version(collection._store)
        own = getattr(type(collection), "write_version", None)
        if callable(own):
            result = own(collection)
            return result if isinstance(result, int) else None
        inner = getattr(collection, "_AsyncMongoMockCollection__collection", None)
        if inner is None:
            return None
        collection = inner
    return None
