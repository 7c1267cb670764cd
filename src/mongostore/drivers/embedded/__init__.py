"""The persistent embedded store: mongomock's data kept in a file, safe across processes.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the CLI without ``--uri`` run on it:
``paths`` (where it lives), ``file`` (``LocalFile``: one database in one BSON file, its lock and
transactions), ``proxy`` (pymongo-shaped handles on it), ``asyncwrap`` (their async face, and
mongomock's), ``stores`` (the engines a store is built on).
"""

from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.embedded.file import LocalFile
from mongostore.drivers.embedded.paths import default_data_dir, parse_local_uri
from mongostore.drivers.embedded.proxy import LocalCollection, open_local
from mongostore.drivers.embedded.stores import adapt_collection, local_engine, memory_engine

__all__ = [
    "AsyncCollection",
    "LocalCollection",
    "LocalFile",
    "adapt_collection",
    "default_data_dir",
    "local_engine",
    "memory_engine",
    "open_local",
    "parse_local_uri",
]
