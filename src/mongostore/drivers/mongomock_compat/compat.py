"""The entry points: ``adapt_collection`` (the store's handle on a collection it was given),
``in_memory_collection`` / ``new_client`` (the embedded engine's own).

mongomock itself is imported only when one of them meets it (it costs a quarter of a
second): ``lookups`` holds the classes, and its docstring lists every change they make.
"""

from __future__ import annotations

import sys
from typing import Any

# The async doubles of mongomock the store adapts: module, collection, database, client classes.
_ASYNC_DOUBLES = (
    ("mongomock_motor", "AsyncMongoMockCollection", "AsyncMongoMockDatabase", "AsyncMongoMockClient"),
    ("pymongo_async_mock", "AsyncMongoMockCollection", "AsyncMongoMockDatabase", "AsyncMongoMockClient"),
)


def _async_double(obj: Any) -> bool:
    """Is ``obj`` a collection of mongomock_motor or pymongo-async-mock (by class)?"""
    for module_name, coll_name, *_ in _ASYNC_DOUBLES:
        module = sys.modules.get(module_name)  # not imported: an object of it means it is
        coll_cls = getattr(module, coll_name, None)
        if isinstance(coll_cls, type) and isinstance(obj, coll_cls):
            return True
    return False


def _mongomock_collection_class() -> type | None:
    module = sys.modules.get("mongomock.collection")
    cls = getattr(module, "Collection", None)
    return cls if isinstance(cls, type) else None


def adapt_collection(collection: Any) -> Any:
    """The collection the store uses for ``collection``: itself, unless it is mongomock's.

    A mongomock collection (sync, or mongomock_motor's / pymongo-async-mock's) becomes a
    handle of the same kind on the same data whose calls behave as pymongo 4.11+ and
    MongoDB expect (``lookups``); the given object, its client and mongomock's classes are
    untouched. Anything else (pymongo, Motor, the local store's collections, wrappers and
    test doubles) is returned as it is. None stays None.
    """
    if collection is None:
        return None
    mock_collection = _mongomock_collection_class()
    if mock_collection is None:
        return collection
    from mongostore.drivers.mongomock_compat import lookups

    if isinstance(collection, lookups.EngineCollection):
        return collection
    if isinstance(collection, mock_collection):
        return lookups.adapt_sync(collection)
    if _async_double(collection):
        return lookups.adapt_async(collection)
    return collection


def new_client(**kwargs: Any) -> Any:
    """A fresh client of the embedded engine: mongomock with the store's changes, tz-aware."""
    from mongostore.drivers.mongomock_compat import lookups

    return lookups.new_client(**kwargs)


def in_memory_collection(db_name: str = "mongostore", collection_name: str = "memories") -> Any:
    """A collection of a fresh embedded engine (tz-aware, like the store's real clients)."""
    return new_client()[db_name][collection_name]


# --------------------------------------------------------------------------- MongoDB's expressions


def mongodb_expressions(pipeline: Any) -> Any:
    """``pipeline`` with ``$add`` of a date, which mongomock 4.3 evaluates unlike MongoDB,
    rewritten into an expression it evaluates as MongoDB does (``lookups``, change 2); the
    same object when there is none. ``$literal`` values are never looked into."""
    if not isinstance(pipeline, list):
        return pipeline
    out = _rewrite(pipeline)
    return pipeline if out is _UNCHANGED else out


_UNCHANGED: Any = object()


def _number(v: Any) -> bool:
    return type(v) in (int, float)


def _rewrite(value: Any) -> Any:
    """The rewritten ``value``, or ``_UNCHANGED`` (leaves are never called on: one put's
    pipeline costs a few microseconds)."""
    if type(value) is list:
        out: Any = None
        for i, v in enumerate(value):
            if type(v) is dict or type(v) is list:
                r = _rewrite(v)
                if r is not _UNCHANGED:
                    if out is None:
                        out = list(value)
                    out[i] = r
        return _UNCHANGED if out is None else out
    if type(value) is not dict:
        return _UNCHANGED
    if len(value) == 1:
        ((op, arg),) = value.items()
        if op == "$literal":
            return _UNCHANGED
        if op == "$add" and type(arg) is list and len(arg) > 1:
            exprs = [v for v in arg if not _number(v)]
            if len(exprs) == 1:
                inner = _rewrite(exprs[0])
                expr = exprs[0] if inner is _UNCHANGED else inner
                return {"$subtract": [expr, -sum(v for v in arg if _number(v))]}
    out = None
    for k, v in value.items():
        if (type(v) is dict and "$literal" not in v) or type(v) is list:
            r = _rewrite(v)
            if r is not _UNCHANGED:
                if out is None:
                    out = dict(value)
                out[k] = r
    return _UNCHANGED if out is None else out
