"""Errors raised by mongostore, all importable from ``mongostore``: every class derives from
``MongoStoreError``, the ones for bad input are also ``ValueError`` s (as is LangGraph's
``InvalidNamespaceError``, used for bad namespaces). pymongo's own errors pass through.

Change-feed errors (``store.watch()``): ``ChangeFeedUnavailableError`` (the backend has no change streams)
and ``ChangeHistoryLostError`` (``start_after`` names a change the server or the local log no longer keeps).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "ChangeFeedUnavailableError",
    "ChangeHistoryLostError",
    "ConfigurationError",
    "DamagedStoreFileError",
    "InvalidFilterError",
    "InvalidValueError",
    "MongoStoreError",
    "PipelineError",
    "ServerUnreachableError",
    "VectorIndexError",
    "WriteError",
]


class MongoStoreError(Exception):
    """Root of every error mongostore raises itself."""


class InvalidValueError(MongoStoreError, ValueError):
    """A value given to ``put`` cannot be stored in MongoDB; nothing of the batch was written."""

    def __init__(self, namespace: tuple[str, ...], key: str, reason: str) -> None:
        self.namespace = namespace
        self.key = key
        self.reason = reason
        super().__init__(
            f"cannot store the value of namespace {namespace!r}, key {key!r}: {reason}. "
            "Nothing of this batch was written."
        )


class InvalidFilterError(MongoStoreError, ValueError):
    """A search filter uses a field name or an operator that mongostore refuses."""


class ConfigurationError(MongoStoreError, ValueError):
    """The ``index=`` or ``ttl=`` configuration is invalid."""


class PipelineError(MongoStoreError, ValueError):
    """An analytics pipeline holds a stage that could read or write outside its scope."""


class WriteError(MongoStoreError):
    """The server rejected some writes of a batch; every other write of it landed. ``failures``:
    ``(namespace, key, message)`` per item with a failed write (``()``, ``""``: no item's, a TTL sweep);
    ``stored``: the items whose value was stored and only the vector write failed (a put writes it again)."""

    def __init__(
        self,
        failures: Sequence[tuple[tuple[str, ...], str, str]],
        stored: Iterable[tuple[tuple[str, ...], str]] = (),
    ) -> None:
        self.failures = list(failures)
        self.stored = frozenset(stored)

        def describe(ns: tuple[str, ...], k: str, msg: str) -> str:
            if not ns and not k:
                return msg
            if (ns, k) in self.stored:
                return f"namespace {ns!r}, key {k!r}: value stored, its vector write failed: {msg}"
            return f"namespace {ns!r}, key {k!r}: not stored: {msg}"

        shown = "; ".join(describe(*f) for f in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(
            f"{len(self.failures)} write(s) were rejected by the server, the rest of the batch "
            f"was applied: {shown}{more}"
        )


class VectorIndexError(MongoStoreError):
    """The Atlas vector search index could not be created, failed, or timed out."""


class ServerUnreachableError(MongoStoreError, ConnectionError):
    """No MongoDB server at the URI (refused, unknown host, no SRV record), found at once."""


class DamagedStoreFileError(MongoStoreError, RuntimeError):
    """The local store's file is not a whole file of the store; it was left untouched."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"the local store file {path} is damaged or not a mongostore local store ({reason}); "
            f"it was left untouched. Move it aside to start an empty store (mv {path} {path}.damaged), "
            "or put back a copy from a backup or a `mongostore export`"
        )


class ChangeFeedUnavailableError(MongoStoreError):
    """``watch()`` on a backend without change streams: a standalone mongod, mongomock, or a server that
    does not know ``$changeStream``. Change streams need a replica set, a sharded cluster or Atlas (a
    single-node replica set will do); ``MongoStore.local()`` has its own change log."""


class ChangeHistoryLostError(MongoStoreError):
    """``watch(start_after=...)``: the change after that token is no longer kept (MongoDB's oplog has
    rolled past it, code 286; or the local store's log was pruned). Read the current state again and
    watch from now on."""
