"""Probe plans: what the server can do (version, client bulk write, search) and no-search detection.

``server_probe_plan`` asks only what writes need; ``search_probe_plan`` whether semantic
searches can use ``$vectorSearch`` now. ``no_search_reason`` reads a failed search command
or stage: "this server has no search" (rank locally) or a real error.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone

from pymongo.errors import OperationFailure

from mongostore.config import VectorSearchMode
from mongostore.core.plan.context import Plan
from mongostore.core.steps import Capabilities, ListSearchIndexes, ServerCommand
from mongostore.errors import VectorIndexError

logger = logging.getLogger("mongostore")

# Server answers that mean "this deployment has no Atlas Search / $vectorSearch".
NO_SEARCH_CODES = frozenset({31082, 6047401, 115, 59, 40324})
# mongos answers hello with this ``msg`` (the manual's hello page: "msg: isdbgrid").
MONGOS_HELLO_MSG = "isdbgrid"
# MongoDB 8.0 speaks wire version 25; its clients can bulk_write across collections.
CLIENT_BULK_WRITE_WIRE_VERSION = 25
FAKE_SERVER = "mongomock (in-memory, for development)"
LOCAL_SERVER = "the local store (SQLite, one file)"
# Before 7.1, $listSearchIndexes off Atlas may answer an empty list instead of an error
# (manual, $listSearchIndexes "Errors"; SERVER-78831, SERVER-117001).
TRUSTED_EMPTY_LIST_VERSION = (7, 1)


def is_index_unavailable(exc: BaseException) -> bool:
    """mongot refused the query because the index has not finished its first build.

    mongot's ``LuceneVectorIndex.throwIfUnavailableForQuerying``: "cannot query vector index ... while in state
    INITIAL_SYNC" (or NOT_STARTED, FAILED); its reply has no code, so mongod reports 8 (UnknownError).
    """
    return isinstance(exc, OperationFailure) and exc.code in (8, None) and "cannot query vector index" in str(exc)


def no_search_reason(exc: BaseException, emulated: bool = True) -> str | None:
    """Why a failed search command or stage means "this server has no search"; None for a real error.

    A TypeError/AttributeError/NotImplementedError means that only on an emulated engine
    (mongomock knows no search stages or commands); from a real server's driver it is a bug.
    """
    if isinstance(exc, OperationFailure):
        if exc.code in NO_SEARCH_CODES:
            return f"server has no Atlas Search (code {exc.code})"
        if exc.code is None and not is_index_unavailable(exc):
            # MongoDB always codes its errors (mongod gives even mongot's uncoded ones code 8); an
            # uncoded refusal comes from a server that only speaks the protocol and knows no search.
            message = str((exc.details or {}).get("errmsg") or exc)
            logger.warning(
                "the server refused a search command without an error code (%s): treating it as "
                "a server without Atlas Search; semantic searches rank locally",
                message,
            )
            return f"server has no Atlas Search (uncoded answer: {message})"
    elif emulated and isinstance(exc, (TypeError, AttributeError, NotImplementedError)):
        return "this backend has no search index commands"
    return None


def server_probe_plan(*, emulated: bool, has_client_bulk: bool, local: bool = False) -> Plan[Capabilities]:
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
        ranges=sharded or local,
        distinct_scan=local,
    )


def search_probe_plan(
    server: Capabilities,
    *,
    has_vectors: bool,
    mode: VectorSearchMode,
    index_name: str,
    previous: Capabilities | None = None,
) -> Plan[Capabilities]:
    """Whether semantic searches use ``$vectorSearch`` now: the server has search and
    the index exists and is queryable (a missing index answers every query with nothing).

    ``auto`` ranks locally otherwise and says why once (``previous``: the last answer);
    ``atlas`` raises ``VectorIndexError`` for a missing or unqueryable index, and trusts
    the configuration when the index list cannot be read; ``local`` asks nothing.
    """
    if not has_vectors:
        return replace(server, detail="no index configured")
    if mode == "local":
        return replace(server, vector_search=False, detail="vector_search='local' set in index config")
    forced = "vector_search='atlas' set in index config"
    try:
        found = list((yield ListSearchIndexes("vectors")))
    except Exception as exc:
        if mode == "atlas":
            return replace(server, vector_search=True, detail=f"{forced} (index list: {exc})")
        why = no_search_reason(exc, server.emulated)
        if why is None:
            raise
        return replace(server, vector_search=False, search_commands=False, detail=why)
    if not found and not server.emulated and mode == "auto" and (server.version or (0, 0)) < TRUSTED_EMPTY_LIST_VERSION:
        return replace(
            server,
            vector_search=False,
            search_commands=None,
            detail=(
                f"MongoDB {server.server_version} answers $listSearchIndexes with an empty list whether or not "
                "it has Atlas Search: ranking locally (setup() finds out by creating the index)"
            ),
        )
    mine = [d for d in found if d.get("name") == index_name]
    doc = mine[0] if mine else {}
    status = str(doc.get("status", "?")) if mine else "MISSING"
    queryable = doc.get("queryable") is True
    if not mine:
        names = ", ".join(sorted(str(d.get("name")) for d in found)) or "none"
        why = (
            f"there is no vector search index {index_name!r} on the vectors collection "
            f"(found: {names}); run setup() to create it"
        )
    elif queryable:
        why = f"vector search index {index_name!r} is queryable (status {status})"
    else:
        created = (doc.get("latestDefinitionVersion") or {}).get("createdAt")
        age = ""
        if isinstance(created, datetime):
            created = created if created.tzinfo else created.replace(tzinfo=timezone.utc)
            age = f" for {max(0.0, (datetime.now(timezone.utc) - created).total_seconds()):.0f}s"
        why = f"vector search index {index_name!r} is {status}{age} and cannot serve queries yet"
    if not queryable:
        if mode == "atlas":
            raise VectorIndexError(f"{why}; vector_search='atlas' does not fall back to local ranking")
        why += ": ranking locally until it can"
        if previous is None or previous.index_status != status:
            logger.warning("%s", why)
    return replace(
        server,
        vector_search=queryable,
        search_commands=True,
        index_status=status,
        recheck=not queryable,
        detail=forced if mode == "atlas" else why,
    )
