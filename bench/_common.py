"""Shared machinery of the benchmarks: proxies that count, record, replay and delay.

Everything a store sends to MongoDB goes through a collection (or, on MongoDB 8.0+,
the client's ``bulk_write``). The benchmarks put a proxy there:

- ``SyncProxy`` / ``AsyncProxy`` wrap a real collection (mongomock with the fake Atlas
  of ``tests/fakes/atlas.py``, or a real server). They count each call that reaches
  the server, the documents and BSON bytes that come back, and the bytes sent; they
  optionally sleep a fixed delay per round trip and record every answer on a ``Tape``.
- ``SyncReplay`` / ``AsyncReplay`` are collection doubles that answer instantly from a
  tape: the exact answers the server gave, decoded from BSON as a driver would. With
  them, wall time is the client's own cost plus the modelled delay, and nothing else.

A cursor result longer than one batch costs more round trips: the server's first
batch holds 101 documents, each ``getMore`` up to 16 MiB (MongoDB's defaults). The
proxies count (and delay) those as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
for _p in (ROOT / "src", ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import bson  # noqa: E402
from bson.codec_options import CodecOptions  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402

from mongostore.drivers.mongomock_compat import is_fake, patch_mongomock  # noqa: E402
from mongostore.embeddings import HashingEmbeddings  # noqa: E402

patch_mongomock()


def _patch_bare_index_keys() -> None:
    """langgraph-store-mongodb calls ``create_index(keys=["namespace_str", "key"])``: pymongo
    reads bare names as ascending keys, mongomock 4.3 does not. Bench-only shim."""
    from mongomock.collection import Collection

    original = Collection.create_index
    if getattr(original, "_bench_bare_keys", False):
        return

    def create_index(self: Any, key_or_list: Any = None, *args: Any, **kwargs: Any) -> Any:
        if "keys" in kwargs and key_or_list is None:
            key_or_list = kwargs.pop("keys")
        if isinstance(key_or_list, (list, tuple)):
            key_or_list = [(k, 1) if isinstance(k, str) else k for k in key_or_list]
        return original(self, key_or_list, *args, **kwargs)

    create_index._bench_bare_keys = True  # type: ignore[attr-defined]
    Collection.create_index = create_index  # type: ignore[method-assign]


_patch_bare_index_keys()

DIMS = 384
FIRST_BATCH_DOCS = 101
MAX_BATCH_BYTES = 16 * 1024 * 1024
CODEC = CodecOptions(tz_aware=True)

# Calls that are one request to the server (index management included: none of the
# timed workloads should make them, and if one does, it should show).
CURSOR_METHODS = frozenset({"find", "aggregate", "list_search_indexes", "list_indexes"})
COUNTED = CURSOR_METHODS | frozenset(
    {
        "find_one",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
        "bulk_write",
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "count_documents",
        "estimated_document_count",
        "distinct",
        "create_index",
        "create_indexes",
        "create_search_index",
        "update_search_index",
        "index_information",
    }
)


# --------------------------------------------------------------------------- sizes


def bson_size(obj: Any) -> int:
    """BSON bytes of a document (or of any value, wrapped in one); 0 if not encodable."""
    try:
        if isinstance(obj, dict):
            return len(bson.encode(obj))
        return len(bson.encode({"v": obj}))
    except Exception:
        return 0


def request_size(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Approximate bytes a driver sends for a call: its arguments as BSON."""
    if method == "bulk_write":
        models = args[0] if args else kwargs.get("requests", [])
        total = 0
        for m in models:
            total += bson_size({"q": getattr(m, "_filter", None) or {}, "u": getattr(m, "_doc", None) or {}})
        return total
    parts = list(args) + [v for k, v in kwargs.items() if k not in ("return_document", "session")]
    return sum(bson_size(p) for p in parts if isinstance(p, (dict, list)))


def cursor_trips(sizes: Sequence[int]) -> int:
    """Round trips to read a whole cursor: the first batch, then 16 MiB getMores."""
    rest = sizes[FIRST_BATCH_DOCS:]
    if not rest:
        return 1
    trips, acc = 2, 0
    for s in rest:
        if acc and acc + s > MAX_BATCH_BYTES:
            trips += 1
            acc = 0
        acc += s
    return trips


# --------------------------------------------------------------------------- log and tape


