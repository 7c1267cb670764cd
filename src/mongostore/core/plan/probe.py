"""Probe plans: what the server can do (version, client bulk write, search) and no-search detection.

``server_probe_plan`` asks only what writes need; ``search_probe_plan`` whether semantic
searches can use ``$vectorSearch`` now. ``is_no_search_error`` reads a failed search
command or stage: "this server has no search" (rank locally) or a real error.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from pymongo.errors import OperationFailure

from mongostore.config import VectorSearchMode
from mongostore.core.plan.context import Plan
from mongostore.core.steps import Capabilities, ListSearchIndexes, ServerCommand
from mongostore.errors import VectorIndexError

logger = logging.getLogger("mongostore")

# Server answers that mean "this deployment has no Atlas Search / $vectorSearch".
NO_SEARCH_CODES = frozenset({31082, 6047401, 115, 59, 40324})


def is_no_search_error(exc: BaseException, emulated: bool = True) -> bool:
    """A search stage or command failed because the server has no search at all.

    A TypeError/AttributeError/NotImplementedError means that only on an emulated engine
    (mongomock & co); from a real server's driver it is a bug and must surface.
    """
    if isinstance(exc, OperationFailure):
        return exc.code in NO_SEARCH_CODES or (exc.code is None and not is_index_unavailable(exc))
    return emulated and isinstance(exc, (NotImplementedError, TypeError, AttributeError))


def is_index_unavailable(exc: BaseException) -> bool:
    """mongot refused the query because the index has not finished its first build.

    mongot's ``LuceneVectorIndex.throwIfUnavailableForQuerying``: "cannot query vector
    index ... while in state INITIAL_SYNC" (or NOT_STARTED, FAILED); its reply has no
    code, so mongod reports 8 (UnknownError).
    """
    return isinstance(exc, OperationFailure) and exc.code in (8, None) and "cannot query vector index" in str(exc)


# mongos answers hello with this ``msg`` (the manual's hello page: "msg: isdbgrid").
MONGOS_HELLO_MSG = "isdbgrid"
# MongoDB 8.0 speaks wire version 25; its clients can bulk_write across collections.
CLIENT_BULK_WRITE_WIRE_VERSION = 25
FAKE_SERVER = "mongomock (in-memory, for development)"
LOCAL_SERVER = "the local store (mongomock's engine, data in one file, for development)"
# Before 7.1, $listSearchIndexes off Atlas may answer an empty list instead of an error
# (manual, $listSearchIndexes "Errors"; SERVER-78831, SERVER-117001).
TRUSTED_EMPTY_LIST_VERSION = (7, 1)


def search_probe_answer(exc: Exception, emulated: bool = True) -> tuple[bool, str]:
    """``(False, why)`` when a search command's error means "this server has no search"; else raise it."""
    if isinstance(exc, OperationFailure):
        if exc.code in NO_SEARCH_CODES:
            return False, f"server has no Atlas Search (code {exc.code})"
        if exc.code is None and not is_index_unavailable(exc):
            # MongoDB always codes its errors (mongod gives even mongot's uncoded ones code 8); an
            # uncoded refusal comes from a server that only speaks the protocol and knows no search.
            message = str((exc.details or {}).get("errmsg") or exc)
            logger.warning(
                "the server refused a search command without an error code (%s): treating it as "
                "a server without Atlas Search; semantic searches rank locally",
                message,
            )
            return False, f"server has no Atlas Search (uncoded answer: {message})"
    if emulated and isinstance(exc, (TypeError, AttributeError, NotImplementedError)):
        # mongomock and its async wrappers know no search stages or commands.
        return False, "this backend has no search index commands"
    raise exc


def server_probe_plan(*, emulated: bool, has_client_bulk: bool, local: bool = False) -> Plan:
    """Server version and client-level bulk_write: ``buildInfo`` and ``hello`` only.

    What writes need; it never asks about search, so puts and deletes work while
    mongot is unreachable (code 125) or the user may not list search indexes (13).
    ``local``: the emulated engine is the persistent local store, which ``server_version`` names.
    """
    version, wire, sharded = (LOCAL_SERVER if local else FAKE_SERVER), 0, False
    if not emulated:  # an emulated engine (mongomock) answers no server commands
        info = yield ServerCommand("buildInfo")
        version = str(info.get("version", "?"))
        hello = yield ServerCommand("hello")
        wire = int(hello.get("maxWireVersion", 0))
        sharded = hello.get("msg") == MONGOS_HELLO_MSG
    return Capabilities(
        server_version=version,
        emulated=emulated,
        vector_search=False,
        client_bulk_write=(not emulated) and has_client_bulk and wire >= CLIENT_BULK_WRITE_WIRE_VERSION,
        detail="search not asked",
        sharded=sharded,
    )


