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

The code lives in modules by concern; this module gathers their names for the bench
scripts (``from _common import ...``):

- ``_setup``: ``sys.path`` (this checkout first) and the mongomock patches; imported first;
- ``_wire``: sizes, round trips per cursor, the call log and the tape;
- ``_proxies`` / ``_aproxies``: the sync / async proxies and replay doubles;
- ``_backends``: capture collections, the memoising embedder, mongomock or ``MONGODB_URI``;
- ``_timing``: interleaved medians and paired rounds; ``_results``: rows, tables, JSON.
"""

from __future__ import annotations

from _aproxies import (
    AsyncDatabaseProxy,
    AsyncProxy,
    AsyncReplay,
)
from _backends import (
    MONGODB_URI,
    THEIRS_INDEX_TIMEOUT,
    CaptureCollection,
    MemoEmbeddings,
    async_backend,
    fake_backend,
    fresh_db_name,
    ours_index,
    real_server,
    sync_backend,
    sync_db,
    theirs_index,
)
from _proxies import (
    ClientProxy,
    SyncDatabaseProxy,
    SyncProxy,
    SyncReplay,
    Wiring,
)
from _results import (
    Row,
    fmt,
    fmt_ratio,
    machine,
    save,
    table,
)
from _setup import (
    RESULTS,
    ROOT,
)
from _timing import (
    apaired_medians,
    median_time,
    paired_medians,
    paired_rounds,
    quiet_gc,
    ratio_spread,
    run_async,
    spread,
)
from _wire import (
    CODEC,
    COUNTED,
    CURSOR_METHODS,
    DIMS,
    FIRST_BATCH_DOCS,
    MAX_BATCH_BYTES,
    Answer,
    CallLog,
    Player,
    Tape,
    bson_size,
    call_key,
    cursor_trips,
    request_size,
)

__all__ = [
    "CODEC",
    "COUNTED",
    "CURSOR_METHODS",
    "DIMS",
    "FIRST_BATCH_DOCS",
    "MAX_BATCH_BYTES",
    "MONGODB_URI",
    "RESULTS",
    "ROOT",
    "THEIRS_INDEX_TIMEOUT",
    "Answer",
    "AsyncDatabaseProxy",
    "AsyncProxy",
    "AsyncReplay",
    "CallLog",
    "CaptureCollection",
    "ClientProxy",
    "MemoEmbeddings",
    "Player",
    "Row",
    "SyncDatabaseProxy",
    "SyncProxy",
    "SyncReplay",
    "Tape",
    "Wiring",
    "apaired_medians",
    "async_backend",
    "bson_size",
    "call_key",
    "cursor_trips",
    "fake_backend",
    "fmt",
    "fmt_ratio",
    "fresh_db_name",
    "machine",
    "median_time",
    "ours_index",
    "paired_medians",
    "paired_rounds",
    "quiet_gc",
    "ratio_spread",
    "real_server",
    "request_size",
    "run_async",
    "save",
    "spread",
    "sync_backend",
    "sync_db",
    "table",
    "theirs_index",
]