@dataclass
class CallLog:
    """What reached the server: calls by method, round trips, documents and bytes."""

    calls: Counter[str] = field(default_factory=Counter)
    round_trips: int = 0
    docs_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    backend_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.round_trips = self.docs_in = self.bytes_in = self.bytes_out = 0
            self.backend_seconds = 0.0

    def add(self, method: str, trips: int, docs: int, nbytes_in: int, nbytes_out: int, seconds: float = 0.0) -> None:
        with self._lock:
            self.calls[method] += 1
            self.round_trips += trips
            self.docs_in += docs
            self.bytes_in += nbytes_in
            self.bytes_out += nbytes_out
            self.backend_seconds += seconds

    def summary(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(self.calls.items())) or "none"


@dataclass
class Answer:
    """One recorded answer: the value (BSON-encoded documents for reads) and its cost."""

    method: str
    raw: Any  # list[bytes] for cursors, bytes | None for single documents, else the value itself
    kind: str  # "cursor" | "doc" | "value"
    trips: int
    docs: int
    nbytes_in: int
    nbytes_out: int

    def value(self) -> Any:
        """A fresh copy, decoded from BSON as pymongo would."""
        if self.kind == "cursor":
            return [bson.decode(b, CODEC) for b in self.raw]
        if self.kind == "doc":
            return None if self.raw is None else bson.decode(self.raw, CODEC)
        return self.raw


def _canon(obj: Any) -> str:
    """A request's text with dict keys sorted: mongomock reorders projection dicts in place
    (the store's module-level ones included), which must not change a request's identity."""
    return json.dumps(obj, sort_keys=True, default=repr)


