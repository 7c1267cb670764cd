"""``export`` and ``import``: JSON Lines out with a cursor, in with checked lines and batched upserts."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal

from langgraph.store.base import InvalidNamespaceError, PutOp
from pymongo import UpdateOne
from pymongo.errors import PyMongoError

from mongostore.core.codec import as_utc, check_value, item_id
from mongostore.core.plan import check_put_namespace
from mongostore.core.queries import all_of, not_expired, prefix_filter, shard_range_filter
from mongostore.errors import InvalidValueError, MongoStoreError, WriteError
from mongostore.store import MongoStore
from mongostore.tools.cli.connect import Ctx
from mongostore.tools.cli.items import _check_ttl
from mongostore.tools.cli.output import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    Progress,
    _iso,
    _NotFinite,
    dumps,
    format_namespace,
    loads_json,
    parse_namespace,
)
from mongostore.tools.settings import _one_line, check_field_path


def export_line(doc: Mapping[str, Any], index: Literal[False] | list[str] | None = None) -> str:
    """One exported item as a JSON line (what ``import`` reads), with the item's own embedding choice
    (``index``: ``False`` for an item put with ``index=False``, a list for per-item fields)."""
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
    """Each item's embedding choice, read back from what was stored (one vectors query per chunk):
    no ``vectors`` is ``index=False`` (or no text), vectors at other fields are a per-item list."""
    if store.vectors_collection is None or store.index_config is None:
        return [None] * len(docs)
    default = set(store.index_config.get("fields") or ["$"])
    fields: dict[Any, set[str]] = {}
    listed = {(d["_id"], h) for d in docs for h in d.get("vectors") or ()}
    if listed:
        # Only the vectors the items list: one no item lists (a re-put within VECTOR_GRACE) may be another field's.
        filt = {"item_id": {"$in": list({i for i, _ in listed})}, "text_hash": {"$in": list({h for _, h in listed})}}
        for v in store.vectors_collection.find(filt, {"item_id": 1, "field": 1, "text_hash": 1}):
            if (v["item_id"], v["text_hash"]) in listed:
                fields.setdefault(v["item_id"], set()).add(_MULTI_TEXT.sub("", str(v.get("field", ""))))
    out: list[Literal[False] | list[str] | None] = []
    for d in docs:
        if not d.get("vectors"):
            out.append(False)
            continue
        got = fields.get(d["_id"])
        out.append(None if not got or got == default else sorted(got))
    return out


def check_export(a: argparse.Namespace) -> None:
    """``export``'s prefix and ``-o`` file, before the store opens."""
    a.prefix_ns = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    if a.out not in (None, "-"):
        check_out_file(a.out, "-o")


def check_out_file(target: str, option: str) -> None:
    """A file a command will write: not a directory, in a directory that exists (checked before the store opens)."""
    path = Path(target)
    if path.is_dir():
        raise CLIError(f"{option} {target} is a directory: give a file name")
    if not path.absolute().parent.is_dir():
        raise CLIError(f"{option} {target}: no such directory {path.absolute().parent}")


def cmd_export(ctx: Ctx) -> int:
    prefix = ctx.args.prefix_ns
    # The prefix's _id range too: behind mongos the count and the cursor reach only its shards.
    filt = all_of([prefix_filter(prefix), shard_range_filter(prefix), not_expired(datetime.now(timezone.utc))])
    total = ctx.store.collection.count_documents(filt)
    fields = ("namespace", "key", "value", "created_at", "updated_at", "ttl_minutes", "vectors")
    target = ctx.args.out
    n = 0
    progress = Progress("export", total, enabled=None if ctx.progress else False)
    with contextlib.ExitStack() as stack:
        to_stdout = target in (None, "-")
        sink: IO[str] = sys.stdout if to_stdout else stack.enter_context(open(target, "w", encoding="utf-8"))
        # A cursor, read in batches: the collection is never loaded as a whole.
        cursor = ctx.store.collection.find(filt, dict.fromkeys(fields, 1)).sort("_id", 1).batch_size(1000)
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
    summary = {"exported": n, "prefix": list(prefix), "out": where}
    if ctx.json and not to_stdout:
        ctx.emit(summary)  # the one JSON document on stdout
    elif ctx.json:
        sys.stderr.write(dumps(ctx.envelope(summary)) + "\n")  # stdout holds the JSON Lines themselves
    else:
        ctx.warn(f"exported {n:,} item(s) under {format_namespace(prefix)} from {ctx.where} to {where}")
    return EXIT_OK


