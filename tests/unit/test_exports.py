"""``mongostore.__all__`` is exactly the public surface, and every name in it resolves."""

from __future__ import annotations

import types

import langgraph.store.base as lg_base
from langgraph.store.base import BaseStore

import mongostore
from mongostore import errors


def public_names() -> set[str]:
    """Non-underscore attributes of the package that are not submodules."""
    return {
        name
        for name, obj in vars(mongostore).items()
        if not name.startswith("_") and not isinstance(obj, types.ModuleType) and name != "annotations"
    }


def test_all_matches_the_public_names() -> None:
    assert set(mongostore.__all__) - {"__version__"} == public_names()


def test_all_has_no_duplicates_and_is_sorted() -> None:
    assert len(mongostore.__all__) == len(set(mongostore.__all__))
    assert mongostore.__all__ == sorted(mongostore.__all__)


def test_every_name_resolves_and_star_import_gives_exactly_all() -> None:
    for name in mongostore.__all__:
        assert getattr(mongostore, name) is not None
    namespace: dict[str, object] = {}
    exec("from mongostore import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(mongostore.__all__)


def test_the_stores_and_every_error_are_exported() -> None:
    assert {"MongoStore", "AsyncMongoStore", "InvalidNamespaceError"} <= set(mongostore.__all__)
    assert set(errors.__all__) <= set(mongostore.__all__)


def test_exported_types() -> None:
    assert issubclass(mongostore.MongoStore, BaseStore)
    assert issubclass(mongostore.AsyncMongoStore, BaseStore)
    # The namespace error is LangGraph's own class, so `except InvalidNamespaceError` works for both.
    assert mongostore.InvalidNamespaceError is lg_base.InvalidNamespaceError
    for name in ("InvalidValueError", "InvalidFilterError", "ConfigurationError", "PipelineError"):
        cls = getattr(mongostore, name)
        assert issubclass(cls, ValueError) and issubclass(cls, mongostore.MongoStoreError)
    for name in ("WriteError", "VectorIndexError"):
        assert issubclass(getattr(mongostore, name), mongostore.MongoStoreError)
    assert isinstance(mongostore.__version__, str) and mongostore.__version__
