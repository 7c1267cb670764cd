"""Store settings from the environment, and the factory LangGraph's Agent Server loads.

``langgraph.json``::

    {
      "graphs": {"memory": "./graph.py:graph"},
      "store": {"path": "mongostore.server.make_store"}
    }

The Agent Server (``langgraph dev`` / ``langgraph up``) calls :func:`make_store`
once, inside its own event loop, enters the async context manager it returns,
and uses the ``AsyncMongoStore`` it yields for the ``/store`` API and as
``runtime.store`` in every graph. Use a dotted path (``package.module.name``):
the server splits a module path at its last ``.``, so ``mongostore.server:make_store``
is *not* understood; a file path (``./store.py:make_store``) works too.

Configuration, read when the server starts (also used by the ``mongostore`` CLI):

=========================  =========================================================  ==========================
variable                   meaning                                                    default
=========================  =========================================================  ==========================
``MONGODB_URI``            ``mongodb://`` / ``mongodb+srv://``, or ``mongomock://``   ``mongomock://`` (in memory,
                                                                                      lost on exit: for trying)
``MONGOSTORE_DB``          database name                                              ``mongostore``
``MONGOSTORE_COLLECTION``  items collection (vectors go to ``<name>_vectors``)        ``memories``
``MONGOSTORE_EMBED``       ``minilm``, ``hashing``, ``none`` (no semantic search),    MiniLM when the ``minilm``
                           or a LangChain provider string                             extra is installed, else
                           (``openai:text-embedding-3-small``)                        ``hashing``
``MONGOSTORE_DIMS``        vector dimensions (needed for unknown provider models)     from the model
``MONGOSTORE_FIELDS``      comma-separated value paths to embed (``text,tags[*]``)    ``$`` (the whole value)
=========================  =========================================================  ==========================

Every process that writes to a collection must use the same embedder, dims and
fields; after changing them, run ``mongostore reindex``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore

from mongostore.config import MongoIndexConfig
from mongostore.embeddings import MINILM_DIMS, MINILM_INSTALL_HINT, HashingEmbeddings, MiniLMEmbeddings
from mongostore.errors import ConfigurationError
from mongostore.store import DEFAULT_COLLECTION, DEFAULT_DB

__all__ = [
    "ENV_COLLECTION",
    "ENV_DB",
    "ENV_DIMS",
    "ENV_EMBED",
    "ENV_FIELDS",
    "ENV_URI",
    "IN_MEMORY_URI",
    "KNOWN_DIMS",
    "StoreSettings",
    "make_store",
    "redact_uri",
    "resolve_embeddings",
]

logger = logging.getLogger("mongostore")

ENV_URI = "MONGODB_URI"
ENV_DB = "MONGOSTORE_DB"
ENV_COLLECTION = "MONGOSTORE_COLLECTION"
ENV_EMBED = "MONGOSTORE_EMBED"
ENV_DIMS = "MONGOSTORE_DIMS"
ENV_FIELDS = "MONGOSTORE_FIELDS"
IN_MEMORY_URI = "mongomock://"

#: Output sizes of common provider models, so ``--dims`` can be left out for them.
KNOWN_DIMS: dict[str, int] = {
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}

_NO_INDEX = frozenset({"none", "off", "false", "no"})
_CREDENTIALS = re.compile(r"^([a-z][a-z0-9+.-]*://)([^@/]*)@", re.IGNORECASE)


def redact_uri(uri: str) -> str:
    """The URI with its password replaced by ``***`` (safe to print and log)."""

    def hide(m: re.Match[str]) -> str:
        user = m.group(2).split(":", 1)[0]
        return f"{m.group(1)}{user}:***@" if ":" in m.group(2) else f"{m.group(1)}{user}@"

    return _CREDENTIALS.sub(hide, uri, count=1)


def resolve_embeddings(spec: str | None, dims: int | None = None) -> tuple[Embeddings | str, int, str] | None:
    """``(embed, dims, description)`` for an ``--embed`` / ``MONGOSTORE_EMBED`` value.

    ``None`` or ``""`` picks the best local model installed (MiniLM, else hashing);
    ``"none"`` means no semantic search and returns ``None``. A provider string is
    passed through for LangGraph's ``init_embeddings`` (it needs its package and keys).

    Raises:
        ConfigurationError: unknown model, missing extra, or dims that do not fit.
    """
    name = (spec or "").strip()
    if dims is not None and (isinstance(dims, bool) or dims < 1):
        raise ConfigurationError(f"dims must be a positive integer, got {dims!r}")
    if name.lower() in _NO_INDEX:
        return None
    if not name:
        name = "minilm" if MiniLMEmbeddings.available() else "hashing"
        if name == "hashing" and dims is None:
            return (
                HashingEmbeddings(MINILM_DIMS),
                MINILM_DIMS,
                "HashingEmbeddings (384 dims): a word-overlap test embedder, not a semantic model "
                f"(the minilm extra is not installed; for semantic search run {MINILM_INSTALL_HINT})",
            )
    lowered = name.lower()
    if lowered == "minilm":
        if dims is not None and dims != MINILM_DIMS:
            raise ConfigurationError(f"the minilm model has {MINILM_DIMS} dimensions, not {dims}")
        if not MiniLMEmbeddings.available():
            raise ConfigurationError(f"the minilm model is not installed: {MINILM_INSTALL_HINT}")
        return (
            MiniLMEmbeddings(),
            MINILM_DIMS,
            "all-MiniLM-L6-v2 (int8 ONNX, 384 dims), a semantic sentence model run locally",
        )
    if lowered == "hashing":
        n = dims or MINILM_DIMS
        return (
            HashingEmbeddings(n),
            n,
            f"HashingEmbeddings ({n} dims): a word-overlap test embedder, not a semantic model",
        )
    if ":" not in name:
        raise ConfigurationError(
            f"unknown embedder {name!r}: use minilm, hashing, none, or a LangChain provider string "
            "such as openai:text-embedding-3-small"
        )
    provider_dims = dims or KNOWN_DIMS.get(lowered)
    if provider_dims is None:
        raise ConfigurationError(f"set the vector size of {name!r} with --dims or {ENV_DIMS}")
    description = f"{name} ({provider_dims} dims) through LangChain's init_embeddings (needs its package and API key)"
    return name, provider_dims, description


def _parse_dims(raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{ENV_DIMS} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ConfigurationError(f"{ENV_DIMS} must be a positive integer, got {raw!r}")
    return value


def _parse_fields(raw: str | None) -> tuple[str, ...] | None:
    if raw is None or not raw.strip():
        return None
    fields = tuple(f.strip() for f in raw.split(",") if f.strip())
    return fields or None


@dataclass(frozen=True)
class StoreSettings:
    """Where the store lives and how it embeds. Built from the environment or the CLI."""

    uri: str | None = None
    db: str = DEFAULT_DB
    collection: str = DEFAULT_COLLECTION
    embed: str | None = None
    dims: int | None = None
    fields: tuple[str, ...] | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> StoreSettings:
        """Settings from ``MONGODB_URI`` and ``MONGOSTORE_*``; keyword overrides that are not None win."""
        env = os.environ if environ is None else environ
        settings = cls(
            uri=(env.get(ENV_URI) or "").strip() or None,
            db=(env.get(ENV_DB) or "").strip() or DEFAULT_DB,
            collection=(env.get(ENV_COLLECTION) or "").strip() or DEFAULT_COLLECTION,
            embed=(env.get(ENV_EMBED) or "").strip() or None,
            dims=_parse_dims(env.get(ENV_DIMS)),
            fields=_parse_fields(env.get(ENV_FIELDS)),
        )
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def in_memory(self) -> bool:
        """True for the embedded default (no URI, or ``mongomock://``)."""
        return self.uri is None or self.uri.startswith(IN_MEMORY_URI)

    def label(self) -> str:
        """One line saying where the data lives, credentials hidden."""
        where = f"database {self.db!r}, collection {self.collection!r}"
        if self.in_memory:
            return (
                f"embedded in-memory store (mongomock, {where}): temporary, lost when this process exits; "
                f"set --uri or {ENV_URI} for a real server"
            )
        assert self.uri is not None
        return f"{redact_uri(self.uri)} ({where})"

    def index(self) -> tuple[MongoIndexConfig | None, str]:
        """The ``index=`` config and a description of the embedder (``None``: no semantic search)."""
        resolved = resolve_embeddings(self.embed, self.dims)
        if resolved is None:
            return None, "none: semantic search is off (search by namespace and filter only)"
        embed, dims, description = resolved
        config = MongoIndexConfig(dims=dims, embed=embed, fields=list(self.fields or ("$",)))
        return config, description


@asynccontextmanager
async def make_store() -> AsyncIterator[BaseStore]:
    """The Agent Server's custom store: ``"store": {"path": "mongostore.server.make_store"}``.

    Reads the variables above, opens an ``AsyncMongoStore`` (pymongo's
    ``AsyncMongoClient``), runs ``setup()`` (idempotent: indexes, and the Atlas vector
    index when the server has one) and closes the client when the server stops.

    With ``mongomock://`` (the default) the store is in memory and lost on restart:
    an ``AsyncMongoStore`` on pymongo-async-mock when it is installed (``test`` extra),
    else the sync ``MongoStore`` on mongomock, whose async methods run in a thread.
    """
    from mongostore.aio import AsyncMongoStore
    from mongostore.store import MongoStore

    settings = StoreSettings.from_env()
    index, description = settings.index()
    logger.info("mongostore: %s; embeddings: %s", settings.label(), description)
    uri = settings.uri or IN_MEMORY_URI
    if uri.startswith(IN_MEMORY_URI):
        try:
            import pymongo_async_mock  # noqa: F401
        except ImportError:
            sync_store = MongoStore.in_memory(index=index, db_name=settings.db, collection_name=settings.collection)
            sync_store.setup()
            yield sync_store
            return
    async with AsyncMongoStore.from_conn_string(
        uri, db_name=settings.db, collection_name=settings.collection, index=index
    ) as store:
        await store.setup()
        yield store
