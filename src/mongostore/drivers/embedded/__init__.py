"""The persistent embedded store: mongomock's data kept in a file, safe across processes.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the CLI without ``--uri`` run on it.

- ``paths``: where the store lives (``$MONGOSTORE_DATA_DIR``, ``mongostore-local://`` URIs);
- ``file``: ``LocalFile``, one database in one BSON file, its lock and its transactions;
- ``proxy``: ``LocalCollection`` / ``LocalDatabase``, pymongo-shaped handles on a ``LocalFile``;
- ``asyncwrap``: ``AsyncCollection``, the async face of any sync embedded collection;
- ``stores``: ``local_engine`` / ``memory_engine``, the engines a store is built on.

The names below are the package's API, as they were when it was one module.
"""

from mongostore.drivers.embedded.asyncwrap import AsyncCollection, AsyncCursor, AsyncDatabase
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.paths import ENV_DATA_DIR, LOCAL_SCHEME, default_data_dir, parse_local_uri
from mongostore.drivers.embedded.proxy import LocalCollection, LocalDatabase, local_collections, open_local
from mongostore.drivers.embedded.stores import local_engine, memory_engine

__all__ = [
    "ENV_DATA_DIR",
    "LOCAL_SCHEME",
    "AsyncCollection",
    "AsyncCursor",
    "AsyncDatabase",
    "LocalCollection",
    "LocalDatabase",
    "LocalFile",
    "default_data_dir",
    "local_collections",
    "local_engine",
    "memory_engine",
    "open_local",
    "parse_local_uri",
]
