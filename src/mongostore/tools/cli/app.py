"""The ``mongostore`` command (also ``python -m mongostore``).

Run ``mongostore --help`` or see ``docs/cli.md``. In short::

    mongostore demo                                  # the memory demo, no server needed
    mongostore --uri "mongodb://localhost:27017/?directConnection=true" setup # indexes (+ the Atlas vector index)
    mongostore doctor                                # server, search path, indexes, counts
    mongostore put users.alice.memories k1 '{"text": "I like pizza"}'
    mongostore search users.alice --query "what food?" --filter '{"kind": "preference"}'
    mongostore export users > memories.jsonl && mongostore import memories.jsonl

Namespaces are written with dots: ``users.alice.memories`` is
``("users", "alice", "memories")`` (LangGraph labels cannot contain ``.``, so this
is unambiguous); ``""`` is the root. The connection comes from ``--uri`` or
``MONGODB_URI``; without one the command runs on the local store, a file per
database under ``--data-dir`` / ``MONGOSTORE_DATA_DIR`` (default
``~/.local/share/mongostore``), kept between commands and locked while one runs
(it says where on stderr). ``--uri mongomock://`` is an in-memory store instead.

Exit status: 0 success, 1 server or connection failure (or ``doctor`` found a
problem), 2 bad input (usage, JSON, namespace, value, filter), 3 not found
(``get``, ``rm``), 130 interrupted. Errors are one line on stderr, never a traceback
(set ``MONGOSTORE_DEBUG=1`` to see one); with ``--json`` they are also one JSON
document on stdout, ``{"ok": false, "error": ..., "exit_code": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any, Literal, TextIO

from bson import json_util
from langgraph.store.base import NOT_PROVIDED, InvalidNamespaceError, Item, PutOp, SearchItem, _validate_namespace
from pymongo import UpdateOne
from pymongo.errors import ConfigurationError as PyMongoConfigurationError
from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from mongostore import __version__
from mongostore._codec import as_utc, check_value, item_id
from mongostore._queries import item_indexes, not_expired, prefix_filter, vector_indexes
from mongostore.errors import InvalidValueError, MongoStoreError, WriteError
from mongostore.store import MongoStore
from mongostore.tools.embeddings import HashingEmbeddings
from mongostore.tools.server import (
    ENV_DATA_DIR,
    ENV_DB,
    ENV_URI,
    ServerUnreachableError,
    StoreSettings,
    check_field_path,
    probe_server,
    redact_uri,
    split_fields,
)

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "CLIError",
    "Progress",
    "build_parser",
    "format_namespace",
    "format_table",
    "main",
    "parse_namespace",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_INTERRUPTED = 130

PROG = "mongostore"
DEFAULT_TIMEOUT = 10.0
#: Seconds between reindex checkpoint lines when no progress bar is drawn.
CHECKPOINT_EVERY = 10.0
JSON_OUT = json_util.RELAXED_JSON_OPTIONS
JSON_IN = json_util.RELAXED_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=timezone.utc)


class CLIError(Exception):
    """A one-line error for the user, with the exit status to leave with."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- namespaces


def parse_namespace(text: str, *, what: str = "namespace", allow_empty: bool = False) -> tuple[str, ...]:
    """``"users.alice"`` -> ``("users", "alice")``; ``""`` -> ``()`` when ``allow_empty``.

    One trailing ``.`` is accepted (``users.alice.``, as in the stored ``path``).
    """
    raw = text.strip()
    if raw.endswith(".") and raw != ".":
        raw = raw[:-1]
    if not raw:
        if allow_empty:
            return ()
        raise CLIError(f"{what} is empty: write it with dots, e.g. users.alice.memories")
    labels = tuple(raw.split("."))
    if any(label == "" for label in labels):
        raise CLIError(f"{what} {text!r} has an empty label: write it with single dots, e.g. users.alice.memories")
    return labels


def format_namespace(namespace: Sequence[str]) -> str:
    return ".".join(namespace) if namespace else "(root)"


# --------------------------------------------------------------------------- output


