"""``AsyncMongoStore``: native asyncio on pymongo's ``AsyncMongoClient`` (Motor accepted).

A LangGraph ``BaseStore`` whose ``aget``/``aput``/... calls made in one event-loop tick are
coalesced into one ``abatch`` (as LangGraph's ``AsyncBatchedBaseStore`` does, on our own queue:
identical reads run once, a bad call or a rejected write fails only its own caller), which runs
the same plans as ``MongoStore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, Literal, cast

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from mongostore.core import plan as _plan
from mongostore.core.changes import watch_prefix
from mongostore.core.codec import as_namespace
from mongostore.drivers.aio import AsyncIO, maybe_await, run_async
from mongostore.drivers.backend import Backend
from mongostore.drivers.changes import AsyncChangeFeed
from mongostore.drivers.connect import check_reachable
from mongostore.store import DEFAULT_COLLECTION, DEFAULT_DB, DRIVER_INFO, _StoreBase

logger = logging.getLogger("mongostore")

# The ops and outcome of the last ``abatch`` run in this task, read by ``_drain``.
_OUTCOME: ContextVar[tuple[list[Op], _plan.BatchOutcome] | None] = ContextVar("mongostore_outcome", default=None)


class AsyncMongoStore(_StoreBase, BaseStore):
    """A LangGraph store on a pymongo ``AsyncCollection`` (or a Motor collection).

    >>> async with AsyncMongoStore.from_conn_string("mongodb://localhost:27017/?directConnection=true") as store:
    ...     await store.setup()
    ...     await store.aput(("users", "alice"), "pref", {"food": "pizza"})
    """

    _driver = AsyncIO
    _io: AsyncIO
    _sweeper: asyncio.Task[None] | None = None

    def __init__(
        self,
        collection: Any,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        vectors_collection: Any | None = None,
        backend: Backend | None = None,
    ) -> None:
        self._task: asyncio.Task[None] | None = None  # __del__ reads it, even when __init__ fails
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                f"{type(self).__name__} needs a running event loop: create it inside async code (in a "
                "coroutine run by asyncio.run(), or in `async with AsyncMongoStore.from_conn_string(...)`); "
                "sync code uses MongoStore"
            ) from None
        self._aqueue: asyncio.Queue[tuple[asyncio.Future[Any], Op]] = asyncio.Queue()
        super().__init__(collection, index=index, ttl=ttl, vectors_collection=vectors_collection, backend=backend)

    def __del__(self) -> None:
        task = getattr(self, "_task", None)
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its loop already closed
                task.cancel()

    async def __aenter__(self) -> AsyncMongoStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the client this store opened (none for a given collection)."""
        await self.stop_ttl_sweeper(timeout=5)
        client, self._owned_client = self._owned_client, None
        if client is not None:
            await maybe_await(client.close())  # Motor's close() is not a coroutine

    @classmethod
    def _embedded(cls, engine: tuple[Any, Any, Backend], index: Any, ttl: Any) -> AsyncMongoStore:
        from mongostore.drivers.embedded import AsyncCollection

        items, vectors, backend = engine
        return super()._embedded((AsyncCollection(items), AsyncCollection(vectors), backend), index, ttl)

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
        """A store on ``conn_string`` (as ``MongoStore.from_conn_string``) with an ``AsyncMongoClient``."""
        embedded = cls._for_uri(conn_string, db_name, collection_name, index, ttl)
        if embedded is not None:
            async with embedded as store:
                yield store
            return
        from pymongo import AsyncMongoClient

        await asyncio.to_thread(check_reachable, conn_string, client_kwargs)  # one line at once, not 30 s
        client = AsyncMongoClient(conn_string, tz_aware=True, driver=DRIVER_INFO, **client_kwargs)
        async with client, cls(client[db_name][collection_name], index=index, ttl=ttl) as store:
            store._owned_client = client
            yield store

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """From another thread than the event loop's: the ops run on the store's loop (as LangGraph's
        batched stores do); on the loop's own thread it would deadlock, so it is refused."""
        ops = list(ops)
        with contextlib.suppress(RuntimeError):  # no loop running in this thread: fine
            if asyncio.get_running_loop() is self._loop:
                raise asyncio.InvalidStateError(
                    f"Synchronous calls to {type(self).__name__} detected in the main event loop: they "
                    "would block it. Use the async methods there (`await store.aget(...)`, `await "
                    "store.aput(...)`, `await store.abatch(...)`...)"
                )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        outcome: _plan.BatchOutcome = await run_async(self._batch_plan(ops, _plan.batch_outcome_plan), self._io)
        # For ``_drain`` (same task, same context): a rejected write fails its own callers only,
        # whoever wraps or overrides abatch.
        _OUTCOME.set((ops, outcome))
        outcome.raise_any()
        return outcome.results

    def _queue(self, op: Op) -> asyncio.Future[Any]:
        """``op`` checked, then queued for ``_drain``: a bad call fails only its own caller, not those
        coalesced with it (keys are str()-ed by the a* methods, as BaseStore's sync methods do)."""
        op = _plan.check_op(op)
        self._ensure_task()
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._aqueue.put_nowait((fut, op))
        return fut

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(_drain(self._aqueue, weakref.ref(self)))

    async def aget(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        item: Item | None = await self._queue(GetOp(namespace, str(key), self._refresh(refresh_ttl)))
        return item

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        namespace = as_namespace(namespace)
        _plan.check_put_namespace(namespace)  # put()'s own rules: not empty, not rooted at "langgraph"
        if ttl is None and self._default_for_none() is not None:
            ttl = NOT_PROVIDED  # sized with its TTL fields here, as the batch will write it
        op = _plan.check_op(PutOp(namespace, str(key), value, index, ttl=self._ttl_minutes(ttl)))
        if self._index is not None and isinstance(op, _plan.SizedPut):  # too big with its text hashes: fail here
            value = cast("dict[str, Any]", op.value)
            op.texts = (
                self._index,
                _plan.indexed_texts(op.namespace, op.key, value, op.index, self._index, op.item_bytes),
            )
        await self._queue(op)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self._queue(PutOp(namespace, str(key), None, ttl=None))

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
        op = SearchOp(namespace_prefix, filter, limit, offset, query, refresh_ttl=self._refresh(refresh_ttl))
        found: list[SearchItem] = await self._queue(op)
        return found

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        conditions = []
        if prefix:
            conditions.append(MatchCondition("prefix", as_namespace(prefix, "prefix")))
        if suffix:
            conditions.append(MatchCondition("suffix", as_namespace(suffix, "suffix")))
        op = ListNamespacesOp(tuple(conditions), max_depth, limit, offset)
        namespaces: list[tuple[str, ...]] = await self._queue(op)
        return namespaces

    async def setup(self) -> None:
        """As ``MongoStore.setup``."""
        await run_async(_plan.setup_plan(self._index), self._io)

    def awatch(
        self, namespace_prefix: Sequence[str] = (), *, start_after: Mapping[str, Any] | None = None
    ) -> AsyncChangeFeed:
        """As ``MongoStore.watch``, an async iterator: ``async for change in store.awatch(("users",))``.
        The stream opens on the first read (mongomock's refusal comes at once, from this call); the
        local store's log is read in a thread, never on the event loop."""
        prefix = watch_prefix(namespace_prefix)
        backend = self._io.backend
        if backend.local_file:
            return AsyncChangeFeed(self.collection.sync, backend, prefix, start_after, threaded=True)
        return AsyncChangeFeed(self.collection, backend, prefix, start_after, threaded=False)

    async def shard_collections(self, *, hashed: bool = False) -> dict[str, dict[str, Any]]:
        """As ``MongoStore.shard_collections``."""
        plan = _plan.shard_plan(self.vectors_collection is not None, hashed)
        return await run_async(plan, self._io)

    async def status(self, *, consistency: bool = True) -> dict[str, Any]:
        """As ``MongoStore.status``."""
        return await run_async(self._status_plan(consistency), self._io)

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
        """As ``MongoStore.put_if_unchanged`` (its own plan: not coalesced with other calls)."""
        return await run_async(self._put_if_unchanged_plan(namespace, key, value, expected, index, ttl), self._io)

    async def apurge(self, namespace_prefix: tuple[str, ...], *, dry_run: bool = False) -> _plan.PurgeReport:
        """As ``MongoStore.purge``."""
        return await run_async(self._purge_plan(namespace_prefix, dry_run), self._io)

    async def aaggregate(
        self, namespace_prefix: tuple[str, ...], pipeline: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """As ``MongoStore.aggregate``."""
        return await run_async(self._aggregate_plan(namespace_prefix, pipeline), self._io)

    async def sweep_ttl(self) -> int:
        """As ``MongoStore.sweep_ttl``."""
        return await run_async(self._sweep_plan(), self._io)

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweep in an asyncio task every ``sweep_interval_minutes`` (default: ttl config, else 5)."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        seconds = self._sweep_seconds(sweep_interval_minutes)

        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    if n := await self.sweep_ttl():
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
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)


async def _drain(queue: asyncio.Queue[tuple[asyncio.Future[Any], Op]], ref: weakref.ref[AsyncMongoStore]) -> None:
    """The batching loop: everything queued in one loop tick becomes one batch, deduplicated
    (``dedupe_ops``), run by ``store.abatch``; the store is not kept alive between ticks."""
    while item := await queue.get():
        items = [item]
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                items.append(queue.get_nowait())
        store = ref()
        if store is None:
            break
        await _answer(store, [(fut, op) for fut, op in items if not fut.done()])
        del store


async def _answer(store: AsyncMongoStore, items: list[tuple[asyncio.Future[Any], Op]]) -> None:
    """Run one batch; unlike LangGraph, errors go to the callers they concern: each put or delete
    whose write failed (with the ops collapsed into it) gets its ``WriteError``; a write failed as a
    whole fails the puts, deletes and the reads whose TTL refresh it carried; an error before the
    write (a read, the embedder) fails every caller of the batch."""
    if not items:
        return
    listen, ops = _plan.dedupe_ops([op for _, op in items])
    token = _OUTCOME.set(None)
    try:
        results = await store.abatch(ops)
        errors: list[BaseException | None] = [None] * len(ops)
    except Exception as exc:
        ran = _OUTCOME.get()
        if ran is None or ran[0] != ops:  # failed before its write, or a wrapper changed the ops
            results, errors = [None] * len(ops), [exc] * len(ops)
        else:
            results, errors = ran[1].results, [ran[1].error_for(i, op) for i, op in enumerate(ops)]
    finally:
        _OUTCOME.reset(token)
    for n, (fut, _) in enumerate(items):
        ix = listen[n]
        if fut.done():
            continue
        if (error := errors[ix]) is not None:
            fut.set_exception(error)
        else:
            fut.set_result(results[ix])
