"""What the proxies measure and keep: request and reply sizes, cursor round trips, the call
log, and the tape of answers (``Tape``) that a replay (``Player``) serves back."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import _setup  # noqa: F401  (first: this checkout's src/ and tests/ on sys.path)
import bson
from bson.codec_options import CodecOptions

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

    _joined: bytes | None = field(default=None, repr=False)

    def value(self) -> Any:
        """A fresh copy, decoded from BSON as pymongo would with a tz-aware client:
        a cursor's documents in one ``decode_all`` (pymongo decodes each reply so, through
        ``_decode_all_selective``), not one ``decode`` call per document."""
        if self.kind == "cursor":
            if self._joined is None:
                self._joined = b"".join(self.raw)
            return bson.decode_all(self._joined, CODEC)
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


# --------------------------------------------------------------------------- the modelled network


class _Network:
    """Replies that land ``seconds`` after their request and wake the event loop as a socket does.

    ``asyncio.sleep`` is a timer, and the loop's epoll waits whole milliseconds, rounded
    up: a 1 ms timer armed before half a millisecond of client work fires up to 1 ms late
    (+0.5 ms median here), while a real reply wakes epoll the moment its bytes land. So
    one thread holds the pending replies, waits until the next is due (a timed wait, as
    precise as the sync side's ``time.sleep``), and hands it to its loop with
    ``call_soon_threadsafe``: a write to the loop's self-pipe, a descriptor becoming
    readable, as a socket would.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def reply_after(self, seconds: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cv:
            heapq.heappush(self._due, (time.perf_counter() + seconds, next(self._seq), loop, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="modelled-network", daemon=True)
                self._thread.start()
            self._cv.notify()
        return fut

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._due:
                    self._cv.wait()
                left = self._due[0][0] - time.perf_counter()
                if left > 0:
                    self._cv.wait(left)
                    continue
                _, _, loop, fut = heapq.heappop(self._due)
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(_land, fut)


def _land(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


NETWORK = _Network()


async def network_delay(seconds: float) -> None:
    """The modelled round trip of an async request (see ``_Network``)."""
    await NETWORK.reply_after(seconds)
