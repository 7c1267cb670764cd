"""The store factory LangGraph's Agent Server loads: ``"store": {"path": "mongostore.tools.server.make_store"}``
(dotted: the server splits the path at its last ``.``). Its variables: docs/cli.md, "The Agent Server".
This module also re-exports the settings' names (their old public path).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import BaseStore

from mongostore.tools.settings import *  # noqa: F403
from mongostore.tools.settings import (
    ENV_TTL_MINUTES,
    ServerUnreachableError,
    StoreSettings,
    _one_line,
    _timeout,
    probe_server,
    redact_uri,
    ttl_from_env,
)

logger = logging.getLogger("mongostore")


@asynccontextmanager
async def make_store() -> AsyncIterator[BaseStore]:
    """An ``AsyncMongoStore`` from the environment, set up, closed when the server stops.

    An unreachable server fails at once, in one line (``ServerUnreachableError``). The Agent Server
    calls this with no arguments and runs no TTL sweeper for a custom store: ``MONGOSTORE_TTL_*``
    give the ``ttl=``, and the local and in-memory stores (no TTL monitor) run the store's sweeper.
    """
    from pymongo.errors import ConnectionFailure

    from mongostore.aio import AsyncMongoStore

    settings = StoreSettings.from_env()
    index, description = settings.index()
    timeout = _timeout(os.environ)
    ttl = ttl_from_env()
    logger.info("mongostore: %s; embeddings: %s; TTL: %s", settings.label(), description, _describe_ttl(ttl))
    if not settings.embedded:
        assert settings.uri is not None
        try:
            note = await asyncio.to_thread(probe_server, settings.uri, timeout)
        except ServerUnreachableError as exc:
            logger.error("mongostore: %s", exc)
            raise
        if note:
            logger.warning("mongostore: %s", note)
    async with settings.open(AsyncMongoStore, timeout, index=index, ttl=ttl) as store:
        try:
            await store.setup()
        except ConnectionFailure as exc:
            where = redact_uri(settings.uri or "")
            message = f"cannot reach MongoDB at {where} within {timeout:g}s: {_one_line(exc)}"
            logger.error("mongostore: %s", message)
            raise ServerUnreachableError(message) from None
        if ttl is not None and settings.embedded:  # no TTL monitor: the store sweeps (stopped with the block)
            await store.start_ttl_sweeper()
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
