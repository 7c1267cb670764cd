"""The blocking driver: ``run_sync`` pumps a plan (``core.plan``), ``SyncIO`` answers its steps
on pymongo or mongomock through ``shared.HANDLERS``; the async twin is ``drivers.aio``.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from types import GeneratorType
from typing import Any, TypeVar

from mongostore.core.plan import Plan
from mongostore.core.steps import Step
from mongostore.drivers import shared

R = TypeVar("R")


def run_sync(plan: Plan[R], io: SyncIO) -> R:
    """The plan's result, run inside one unit of work of the backend."""
    with io.backend.unit():
        result: R = io.resolve(plan)
        return result


def pump(gen: shared.Handler, answer: Callable[[Any], Any]) -> Any:
    """Run a plan or a handler: each thing it yields is answered, or its exception thrown back in."""
    try:
        step = next(gen)
        while True:
            try:
                result = answer(step)
            except Exception as exc:
                step = gen.throw(exc)
            else:
                step = gen.send(result)
    except StopIteration as stop:
        return stop.value


class SyncIO(shared.IOBase):
    """Answers steps on pymongo ``Collection`` s."""

    _executor: concurrent.futures.ThreadPoolExecutor | None = None  # made on first use
    sleep = staticmethod(time.sleep)

    def embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embeddings is not None
        return self.embeddings.embed_documents(texts)

    def execute(self, step: Step) -> Any:
        return self.resolve(shared.handler_for(step)(self, step))

    def resolve(self, x: Any) -> Any:
        """The answer to what a plan or a handler yielded (see ``shared``)."""
        if isinstance(x, Step):
            return self.execute(x)
        if isinstance(x, GeneratorType):
            return pump(x, self.resolve)
        if isinstance(x, shared.Rows):
            return list(x.cursor)
        if isinstance(x, shared.All):
            if len(x.each) < 2 or not self.backend.threads:
                return [self.resolve(e) for e in x.each]
            # pymongo is thread-safe: independent reads and writes overlap their round trips.
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="mongostore-read")
            return list(self._executor.map(self.resolve, x.each))
        if isinstance(x, shared.Locked):
            return self.resolve(x.handler)
        return x
