"""The entry points: ``adapt_collection`` (the store's handle on a collection it was given),
``in_memory_collection`` / ``new_client`` (the embedded engine's own).

mongomock itself is imported only when one of them meets it (it costs a quarter of a
second): ``lookups`` holds the classes, and its docstring lists every change they make.
"""

from __future__ import annotations

import sys
from typing import Any


def _instance(obj: Any, module_name: str, class_name: str) -> bool:
    """Is ``obj`` of that class? (By class; a module not imported has no objects yet.)"""
    cls = getattr(sys.modules.get(module_name), class_name, None)
    return isinstance(cls, type) and isinstance(obj, cls)


def adapt_collection(collection: Any) -> Any:
    """The collection the store uses for ``collection``: itself, unless it is mongomock's.

    A mongomock collection (sync, or mongomock_motor's / pymongo-async-mock's) becomes a
    handle of the same kind on the same data whose calls behave as pymongo 4.11+ and
    MongoDB expect (``lookups``); the given object, its client and mongomock's classes are
    untouched. Anything else (pymongo, Motor, the local store's collections, wrappers and
    test doubles) is returned as it is. None stays None.
    """
    if _instance(collection, "mongomock.collection", "Collection"):
        from mongostore.drivers.mongomock_compat import lookups

        return collection if isinstance(collection, lookups.EngineCollection) else lookups.adapt_sync(collection)
    if any(_instance(collection, m, "AsyncMongoMockCollection") for m in ("mongomock_motor", "pymongo_async_mock")):
        from mongostore.drivers.mongomock_compat import lookups

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
    """The rewritten ``value``, or ``_UNCHANGED`` (copied only where it changes, leaves never
    called on: one put's pipeline costs a few microseconds)."""
    if type(value) is dict:
        if "$literal" in value:
            return _UNCHANGED
        if len(value) == 1 and type(arg := value.get("$add")) is list and len(arg) > 1:
            exprs = [v for v in arg if not _number(v)]
            if len(exprs) == 1:
                inner = _rewrite(exprs[0])
                expr = exprs[0] if inner is _UNCHANGED else inner
                return {"$subtract": [expr, -sum(v for v in arg if _number(v))]}
        items: Any = value.items()
    elif type(value) is list:
        items = enumerate(value)
    else:
        return _UNCHANGED
    out = None
    for k, v in items:
        if type(v) is dict or type(v) is list:
            r = _rewrite(v)
            if r is not _UNCHANGED:
                if out is None:
                    out = type(value)(value)
                out[k] = r
    return _UNCHANGED if out is None else out