def call_key(coll: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What identifies a request for a keyed replay (timestamps in updates are ignored)."""
    if method == "bulk_write":
        return f"{coll}.bulk_write"
    first = args[0] if args else kwargs.get("filter", kwargs.get("pipeline", kwargs.get("name")))
    if method == "find":
        second = args[1] if len(args) > 1 else kwargs.get("projection")
        return f"{coll}.find{_canon(first)}{_canon(second)}"
    return f"{coll}.{method}{_canon(first)}"


class Tape:
    """The answers a server gave, in order, for a replay double to give again."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, Answer]] = []  # (collection.method, request key, answer)

    def add(self, coll: str, method: str, key: str, answer: Answer) -> None:
        self.entries.append((f"{coll}.{method}", key, answer))

    def player(self, keyed: bool) -> Player:
        return Player(self, keyed)


class Player:
    """Answers requests from a tape: in recorded order per (collection, method), or by request key.

    Keyed replay matches each request to its own answer, whatever order concurrent
    callers ask in; ordered replay is cheaper (no key to compute) for sequential runs.
    """

    def __init__(self, tape: Tape, keyed: bool) -> None:
        self.keyed = keyed
        self._by: dict[str, list[Answer]] = defaultdict(list)
        for head, key, ans in tape.entries:
            self._by[key if keyed else head].append(ans)
        self._queues: dict[str, deque[Answer]] = {}
        self._next: dict[str, int] = defaultdict(int)
        self.rewind()

    def rewind(self) -> None:
        self._queues = {k: deque(v) for k, v in self._by.items()}
        self._next.clear()

    def next(self, coll: str, method: str, key: str) -> Answer:
        if self.keyed:
            answers = self._by.get(key)
            if not answers:
                raise KeyError(f"no recorded answer for {key[:200]}")
            i = self._next[key]
            self._next[key] = i + 1
            return answers[i % len(answers)]
        head = f"{coll}.{method}"
        q = self._queues.get(head)
        if not q:
            # A sequential run asked for more than was recorded: start over (same workload again).
            q = self._queues[head] = deque(self._by.get(head, ()))
            if not q:
                raise KeyError(f"no recorded answer for {head}")
        return q.popleft()


def _record(method: str, value: Any) -> tuple[Any, str, int, int, int]:
    """(raw, kind, trips, docs, bytes_in) of a server answer."""
    if method in CURSOR_METHODS:
        raw = [bson.encode(d) for d in value]
        sizes = [len(b) for b in raw]
        return raw, "cursor", cursor_trips(sizes), len(raw), sum(sizes)
    if isinstance(value, dict) or (value is None and method.startswith("find_one")):
        raw_doc = None if value is None else bson.encode(value)
        return raw_doc, "doc", 1, int(value is not None), len(raw_doc or b"")
    return value, "value", 1, 0, 0


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
        return client if is_fake(client) else ClientProxy(client, self._w)

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
                await asyncio.sleep(w.delay)
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
            await asyncio.sleep(self._w.delay * trips)

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
        key = call_key(self.name, method, args, kwargs) if self._player.keyed else ""
        ans = self._player.next(self.name, method, key)
        self._log.add(method, ans.trips, ans.docs, ans.nbytes_in, ans.nbytes_out)
        if self._delay:
            await asyncio.sleep(self._delay * ans.trips)
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
            doc.update(update.get("$set", {}))
            doc.update(update.get("$setOnInsert", {}))
            out[repr(sorted(filt.items()))] = doc
        return list(out.values())


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


# --------------------------------------------------------------------------- timing


def quiet_gc() -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def cm() -> Iterator[None]:
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                gc.enable()

    return cm()


def median_time(fn: Callable[[], Any], repeats: int, warmup: int = 1, inner: int = 1) -> float:
    """Median seconds of one call of ``fn`` over ``repeats`` samples of ``inner`` calls each."""
    for _ in range(warmup):
        fn()
    samples = []
    with quiet_gc():
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def paired_medians(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1, inner: int = 1
) -> dict[str, float]:
    """Like ``median_time`` for several functions, interleaved so that noise hits them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    with quiet_gc():
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                samples[name].append((time.perf_counter() - t0) / inner)
    return {k: statistics.median(v) for k, v in samples.items()}


def run_async(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro_fn())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    """One line of a result table: ours vs theirs, and the ratio theirs/ours."""

    section: str
    workload: str
    ours: float | None
    theirs: float | None
    unit: str
    note: str = ""
    ratio_of: str = "theirs/ours"

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.theirs is None:
            return None
        if self.ours == 0:
            return None if self.theirs == 0 else float("inf")
        return self.theirs / self.ours

    def as_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "workload": self.workload,
            "ours": self.ours,
            "theirs": self.theirs,
            "unit": self.unit,
            "ratio": self.ratio,
            "note": self.note,
        }


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("calls", "trips", "docs", "texts", "n", "round trips"):
        return f"{value:.0f}"
    if unit == "KB":
        return f"{value:.1f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    if r == float("inf"):
        return "inf"
    if r >= 10:
        return f"{r:.0f}x"
    return f"{r:.2f}x"


def table(rows: Sequence[Row], title: str = "", markdown: bool = False) -> str:
    head = ["section", "workload", "ours", "theirs", "unit", "theirs/ours", "note"]
    body = [
        [r.section, r.workload, fmt(r.ours, r.unit), fmt(r.theirs, r.unit), r.unit, fmt_ratio(r.ratio), r.note]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return (f"**{title}**\n\n" if title else "") + "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    out = [title] if title else []
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in body]
    return "\n".join(out)


def save(name: str, rows: Sequence[Row], extra: dict[str, Any] | None = None) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"rows": [r.as_dict() for r in rows], **(extra or {})}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def machine() -> str:
    import platform

    import langgraph.store.mongodb  # noqa: F401
    import pymongo

    try:
        from importlib.metadata import version

        theirs = version("langgraph-store-mongodb")
        lg = version("langgraph")
    except Exception:  # pragma: no cover
        theirs = lg = "?"
    return (
        f"python {platform.python_version()}, {os.cpu_count()} cores, pymongo {pymongo.version}, "
        f"langgraph {lg}, langgraph-store-mongodb {theirs}"
    )


async def apaired_medians(
    fns: dict[str, Callable[[], Awaitable[Any]]], repeats: int, warmup: int = 1, inner: int = 1
) -> dict[str, float]:
    """``paired_medians`` for coroutine functions, inside the running event loop."""
    for fn in fns.values():
        for _ in range(warmup):
            await fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    with quiet_gc():
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    await fn()
                samples[name].append((time.perf_counter() - t0) / inner)
    return {k: statistics.median(v) for k, v in samples.items()}


# --------------------------------------------------------------------------- paired rounds


def paired_rounds(fns: dict[str, Callable[[], Any]], rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each function, in interleaved rounds (each round calls every
    function once, in a rotating order), so that load on a shared machine hits all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names = list(fns)
    samples: dict[str, list[float]] = {k: [] for k in names}
    with quiet_gc():
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                fns[name]()
                samples[name].append(time.perf_counter() - t0)
    return samples


def spread(samples: Sequence[float], scale: float = 1.0) -> str:
    """``median [min-max]`` of samples, scaled (e.g. 1e3 for ms)."""
    v = sorted(x * scale for x in samples)

    def f(x: float) -> str:
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    return f"{f(statistics.median(v))} [{f(v[0])}-{f(v[-1])}]"


def ratio_spread(num: Sequence[float], den: Sequence[float]) -> str:
    """Per-round ratios num/den (paired samples): ``median [min-max]``."""
    ratios = sorted(a / b for a, b in zip(num, den, strict=True) if b > 0)
    if not ratios:
        return "n/a"
    return f"{fmt_ratio(statistics.median(ratios))} [{fmt_ratio(ratios[0])}-{fmt_ratio(ratios[-1])}]"
