"""Store settings from the environment, and the factory LangGraph's Agent Server loads.

``langgraph.json``::

    {
      "graphs": {"memory": "./graph.py:graph"},
      "store": {"path": "mongostore.tools.server.make_store"}
    }

The Agent Server (``langgraph dev`` / ``langgraph up``) calls :func:`make_store`
once, inside its own event loop, enters the async context manager it returns,
and uses the ``AsyncMongoStore`` it yields for the ``/store`` API and as
``runtime.store`` in every graph. Use a dotted path (``package.module.name``):
the server splits a module path at its last ``.``, so ``mongostore.tools.server:make_store``
is *not* understood; a file path (``./store.py:make_store``) works too.

Configuration, read when the server starts (also used by the ``mongostore`` CLI):

=========================  =========================================================  ==========================
variable                   meaning                                                    default
=========================  =========================================================  ==========================
``MONGODB_URI``            ``mongodb://`` / ``mongodb+srv://``; ``mongomock://`` (in  the local store in
                           memory, lost on exit); ``mongostore-local://[/abs/dir]``   ``MONGOSTORE_DATA_DIR``
                           (the persistent embedded store)                            (see ``_embedded``)
``MONGOSTORE_DATA_DIR``    directory of the local store (no ``MONGODB_URI``)          ``~/.local/share/mongostore``
``MONGOSTORE_TIMEOUT``     seconds to wait for the server at start                    ``10``
``MONGOSTORE_DB``          database name                                              ``mongostore``
``MONGOSTORE_COLLECTION``  items collection (vectors go to ``<name>_vectors``)        ``memories``
``MONGOSTORE_EMBED``       ``minilm``, ``hashing``, ``none`` (no semantic search),    MiniLM when the ``minilm``
                           or a LangChain provider string                             extra is installed, else
                           (``openai:text-embedding-3-small``)                        ``hashing``
``MONGOSTORE_DIMS``        vector dimensions (needed for unknown provider models)     from the model
``MONGOSTORE_FIELDS``      comma-separated value paths to embed (``text,tags[*]``)    ``$`` (the whole value)
=========================  =========================================================  ==========================

The TTL (read by the Agent Server only; the CLI takes ``--ttl`` per put), LangGraph's
``TTLConfig`` keys, in minutes:

- ``MONGOSTORE_TTL_MINUTES``: ``default_ttl``, minutes until an item put without a ``ttl``
  expires (default: no TTL);
- ``MONGOSTORE_TTL_REFRESH_ON_READ``: ``refresh_on_read``, ``true``/``false`` (default true);
- ``MONGOSTORE_TTL_SWEEP_MINUTES``: ``sweep_interval_minutes``, how often expired items are
  deleted where no TTL monitor runs (default 5).

The Agent Server calls ``make_store()`` with no arguments and skips its own TTL
sweeper for a custom store, so the TTL comes from these variables.
MongoDB deletes expired items itself (its TTL monitor, about once a minute); the
local and ``mongomock://`` stores have no TTL monitor, so when any ``MONGOSTORE_TTL_*``
variable is set ``make_store`` starts the store's sweeper on them.

Every process that writes to a collection must use the same embedder, dims and
fields; after changing them, run ``mongostore reindex``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import BaseStore

from mongostore.tools.settings import (
    ENV_COLLECTION,
    ENV_DATA_DIR,
    ENV_DB,
    ENV_DIMS,
    ENV_EMBED,
    ENV_FIELDS,
    ENV_TIMEOUT,
    ENV_TTL_MINUTES,
    ENV_TTL_REFRESH_ON_READ,
    ENV_TTL_SWEEP_MINUTES,
    ENV_URI,
    IN_MEMORY_URI,
    KNOWN_DIMS,
    LOCAL_SCHEME,
    ServerUnreachableError,
    StoreSettings,
    _first_line,
    _timeout,
    check_field_path,
    probe_server,
    redact_uri,
    resolve_embeddings,
    split_fields,
    ttl_from_env,
)

__all__ = [
    "ENV_COLLECTION",
    "ENV_DATA_DIR",
    "ENV_DB",
    "ENV_DIMS",
    "ENV_EMBED",
    "ENV_FIELDS",
    "ENV_TIMEOUT",
    "ENV_TTL_MINUTES",
    "ENV_TTL_REFRESH_ON_READ",
    "ENV_TTL_SWEEP_MINUTES",
    "ENV_URI",
    "IN_MEMORY_URI",
    "KNOWN_DIMS",
    "LOCAL_SCHEME",
    "ServerUnreachableError",
    "StoreSettings",
    "check_field_path",
    "make_store",
    "probe_server",
    "redact_uri",
    "resolve_embeddings",
    "split_fields",
    "ttl_from_env",
]

logger = logging.getLogger("mongostore")


@asynccontextmanager
async def make_store() -> AsyncIterator[BaseStore]:
    """The Agent Server's custom store: ``"store": {"path": "mongostore.tools.server.make_store"}``.

    Reads the variables above, opens an ``AsyncMongoStore`` (pymongo's
    ``AsyncMongoClient``), runs ``setup()`` (idempotent: indexes, and the Atlas vector
    index when the server has one) and closes the client when the server stops.

    Without ``MONGODB_URI`` the store is the local one (a file under
    ``MONGOSTORE_DATA_DIR``, shared with the ``mongostore`` CLI); ``mongomock://`` is
    in memory and lost on restart. An unreachable server fails at once with one line
    (``ServerUnreachableError``), not a driver traceback after its whole timeout.

    ``MONGOSTORE_TTL_*`` give the store its ``ttl=``; on the local and in-memory stores
    (no TTL monitor) the store's sweeper then runs until the server stops.
    """
    from pymongo.errors import ConnectionFailure

    from mongostore.aio import AsyncMongoStore

    settings = StoreSettings.from_env()
    index, description = settings.index()
    timeout = _timeout(os.environ)
    ttl = ttl_from_env()
    logger.info("mongostore: %s; embeddings: %s; TTL: %s", settings.label(), description, _describe_ttl(ttl))
    if settings.embedded:
        kwargs: dict[str, Any] = {
            "index": index,
            "ttl": ttl,
            "db_name": settings.db,
            "collection_name": settings.collection,
        }
        if settings.local:
            embedded = AsyncMongoStore.local(settings.local_dir(), **kwargs)
        else:
            embedded = AsyncMongoStore.in_memory(**kwargs)
        async with embedded:
            await embedded.setup()
            if ttl is not None:  # no TTL monitor here: the store sweeps (stopped when the block exits)
                await embedded.start_ttl_sweeper()
            yield embedded
        return
    assert settings.uri is not None
    where = redact_uri(settings.uri)
    try:
        note = await asyncio.to_thread(probe_server, settings.uri, timeout)
    except ServerUnreachableError as exc:
        logger.error("mongostore: %s", exc)
        raise
    if note:
        logger.warning("mongostore: %s", note)
    ms = int(timeout * 1000)
    async with AsyncMongoStore.from_conn_string(
        settings.uri,
        db_name=settings.db,
        collection_name=settings.collection,
        index=index,
        ttl=ttl,
        serverSelectionTimeoutMS=ms,
        connectTimeoutMS=ms,
    ) as store:
        try:
            await store.setup()
        except ConnectionFailure as exc:
            message = f"cannot reach MongoDB at {where} within {timeout:g}s: {_first_line(exc).split(', Timeout:')[0]}"
            logger.error("mongostore: %s", message)
            raise ServerUnreachableError(message) from None
        yield store


def _describe_ttl(ttl: Mapping[str, Any] | None) -> str:
    if ttl is None:
        return f"none (set {ENV_TTL_MINUTES} for a default TTL)"
    parts = [
        f"default {ttl['default_ttl']:g} min" if ttl.get("default_ttl") else "no default (per-item ttl only)",
        f"refresh on read {'on' if ttl.get('refresh_on_read', True) else 'off'}",
        f"sweep every {ttl.get('sweep_interval_minutes', 5):g} min where no TTL monitor runs",
    ]
    return ", ".join(parts)
