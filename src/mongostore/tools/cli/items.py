"""The item commands: ``put``, ``get``, ``rm``, ``search``, ``ls``."""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    NOT_PROVIDED,
    GetOp,
    PutOp,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from mongostore.config import MAX_TTL_MINUTES
from mongostore.core.codec import as_utc, item_id
from mongostore.core.plan import check_op, check_put_namespace
from mongostore.tools.cli.connect import Ctx, _empty_hint
from mongostore.tools.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    CLIError,
    _iso,
    _item_json,
    _NotFinite,
    _when,
    dumps,
    format_namespace,
    format_table,
    loads_json,
    parse_namespace,
)
from mongostore.tools.settings import _one_line, split_fields


def _read_json_arg(text: str, what: str) -> Any:
    if text == "-":
        text = sys.stdin.read()
    try:
        return loads_json(text)
    except _NotFinite as exc:
        raise CLIError(f"{what} holds {exc}") from None
    except ValueError as exc:
        raise CLIError(f"{what} is not valid JSON: {_one_line(exc)}") from None


def check_put(a: argparse.Namespace) -> None:
    """``put``'s arguments, checked as the store checks a put, before the store opens: the namespace
    (LangGraph's rules), the value (JSON, an object, what BSON stores), ``--ttl``, ``--index``.
    ``-`` reads stdin here, before the local store's lock: the writer of a pipe may hold it."""
    a.ns = parse_namespace(a.namespace)
    value = _read_json_arg(a.value, "the value")
    if not isinstance(value, dict):
        raise CLIError(f'the value must be a JSON object, got {type(value).__name__}: e.g. \'{{"text": "hi"}}\'')
    index: Any = None
    if a.no_index:
        index = False
    elif a.index is not None:
        index = list(split_fields(a.index, "--index"))
    ttl = None if a.ttl is None else _check_ttl(a.ttl, "--ttl")
    check_put_namespace(a.ns)  # put()'s own rules: not empty, not rooted at "langgraph"
    check_op(PutOp(a.ns, a.key, value, index, ttl=ttl))  # labels, key, value, size: InvalidValueError
    a.put = (value, index, NOT_PROVIDED if ttl is None else ttl)


def cmd_put(ctx: Ctx) -> int:
    a = ctx.args
    namespace = a.ns
    value, index, ttl = a.put
    ctx.store.put(namespace, a.key, value, index=index, ttl=ttl)
    _note_unembedded(ctx, value, index)
    if ctx.json:
        ctx.emit({"namespace": list(namespace), "key": a.key})
    else:
        extra = f", expires in {a.ttl:g} min" if a.ttl is not None else ""
        ctx.print(f"stored {format_namespace(namespace)} / {a.key} in {ctx.where}{extra}")
    return EXIT_OK


def _note_unembedded(ctx: Ctx, value: dict[str, Any], index: Any) -> None:
    """Say so when a put's value has no text at the fields embedded (semantic search misses it)."""
    config = getattr(ctx.store, "index_config", None)
    if index is False or not config:
        return
    fields = index if index is not None else list(config.get("fields") or ["$"])
    if any(f == "$" or get_text_at_path(value, tokenize_path(f)) for f in fields):
        return
    ctx.warn(
        f"note: the value has no text at {','.join(fields)}, so it has no vector and semantic search "
        "will not find it (--fields $ embeds the whole value; --index a,b embeds other fields for this item)"
    )


def _check_ttl(ttl: Any, what: str) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise CLIError(f"{what} must be a positive number of minutes, got {ttl!r}")
    if ttl > MAX_TTL_MINUTES:
        raise CLIError(f"{what} of {ttl:g} minutes is past year 9999: leave the TTL out for an item that never expires")
    return float(ttl)


def check_item(a: argparse.Namespace) -> None:
    """``get`` and ``rm``: the namespace and key, checked before the store opens."""
    a.ns = parse_namespace(a.namespace)
    check_op(GetOp(a.ns, a.key))


def cmd_get(ctx: Ctx) -> int:
    namespace = ctx.args.ns
    # Looking at an item does not extend its life: no TTL refresh, so the expiry shown is the item's.
    item = ctx.store.get(namespace, ctx.args.key, refresh_ttl=False)
    if item is None:
        raise _not_found(ctx, namespace)
    ttl, expires_at = _item_ttl(ctx, namespace, ctx.args.key)
    if ctx.json:
        ctx.emit({"item": {**_item_json(item), "ttl": ttl, "expires_at": _iso(expires_at)}})
        return EXIT_OK
    ctx.print(f"namespace   {format_namespace(item.namespace)}")
    ctx.print(f"key         {item.key}")
    ctx.print(f"created_at  {_iso(item.created_at)}")
    ctx.print(f"updated_at  {_iso(item.updated_at)}")
    if ttl is None or expires_at is None:
        ctx.print("ttl         none: never expires")
    else:
        ctx.print(f"ttl         {ttl:g} min (each read that refreshes the TTL pushes the expiry this far ahead)")
        ctx.print(f"expires_at  {_iso(expires_at)} ({_from_now(expires_at)})")
    ctx.print("value")
    ctx.print(dumps(item.value, indent=2))
    return EXIT_OK


