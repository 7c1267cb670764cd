"""The store factory LangGraph's Agent Server loads: ``"store": {"path": "mongostore.tools.server.make_store"}``
(dotted: the server splits the path at its last ``.``). Its variables: docs/cli.md, "The Agent Server".
This module also re-exports the settings' names (their old public path).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import BaseStore
from pymongo.errors import ConnectionFailure, PyMongoError

from mongostore.aio import AsyncMongoStore
from mongostore.errors import MongoStoreError
from mongostore.tools.settings import *  # noqa: F403
from mongostore.tools.settings import (
    ENV_DATA_DIR,
    ENV_TTL_MINUTES,
    ServerUnreachableError,
    StoreSettings,
    _one_line,
    _timeout,
    check_local_dir,
    local_dir_error,
    probe_server,
    redact_uri,
    ttl_from_env,
)

logger = logging.getLogger("mongostore")


@asynccontextmanager
async def make_store() -> AsyncIterator[BaseStore]:
    """An ``AsyncMongoStore`` from the environment, set up, closed when the server stops.

    A bad setting (``ConfigurationError``), an unusable local store directory or an unreachable server
    (``ServerUnreachableError``) fails at once, in one line, and ends ``langgraph dev``: in its reload
    mode the server runs in a child of uvicorn's reloader, which would keep running with nothing
    listening, so the child stops it as it exits (``_stop_reloader_at_exit``). The Agent Server calls
    this with no arguments and runs no TTL sweeper for a custom store: ``MONGOSTORE_TTL_*`` give the
    ``ttl=``, and the local and in-memory stores (no TTL monitor) run the store's sweeper (with a TTL or an
    index: it also removes the vector documents no item lists, issue 34).
    """
    async with contextlib.AsyncExitStack() as stack:
        try:
            store = await _open_store(stack)
        except Exception as exc:  # whatever it is, the server cannot start without its store
            _startup_failed(exc)
            raise
        yield store


async def _open_store(stack: contextlib.AsyncExitStack) -> AsyncMongoStore:
    """The store, opened on ``stack`` and set up (every setting checked before any I/O)."""
    settings = StoreSettings.from_env()
    index, description = settings.index()
    timeout = _timeout(os.environ)
    ttl = ttl_from_env()
    logger.info("mongostore: %s; embeddings: %s; TTL: %s", settings.label(), description, _describe_ttl(ttl))
    if settings.local:
        check_local_dir(settings.local_dir(), ENV_DATA_DIR)
    elif not settings.embedded:
        assert settings.uri is not None
        note = await asyncio.to_thread(probe_server, settings.uri, timeout)
        if note:
            logger.warning("mongostore: %s", note)
    try:
        store: AsyncMongoStore = await stack.enter_async_context(
            settings.open(AsyncMongoStore, timeout, index=index, ttl=ttl)
        )
        await store.setup()
    except ConnectionFailure as exc:
        where = redact_uri(settings.uri or "")
        raise ServerUnreachableError(f"cannot reach MongoDB at {where} within {timeout:g}s: {_one_line(exc)}") from None
    except OSError as exc:
        if not settings.local:
            raise
        raise local_dir_error(settings.local_dir(), ENV_DATA_DIR, exc) from exc
    if settings.embedded and (ttl is not None or index is not None):
        # No TTL monitor: the store sweeps expired items and the vectors no item lists (stopped with the block).
        await store.start_ttl_sweeper()
    return store


def _startup_failed(exc: BaseException) -> None:
    """Say why the store cannot start, in one line; under ``langgraph dev``'s reloader, stop it too."""
    message = _one_line(exc)
    if not isinstance(exc, (MongoStoreError, ValueError, OSError, PyMongoError)):
        message = f"unexpected {type(exc).__name__}: {message}"
    logger.error("mongostore: %s", message)
    reloader = _uvicorn_reloader()
    if reloader is not None:
        atexit.register(_stop_reloader_at_exit, reloader, message)


def _uvicorn_reloader() -> int | None:
    """The pid of uvicorn's reloader when this process is the server it started (``langgraph dev``
    without ``--no-reload``: a ``spawn`` child running ``uvicorn._subprocess.subprocess_started``
    with ``reload`` on), else None (``--no-reload``, a production server, a test calling the factory)."""
    import multiprocessing

    process = multiprocessing.current_process()
    target = getattr(process, "_target", None)
    kwargs = getattr(process, "_kwargs", None)
    config = kwargs.get("config") if isinstance(kwargs, dict) else None
    if getattr(target, "__module__", None) != "uvicorn._subprocess" or not getattr(config, "reload", False):
        return None
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None or parent.pid != os.getppid():
        return None
    return parent.pid


#: The signal that ends the reloader: it handles SIGINT and SIGTERM itself, then exits 0 as if all
#: went well; SIGHUP's default action ends it with a failure status (129 in a shell).
_STOP_SIGNAL = getattr(signal, "SIGHUP", signal.SIGTERM)


def _stop_reloader_at_exit(pid: int, message: str) -> None:
    """At this server process's exit (after uvicorn's own "Application startup failed"), end the
    reloader that started it, so ``langgraph dev`` exits with a failure status and this line last."""
    if os.getppid() != pid:  # it is gone already (this process was handed to another parent)
        return
    sys.stderr.write(f"mongostore: error: {message} (langgraph dev stops: fix the setting and start it again)\n")
    sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.kill(pid, _STOP_SIGNAL)
        for _ in range(40):  # SIGHUP is ignored under nohup: then SIGTERM (it still stops, status 0)
            time.sleep(0.05)
            if os.getppid() != pid:
                return
        os.kill(pid, signal.SIGTERM)


def _describe_ttl(ttl: Mapping[str, Any] | None) -> str:
    if ttl is None:
        return f"none (set {ENV_TTL_MINUTES} for a default TTL)"
    parts = [
        f"default {ttl['default_ttl']:g} min" if ttl.get("default_ttl") else "no default (per-item ttl only)",
        f"refresh on read {'on' if ttl.get('refresh_on_read', True) else 'off'}",
        f"sweep every {ttl.get('sweep_interval_minutes', 5):g} min where no TTL monitor runs",
    ]
    return ", ".join(parts)
