"""The async twins of ``_proxies``: ``AsyncProxy`` and ``AsyncReplay`` for pymongo async / Motor."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import _setup  # noqa: F401  (first: this checkout's src/ and tests/ on sys.path)
from _proxies import SyncDatabaseProxy, SyncProxy, SyncReplay
from _wire import COUNTED, CURSOR_METHODS, Answer, call_key, network_delay, request_size

# --------------------------------------------------------------------------- async proxy and replay


class _AsyncListCursor:
    def __init__(self, docs: list[Any]) -> None:
        self._docs = docs

    async def to_list(self, length: int | None = None) -> list[Any]:
        return list(self._docs)

    def __aiter__(self) -> _AsyncListCursor:
        self._it = iter(self._docs)
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        pass


class _AsyncLazyCursor:
    """pymongo's ``AsyncCollection.find`` is sync and returns a cursor; ``to_list`` is the round trip."""

    def __init__(self, inner: Any, done: Callable[[Any], Awaitable[list[Any]]]) -> None:
        self._inner = inner
        self._done = done

    def _chain(self, name: str, *args: Any, **kwargs: Any) -> _AsyncLazyCursor:
        if self._inner is not None:
            self._inner = getattr(self._inner, name)(*args, **kwargs)
        return self

    def sort(self, *a: Any, **kw: Any) -> _AsyncLazyCursor:
        return self._chain("sort", *a, **kw)

    def skip(self, *a: Any, **kw: Any) -> _AsyncLazyCursor:
        return self._chain("skip", *a, **kw)

    def limit(self, *a: Any, **kw: Any) -> _AsyncLazyCursor:
        return self._chain("limit", *a, **kw)

    def batch_size(self, *a: Any, **kw: Any) -> _AsyncLazyCursor:
        return self._chain("batch_size", *a, **kw)

    async def to_list(self, length: int | None = None) -> list[Any]:
        return await self._done(self._inner)


async def _drain(result: Any) -> list[Any]:
    if inspect.isawaitable(result):
        result = await result
    to_list = getattr(result, "to_list", None)
    if to_list is not None:
        got = to_list()
        return list(await got if inspect.isawaitable(got) else got)
    return list(result)


class AsyncProxy(SyncProxy):
    """A pymongo ``AsyncCollection`` (or ``pymongo_async_mock``'s) that counts, delays and records."""

    @property
    def database(self) -> AsyncDatabaseProxy:  # type: ignore[override]
        return AsyncDatabaseProxy(self._inner.database, self._w)

    async def _sleep(self, trips: int) -> None:
        if self._w.delay:
            await network_delay(self._w.delay * trips)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in COUNTED or not callable(attr):
            return attr

        if name == "find":

            def find(*args: Any, **kwargs: Any) -> _AsyncLazyCursor:
                req = self._request("find", args, kwargs)

                async def done(cursor: Any) -> list[Any]:
                    t0 = time.perf_counter()
                    docs = list(await cursor.to_list(None))
                    await self._sleep(self._account("find", req, docs, time.perf_counter() - t0))
                    return docs

                return _AsyncLazyCursor(attr(*args, **kwargs), done)

            return find

        async def call(*args: Any, **kwargs: Any) -> Any:
            req = self._request(name, args, kwargs)
            t0 = time.perf_counter()
            result = attr(*args, **kwargs)
            if name in CURSOR_METHODS:
                result = await _drain(result)
            elif inspect.isawaitable(result):
                result = await result
            await self._sleep(self._account(name, req, result, time.perf_counter() - t0))
            return _AsyncListCursor(result) if name in CURSOR_METHODS else result

        return call


class AsyncDatabaseProxy(SyncDatabaseProxy):
    def __getitem__(self, name: str) -> AsyncProxy:
        return AsyncProxy(self._inner[name], self._w)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> AsyncProxy:
        return AsyncProxy(self._inner.get_collection(name, *args, **kwargs), self._w)


class AsyncReplay(SyncReplay):
    """The async double: coroutine methods, ``find`` returning a cursor whose ``to_list`` is awaited."""

    async def _aanswer(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Answer:
        request_size(method, args, kwargs)  # the client's BSON encoding of the request, as in SyncReplay
        key = call_key(self.name, method, args, kwargs) if self._player.keyed else ""
        ans = self._player.next(self.name, method, key)
        self._log.add(method, ans.trips, ans.docs, ans.nbytes_in, ans.nbytes_out)
        if self._delay:
            await network_delay(self._delay * ans.trips)
        return ans

    def __getattr__(self, name: str) -> Any:
        if name not in COUNTED:
            raise AttributeError(name)

        if name == "find":

            def find(*args: Any, **kwargs: Any) -> _AsyncLazyCursor:
                async def done(_c: Any) -> list[Any]:
                    return (await self._aanswer("find", args, kwargs)).value()  # type: ignore[no-any-return]

                return _AsyncLazyCursor(None, done)

            return find

        async def call(*args: Any, **kwargs: Any) -> Any:
            value = (await self._aanswer(name, args, kwargs)).value()
            return _AsyncListCursor(value) if name in CURSOR_METHODS else value

        return call
