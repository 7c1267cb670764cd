"""The asyncio driver: ``run_async`` pumps a plan, ``AsyncIO`` answers its steps on pymongo
``AsyncCollection`` s or Motor (whose ``aggregate`` returns a cursor without ``await``), with
no thread pool: ``All`` runs concurrently. The handlers are ``shared.HANDLERS``.
"""

from __future__ import annotations

import asyncio
import inspect
from types import GeneratorType
from typing import Any, TypeVar

from mongostore.core.plan import Plan
from mongostore.core.steps import Step
from mongostore.drivers import shared

R = TypeVar("R")


async def run_async(plan: Plan[R], io: AsyncIO) -> R:
    """The plan's result, run inside one unit of work of the backend."""
    result: R
    if io.backend.aunit is None:
        with io.backend.unit():
            result = await io.resolve(plan)
            return result
    async with io.backend.aunit():
        result = await io.resolve(plan)
        return result


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncIO(shared.IOBase):
    """Answers steps on pymongo ``AsyncCollection`` s or Motor."""

    _lock: asyncio.Lock | None = None  # made on first use, in the running loop
    sleep = staticmethod(asyncio.sleep)

    def has_client_bulk(self) -> bool:
        # Motor clients have no client-level bulk_write; pymongo's AsyncMongoClient does. (Motor is
        # imported only then: an import reads files, which an Agent Server's loop refuses.)
        if not super().has_client_bulk():
            return False
        try:
            from motor.motor_asyncio import AsyncIOMotorClient
        except ImportError:
            return True
        return not isinstance(self.items.database.client, AsyncIOMotorClient)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embeddings is not None
        return await self.embeddings.aembed_documents(texts)

    async def execute(self, step: Step) -> Any:
        return await self.resolve(shared.handler_for(step)(self, step))

    async def resolve(self, x: Any) -> Any:
        """The answer to what a plan or a handler yielded (see ``shared``)."""
        if isinstance(x, Step):
            return await self.execute(x)
        if isinstance(x, GeneratorType):
            return await self._pump(x)
        if isinstance(x, shared.Rows):
            cursor = await maybe_await(x.cursor)
            return list(await cursor.to_list(length=None))
        if isinstance(x, shared.All):
            if len(x.each) == 1:  # no task: each costs the event loop a few scheduling passes (~10 us)
                return [await self.resolve(x.each[0])]
            return list(await asyncio.gather(*(self.resolve(e) for e in x.each)))
        if isinstance(x, shared.Locked):
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                return await self.resolve(x.handler)
        return await maybe_await(x)

    async def _pump(self, gen: shared.Handler) -> Any:
        """``drivers.sync.pump``, awaiting each answer."""
        try:
            step = next(gen)
            while True:
                try:
                    result = await self.resolve(step)
                except Exception as exc:
                    step = gen.throw(exc)
                else:
                    step = gen.send(result)
        except StopIteration as stop:
            return stop.value
