"""Errors raised by mongostore.

The tree (every class is importable from ``mongostore``)::

    Exception
    ├── ValueError
    │   ├── langgraph InvalidNamespaceError     bad namespace or label (re-used, not ours)
    │   └── MongoStoreError ... (below) subclasses that are also ValueErrors
    └── MongoStoreError                         root of our own errors
        ├── InvalidValueError (ValueError)      a put value MongoDB cannot store; names namespace and key
        ├── InvalidFilterError (ValueError)     a search filter with a field or operator we refuse
        ├── ConfigurationError (ValueError)     bad index=/ttl= settings
        ├── PipelineError (ValueError)          an analytics pipeline stage that could leave its scope
        ├── WriteError                          the server rejected some writes of a batch; the others landed
        ├── ServerUnreachableError (ConnectionError)  no server at the URI: refused, unknown host, no SRV record
        ├── VectorIndexError                    the Atlas vector index failed or was not queryable in time
        └── DamagedStoreFileError (RuntimeError) the local store's file is not whole; left untouched

pymongo's own errors (``ConnectionFailure``, ``OperationFailure``...) pass through
unchanged unless we can add meaning, in which case they are chained with ``from``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
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
    """A value given to ``put`` cannot be stored in MongoDB.

    Raised before anything of the batch is written.
    """

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
    """The server rejected some writes of a batch; every other write of it landed.

    ``failures`` lists ``(namespace, key, message)`` for each item with a failed write.
    ``stored`` holds the ``(namespace, key)`` of those whose value *was* stored and only
    whose vector write failed: they are found by get and plain search, are returned
    unscored by semantic search, and their next put writes the vectors again. For a
    write that is not one item's (a TTL sweep), the namespace is ``()`` and the key ``""``.
    """

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
    """No MongoDB server at the URI: every host refused the connection, is unknown, or
    an SRV name has no record. Raised at once, in one line, where pymongo would wait its
    whole server-selection timeout (30 s) and then print its topology."""


class DamagedStoreFileError(MongoStoreError, RuntimeError):
    """The local store's file (``MongoStore.local``) is not a whole file of the store: empty,
    cut short, or not ours. It was left untouched; the message says how to move it aside."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"the local store file {path} is damaged or not a mongostore local store ({reason}); "
            f"it was left untouched. Move it aside to start an empty store (mv {path} {path}.damaged), "
            "or put back a copy from a backup or a `mongostore export`"
        )
