"""What the benchmarks run on: capture collections, the memoising embedder, and the
backends (mongomock with the fake Atlas, or the server at ``MONGODB_URI``) for both stores."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import Any

import _setup  # noqa: F401  (first: this checkout's src/ and tests/ on sys.path)
from _proxies import _LazyCursor, _ListCursor
from _wire import DIMS
from langchain_core.embeddings import Embeddings

from mongostore.tools.embeddings import HashingEmbeddings

# --------------------------------------------------------------------------- capture loading


class _BulkResult:
    deleted_count = 0
    upserted_count = 0
    modified_count = 0


class CaptureCollection:
    """A collection double that sees no data and keeps every write a store sends it.

    Used to bulk-load: a store writes its own document format here, and ``documents()``
    turns its upserts into plain documents for one fast ``insert_many``. (mongomock
    applies each upsert with a scan of the collection, so loading 100k items through
    a store would take hours.)
    """

    def __init__(self, name: str, database: Any) -> None:
        self.name = name
        self.full_name = f"{database.name}.{name}"
        self.database = database
        self.models: list[Any] = []

    def find(self, *args: Any, **kwargs: Any) -> _LazyCursor:
        return _LazyCursor(None, lambda _c: [])

    def aggregate(self, *args: Any, **kwargs: Any) -> _ListCursor:
        return _ListCursor([])

    def bulk_write(self, models: Sequence[Any], *args: Any, **kwargs: Any) -> _BulkResult:
        self.models.extend(models)
        return _BulkResult()

    def documents(self) -> list[dict[str, Any]]:
        """The documents the captured upserts would create in an empty collection (last wins)."""
        out: dict[str, dict[str, Any]] = {}
        for m in self.models:
            filt = getattr(m, "_filter", {}) or {}
            update = getattr(m, "_doc", {}) or {}
            if not getattr(m, "_upsert", False):
                continue
            doc = {k: v for k, v in filt.items() if not k.startswith("$") and not isinstance(v, dict)}
            if isinstance(update, list):  # an update pipeline (item writes), run on an empty document
                for stage in update:
                    for name, expr in stage.get("$set", {}).items():
                        doc[name] = _pipeline_value(expr, doc)
                    for name, keep in stage.get("$project", {}).items():
                        if not keep:
                            doc.pop(name, None)
            else:
                doc.update(update.get("$set", {}))
                doc.update(update.get("$setOnInsert", {}))
            out[repr(sorted(filt.items()))] = doc
        return list(out.values())


def _pipeline_value(expr: Any, doc: dict[str, Any]) -> Any:
    """The few aggregation expressions the store's item writes use, on a new document."""
    if isinstance(expr, str) and expr.startswith("$"):
        return doc.get(expr[1:])
    if isinstance(expr, dict) and len(expr) == 1:
        ((op, arg),) = expr.items()
        if op == "$literal":
            return arg
        if op in ("$ifNull", "$max", "$add"):
            values = [_pipeline_value(a, doc) for a in arg]
            if op == "$ifNull":
                return next((v for v in values if v is not None), None)
            if op == "$add":
                return None if any(v is None for v in values) else sum(values[1:], values[0])
            present = [v for v in values if v is not None]
            return max(present) if present else None
        if op.startswith("$"):
            raise ValueError(f"bench capture: expression {op} is not evaluated here")
    return expr


# --------------------------------------------------------------------------- embedders


class MemoEmbeddings(Embeddings):
    """``HashingEmbeddings`` behind a cache, with native async: an embedder that costs ~nothing.

    Counts ``calls`` and ``texts_embedded`` like ``HashingEmbeddings``, and ``empty_calls``
    (calls with no text at all). The async methods
    do not hop to a thread (as an API client such as OpenAI's would not).
    """

    def __init__(self, dims: int = DIMS) -> None:
        self._inner = HashingEmbeddings(dims)
        self._cache: dict[str, list[float]] = {}
        self.calls = 0
        self.empty_calls = 0
        self.texts_embedded = 0
        self._lock = threading.Lock()

    def reset_counters(self) -> None:
        with self._lock:
            self.calls = self.empty_calls = self.texts_embedded = 0

    def _one(self, text: str) -> list[float]:
        vec = self._cache.get(text)
        if vec is None:
            vec = self._cache[text] = self._inner.embed_query(text)
        return vec

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            self.empty_calls += not texts
            self.texts_embedded += len(texts)
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.calls += 1
            self.texts_embedded += 1
        return self._one(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


# --------------------------------------------------------------------------- stores


MONGODB_URI = os.environ.get("MONGODB_URI")
# How long langgraph-store-mongodb's constructor may wait for its Atlas index (its default is 15 s).
THEIRS_INDEX_TIMEOUT = 300
_created_dbs: list[str] = []
_client_cache: list[Any] = []


def real_server() -> bool:
    """True when ``MONGODB_URI`` points the benchmarks at a real server instead of mongomock."""
    return bool(MONGODB_URI)


def ours_index(embed: Embeddings) -> dict[str, Any]:
    # On the fake Atlas, vector_search is pinned to "atlas": the one-time capability probe
    # (one list_search_indexes per store) stays out of the counts. A real server is asked.
    return {"dims": DIMS, "embed": embed, "fields": ["text"], "vector_search": "auto" if real_server() else "atlas"}


def theirs_index(embed: Embeddings) -> Any:
    from langgraph.store.mongodb import create_vector_index_config

    return create_vector_index_config(dims=DIMS, embed=embed, fields=["text"])


def fresh_db_name() -> str:
    fresh_db_name.n += 1  # type: ignore[attr-defined]
    return f"bench{os.getpid()}_{fresh_db_name.n}"  # type: ignore[attr-defined]


fresh_db_name.n = 0  # type: ignore[attr-defined]


def _sync_client() -> Any:
    if not _client_cache:
        import atexit

        from pymongo import MongoClient

        client: Any = MongoClient(MONGODB_URI, tz_aware=True)
        _client_cache.append(client)

        def drop() -> None:
            for name in _created_dbs:
                with contextlib.suppress(Exception):
                    client.drop_database(name)
            client.close()

        atexit.register(drop)
    return _client_cache[0]


def fake_backend(coll_name: str = "memories") -> Any:
    """A collection of a fresh fake Atlas (mongomock + ``$vectorSearch``), whatever MONGODB_URI says."""
    from fakes.atlas import atlas_collection

    return atlas_collection(fresh_db_name(), coll_name)


def sync_backend(coll_name: str = "memories") -> Any:
    """A collection in a fresh database: on the fake Atlas, or on ``MONGODB_URI`` (dropped at exit)."""
    if not real_server():
        return fake_backend(coll_name)
    name = fresh_db_name()
    _created_dbs.append(name)
    return _sync_client()[name][coll_name]


def async_backend(coll_name: str = "memories") -> Any:
    """The async twin of ``sync_backend`` (call it inside the event loop that will use it)."""
    if not real_server():
        from fakes.atlas import async_atlas_collection

        return async_atlas_collection(fresh_db_name(), coll_name)
    from pymongo import AsyncMongoClient

    name = fresh_db_name()
    _created_dbs.append(name)
    _sync_client()  # registers the cleanup
    client: Any = AsyncMongoClient(MONGODB_URI, tz_aware=True)
    return client[name][coll_name]


def sync_db(backend: Any) -> Any:
    """A sync handle on the database holding ``backend``'s data (to load it)."""
    if not real_server():
        db = backend.database
        return getattr(db, "mongomock_db", db)
    return _sync_client()[backend.database.name]
