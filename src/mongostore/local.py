"""Where the local store lives: its URI scheme, its environment variable and its default directory.

``MongoStore.local()`` / ``AsyncMongoStore.local()`` and the ``mongostore`` command use these;
``default_data_dir()`` answers "where are my memories?" without opening the store.
"""

from __future__ import annotations

from mongostore.drivers.embedded import ENV_DATA_DIR, LOCAL_SCHEME, default_data_dir, parse_local_uri

__all__ = ["ENV_DATA_DIR", "LOCAL_SCHEME", "default_data_dir", "parse_local_uri"]
