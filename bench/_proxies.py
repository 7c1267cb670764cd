"""The sync proxy (``SyncProxy``: counts, records, delays) and the sync replay double
(``SyncReplay``: answers from a tape), with their database, client and cursor shapes."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import _setup  # noqa: F401  (first: this checkout's src/ and tests/ on sys.path)
import mongomock
from _wire import (
    COUNTED,
    CURSOR_METHODS,
    Answer,
    CallLog,
    Player,
    Tape,
    _record,
    call_key,
    network_delay,
    request_size,
)

# --------------------------------------------------------------------------- sync proxy and replay


class _ListCursor:
    """A materialised cursor: iterable, ``to_list``-able, ``close``-able."""

    def __init__(self, docs: list[Any]) -> None:
        self._docs = docs

    def __iter__(self) -> Iterator[Any]:
        return iter(self._docs)

    def to_list(self, length: int | None = None) -> list[Any]:
        return list(self._docs)

    def close(self) -> None:
        pass

    def __enter__(self) -> _ListCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _LazyCursor:
    """A find cursor: chained sort/skip/limit reach the real cursor; the query runs on iteration."""

    def __init__(self, inner: Any, done: Callable[[Any], list[Any]]) -> None:
        self._inner = inner
        self._done = done
        self._docs: list[Any] | None = None

    def _chain(self, name: str, *args: Any, **kwargs: Any) -> _LazyCursor:
        if self._inner is not None:
            self._inner = getattr(self._inner, name)(*args, **kwargs)
        return self

    def sort(self, *a: Any, **kw: Any) -> _LazyCursor:
        return self._chain("sort", *a, **kw)

    def skip(self, *a: Any, **kw: Any) -> _LazyCursor:
        return self._chain("skip", *a, **kw)

    def limit(self, *a: Any, **kw: Any) -> _LazyCursor:
        return self._chain("limit", *a, **kw)

    def batch_size(self, *a: Any, **kw: Any) -> _LazyCursor:
        return self._chain("batch_size", *a, **kw)

    def _materialise(self) -> list[Any]:
        if self._docs is None:
            self._docs = self._done(self._inner)
        return self._docs

    def __iter__(self) -> Iterator[Any]:
        return iter(self._materialise())

    def to_list(self, length: int | None = None) -> list[Any]:
        return list(self._materialise())

    def close(self) -> None:
        pass


@dataclass
class Wiring:
    """How a proxy behaves; shared by the proxies of one store's collections."""

    log: CallLog
    delay: float = 0.0
    tape: Tape | None = None
    measure: bool = True


class SyncProxy:
    """A pymongo ``Collection`` (or mongomock's) that counts, delays and records its calls."""

    def __init__(self, inner: Any, wiring: Wiring) -> None:
        self._inner = inner
        self._w = wiring

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def database(self) -> SyncDatabaseProxy:
        return SyncDatabaseProxy(self._inner.database, self._w)

    def _request(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, int]:
        """(replay key, bytes sent), taken before the call: mongomock mutates some arguments."""
        w = self._w
        if not w.measure and w.tape is None:
            return "", 0
        key = call_key(self._inner.name, method, args, kwargs) if w.tape is not None else ""
        return key, request_size(method, args, kwargs)

    def _account(self, method: str, req: tuple[str, int], value: Any, secs: float) -> int:
        """Log (and record) one answered call; returns its round trips."""
        w = self._w
        if not w.measure and w.tape is None:
            w.log.add(method, 1, 0, 0, 0, secs)
            return 1
        raw, kind, trips, docs, nin = _record(method, value)
        w.log.add(method, trips, docs, nin, req[1], secs)
        if w.tape is not None:
            w.tape.add(self._inner.name, method, req[0], Answer(method, raw, kind, trips, docs, nin, req[1]))
        return trips

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in COUNTED or not callable(attr):
            return attr

        if name == "find":

            def find(*args: Any, **kwargs: Any) -> _LazyCursor:
                req = self._request("find", args, kwargs)

                def done(cursor: Any) -> list[Any]:
                    t0 = time.perf_counter()
                    docs = list(cursor)
                    trips = self._account("find", req, docs, time.perf_counter() - t0)
                    if self._w.delay:
                        time.sleep(self._w.delay * trips)
                    return docs

                return _LazyCursor(attr(*args, **kwargs), done)

            return find

        def call(*args: Any, **kwargs: Any) -> Any:
            req = self._request(name, args, kwargs)
            t0 = time.perf_counter()
            result = attr(*args, **kwargs)
            if name in CURSOR_METHODS:
                result = list(result)
            trips = self._account(name, req, result, time.perf_counter() - t0)
            if self._w.delay:
                time.sleep(self._w.delay * trips)
            return _ListCursor(result) if name in CURSOR_METHODS else result

        return call


class SyncDatabaseProxy:
    def __init__(self, inner: Any, wiring: Wiring) -> None:
        self._inner = inner
        self._w = wiring

    def __getitem__(self, name: str) -> SyncProxy:
        return SyncProxy(self._inner[name], self._w)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> SyncProxy:
        return SyncProxy(self._inner.get_collection(name, *args, **kwargs), self._w)

    @property
    def client(self) -> Any:
        client = self._inner.client
        return client if isinstance(client, mongomock.MongoClient) else ClientProxy(client, self._w)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class ClientProxy:
    """Counts MongoDB 8.0's client-level ``bulk_write`` (one round trip for both collections)."""

    def __init__(self, inner: Any, wiring: Wiring) -> None:
        self._inner = inner
        self._w = wiring

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "bulk_write":
            return attr
        w = self._w

        def bulk_write(*args: Any, **kwargs: Any) -> Any:
            w.log.add("client.bulk_write", 1, 0, 0, request_size("bulk_write", args, kwargs))
            if w.delay:
                time.sleep(w.delay)
            return attr(*args, **kwargs)

        async def abulk_write(*args: Any, **kwargs: Any) -> Any:
            w.log.add("client.bulk_write", 1, 0, 0, request_size("bulk_write", args, kwargs))
            if w.delay:
                await network_delay(w.delay)
            return await attr(*args, **kwargs)

        return abulk_write if inspect.iscoroutinefunction(attr) else bulk_write


class SyncReplay:
    """A collection double that answers instantly from a tape (plus the modelled delay)."""

    def __init__(self, player: Player, log: CallLog, *, name: str, database: Any, delay: float = 0.0) -> None:
        self._player = player
        self._log = log
        self._delay = delay
        self.name = name
        self.full_name = f"{getattr(database, 'name', 'db')}.{name}"
        self.database = database

    def _answer(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Answer:
        # What pymongo does in the client before any byte leaves: the request as BSON
        # (a vector as 384 doubles costs ~29 us to encode, as a packed BinData ~3 us).
        request_size(method, args, kwargs)
        key = call_key(self.name, method, args, kwargs) if self._player.keyed else ""
        ans = self._player.next(self.name, method, key)
        self._log.add(method, ans.trips, ans.docs, ans.nbytes_in, ans.nbytes_out)
        if self._delay:
            time.sleep(self._delay * ans.trips)
        return ans

    def __getattr__(self, name: str) -> Any:
        if name not in COUNTED:
            raise AttributeError(name)

        if name == "find":

            def find(*args: Any, **kwargs: Any) -> _LazyCursor:
                return _LazyCursor(None, lambda _c: self._answer("find", args, kwargs).value())

            return find

        def call(*args: Any, **kwargs: Any) -> Any:
            value = self._answer(name, args, kwargs).value()
            return _ListCursor(value) if name in CURSOR_METHODS else value

        return call
