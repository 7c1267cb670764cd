"""``AsyncMongoStore``: native asyncio on pymongo's ``AsyncMongoClient`` (Motor accepted).

It is LangGraph's ``AsyncBatchedBaseStore``: ``aget``/``aput``/... calls made in one
event-loop tick are coalesced into one ``abatch``, which runs the same plans as
``MongoStore`` through ``_drivers.run_async``. No thread pool is involved.
Construct it inside a running event loop (LangGraph's base class requires it).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    IndexConfig,
    ListNamespacesOp,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    _ensure_ttl,
    _validate_namespace,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore

from mongostore import _plan
from mongostore._drivers import AsyncIO, run_async
from mongostore.store import DEFAULT_COLLECTION, DEFAULT_DB, DRIVER_INFO, _StoreConfig, utcnow

logger = logging.getLogger("mongostore")


class AsyncMongoStore(_StoreConfig, AsyncBatchedBaseStore):
    """A LangGraph store on a pymongo ``AsyncCollection`` (or a Motor collection).

    >>> async with AsyncMongoStore.from_conn_string("mongodb://localhost:27017") as store:
    ...     await store.setup()
    ...     await store.aput(("users", "alice"), "pref", {"food": "pizza"})
    """

    supports_ttl = True

    def __init__(
        self,
        collection: Any,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        vectors_collection: Any | None = None,
    ) -> None:
        super().__init__()
        self._io = AsyncIO(*self._configure(collection, index, ttl, vectors_collection))
        self._sweeper: asyncio.Task[None] | None = None
        self._owned_client: Any = None

    # ------------------------------------------------------------------ context manager

    async def __aenter__(self) -> AsyncMongoStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the client this store opened (none for a given collection)."""
        await self.stop_ttl_sweeper(timeout=5)
        client, self._owned_client = self._owned_client, None
        if client is not None:
            result = client.close()
            if asyncio.iscoroutine(result):
                await result

    # ------------------------------------------------------------------ constructors

    @classmethod
    def in_memory(
        cls,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
    ) -> AsyncMongoStore:
        """A temporary in-memory store (mongomock, in the base install), for tests and throwaway use.

        Call it inside a running event loop, like the constructor.
        """
        from mongostore._embedded import AsyncCollection
        from mongostore._mongomock import in_memory_collection

        items = in_memory_collection(db_name, collection_name)
        vectors = items.database[f"{collection_name}_vectors"]
        return cls(AsyncCollection(items), index=index, ttl=ttl, vectors_collection=AsyncCollection(vectors))

    @classmethod
    def local(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
    ) -> AsyncMongoStore:
        """The persistent embedded store (see ``MongoStore.local``), with the async API."""
        from mongostore._embedded import async_local_store

        return async_local_store(path, db_name, collection_name, index=index, ttl=ttl)  # type: ignore[no-any-return]

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        db_name: str = DEFAULT_DB,
        collection_name: str = DEFAULT_COLLECTION,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        **client_kwargs: Any,
    ) -> AsyncIterator[AsyncMongoStore]:
        """A store on ``conn_string`` with a tz-aware ``AsyncMongoClient``, closed afterwards.

        ``mongomock://`` gives an in-memory store and ``mongostore-local://[/abs/dir]``
        the persistent embedded one (both in the base install): for development only.
        """
        if conn_string.startswith("mongomock://"):
            async with cls.in_memory(index=index, ttl=ttl, db_name=db_name, collection_name=collection_name) as store:
                yield store
            return
        if conn_string.startswith("mongostore-local://"):
            from mongostore._embedded import parse_local_uri

            path = parse_local_uri(conn_string)
            async with cls.local(
                path, index=index, ttl=ttl, db_name=db_name, collection_name=collection_name
            ) as store:
                yield store
            return
        from pymongo import AsyncMongoClient

        client: AsyncMongoClient[Any] = AsyncMongoClient(
            conn_string, tz_aware=True, driver=DRIVER_INFO, **client_kwargs
        )
        try:
            store = cls(client[db_name][collection_name], index=index, ttl=ttl)
            store._owned_client = client
            async with store:
                yield store
        finally:
            await client.close()

    # ------------------------------------------------------------------ BaseStore

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await run_async(_plan.batch_plan(list(ops), self._context()), self._io)  # type: ignore[no-any-return]

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        # Check before queueing: a bad call must fail only its own caller, not the
        # other coroutines whose ops are coalesced into the same abatch.
        _validate_namespace(namespace)
        _plan.check_op(PutOp(namespace, str(key), value, index, ttl=_ensure_ttl(self.ttl_config, ttl)))
        await super().aput(namespace, key, value, index, ttl=ttl)

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        _plan.check_op(SearchOp(namespace_prefix, filter, limit, offset, query))
        return await super().asearch(
            namespace_prefix, query=query, filter=filter, limit=limit, offset=offset, refresh_ttl=refresh_ttl
        )

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        _plan.check_op(ListNamespacesOp(None, max_depth, limit, offset))
        return await super().alist_namespaces(
            prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
        )

    # ------------------------------------------------------------------ extras

    async def setup(self) -> None:
        """Create the indexes (and the Atlas vector index, waiting until queryable). Idempotent."""
        await run_async(_plan.setup_plan(self._index), self._io)

    async def status(self) -> dict[str, Any]:
        return await run_async(_plan.status_plan(self._index), self._io)  # type: ignore[no-any-return]

    async def aaggregate(
        self, namespace_prefix: tuple[str, ...], pipeline: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Run an aggregation pipeline over the items under ``namespace_prefix`` only."""
        return await run_async(_plan.aggregate_plan(self._scoped(namespace_prefix, pipeline)), self._io)  # type: ignore[no-any-return]

    async def sweep_ttl(self) -> int:
        """Delete expired items and their vectors now; returns the number of items deleted."""
        return await run_async(_plan.sweep_plan(utcnow(), self.vectors_collection is not None), self._io)  # type: ignore[no-any-return]

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweep in an asyncio task every ``sweep_interval_minutes`` (default: ttl config, else 5)."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        seconds = self._sweep_minutes(sweep_interval_minutes) * 60

        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    n = await self.sweep_ttl()
                    if n:
                        logger.info("TTL sweep deleted %d expired item(s)", n)
                except Exception:
                    logger.exception("TTL sweep failed; retrying next interval")

        self._sweeper = asyncio.get_running_loop().create_task(loop())
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Cancel the sweeper task; True if it ended within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        task, self._sweeper = self._sweeper, None
        task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.CancelledError:
            return True
        except asyncio.TimeoutError:
            return False
        return True


