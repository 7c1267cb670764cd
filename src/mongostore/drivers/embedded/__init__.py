"""The embedded engines: the local store (SQLite, persistent, safe across processes) and in-memory mongomock.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the CLI without ``--uri`` run on the local store:
``paths`` (where it lives), ``sqlite`` (``LocalDB``: one database in one SQLite file, its connections and
transactions), ``sqlquery`` (MongoDB filters, sorts and projections as SQL), ``collection`` (pymongo-shaped
handles on it), ``changelog`` (their change streams, read from the file's change log), ``asyncwrap`` (their
async face, and mongomock's), ``stores`` (the engines a store is built on).
"""

from mongostore.drivers.embedded.asyncwrap import AsyncCollection
from mongostore.drivers.embedded.collection import LocalCollection
from mongostore.drivers.embedded.paths import default_data_dir, parse_local_uri
from mongostore.drivers.embedded.sqlite import LocalDB
from mongostore.drivers.embedded.stores import adapt_collection, local_engine, memory_engine, open_local

__all__ = [
    "AsyncCollection",
    "LocalCollection",
    "LocalDB",
    "adapt_collection",
    "default_data_dir",
    "local_engine",
    "memory_engine",
    "open_local",
    "parse_local_uri",
]