def _clip(text: str, width: int) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> str:
    """A plain-text table: a header, a rule, one line per row; long cells end with ``…``."""
    cells = [[_clip("" if c is None else str(c), max_width) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """JSON for output: plain JSON, with BSON-only values (dates...) in relaxed Extended JSON."""
    return json_util.dumps(obj, json_options=JSON_OUT, ensure_ascii=False, indent=indent)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else as_utc(value).isoformat()


def _item_json(item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
    }
    if isinstance(item, SearchItem):
        out["score"] = item.score
    return out


def _when(value: datetime) -> str:
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S")


class Progress:
    """A one-line progress bar on stderr, redrawn with ``\\r`` at most ten times a second.

    Disabled unless the stream is a terminal (so logs and tests stay clean);
    ``total=None`` shows a counter instead of a bar.
    """

    def __init__(
        self, label: str, total: int | None, *, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._last = 0.0
        self._drawn = False
        self.suffix = ""

    def render(self) -> str:
        counts = self.suffix or (f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}")
        if self.total:
            frac = min(self.done / self.total, 1.0)
            filled = int(frac * 30)
            return f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%} {counts}"
        return f"{self.label} {counts}"

    def update(self, done: int, *, force: bool = False, suffix: str | None = None) -> None:
        """Set the amount done; ``suffix`` replaces the ``done/total`` counts (e.g. "1,204 lines")."""
        self.done = done
        if suffix is not None:
            self.suffix = suffix
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now - self._last >= 0.1 or (self.total is not None and done >= self.total):
            self._last = now
            self.stream.write("\r" + self.render() + "\033[K")
            self.stream.flush()
            self._drawn = True

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.update(self.done, force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False  # closing twice draws one line


# --------------------------------------------------------------------------- the store


@dataclass
class Ctx:
    """What every command gets: the store, the settings and the output mode."""

    args: argparse.Namespace
    store: MongoStore
    settings: StoreSettings
    embedder: str
    json: bool
    progress: bool
    injected: bool = False

    @property
    def where(self) -> str:
        """Where the data is, in a few words (named in result lines)."""
        return "the given store" if self.injected else self.settings.where()

    @property
    def out(self) -> TextIO:
        return sys.stdout

    @property
    def err(self) -> TextIO:
        return sys.stderr

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def emit(self, obj: Any) -> None:
        self.out.write(dumps(obj) + "\n")

    def warn(self, text: str) -> None:
        self.err.write(f"{PROG}: {text}\n")


def _settings(
    args: argparse.Namespace, *, db_default: str | None = None, fields_default: tuple[str, ...] | None = None
) -> StoreSettings:
    fields = split_fields(args.fields, "--fields") if args.fields is not None else None
    uri = args.uri
    if uri is not None and not uri.strip():
        raise CLIError("--uri is empty: give a mongodb:// URI, or leave it out for the local store")
    settings = StoreSettings.from_env(
        uri=uri.strip() if uri else None,
        db=args.db or None,
        collection=args.collection or None,
        embed=args.embed,
        dims=args.dims,
        fields=fields,
        data_dir=args.data_dir or None,
    )
    if db_default is not None and not args.db and not os.environ.get(ENV_DB):
        settings = replace(settings, db=db_default)
    if fields_default is not None and settings.fields is None:
        settings = replace(settings, fields=fields_default)
    return settings


#: Commands that lock the local store per operation, as a server isolates each one, instead
#: of for the whole command: ``export`` / ``import`` stream through pipes, so
#: ``mongostore export | mongostore import -`` cannot deadlock on the lock (the reader
#: waiting for it while the writer waits for the reader); ``demo`` runs LangGraph nodes on
#: worker threads, which would wait for the main thread's lock forever.
PER_OPERATION_COMMANDS = frozenset({"export", "import", "demo"})


@contextmanager
def _open(
    settings: StoreSettings, timeout: float, warn: Callable[[str], None], *, whole_command: bool = True
) -> Iterator[tuple[MongoStore, str]]:
    index, description = settings.index()
    if settings.in_memory:
        with MongoStore.in_memory(index=index, db_name=settings.db, collection_name=settings.collection) as store:
            store.setup()  # a fresh, empty store: give it its indexes so it behaves like a set-up one
            yield store, description
        return
    if settings.local:
        with MongoStore.local(
            settings.local_dir(), index=index, db_name=settings.db, collection_name=settings.collection
        ) as store:
            engine = store.engine  # type: ignore[attr-defined]
            engine.on_wait = warn
            # The whole command is one transaction: other commands wait, nothing is lost.
            with engine.transaction() if whole_command else contextlib.nullcontext():
                with engine.transaction():
                    names = store.collection.database.list_collection_names()
                    wanted = [store.collection.name]
                    if store.vectors_collection is not None:
                        wanted.append(store.vectors_collection.name)
                    if any(name not in names for name in wanted):
                        store.setup()  # a new store (or a first index): indexes, as on a set-up server
                yield store, description
        return
    assert settings.uri is not None
    note = probe_server(settings.uri, timeout)
    if note:
        warn(note)
    ms = int(timeout * 1000)
    with MongoStore.from_conn_string(
        settings.uri,
        db_name=settings.db,
        collection_name=settings.collection,
        index=index,
        serverSelectionTimeoutMS=ms,
        connectTimeoutMS=ms,
    ) as store:
        yield store, description


def _describe_injected(store: MongoStore) -> str:
    index = store.index_config
    if not index:
        return "none: semantic search is off"
    embed = index.get("embed")
    return f"{embed!r} ({index.get('dims')} dims)"


# --------------------------------------------------------------------------- commands


def cmd_setup(ctx: Ctx) -> int:
    ctx.store.setup()
    status = ctx.store.status()
    if ctx.json:
        ctx.emit({"ok": True, "store": ctx.settings.label(), **_status_json(status)})
        return EXIT_OK
    ctx.print(f"indexes ready on {ctx.settings.label() if not ctx.injected else 'the given store'}")
    if ctx.settings.local and not ctx.injected:
        ctx.print(f"  data:    {ctx.settings.local_file()}")
    ctx.print(f"  items:   {', '.join(status['item_indexes'])}")
    if status["vector_indexes"] is not None:
        ctx.print(f"  vectors: {', '.join(status['vector_indexes'])}")
    ctx.print(f"  search:  {_search_path_text(status)}")
    return EXIT_OK


def _search_path_text(status: Mapping[str, Any]) -> str:
    path = status.get("search_path")
    if path == "atlas":
        return "Atlas Vector Search ($vectorSearch)"
    if path == "local":
        why = status.get("detail") or "no $vectorSearch"
        return f"exact ranking in Python (numpy) over the candidates: {why}"
    return "no semantic search (no index configured: set --embed)"


def _status_json(status: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items()}


def cmd_doctor(ctx: Ctx) -> int:
    status = ctx.store.status()
    problems: list[str] = []
    info: list[str] = []
    missing_items = [s.name for s in item_indexes() if s.name not in status["item_indexes"]]
    if missing_items:
        problems.append(f"items collection lacks indexes {', '.join(missing_items)}: run `mongostore setup`")
    unvectored = None
    if status["vector_indexes"] is not None:
        missing_vectors = [s.name for s in vector_indexes() if s.name not in status["vector_indexes"]]
        if missing_vectors:
            problems.append(f"vectors collection lacks indexes {', '.join(missing_vectors)}: run `mongostore setup`")
        if status["vector_search_available"]:
            idx = status["vector_search_index"]
            if not idx:
                problems.append("the Atlas vector search index does not exist: run `mongostore setup`")
            elif idx.get("queryable") is not True:
                problems.append(f"the Atlas vector search index is not queryable yet (status {idx.get('status')})")
        unvectored = ctx.store.collection.count_documents({"vectors": {"$exists": False}})
        if unvectored:
            info.append(
                f"{unvectored} item(s) have no vectors (put with index=False, no text at the indexed fields, "
                "or written without an index); `mongostore reindex --all` embeds them"
            )
        missing = status.get("items_missing_vectors")
        if missing:
            info.append(
                f"{missing} item(s) list texts whose vectors are missing (a failed or raced write): semantic "
                "search returns them unscored until they are put again; `mongostore reindex` repairs them"
            )
    idx = status.get("vector_search_index") or {}
    local = ctx.settings.local and not ctx.injected
    data_file = ctx.settings.local_file() if local else None
    server = str(status["server_version"])
    if local:
        server = "none: the local store (mongomock's engine, data in one file; see --data-dir)"
    if ctx.json:
        ctx.emit(
            {
                "ok": not problems,
                "store": ctx.settings.label() if not ctx.injected else "given store",
                "data_file": str(data_file) if data_file else None,
                "embedder": ctx.embedder,
                "index": _index_summary(ctx.store),
                **_status_json(status),
                "server_version": server,
                "items_without_vectors": unvectored,
                "problems": problems,
                "info": info,
            }
        )
        return EXIT_FAILURE if problems else EXIT_OK
    rows: list[tuple[str, str]] = [
        ("store", ctx.settings.label() if not ctx.injected else "the given store"),
        *([("data file", _file_text(data_file))] if data_file else []),
        ("server", server),
        ("embedder", ctx.embedder),
        ("index", _index_summary(ctx.store) or "none"),
        ("vector search", "available" if status["vector_search_available"] else "not available"),
        ("searches", _search_path_text(status)),
        ("item indexes", ", ".join(status["item_indexes"]) or "(none)"),
    ]
    if status["vector_indexes"] is not None:
        rows.append(("vector indexes", ", ".join(status["vector_indexes"]) or "(none)"))
    if status["vector_search_available"]:
        rows.append(
            ("atlas index", f"{idx.get('name', '?')}: {idx.get('status', 'missing')}, queryable={idx.get('queryable')}")
        )
    rows.append(("items", f"{status['items']:,}"))
    if status["vectors"] is not None:
        rows.append(("vectors", f"{status['vectors']:,}"))
    rows.append(("client bulk write", "yes (MongoDB 8.0+: one round trip)" if status["client_bulk_write"] else "no"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        ctx.print(f"{k:<{width}}  {v}")
    for line in info:
        ctx.print(f"note: {line}")
    for line in problems:
        ctx.print(f"PROBLEM: {line}")
    if not problems:
        ctx.print("ok")
    return EXIT_FAILURE if problems else EXIT_OK


def _file_text(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return f"{path} (not written yet)"
    return f"{path} ({size:,} bytes)"


def _index_summary(store: MongoStore) -> str:
    cfg = store.index_config
    if not cfg:
        return ""
    return f"dims={cfg.get('dims')}, fields={','.join(cfg.get('fields') or ['$'])}"


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name}, which is not a JSON number (JSON has no NaN or Infinity): store a string or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotFinite(f"{text}, a number too large for a double (it would be stored as Infinity)")
    return value


def loads_json(text: str) -> Any:
    """Strict JSON with Extended JSON types (dates...): no NaN / Infinity, no overflowing numbers.

    Any failure (bad Extended JSON such as ``{"$oid": "zzz"}`` or ``{"$date": 1e300}``,
    nesting too deep) is a ``ValueError`` with the reason.
    """
    try:
        return json_util.loads(text, json_options=JSON_IN, parse_constant=_no_constant, parse_float=_finite_float)
    except _NotFinite:
        raise
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:
        raise
    except Exception as exc:  # bson's InvalidId, decimal.InvalidOperation, OverflowError...
        raise ValueError(f"bad Extended JSON: {type(exc).__name__}: {_one_line(exc)}") from None


def _read_json_arg(text: str, what: str, stdin_text: str | None = None) -> Any:
    if text == "-":
        text = stdin_text if stdin_text is not None else sys.stdin.read()
    try:
        return loads_json(text)
    except _NotFinite as exc:
        raise CLIError(f"{what} holds {exc}") from None
    except ValueError as exc:
        raise CLIError(f"{what} is not valid JSON: {_one_line(exc)}") from None


def cmd_put(ctx: Ctx) -> int:
    a = ctx.args
    namespace = parse_namespace(a.namespace)
    value = _read_json_arg(a.value, "the value", getattr(a, "stdin_value", None))
    if not isinstance(value, dict):
        raise CLIError(f'the value must be a JSON object, got {type(value).__name__}: e.g. \'{{"text": "hi"}}\'')
    index: Any = None
    if a.no_index:
        index = False
    elif a.index is not None:
        index = list(split_fields(a.index, "--index"))
    ttl = NOT_PROVIDED if a.ttl is None else a.ttl
    if a.ttl is not None:
        _check_ttl(a.ttl, "--ttl")
    ctx.store.put(namespace, a.key, value, index=index, ttl=ttl)
    if ctx.json:
        ctx.emit({"ok": True, "namespace": list(namespace), "key": a.key, "store": ctx.where})
    else:
        extra = f", expires in {a.ttl:g} min" if a.ttl is not None else ""
        ctx.print(f"stored {format_namespace(namespace)} / {a.key} in {ctx.where}{extra}")
    return EXIT_OK


#: The longest TTL we accept, in minutes: 1,000 years (a later expiry overflows dates).
MAX_TTL_MINUTES = 1000 * 365.25 * 24 * 60


def _check_ttl(ttl: Any, what: str) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise CLIError(f"{what} must be a positive number of minutes, got {ttl!r}")
    if ttl > MAX_TTL_MINUTES:
        raise CLIError(f"{what} of {ttl:g} minutes is past year 9999: leave the TTL out for an item that never expires")
    return float(ttl)


def cmd_get(ctx: Ctx) -> int:
    namespace = parse_namespace(ctx.args.namespace)
    item = ctx.store.get(namespace, ctx.args.key)
    if item is None:
        raise CLIError(
            f"no item {ctx.args.key!r} in namespace {format_namespace(namespace)} in {ctx.where}{_empty_hint(ctx)}",
            EXIT_NOT_FOUND,
        )
    if ctx.json:
        ctx.emit(_item_json(item))
        return EXIT_OK
    ctx.print(f"namespace   {format_namespace(item.namespace)}")
    ctx.print(f"key         {item.key}")
    ctx.print(f"created_at  {_iso(item.created_at)}")
    ctx.print(f"updated_at  {_iso(item.updated_at)}")
    ctx.print("value")
    ctx.print(dumps(item.value, indent=2))
    return EXIT_OK


def _empty_hint(ctx: Ctx) -> str:
    if ctx.settings.in_memory and not ctx.injected:
        return " (the in-memory store starts empty in every command: leave out --uri for the local store)"
    return ""


def cmd_rm(ctx: Ctx) -> int:
    namespace = parse_namespace(ctx.args.namespace)
    existed = ctx.store.get(namespace, ctx.args.key, refresh_ttl=False) is not None
    if not existed and not ctx.args.force:
        raise CLIError(
            f"no item {ctx.args.key!r} in namespace {format_namespace(namespace)} in {ctx.where}"
            f"{_empty_hint(ctx)} (--force ignores this)",
            EXIT_NOT_FOUND,
        )
    ctx.store.delete(namespace, ctx.args.key)
    if ctx.json:
        ctx.emit({"ok": True, "namespace": list(namespace), "key": ctx.args.key, "deleted": existed})
    else:
        done = "deleted" if existed else "nothing to delete at"
        ctx.print(f"{done} {format_namespace(namespace)} / {ctx.args.key} in {ctx.where}")
    return EXIT_OK


def cmd_search(ctx: Ctx) -> int:
    a = ctx.args
    prefix = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    filt: dict[str, Any] | None = None
    if a.filter:
        try:
            parsed = json.loads(a.filter)
        except ValueError as exc:
            raise CLIError(f"--filter is not valid JSON: {_one_line(exc)}") from None
        if not isinstance(parsed, dict):
            raise CLIError('--filter must be a JSON object, e.g. \'{"kind": "preference"}\'')
        filt = parsed
    if a.query and ctx.store.index_config is None:
        ctx.warn("no index configured (--embed none): --query is ignored, results are newest first")
    items = ctx.store.search(prefix, query=a.query or None, filter=filt, limit=a.limit, offset=a.offset)
    if ctx.json:
        ctx.emit([_item_json(i) for i in items])
        return EXIT_OK
    if not items:
        matching = " matching the filter" if filt else ""
        ctx.warn(f"no items under {format_namespace(prefix)}{matching} in {ctx.where}{_empty_hint(ctx)}")
        return EXIT_OK
    headers = ["namespace", "key", "score", "updated", "value"] if a.query else ["namespace", "key", "updated", "value"]
    rows = []
    for i in items:
        row = [format_namespace(i.namespace), i.key]
        if a.query:
            row.append("-" if i.score is None else f"{i.score:.3f}")
        row += [_when(i.updated_at), dumps(i.value)]
        rows.append(row)
    ctx.print(format_table(headers, rows))
    if len(items) == a.limit:
        ctx.warn(f"showing {len(items)} items from offset {a.offset}; more may follow (--offset {a.offset + a.limit})")
    return EXIT_OK


def cmd_ls(ctx: Ctx) -> int:
    a = ctx.args
    prefix = parse_namespace(a.prefix, what="--prefix", allow_empty=True) if a.prefix else None
    suffix = parse_namespace(a.suffix, what="--suffix", allow_empty=True) if a.suffix else None
    if a.max_depth is not None and a.max_depth < 1:
        raise CLIError(f"--max-depth must be at least 1, got {a.max_depth}")
    found = ctx.store.list_namespaces(
        prefix=prefix or None, suffix=suffix or None, max_depth=a.max_depth, limit=a.limit, offset=a.offset
    )
    if ctx.json:
        ctx.emit([list(ns) for ns in found])
        return EXIT_OK
    for ns in found:
        ctx.print(format_namespace(ns))
    if not found:
        ctx.warn(f"no namespaces found in {ctx.where}{_empty_hint(ctx)}")
    elif len(found) == a.limit:
        ctx.warn(f"showing {len(found)} namespaces; more may follow (--offset {a.offset + a.limit})")
    return EXIT_OK


# --------------------------------------------------------------------------- export / import


def _export_filter(prefix: tuple[str, ...], now: datetime) -> dict[str, Any]:
    clauses = [c for c in (prefix_filter(prefix), not_expired(now)) if c]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def export_line(doc: Mapping[str, Any], index: Literal[False] | list[str] | None = None) -> str:
    """One exported item as a JSON line (what ``import`` reads).

    ``index`` is the item's own embedding choice, kept so ``import`` does the same:
    ``False`` for an item put with ``index=False``, a list for per-item fields.
    """
    record: dict[str, Any] = {
        "namespace": list(doc["namespace"]),
        "key": doc["key"],
        "value": doc["value"],
        "created_at": _iso(doc.get("created_at")),
        "updated_at": _iso(doc.get("updated_at")),
    }
    if doc.get("ttl_minutes") is not None:
        record["ttl"] = float(doc["ttl_minutes"])
    if index is not None:
        record["index"] = index
    return dumps(record)


_MULTI_TEXT = re.compile(r"\.\d+$")


def _item_indexes(store: MongoStore, docs: Sequence[Mapping[str, Any]]) -> list[Literal[False] | list[str] | None]:
    """Each item's embedding choice, read back from what was stored (one vectors query per chunk).

    No ``vectors`` on an item of an indexed store: it was put with ``index=False`` (or had
    no text at the fields). Vectors at other fields than the store's: per-item ``index=[...]``.
    """
    if store.vectors_collection is None or store.index_config is None:
        return [None] * len(docs)
    default = set(store.index_config.get("fields") or ["$"])
    fields: dict[Any, set[str]] = {}
    ids = [d["_id"] for d in docs if d.get("vectors")]
    if ids:
        for v in store.vectors_collection.find({"item_id": {"$in": ids}}, {"item_id": 1, "field": 1}):
            fields.setdefault(v["item_id"], set()).add(_MULTI_TEXT.sub("", str(v.get("field", ""))))
    out: list[Literal[False] | list[str] | None] = []
    for d in docs:
        if not d.get("vectors"):
            out.append(False)
            continue
        got = fields.get(d["_id"])
        out.append(None if not got or got == default else sorted(got))
    return out


def cmd_export(ctx: Ctx) -> int:
    prefix = parse_namespace(ctx.args.prefix, what="namespace prefix", allow_empty=True)
    filt = _export_filter(prefix, datetime.now(timezone.utc))
    total = ctx.store.collection.count_documents(filt)
    projection = {
        "namespace": 1, "key": 1, "value": 1, "created_at": 1, "updated_at": 1, "ttl_minutes": 1, "vectors": 1,
    }
    target = ctx.args.out
    n = 0
    progress = Progress("export", total, enabled=None if ctx.progress else False)
    with contextlib.ExitStack() as stack:
        to_stdout = target in (None, "-")
        sink: IO[str] = sys.stdout if to_stdout else stack.enter_context(open(target, "w", encoding="utf-8"))
        # A cursor, read in batches: the collection is never loaded as a whole.
        cursor = ctx.store.collection.find(filt, projection).sort("_id", 1).batch_size(1000)
        stack.callback(cursor.close)
        chunk: list[Mapping[str, Any]] = []

        def flush() -> None:
            nonlocal n
            for doc, index in zip(chunk, _item_indexes(ctx.store, chunk), strict=True):
                sink.write(export_line(doc, index) + "\n")
            n += len(chunk)
            chunk.clear()
            progress.update(n)

        for doc in cursor:
            chunk.append(doc)
            if len(chunk) >= 500:
                flush()
        flush()
    progress.close()
    where = "stdout" if target in (None, "-") else target
    summary = {"ok": True, "exported": n, "prefix": list(prefix), "out": where, "store": ctx.where}
    if ctx.json and not to_stdout:
        ctx.emit(summary)  # the one JSON document on stdout
    elif ctx.json:
        ctx.err.write(dumps(summary) + "\n")  # stdout holds the JSON Lines themselves
    else:
        ctx.warn(f"exported {n:,} item(s) under {format_namespace(prefix)} from {ctx.where} to {where}")
    return EXIT_OK


@dataclass
class _Line:
    number: int
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    ttl: float | None
    created_at: datetime | None
    updated_at: datetime | None
    index: Literal[False] | list[str] | None = None

    def op(self) -> PutOp:
        return PutOp(self.namespace, self.key, self.value, index=self.index, ttl=self.ttl)


@dataclass
class ImportSummary:
    lines: int = 0
    written: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, number: int, reason: str, error: str) -> None:
        self.rejected.append({"line": number, "reason": reason, "error": error})

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "written": self.written,
            "rejected": len(self.rejected),
            "by_reason": dict(Counter(r["reason"] for r in self.rejected)),
            "rejections": self.rejected,
        }


class _Rejected(Exception):
    def __init__(self, reason: str, error: str) -> None:
        super().__init__(error)
        self.reason = reason
        self.error = error


def _timestamp(record: Mapping[str, Any], name: str) -> datetime | None:
    raw = record.get(name)
    if raw is None:
        return None
    if isinstance(raw, datetime):
        return as_utc(raw)
    if isinstance(raw, str):
        try:
            return as_utc(datetime.fromisoformat(raw.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise _Rejected("bad timestamp", f"{name} must be an ISO 8601 date, got {raw!r}")


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Rejected("bad text", f"{what} holds a lone surrogate (not valid Unicode): {text!r}") from None


def _surrogates(obj: Any, where: str, depth: int = 0) -> None:
    """Reject strings BSON cannot encode (lone surrogates), naming where; no recursion limit surprises."""
    stack: list[tuple[Any, str]] = [(obj, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            _check_text(item, at)
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str):
                    _check_text(k, f"{at}: a field name")
                stack.append((v, f"{at}.{k}"))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))


def parse_import_line(number: int, raw: bytes) -> _Line | None:
    """Parse and check one line of an export; ``None`` for a blank line. Raises ``_Rejected``."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise _Rejected("bad JSON", f"not UTF-8: {exc}") from None
    if number == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte-order mark, as some editors write
    if not text:
        return None
    try:
        record = loads_json(text)
    except _NotFinite as exc:
        raise _Rejected("bad number", f"the line holds {exc}") from None
    except ValueError as exc:
        raise _Rejected("bad JSON", _one_line(exc)) from None
    if not isinstance(record, dict):
        raise _Rejected("bad record", f"expected a JSON object, got {type(record).__name__}")
    ns_raw = record.get("namespace")
    if isinstance(ns_raw, str):
        try:
            namespace = parse_namespace(ns_raw)
        except CLIError as exc:
            raise _Rejected("bad namespace", str(exc)) from None
    elif isinstance(ns_raw, list) and all(isinstance(label, str) for label in ns_raw):
        namespace = tuple(ns_raw)
    else:
        raise _Rejected("bad namespace", f"namespace must be a list of strings, got {ns_raw!r}")
    for label in namespace:
        _check_text(label, "a namespace label")
    try:
        _validate_namespace(namespace)
    except InvalidNamespaceError as exc:
        raise _Rejected("bad namespace", _one_line(exc)) from None
    key = record.get("key")
    if not isinstance(key, str):
        raise _Rejected("bad key", f"key must be a string, got {key!r}")
    _check_text(key, "the key")
    value = record.get("value")
    try:
        _surrogates(value, "the value")
        value = check_value(namespace, key, value)
    except InvalidValueError as exc:
        raise _Rejected("invalid value", exc.reason) from None
    except RecursionError:
        raise _Rejected("invalid value", "nested too deeply") from None
    ttl = record.get("ttl")
    if ttl is not None:
        try:
            ttl = _check_ttl(ttl, "ttl")
        except CLIError as exc:
            raise _Rejected("bad ttl", str(exc)) from None
    index = record.get("index")
    if index is not None and index is not False:
        if not isinstance(index, list) or not index or not all(isinstance(f, str) for f in index):
            raise _Rejected("bad index", f"index must be false or a non-empty list of field paths, got {index!r}")
        try:
            index = [check_field_path(f, "index: the path") for f in index]
        except ValueError as exc:
            raise _Rejected("bad index", str(exc)) from None
    return _Line(
        number,
        namespace,
        key,
        value,
        None if ttl is None else float(ttl),
        _timestamp(record, "created_at"),
        _timestamp(record, "updated_at"),
        index,
    )


def _write_batch(ctx: Ctx, batch: list[_Line], summary: ImportSummary, keep_timestamps: bool) -> None:
    """Upsert one batch; per-item server rejections are recorded, the rest of the batch lands."""
    if not batch:
        return
    ops = [b.op() for b in batch]
    failed: dict[tuple[tuple[str, ...], str], str] = {}
    try:
        ctx.store.batch(ops)
    except WriteError as exc:
        failed = {(ns, key): msg for ns, key, msg in exc.failures}
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError):
        # Checked per line already; if the store still refuses one, find it one by one:
        # one bad line never costs the good ones of its batch.
        for b in list(batch):
            try:
                ctx.store.batch([b.op()])
            except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, WriteError) as exc:
                failed[(b.namespace, b.key)] = _one_line(exc)
    landed = []
    for b in batch:
        msg = failed.get((b.namespace, b.key))
        if msg is None:
            landed.append(b)
        else:
            summary.reject(b.number, "rejected by server", msg)
    summary.written += len(landed)
    if keep_timestamps:
        stamps = []
        for b in landed:
            dates = {k: v for k, v in (("created_at", b.created_at), ("updated_at", b.updated_at)) if v is not None}
            if dates:
                stamps.append(UpdateOne({"_id": item_id(b.namespace, b.key)}, {"$set": dates}))
        if stamps:
            ctx.store.collection.bulk_write(stamps, ordered=False)


def cmd_import(ctx: Ctx) -> int:
    a = ctx.args
    if a.batch_size < 1:
        raise CLIError(f"--batch-size must be at least 1, got {a.batch_size}")
    source = a.file
    summary = ImportSummary()
    with contextlib.ExitStack() as stack:
        stream: IO[bytes]
        total: int | None = None
        if source == "-":
            stream = sys.stdin.buffer
        else:
            path = Path(source)
            if not path.is_file():
                raise CLIError(f"no such file: {source}")
            total = path.stat().st_size
            stream = stack.enter_context(path.open("rb"))
        progress = Progress("import", total, enabled=None if ctx.progress else False)
        stack.callback(progress.close)
        batch: list[_Line] = []
        read = 0
        try:
            for number, raw in enumerate(stream, start=1):
                summary.lines = number
                read += len(raw)
                try:
                    parsed = parse_import_line(number, raw)
                except _Rejected as rej:
                    summary.reject(number, rej.reason, rej.error)
                    parsed = None
                if parsed is not None:
                    batch.append(parsed)
                if len(batch) >= a.batch_size:
                    _write_batch(ctx, batch, summary, a.keep_timestamps)
                    batch = []
                progress.update(read if total is not None else number, suffix=f"{number:,} lines")
            _write_batch(ctx, batch, summary, a.keep_timestamps)
            progress.update(read if total is not None else summary.lines, force=True)
        except KeyboardInterrupt:
            progress.close()
            ctx.warn(
                f"import interrupted at line {summary.lines:,}: {summary.written:,} item(s) written, "
                f"{len(summary.rejected):,} line(s) rejected so far; rerun the same command to finish "
                "(import is idempotent: upserts by namespace and key)"
            )
            raise
        except (PyMongoError, MongoStoreError) as exc:
            raise CLIError(
                f"import stopped at line {summary.lines} after writing {summary.written:,} item(s): "
                f"{_one_line(exc)}. Rerun the same command: import is idempotent (upserts by namespace and key)",
                EXIT_FAILURE,
            ) from exc
    result = summary.as_dict()
    if ctx.json:
        ctx.emit(result)
    else:
        ctx.print(
            f"import: {summary.lines:,} line(s) read, {summary.written:,} item(s) written, "
            f"{len(summary.rejected):,} rejected"
        )
        for r in summary.rejected[:20]:
            ctx.print(f"  line {r['line']}: {r['reason']}: {r['error']}")
        if len(summary.rejected) > 20:
            ctx.print(f"  ... and {len(summary.rejected) - 20} more (--json lists them all)")
        if summary.rejected:
            ctx.print("rejected by reason: " + ", ".join(f"{k} {v}" for k, v in result["by_reason"].items()))
    if summary.rejected:
        ctx.warn(f"{len(summary.rejected)} line(s) rejected; every other line was written")
        return EXIT_USAGE
    return EXIT_OK


# --------------------------------------------------------------------------- reindex


def reindex_token(doc_id: str) -> str:
    """A printable, unambiguous form of an item ``_id`` (it holds a NUL): JSON string escapes."""
    return json.dumps(doc_id)[1:-1]


def parse_reindex_token(token: str) -> str:
    try:
        value = json.loads('"' + token + '"')
    except ValueError:
        raise CLIError(f"--after {token!r} is not a checkpoint printed by reindex") from None
    if not isinstance(value, str) or "\x00" not in value:
        raise CLIError(f"--after {token!r} is not a checkpoint printed by reindex")
    return value


def cmd_reindex(ctx: Ctx) -> int:
    a = ctx.args
    store = ctx.store
    if store.vectors_collection is None or store.index_config is None:
        raise CLIError("reindex needs an index: choose an embedder with --embed or MONGOSTORE_EMBED")
    if a.batch_size < 1:
        raise CLIError(f"--batch-size must be at least 1, got {a.batch_size}")
    prefix = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    after = parse_reindex_token(a.after) if a.after else None
    store.setup()  # the vector index must match the current dims before vectors are written
    now = datetime.now(timezone.utc)
    clauses = [c for c in (prefix_filter(prefix), not_expired(now)) if c]
    if not a.all:
        clauses.append({"vectors": {"$exists": True}})
    base: dict[str, Any] = {"$and": clauses}
    total = store.collection.count_documents(base if after is None else {"$and": [*clauses, {"_id": {"$gt": after}}]})
    projection = {"_id": 1, "namespace": 1, "key": 1, "value": 1, "updated_at": 1, "expires_at": 1, "ttl_minutes": 1}
    progress = Progress("reindex", total, enabled=None if ctx.progress else False)
    done = 0
    batches = 0
    last = after
    logged = time.monotonic()
    try:
        while True:
            filt = base if last is None else {"$and": [*clauses, {"_id": {"$gt": last}}]}
            docs = list(store.collection.find(filt, projection).sort("_id", 1).limit(a.batch_size))
            if not docs:
                break
            now = datetime.now(timezone.utc)
            ids = [d["_id"] for d in docs]
            ops = []
            restore = []
            for d in docs:
                ttl: float | None = None
                if d.get("expires_at") is not None:
                    # Keep the item's expiry where it was (the put computes it from now).
                    ttl = max((as_utc(d["expires_at"]) - now) / timedelta(minutes=1), 1e-6)
                ops.append(PutOp(tuple(d["namespace"]), d["key"], d["value"], ttl=ttl))
                fix: dict[str, Any] = {"updated_at": d["updated_at"]}
                if d.get("ttl_minutes") is not None:
                    fix["ttl_minutes"] = d["ttl_minutes"]
                restore.append(UpdateOne({"_id": d["_id"]}, {"$set": fix}))
            # The store re-embeds only texts whose hash changed; drop the old vectors so
            # every text is embedded again with the current model.
            store.vectors_collection.delete_many({"item_id": {"$in": ids}})
            store.batch(ops)
            # A reindex is not an update: keep updated_at (and the original ttl_minutes).
            store.collection.bulk_write(restore, ordered=False)
            done += len(docs)
            batches += 1
            last = ids[-1]
            progress.update(done)
            if not progress.enabled and time.monotonic() - logged >= CHECKPOINT_EVERY:
                # No bar (a job log): a resumable checkpoint line now and then.
                logged = time.monotonic()
                ctx.warn(f"reindex: {done:,}/{total:,} item(s); checkpoint --after {shlex.quote(reindex_token(last))}")
    except (KeyboardInterrupt, PyMongoError, MongoStoreError) as exc:
        progress.close()
        hint = f" --after {shlex.quote(reindex_token(last))}" if last is not None else ""
        ctx.warn(f"reindex stopped after {done:,} item(s); resume with: mongostore reindex{hint} (same options)")
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CLIError(f"reindex failed: {_one_line(exc)}", EXIT_FAILURE) from exc
    progress.close()
    result = {
        "reindexed": done,
        "batches": batches,
        "prefix": list(prefix),
        "last": reindex_token(last) if last is not None else None,
        "embedder": ctx.embedder,
    }
    if ctx.json:
        ctx.emit(result)
    else:
        ctx.print(f"reindexed {done:,} item(s) under {format_namespace(prefix)} in {batches} batch(es)")
        if last is not None:
            ctx.print(f"checkpoint: --after {shlex.quote(reindex_token(last))}")
    return EXIT_OK


# --------------------------------------------------------------------------- stats / report


def _plain(obj: Any) -> Any:
    """Dataclass output as JSON-ready data: dates as ISO strings, tuples as lists."""
    if isinstance(obj, datetime):
        return _iso(obj)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _collect(ctx: Ctx) -> Any:
    from mongostore.tools.analytics import collect_reports

    a = ctx.args
    if a.stale_days <= 0:
        raise CLIError(f"--stale-days must be positive, got {a.stale_days:g}")
    if a.limit < 1:
        raise CLIError(f"--limit must be at least 1, got {a.limit}")
    prefix = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    return collect_reports(
        ctx.store,
        prefix,
        level=a.level,
        period=a.period,
        stale_days=a.stale_days,
        breakdown_field=None if a.no_breakdown else a.breakdown,
        limit=a.limit,
    )


def cmd_stats(ctx: Ctx) -> int:
    from mongostore.tools.report import render_text

    reports = _collect(ctx)
    if ctx.json:
        ctx.emit({**_plain(asdict(reports)), "store": ctx.where})
    else:
        ctx.print(f"store: {ctx.where}")
        ctx.out.write(render_text(reports))
        if reports.namespaces.total_items == 0:
            ctx.warn(f"no items in {ctx.where}{_empty_hint(ctx)}")
    return EXIT_OK


def cmd_report(ctx: Ctx) -> int:
    from mongostore.tools.report import render_html

    reports = _collect(ctx)
    page = render_html(reports, title=ctx.args.title)
    target = ctx.args.out
    if target == "-":
        ctx.out.write(page)
        return EXIT_OK
    Path(target).write_text(page, encoding="utf-8")
    if ctx.json:
        ctx.emit({"ok": True, "out": target, "bytes": len(page.encode("utf-8"))})
    else:
        ctx.print(f"wrote {target} ({len(page.encode('utf-8')):,} bytes): open it in a browser, it needs no network")
    return EXIT_OK


# --------------------------------------------------------------------------- demo


def cmd_demo(ctx: Ctx) -> int:
    from mongostore.tools.demo import render_demo, run_demo

    embed = (ctx.store.index_config or {}).get("embed")
    result = run_demo(
        ctx.store,
        user_id=ctx.args.user,
        store_label=ctx.settings.label() if not ctx.injected else "the given store",
        embedder=ctx.embedder,
        semantic=not isinstance(embed, HashingEmbeddings),
    )
    if ctx.json:
        ctx.emit(result.as_dict())
    else:
        render_demo(result, ctx.out)
        if ctx.settings.in_memory and not ctx.injected:
            ctx.print("The in-memory store is gone now. Keep the memories in the local store, or on a server:")
            ctx.print("  mongostore demo --uri mongostore-local://")
            ctx.print("  mongostore demo --uri mongodb://localhost:27017/?directConnection=true")
        else:
            ctx.print(
                f"The memories stay in database {ctx.settings.db!r}; look at them with:\n"
                f"  mongostore --db {ctx.settings.db} search {result.user_id}.memories --query 'food'"
            )
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def _at_least_one(text: str) -> int:
    value = _positive_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


#: The connection and output options every command takes (listed once, in ``mongostore --help``).
COMMON_OPTIONS = "--uri --data-dir --db --collection --embed --dims --fields --timeout --json --no-progress"


def _common(parser: argparse.ArgumentParser, *, sub: bool) -> None:
    """Connection and output options; accepted before or after the command name.

    Shown once, in ``mongostore --help``; each command's ``--help`` names them in one line.
    """

    def d(value: Any) -> Any:
        return argparse.SUPPRESS if sub else value

    def h(text: str) -> str:
        return argparse.SUPPRESS if sub else text

    g = parser.add_argument_group("connection (also after the command)") if not sub else parser
    g.add_argument(
        "--uri",
        default=d(None),
        help=h(f"MongoDB URI (default: ${ENV_URI}; none: the local store; mongomock:// is in memory)"),
    )
    g.add_argument(
        "--data-dir",
        default=d(None),
        metavar="DIR",
        help=h(f"the local store's directory, used without a URI (default: ${ENV_DATA_DIR} or {_default_dir_text()})"),
    )
    g.add_argument("--db", default=d(None), help=h("database (default: $MONGOSTORE_DB or mongostore)"))
    g.add_argument(
        "--collection", default=d(None), help=h("items collection (default: $MONGOSTORE_COLLECTION or memories)")
    )
    g.add_argument(
        "--timeout",
        type=_positive_float,
        default=d(DEFAULT_TIMEOUT),
        help=h("seconds to wait for the server (default 10)"),
    )
    e = parser.add_argument_group("embedding (also after the command)") if not sub else parser
    e.add_argument(
        "--embed",
        default=d(None),
        help=h(
            "minilm, hashing, none, or a LangChain provider string like openai:text-embedding-3-small "
            "(default: $MONGOSTORE_EMBED, else minilm when installed, else hashing)"
        ),
    )
    e.add_argument(
        "--dims", type=_positive_int, default=d(None), help=h("vector size (default: $MONGOSTORE_DIMS or the model's)")
    )
    e.add_argument(
        "--fields",
        default=d(None),
        help=h("comma-separated value paths to embed, e.g. text,tags[*] (default: $MONGOSTORE_FIELDS or $)"),
    )
    o = parser.add_argument_group("output (also after the command)") if not sub else parser
    o.add_argument(
        "--json", action="store_true", default=d(False), help=h("one JSON document on stdout, errors included")
    )
    o.add_argument("--no-progress", action="store_true", default=d(False), help=h("never draw a progress bar"))


def _default_dir_text() -> str:
    from mongostore._embedded import default_data_dir

    home = str(Path.home())
    text = str(default_data_dir({}))
    return "~" + text[len(home) :] if text.startswith(home) else text


class _UsageError(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line plus the usage hint, exit 2 (see main)
        raise _UsageError(self.prog, message)


#: ``mongostore.demo.DEMO_DB``, repeated so that commands other than ``demo`` never import
#: the demo (and LangGraph's graph machinery): seconds off every command's start.
DEMO_DB = "mongostore_demo"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="A LangGraph long-term-memory store on MongoDB: demo, admin and data tools.",
        epilog="Namespaces are dotted: users.alice.memories = ('users', 'alice', 'memories'). "
        "Without --uri / MONGODB_URI every command runs on the local store, a file under --data-dir that is "
        "kept between commands (`mongostore doctor` says where).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common(parser, sub=False)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def sub(name: str, help_: str, fn: Callable[[Ctx], int], epilog: str = "") -> argparse.ArgumentParser:
        p = subs.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=(epilog + " " if epilog else "")
            + f"Also takes the connection, embedding and output options ({COMMON_OPTIONS}): see `{PROG} --help`.",
        )
        _common(p, sub=True)
        p.set_defaults(func=fn)
        return p

    p = sub(
        "demo",
        "run the LangGraph memory demo (two threads, one user, semantic recall)",
        cmd_demo,
        "Without --uri it runs on a temporary in-memory store; with one, in database "
        f"{DEMO_DB!r} unless --db or $MONGOSTORE_DB says otherwise.",
    )
    p.add_argument("--user", default="alice", help="the user id whose memories the demo writes (default alice)")

    sub("setup", "create the indexes (and the Atlas vector index); safe to run on every deploy", cmd_setup)
    sub("doctor", "server version, vector search and search path, index status, item and vector counts", cmd_doctor)

    key_help = "the item's key within the namespace (a key starting with - goes after --)"
    p = sub(
        "put", "store one item (an upsert)", cmd_put, f"A key that starts with -: {PROG} put users.alice -- -k1 '{{}}'."
    )
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)
    p.add_argument("value", help="a JSON object, or - to read it from stdin")
    p.add_argument("--ttl", type=float, help="expire after this many minutes")
    grp = p.add_mutually_exclusive_group()
    grp.add_argument("--no-index", action="store_true", help="do not embed this item")
    grp.add_argument("--index", help="comma-separated fields to embed for this item (instead of --fields)")

    p = sub("get", "show one item", cmd_get)
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)

    p = sub("rm", "delete one item (and its vectors)", cmd_rm)
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)
    p.add_argument("-f", "--force", action="store_true", help="succeed even if the item does not exist")

    p = sub("search", "list or semantically search items under a namespace prefix", cmd_search)
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("-q", "--query", help="natural-language query (semantic search)")
    p.add_argument("--filter", help='JSON filter on value fields, e.g. \'{"kind": "preference"}\'')
    p.add_argument("--limit", type=_at_least_one, default=10, help="at most this many items (default 10)")
    p.add_argument("--offset", type=_positive_int, default=0, help="skip this many items first")

    p = sub("ls", "list namespaces", cmd_ls)
    p.add_argument("--prefix", help="only namespaces starting with this (dotted; * matches one label)")
    p.add_argument("--suffix", help="only namespaces ending with this (dotted; * matches one label)")
    p.add_argument("--max-depth", type=_positive_int, help="truncate namespaces to this many labels")
    p.add_argument("--limit", type=_at_least_one, default=100, help="at most this many (default 100)")
    p.add_argument("--offset", type=_positive_int, default=0)

    p = sub("export", "write items as JSON Lines (streamed with a cursor)", cmd_export)
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("-o", "--out", help="file to write (default: stdout)")

    p = sub("import", "read JSON Lines written by export (batched, idempotent upserts)", cmd_import)
    p.add_argument("file", help="a .jsonl file, or - for stdin")
    p.add_argument("--batch-size", type=_positive_int, default=500, help="lines per write (default 500)")
    p.add_argument(
        "--keep-timestamps",
        action="store_true",
        help="set created_at/updated_at from the file (default: the import time, as for any put)",
    )

    p = sub("reindex", "re-embed items with the current embedder (batched, resumable)", cmd_reindex)
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("--batch-size", type=_positive_int, default=100, help="items per batch (default 100)")
    p.add_argument("--after", help="resume after this checkpoint (printed by an earlier run)")
    p.add_argument("--all", action="store_true", help="also embed items that have no vectors yet")

    _add_analytics_commands(sub)
    return parser


def _add_analytics_commands(sub: Callable[[str, str, Callable[[Ctx], int]], argparse.ArgumentParser]) -> None:
    """``stats`` and ``report`` (see ``mongostore.analytics`` / ``mongostore.report``)."""
    for name, help_, fn in (
        ("stats", "counts per namespace, growth, stale items, TTL outlook, breakdown by a value field", cmd_stats),
        ("report", "the same reports as one self-contained HTML page (inline SVG, no scripts)", cmd_report),
    ):
        p = sub(name, help_, fn)
        p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
        p.add_argument(
            "--level", type=_positive_int, help="count namespaces by the label at this level (default: the next)"
        )
        p.add_argument(
            "--period", choices=["day", "week", "month"], default="week", help="growth period (default week)"
        )
        p.add_argument("--stale-days", type=float, default=30.0, help="stale = not updated for this many days (30)")
        grp = p.add_mutually_exclusive_group()
        grp.add_argument("--breakdown", default="kind", help="value field to break items down by (default kind)")
        grp.add_argument("--no-breakdown", action="store_true", help="leave the value breakdown out")
        p.add_argument("--limit", type=_positive_int, default=50, help="rows per table (default 50)")
        if name == "report":
            p.add_argument("-o", "--out", required=True, help="the HTML file to write (- for stdout)")
            p.add_argument("--title", help="page title")


# --------------------------------------------------------------------------- main


def _one_line(exc: BaseException) -> str:
    """The error as one line: every line of its message joined, cut at a sentence end if long."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ServerSelectionTimeoutError):
        text = text.split(", Timeout:", 1)[0].split(" (configured timeouts:", 1)[0]
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(text) <= 600:
        return text
    cut = text.rfind(". ", 0, 600)
    return text[: cut + 1] if cut > 200 else text[:599] + "…"


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")


def _fail(json_mode: bool, message: str, code: int) -> int:
    """An error: one line on stderr and, with --json, one JSON document on stdout."""
    _error(message)
    if json_mode:
        with contextlib.suppress(Exception):
            sys.stdout.write(dumps({"ok": False, "error": message, "exit_code": code}) + "\n")
            sys.stdout.flush()
    return code


def _dash_hint(argv: Sequence[str], message: str) -> str:
    """A hint when a positional that starts with ``-`` was taken for an option."""
    if "unrecognized arguments" not in message and "the following arguments are required" not in message:
        return ""
    dashed = [a for a in argv if a.startswith("-") and not a.startswith("--") and len(a) > 1 and a not in ("-f",)]
    if not dashed or "--" in argv:
        return ""
    return f"; a key or value starting with - goes after --, e.g. {PROG} put users.alice -- {dashed[0]} '{{...}}'"


def main(argv: Sequence[str] | None = None, *, store: MongoStore | None = None) -> int:
    """Run the CLI; returns the exit status (the console script exits with it).

    ``store`` runs every command against that store instead of opening one from
    ``--uri`` / ``MONGODB_URI`` (for tests and for embedding the CLI).
    """
    parser = build_parser()
    arglist = list(argv) if argv is not None else sys.argv[1:]
    json_mode = "--json" in arglist[: arglist.index("--")] if "--" in arglist else "--json" in arglist
    try:
        args = parser.parse_args(arglist)
    except _UsageError as exc:
        message = exc.message + _dash_hint(arglist, exc.message)
        sys.stderr.write(f"{exc.prog}: error: {message} (see {exc.prog} --help)\n")
        if json_mode:
            sys.stdout.write(dumps({"ok": False, "error": message, "exit_code": EXIT_USAGE}) + "\n")
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        _error("no command given (see the list above)")
        if json_mode:
            sys.stdout.write(dumps({"ok": False, "error": "no command given", "exit_code": EXIT_USAGE}) + "\n")
        return EXIT_USAGE
    with warnings.catch_warnings():
        # Library warnings (e.g. pymongo's "Unknown option" for a URI) as one line each.
        warnings.showwarning = _show_warning
        return _run(args, store)


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    sys.stderr.write(f"{PROG}: warning: {_one_line(Exception(str(message)))}\n")


def _note(text: str) -> None:
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


def _run(args: argparse.Namespace, store: MongoStore | None) -> int:
    debug = bool(os.environ.get("MONGOSTORE_DEBUG"))
    settings: StoreSettings | None = None
    json_mode = bool(getattr(args, "json", False))
    try:
        if args.command == "demo":
            # The demo's memories are {"text", "kind"}: embed the sentence, in a database of its own.
            settings = _settings(args, db_default=DEMO_DB, fields_default=("text",))
            if settings.uri is None:
                settings = replace(settings, uri="mongomock://")  # the demo stays a throwaway by default
        else:
            settings = _settings(args)
        progress = not args.no_progress
        if store is not None:
            ctx = Ctx(args, store, settings, _describe_injected(store), args.json, progress, injected=True)
            return int(args.func(ctx))
        if args.command != "demo":
            if settings.local:
                _note(f"{settings.where()} (no --uri or {ENV_URI}: kept between commands)")
            elif settings.in_memory:
                _note(
                    "using the embedded in-memory store (mongomock): it starts empty and is lost when this "
                    "command exits; leave out --uri for the local store, or set it to a real server"
                )
        if args.command == "put" and args.value == "-":
            args.stdin_value = sys.stdin.read()  # before the store's lock: the writer may hold it
        whole = args.command not in PER_OPERATION_COMMANDS
        with _open(settings, args.timeout, _note, whole_command=whole) as (opened, description):
            ctx = Ctx(args, opened, settings, description, args.json, progress)
            return int(args.func(ctx))
    except CLIError as exc:
        return _fail(json_mode, str(exc), exc.code)
    except KeyboardInterrupt:
        return _fail(json_mode, "interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (e.g. `mongostore export | head`): stop quietly.
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except ServerUnreachableError as exc:
        return _fail(json_mode, str(exc), EXIT_FAILURE)
    except ServerSelectionTimeoutError as exc:
        where = redact_uri(settings.uri) if settings and settings.uri else "the server"
        return _fail(json_mode, f"cannot reach MongoDB at {where} within {args.timeout:g}s: {_one_line(exc)}", 1)
    except PyMongoConfigurationError as exc:
        return _fail(json_mode, f"bad connection settings: {_one_line(exc)}", EXIT_USAGE)
    except WriteError as exc:
        return _fail(json_mode, _one_line(exc), EXIT_FAILURE)
    except ValueError as exc:
        # ValueError covers JSON errors, InvalidNamespaceError and our ValueError subclasses
        # (InvalidValueError, InvalidFilterError, ConfigurationError, PipelineError).
        if debug:
            traceback.print_exc()
        return _fail(json_mode, _one_line(exc), EXIT_USAGE)
    except (MongoStoreError, PyMongoError) as exc:
        if debug:
            traceback.print_exc()
        return _fail(json_mode, _one_line(exc), EXIT_FAILURE)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        return _fail(
            json_mode,
            f"unexpected {type(exc).__name__}: {_one_line(exc)} (set MONGOSTORE_DEBUG=1 for the traceback)",
            EXIT_FAILURE,
        )