def _item_ttl(ctx: Ctx, namespace: tuple[str, ...], key: str) -> tuple[float | None, datetime | None]:
    """The item's TTL in minutes and its expiry, as stored (an ``Item`` carries neither)."""
    doc = ctx.store.collection.find_one({"_id": item_id(namespace, key)}, {"ttl_minutes": 1, "expires_at": 1})
    if doc is None or doc.get("expires_at") is None:
        return None, None
    minutes = doc.get("ttl_minutes")
    return (float(minutes) if minutes is not None else None), as_utc(doc["expires_at"])


def _from_now(when: datetime) -> str:
    seconds = (when - datetime.now(timezone.utc)).total_seconds()
    if seconds <= 0:
        return "expired: it is deleted at the next TTL sweep and no longer listed"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            amount = seconds / size
            return f"in {amount:.1f} {unit}{'s' if unit == 'day' and amount >= 2 else ''}"
    return f"in {seconds:.0f} s"


def _not_found(ctx: Ctx, namespace: tuple[str, ...], hint: str = "") -> CLIError:
    where = f"{ctx.where}{_empty_hint(ctx)}{hint}"
    return CLIError(f"no item {ctx.args.key!r} in namespace {format_namespace(namespace)} in {where}", EXIT_NOT_FOUND)


def cmd_rm(ctx: Ctx) -> int:
    namespace = ctx.args.ns
    existed = ctx.store.get(namespace, ctx.args.key, refresh_ttl=False) is not None
    if not existed and not ctx.args.force:
        raise _not_found(ctx, namespace, " (--force ignores this)")
    ctx.store.delete(namespace, ctx.args.key)
    if ctx.json:
        ctx.emit({"namespace": list(namespace), "key": ctx.args.key, "deleted": existed})
    else:
        done = "deleted" if existed else "nothing to delete at"
        ctx.print(f"{done} {format_namespace(namespace)} / {ctx.args.key} in {ctx.where}")
    return EXIT_OK


def check_search(a: argparse.Namespace) -> None:
    """``search``'s prefix and ``--filter`` (JSON, an object, operators the store takes), before the store opens."""
    a.prefix_ns = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    a.filter_obj = None
    if a.filter:
        try:
            parsed = json.loads(a.filter)
        except ValueError as exc:
            raise CLIError(f"--filter is not valid JSON: {_one_line(exc)}") from None
        if not isinstance(parsed, dict):
            raise CLIError('--filter must be a JSON object, e.g. \'{"kind": "preference"}\'')
        a.filter_obj = parsed
    check_op(SearchOp(a.prefix_ns, a.filter_obj, a.limit, a.offset, a.query or None))  # InvalidFilterError


def cmd_search(ctx: Ctx) -> int:
    a = ctx.args
    prefix, filt = a.prefix_ns, a.filter_obj
    if a.query and ctx.store.index_config is None:
        ctx.warn("no index configured (--embed none): --query is ignored, results are newest first")
    items = ctx.store.search(prefix, query=a.query or None, filter=filt, limit=a.limit, offset=a.offset)
    if ctx.json:
        ctx.emit({"items": [_item_json(i) for i in items]})
        return EXIT_OK
    if not items:
        matching = " matching the filter" if filt else ""
        ctx.warn(f"no items under {format_namespace(prefix)}{matching} in {ctx.where}{_empty_hint(ctx)}")
        return EXIT_OK
    rows = [[format_namespace(i.namespace), i.key, _when(i.updated_at), dumps(i.value)] for i in items]
    if a.query:  # a score column after the key
        for row, i in zip(rows, items, strict=True):
            row.insert(2, "-" if i.score is None else f"{i.score:.3f}")
    ctx.print(format_table(["namespace", "key", *(["score"] if a.query else []), "updated", "value"], rows))
    if len(items) == a.limit:
        ctx.warn(f"showing {len(items)} items from offset {a.offset}; more may follow (--offset {a.offset + a.limit})")
    return EXIT_OK


def check_ls(a: argparse.Namespace) -> None:
    """``ls``'s ``--prefix``, ``--suffix`` and ``--max-depth``, before the store opens."""
    a.prefix_ns = parse_namespace(a.prefix, what="--prefix", allow_empty=True) if a.prefix else None
    a.suffix_ns = parse_namespace(a.suffix, what="--suffix", allow_empty=True) if a.suffix else None
    if a.max_depth is not None and a.max_depth < 1:
        raise CLIError(f"--max-depth must be at least 1, got {a.max_depth}")


def cmd_ls(ctx: Ctx) -> int:
    a = ctx.args
    prefix, suffix = a.prefix_ns, a.suffix_ns
    found = ctx.store.list_namespaces(
        prefix=prefix or None, suffix=suffix or None, max_depth=a.max_depth, limit=a.limit, offset=a.offset
    )
    if ctx.json:
        ctx.emit({"namespaces": [list(ns) for ns in found]})
        return EXIT_OK
    for ns in found:
        ctx.print(format_namespace(ns))
    if not found:
        ctx.warn(f"no namespaces found in {ctx.where}{_empty_hint(ctx)}")
    elif len(found) == a.limit:
        ctx.warn(f"showing {len(found)} namespaces; more may follow (--offset {a.offset + a.limit})")
    return EXIT_OK