def _age(doc: dict[str, Any], now: datetime) -> str:
    created = (doc.get("latestDefinitionVersion") or {}).get("createdAt")
    if not isinstance(created, datetime):
        return ""
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return f" for {max(0.0, (now - created).total_seconds()):.0f}s"


def _index_state(found: list[dict[str, Any]], index_name: str, now: datetime) -> tuple[str, bool, str]:
    """(status, queryable, description) of the named index in a ``$listSearchIndexes`` answer."""
    mine = [d for d in found if d.get("name") == index_name]
    if not mine:
        names = sorted(str(d.get("name")) for d in found)
        return (
            "MISSING",
            False,
            (
                f"there is no vector search index {index_name!r} on the vectors collection "
                f"(found: {', '.join(names) or 'none'}); run setup() to create it"
            ),
        )
    doc = mine[0]
    status = str(doc.get("status", "?"))
    if doc.get("queryable") is True:
        return status, True, f"vector search index {index_name!r} is queryable (status {status})"
    return status, False, f"vector search index {index_name!r} is {status}{_age(doc, now)} and cannot serve queries yet"


def search_probe_plan(
    server: Capabilities,
    *,
    has_vectors: bool,
    mode: VectorSearchMode,
    index_name: str,
    previous: Capabilities | None = None,
    now: datetime | None = None,
) -> Plan:
    """Whether semantic searches use ``$vectorSearch`` now: the server has search and
    the index exists and is queryable (a missing index answers every query with nothing).

    ``auto`` ranks locally otherwise and says why once (``previous``: the last answer);
    ``atlas`` raises ``VectorIndexError`` for a missing or unqueryable index, and trusts
    the configuration when the index list cannot be read; ``local`` asks nothing.
    """
    now = now or datetime.now(timezone.utc)
    if not has_vectors:
        return replace(server, detail="no index configured")
    if mode == "local":
        return replace(server, vector_search=False, detail="vector_search='local' set in index config")
    try:
        found = list((yield ListSearchIndexes("vectors")))
    except Exception as exc:
        if mode == "atlas":
            return replace(
                server, vector_search=True, detail=f"vector_search='atlas' set in index config (index list: {exc})"
            )
        searchable, why = search_probe_answer(exc, server.emulated)
        return replace(server, vector_search=searchable, search_commands=False, detail=why)
    if not found and not server.emulated and mode == "auto":
        v = server.version
        if v is None or v < TRUSTED_EMPTY_LIST_VERSION:
            return replace(
                server,
                vector_search=False,
                search_commands=None,
                detail=(
                    f"MongoDB {server.server_version} answers $listSearchIndexes with an empty list whether or not "
                    "it has Atlas Search: ranking locally (setup() finds out by creating the index)"
                ),
            )
    status, queryable, why = _index_state(found, index_name, now)
    if mode == "atlas":
        if not queryable:
            raise VectorIndexError(f"{why}; vector_search='atlas' does not fall back to local ranking")
        return replace(
            server,
            vector_search=True,
            search_commands=True,
            index_status=status,
            detail="vector_search='atlas' set in index config",
        )
    caps = replace(
        server,
        vector_search=queryable,
        search_commands=True,
        index_status=status,
        recheck=not queryable,
        detail=why if queryable else why + ": ranking locally until it can",
    )
    if not queryable and (previous is None or previous.index_status != status):
        logger.warning("%s", caps.detail)
    return caps


def probe_plan(
    *, emulated: bool, has_vectors: bool, mode: VectorSearchMode, has_client_bulk: bool, index_name: str = ""
) -> Plan:
    """``server_probe_plan`` then ``search_probe_plan``: everything a store asks once."""
    server = yield from server_probe_plan(emulated=emulated, has_client_bulk=has_client_bulk)
    return (yield from search_probe_plan(server, has_vectors=has_vectors, mode=mode, index_name=index_name))
