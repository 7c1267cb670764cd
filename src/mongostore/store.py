"""``MongoStore``, the synchronous LangGraph ``BaseStore`` on a pymongo ``Collection``, and
``_StoreBase``, what it shares with ``AsyncMongoStore``. Every method runs a plan from
``core.plan``; the constructor does no I/O.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Literal, Self, TypeVar

from langgraph.store.base import NOT_PROVIDED, BaseStore, IndexConfig, Item, NotProvided, Op, PutOp, Result, TTLConfig
from pymongo import MongoClient
from pymongo.driver_info import DriverInfo

from mongostore.config import TTLSettings, index_settings, sweep_minutes, ttl_settings
from mongostore.core import plan as _plan
from mongostore.core import queries as q
from mongostore.core.changes import watch_prefix
from mongostore.core.codec import as_namespace, as_utc, vectors_name
from mongostore.core.scope import scoped_pipeline
from mongostore.core.steps import Capabilities, ServerInfo
from mongostore.core.vectors import VectorCache
from mongostore.drivers.aio import AsyncIO
from mongostore.drivers.backend import Backend
from mongostore.drivers.changes import AsyncChangeFeed, ChangeFeed
from mongostore.drivers.connect import check_reachable
from mongostore.drivers.embedded import adapt_collection
from mongostore.drivers.sync import SyncIO, run_sync
from mongostore.errors import ConfigurationError

logger = logging.getLogger("mongostore")

DEFAULT_DB = "mongostore"
DEFAULT_COLLECTION = "memories"
DEFAULT_SWEEP_MINUTES = 5.0
DRIVER_INFO = DriverInfo(name="mongostore", version="0.1.0")
_OMIT_EXPIRED = TTLSettings(omit_expired=True)  # all a plan reads of the TTL settings
_R = TypeVar("_R")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _database_name(collection: Any) -> str:
    return str(getattr(collection.database, "name", ""))


class _StoreBase:
    """What the sync and async stores share: settings, plans and constructors (no I/O)."""

    supports_ttl = True
    _driver: type[SyncIO] | type[AsyncIO]
    _owned_client: Any = None  # the client from_conn_string opened: closed with the store

    def __init__(
        self,
        collection: Any,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        vectors_collection: Any | None = None,
        backend: Backend | None = None,
    ) -> None:
        """``backend``: what the collection runs on (``drivers.backend``); the embedded stores pass theirs."""
        super().__init__()
        self.collection = items = adapt_collection(collection)
        self._index = settings = index_settings(index)
        ttl_settings(ttl)
        # BaseStore reads these two for refresh/default-TTL resolution: copies.
        self.index_config = dict(index) if index is not None else None
        self.ttl_config = TTLConfig(**ttl) if ttl is not None else None
        self.vectors_collection = vectors = adapt_collection(vectors_collection) if settings else None
        self._vector_cache = VectorCache(settings.dims) if settings else None
        if settings is None:
            self._io = self._driver(items, None, None, backend=backend)
            return
        if vectors is None:
            self.vectors_collection = vectors = items.database[vectors_name(items.name)]
        elif _database_name(vectors) != _database_name(items):
            # $lookup joins only within one database: the items would never be found.
            raise ConfigurationError(
                f"vectors_collection= must be in the items' database {_database_name(items)!r}, "
                f"not {_database_name(vectors)!r}: semantic search joins the two with $lookup"
            )
        self._io = self._driver(items, vectors, settings.embeddings, settings.vector_search, backend=backend)

    def _omit_expired(self) -> bool:
        # Read from ttl_config on every call, as BaseStore reads default_ttl and refresh_on_read.
        return bool((self.ttl_config or {}).get("omit_expired", False))

    def _vectors_name(self) -> str:
        return self.vectors_collection.name if self.vectors_collection is not None else ""

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        """A read's ``refresh_ttl``: as given, else ``ttl_config['refresh_on_read']`` (default True)."""
        if refresh_ttl is not None:
            return refresh_ttl
        return bool((self.ttl_config or {}).get("refresh_on_read", True))

    def _ttl_minutes(self, ttl: float | NotProvided | None) -> float | None:
        """A put's ``ttl``: as given, else ``ttl_config['default_ttl']`` (None: never expires)."""
        if isinstance(ttl, NotProvided):
            return (self.ttl_config or {}).get("default_ttl")
        return ttl

    def _default_for_none(self) -> float | None:
        """``default_ttl`` when ``ttl_config`` says a put with ``ttl=None`` gets it (read live)."""
        config: Mapping[str, Any] = self.ttl_config or {}
        return config.get("default_ttl") if config.get("default_for_none") else None

    def _with_default_ttl(self, ops: list[Op]) -> list[Op]:
        """``ops`` with ``default_ttl`` on each put of a value whose ``ttl`` is None, under
        ``default_for_none`` (a delete keeps None; the put is checked again, with its TTL fields)."""
        default = self._default_for_none()
        if default is None:
            return ops
        return [
            PutOp(op.namespace, op.key, op.value, op.index, ttl=default)
            if isinstance(op, PutOp) and op.value is not None and op.ttl is None
            else op
            for op in ops
        ]

    def _batch_plan(
        self, ops: list[Op], batch: Callable[[list[Op], _plan.PlanContext], _plan.Plan[_R]]
    ) -> _plan.Plan[_R]:
        ops = self._with_default_ttl(ops)  # errors still go to their callers: they name namespace and key
        # Asked once per store (no I/O on mongomock); behind mongos the plans target shards.
        server: Capabilities = yield ServerInfo()
        ctx = _plan.PlanContext(
            self.collection.name,
            self._index,
            _OMIT_EXPIRED if self._omit_expired() else None,
            utcnow(),
            vectors_name=self._vectors_name(),
            vector_cache=self._vector_cache,
            ranges=server.ranges,
            distinct_paths=server.distinct_scan,
        )
        return (yield from batch(ops, ctx))

    def _aggregate_plan(
        self, namespace_prefix: tuple[str, ...], pipeline: Sequence[Mapping[str, Any]]
    ) -> _plan.Plan[list[dict[str, Any]]]:
        server: Capabilities = yield ServerInfo()
        cutoff = utcnow() if self._omit_expired() else None
        scoped = scoped_pipeline(namespace_prefix, pipeline, now=cutoff, sharded=server.ranges)
        return (yield from _plan.aggregate_plan(scoped))

    def _put_if_unchanged_plan(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        expected: Item | None,
        index: Literal[False] | list[str] | None,
        ttl: float | NotProvided | None,
    ) -> _plan.Plan[bool]:
        """``put_if_unchanged``'s plan, its arguments checked first (before any I/O)."""
        namespace = as_namespace(namespace)
        _plan.check_put_namespace(namespace)
        key = str(key)
        if expected is None:
            revision = q.ABSENT
        elif isinstance(expected, Item):
            if tuple(expected.namespace) != namespace or expected.key != key:
                raise ValueError(
                    f"expected is the item {tuple(expected.namespace)!r} / {expected.key!r}, not {namespace!r} / "
                    f"{key!r}: pass the item you read at this namespace and key (or None to create it)"
                )
            revision = q.Revision(as_utc(expected.created_at), as_utc(expected.updated_at))
        else:
            raise TypeError(
                f"expected must be the Item you read (from get or search) or None, got {type(expected).__name__}"
            )
        op = _plan.check_op(PutOp(namespace, key, value, index, ttl=self._ttl_minutes(ttl)))

        def plan(ops: list[Op], ctx: _plan.PlanContext) -> _plan.Plan[bool]:
            put = ops[0]  # with ttl_config's default TTL for ttl=None, when it asks for one
            assert isinstance(put, PutOp)
            return _plan.put_if_unchanged_plan(put, revision, ctx)

        return self._batch_plan([op], plan)

    def _purge_plan(self, namespace_prefix: tuple[str, ...], dry_run: bool) -> _plan.Plan[_plan.PurgeReport]:
        prefix = _plan.check_purge_prefix(namespace_prefix)  # before any I/O
        if not isinstance(dry_run, bool):
            raise TypeError(f"dry_run must be True or False, got {dry_run!r}")
        return _plan.purge_plan(prefix, self.vectors_collection is not None, dry_run, self._vector_cache)

    def _status_plan(self, consistency: bool = True) -> _plan.Plan[dict[str, Any]]:
        return _plan.status_plan(self._index, self._vectors_name(), self.collection.name, consistency)

    def _sweep_plan(self) -> _plan.Plan[int]:
        return _plan.sweep_plan(utcnow(), self.vectors_collection is not None, self.collection.name)

    def _sweep_seconds(self, minutes: float | None) -> float:
        if minutes is not None:
            return sweep_minutes(minutes) * 60
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        minutes = DEFAULT_SWEEP_MINUTES if configured is None else configured
        return sweep_minutes(minutes, "ttl_config['sweep_interval_minutes']") * 60

    @classmethod
    def _embedded(cls, engine: tuple[Any, Any, Backend], index: Any, ttl: Any) -> Self:
        items, vectors, backend = engine
        return cls(items, index=index, ttl=ttl, vectors_collection=vectors, backend=backend)

    @classmethod
    def in_memory(
        cls,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
    ) -> Self:
        """A temporary in-memory store on mongomock, for tests and throwaway use (gone on exit).
        (``AsyncMongoStore``: call it inside a running event loop, like the constructor.)"""
        from mongostore.drivers.embedded import memory_engine

        return cls._embedded(memory_engine(db_name, collection_name), index, ttl)

    @classmethod
    def local(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
    ) -> Self:
        """The persistent embedded store, no server: a SQLite file, ``<path>/<db_name>.sqlite``.
        ``path`` defaults to the CLI's: ``$MONGOSTORE_DATA_DIR``, else ``$XDG_DATA_HOME/mongostore`` or
        ``~/.local/share/mongostore``. Each operation is one SQLite transaction: processes may share it."""
        from mongostore.drivers.embedded import local_engine

        return cls._embedded(local_engine(path, db_name, collection_name), index, ttl)

    @classmethod
    def _for_uri(cls, conn_string: str, db_name: str, collection_name: str, index: Any, ttl: Any) -> Self | None:
        """The embedded store a ``mongomock://`` or ``mongostore-local://`` URI names, else None."""
        if conn_string.startswith("mongomock://"):
            return cls.in_memory(index=index, ttl=ttl, db_name=db_name, collection_name=collection_name)
        if conn_string.startswith("mongostore-local://"):
            from mongostore.drivers.embedded import parse_local_uri

            path = parse_local_uri(conn_string)
            return cls.local(path, index=index, ttl=ttl, db_name=db_name, collection_name=collection_name)
        return None