@dataclass
class _Line:
    number: int
    op: PutOp
    stamps: dict[str, datetime]  # the line's created_at / updated_at, when given

    @property
    def id(self) -> tuple[tuple[str, ...], str]:
        return self.op.namespace, self.op.key


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


def _surrogates(obj: Any, where: str) -> None:
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
    namespace = _record_namespace(record)
    key = record.get("key")
    if not isinstance(key, str):
        raise _Rejected("bad key", f"key must be a string, got {key!r}")
    _check_text(key, "the key")
    value = record.get("value")
    try:
        _surrogates(value, "the value")
        value, _ = check_value(namespace, key, value)
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
    stamps = {name: _timestamp(record, name) for name in ("created_at", "updated_at")}
    op = PutOp(namespace, key, value, index=_record_index(record), ttl=ttl)
    return _Line(number, op, {name: at for name, at in stamps.items() if at is not None})


def _record_namespace(record: Mapping[str, Any]) -> tuple[str, ...]:
    """A line's namespace: a list of labels, or a dotted string. Raises ``_Rejected``."""
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
        check_put_namespace(namespace)
    except InvalidNamespaceError as exc:
        raise _Rejected("bad namespace", _one_line(exc)) from None
    return namespace


def _record_index(record: Mapping[str, Any]) -> Literal[False] | list[str] | None:
    """A line's own embedding choice (``index``): absent, ``false`` or field paths. Raises ``_Rejected``."""
    index = record.get("index")
    if index is not None and index is not False:
        if not isinstance(index, list) or not index or not all(isinstance(f, str) for f in index):
            raise _Rejected("bad index", f"index must be false or a non-empty list of field paths, got {index!r}")
        try:
            index = [check_field_path(f, "index: the path") for f in index]
        except ValueError as exc:
            raise _Rejected("bad index", str(exc)) from None
    return index


def _write_batch(ctx: Ctx, batch: list[_Line], summary: ImportSummary, keep_timestamps: bool) -> None:
    """Upsert one batch; per-item server rejections are recorded, the rest of the batch lands."""
    if not batch:
        return
    failed: dict[tuple[tuple[str, ...], str], str] = {}
    try:
        ctx.store.batch([b.op for b in batch])
    except WriteError as exc:
        failed = {(ns, key): msg for ns, key, msg in exc.failures}
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError):
        # Checked per line already; if the store still refuses one, find it one by one:
        # one bad line never costs the good ones of its batch.
        for b in batch:
            try:
                ctx.store.batch([b.op])
            except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, WriteError) as exc:
                failed[b.id] = _one_line(exc)
    for b in batch:
        if b.id in failed:
            summary.reject(b.number, "rejected by server", failed[b.id])
    landed = [b for b in batch if b.id not in failed]
    summary.written += len(landed)
    stamps = [UpdateOne({"_id": item_id(*b.id)}, {"$set": b.stamps}) for b in landed if b.stamps]
    if keep_timestamps and stamps:
        ctx.store.collection.bulk_write(stamps, ordered=False)


def check_import(a: argparse.Namespace) -> None:
    """``import``'s file and ``--batch-size``, before the store opens."""
    if a.batch_size < 1:
        raise CLIError(f"--batch-size must be at least 1, got {a.batch_size}")
    if a.file != "-":
        path = Path(a.file)
        if path.is_dir():
            raise CLIError(f"{a.file} is a directory: give the .jsonl file that export wrote")
        if not path.is_file():
            raise CLIError(f"no such file: {a.file}")


def cmd_import(ctx: Ctx) -> int:
    a = ctx.args
    source = a.file
    summary = ImportSummary()
    with contextlib.ExitStack() as stack:
        stream: IO[bytes]
        total: int | None = None
        if source == "-":
            stream = sys.stdin.buffer
        else:
            path = Path(source)
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
                    summary.reject(number, rej.reason, str(rej))
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
    _print_import_summary(ctx, summary)
    if summary.rejected:
        ctx.warn(f"{len(summary.rejected)} line(s) rejected; every other line was written")
        return EXIT_USAGE
    return EXIT_OK


def _print_import_summary(ctx: Ctx, summary: ImportSummary) -> None:
    result = summary.as_dict()
    if ctx.json:
        ctx.emit(result)
        return
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