class MongoStore(_StoreBase, BaseStore):
    """A LangGraph store on one MongoDB collection (plus ``<name>_vectors`` with an index).

    >>> with MongoStore.from_conn_string("mongodb://localhost:27017/?directConnection=true") as store:
    ...     store.setup()
    ...     store.put(("users", "alice"), "pref", {"food": "pizza"})
    """

    _driver = SyncIO
    _io: SyncIO
    _sweeper: concurrent.futures.Future[None] | None = None

    def __enter__(self) -> MongoStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the TTL sweeper and close the client this store opened (none for a given collection)."""
        self.stop_ttl_sweeper(timeout=5)
        client, self._owned_client = self._owned_client, None
        if client is not None:
            client.close()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        **client_kwargs: Any,
    ) -> Iterator[MongoStore]:
        """A store on ``conn_string``: ``mongodb://``, ``mongodb+srv://``, ``mongomock://`` (in memory)
        or ``mongostore-local://[/abs/dir]`` (the persistent embedded store); a tz-aware client, closed after."""
        embedded = cls._for_uri(conn_string, db_name, collection_name, index, ttl)
        if embedded is not None:
            with embedded as store:
                yield store
            return
        check_reachable(conn_string, client_kwargs)  # nothing listening: one line at once, not 30 s
        client: MongoClient[Any] = MongoClient(conn_string, tz_aware=True, driver=DRIVER_INFO, **client_kwargs)
        with client, cls(client[db_name][collection_name], index=index, ttl=ttl) as store:
            store._owned_client = client
            yield store

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_sync(self._batch_plan(list(ops), _plan.batch_plan), self._io)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The sync store has blocking I/O only; AsyncMongoStore is the native async one.
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    def setup(self) -> None:
        """Create the indexes (and the Atlas vector index, waiting until it is queryable). Idempotent."""
        run_sync(_plan.setup_plan(self._index), self._io)

    def watch(
        self, namespace_prefix: Sequence[str] = (), *, start_after: Mapping[str, Any] | None = None
    ) -> ChangeFeed:
        """The changes of the items under ``namespace_prefix`` (whole labels), in order, from now on or
        after ``start_after`` (a ``Change.resume_token``): an iterator of ``mongostore.Change`` that waits
        for the next one; close it (or use it in ``with``). A change stream on MongoDB (replica sets,
        sharded clusters, Atlas); the file's change log on the local store (every process's writes);
        ``ChangeFeedUnavailableError`` at once elsewhere (mongomock, a standalone mongod)."""
        return ChangeFeed(self.collection, self._io.backend, watch_prefix(namespace_prefix), start_after)

    def awatch(
        self, namespace_prefix: Sequence[str] = (), *, start_after: Mapping[str, Any] | None = None
    ) -> AsyncChangeFeed:
        """``watch`` as an async iterator (``async for change in store.awatch(...)``); its blocking reads
        run in a thread (``AsyncMongoStore.awatch`` reads natively)."""
        prefix = watch_prefix(namespace_prefix)
        return AsyncChangeFeed(self.collection, self._io.backend, prefix, start_after, threaded=True)

    def shard_collections(self, *, hashed: bool = False) -> dict[str, dict[str, Any]]:
        """Opt-in: shard the store's unsharded collections behind mongos, on ``{_id: 1}`` and
        ``{item_id: 1}`` (``hashed=True``: hashed keys). Run ``setup()`` first. Returns the
        collections it sharded; see docs/scaling.md. ``setup()`` never shards."""
        plan = _plan.shard_plan(self.vectors_collection is not None, hashed)
        return run_sync(plan, self._io)

    def status(self, *, consistency: bool = True) -> dict[str, Any]:
        """Server version, which search path runs, indexes and counts (``mongostore doctor``).
        ``consistency=False`` leaves out the counts that read every item and vector (items missing
        vectors, vectors no item lists: None then), for a quick look at a large store."""
        return run_sync(self._status_plan(consistency), self._io)

    def put_if_unchanged(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        *,
        expected: Item | None,
        index: Literal[False] | list[str] | None = None,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> bool:
        """Put ``value`` only if the stored item is still ``expected``, the ``Item`` you read (from ``get`` or
        ``search``), or, with ``expected=None``, only if there is none. True if it wrote; False if the item
        changed, appeared or went meanwhile (then nothing is written and nothing embedded). Of concurrent
        callers expecting the same item, exactly one wins. ``index`` and ``ttl`` as for ``put``."""
        return run_sync(self._put_if_unchanged_plan(namespace, key, value, expected, index, ttl), self._io)

    async def aput_if_unchanged(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        *,
        expected: Item | None,
        index: Literal[False] | list[str] | None = None,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> bool:
        """``put_if_unchanged`` off the event loop (the sync store's I/O blocks)."""
        plan = self._put_if_unchanged_plan(namespace, key, value, expected, index, ttl)  # checked here, at once
        return await asyncio.get_running_loop().run_in_executor(None, run_sync, plan, self._io)

    def purge(self, namespace_prefix: tuple[str, ...], *, dry_run: bool = False) -> _plan.PurgeReport:
        """Delete every item under ``namespace_prefix`` (whole labels: ``("a",)`` never touches
        ``("ab", ...)``) with its vectors, in bounded batches; returns how many of each. ``dry_run``:
        count them, delete nothing. The empty prefix is refused (``InvalidNamespaceError``)."""
        return run_sync(self._purge_plan(namespace_prefix, dry_run), self._io)

    def aggregate(
        self, namespace_prefix: tuple[str, ...], pipeline: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Run an aggregation pipeline over the items under ``namespace_prefix`` only: the scoping
        ``$match`` first, stages that could read or write outside it refused (``PipelineError``)."""
        return run_sync(self._aggregate_plan(namespace_prefix, pipeline), self._io)

    def sweep_ttl(self) -> int:
        """Delete expired items and their vectors now; returns the number of items deleted (MongoDB's
        TTL monitor does it about once a minute; this is for the embedded stores, or at a known time)."""
        return run_sync(self._sweep_plan(), self._io)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Sweep in a daemon thread every ``sweep_interval_minutes`` (default: ttl config, else 5)."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        seconds = self._sweep_seconds(sweep_interval_minutes)
        stop = self._sweeper_stop = threading.Event()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def loop() -> None:
            while not stop.wait(seconds):
                try:
                    if n := self.sweep_ttl():
                        logger.info("TTL sweep deleted %d expired item(s)", n)
                except Exception:
                    logger.exception("TTL sweep failed; retrying next interval")
            future.set_result(None)

        threading.Thread(target=loop, name="mongostore-ttl-sweeper", daemon=True).start()
        self._sweeper = future
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True if it stopped within ``timeout`` seconds."""
        if self._sweeper is not None:
            self._sweeper_stop.set()
            if concurrent.futures.wait([self._sweeper], timeout).not_done:
                return False
            self._sweeper = None
        return True
