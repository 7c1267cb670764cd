"""The admin commands: ``setup``, ``doctor``, ``reindex``."""

from __future__ import annotations

import argparse
import json
import shlex
import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from langgraph.store.base import PutOp
from pymongo import UpdateOne
from pymongo.errors import PyMongoError

from mongostore.core.codec import as_utc
from mongostore.core.queries import (
    VECTOR_GRACE,
    item_indexes,
    not_expired,
    prefix_filter,
    shard_range_filter,
    vector_indexes,
)
from mongostore.errors import MongoStoreError
from mongostore.store import MongoStore
from mongostore.tools.cli.connect import Ctx
from mongostore.tools.cli.output import EXIT_FAILURE, EXIT_OK, CLIError, Progress, format_namespace, parse_namespace
from mongostore.tools.settings import _one_line


def cmd_setup(ctx: Ctx) -> int:
    ctx.store.setup()
    status = ctx.store.status(consistency=False)  # what it prints needs no read of every item (doctor does)
    if ctx.json:
        ctx.emit(status)
        return EXIT_OK
    ctx.print(f"indexes ready on {ctx.label(path=not ctx.local)}")
    if ctx.local:
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


def cmd_doctor(ctx: Ctx) -> int:
    status = ctx.store.status()
    problems, info, unvectored = _doctor_findings(ctx, status)
    data_file = ctx.settings.local_file() if ctx.local else None
    server = str(status["server_version"])
    if ctx.local:
        server = "none: the local store (SQLite, one file; see --data-dir)"
    if ctx.json:
        ctx.emit(
            {
                "ok": not problems,
                "data_file": str(data_file) if data_file else None,
                "data_file_bytes": _file_size(data_file) if data_file else None,
                "embedder": ctx.embedder,
                "index": _index_summary(ctx.store),
                **status,
                "server_version": server,
                "items_without_vectors": unvectored,
                "problems": problems,
                "info": info,
            }
        )
        return EXIT_FAILURE if problems else EXIT_OK
    rows = _doctor_rows(ctx, status, server, data_file)
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


def _doctor_findings(ctx: Ctx, status: Mapping[str, Any]) -> tuple[list[str], list[str], int | None]:
    """What ``doctor`` found: problems (exit 1), notes, and the count of items without vectors."""
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
        unvectored = status.get("items_without_vectors")
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
        stale = status.get("stale_vectors")
        if stale:
            grace = f"{VECTOR_GRACE.total_seconds() / 60:g} min"
            info.append(
                f"{stale} vector document(s) no item lists (a delete or re-put within {grace} of the item's last "
                f"write, or a concurrent writer's): they match nothing, and the TTL sweep removes them once "
                f"{grace} old (the local store's server runs it; elsewhere store.sweep_ttl() or start_ttl_sweeper())"
            )
    for role, verdict in ((status.get("cluster") or {}).get("shard_keys") or {}).items():
        if verdict.get("verdict") == "unsupported":
            problems.append(f"the {role} collection's shard key: {verdict.get('advice')}")
        elif verdict.get("verdict") == "supported":
            info.append(f"the {role} collection's shard key {verdict.get('key')}: {verdict.get('advice')}")
    return problems, info, unvectored


def _doctor_rows(ctx: Ctx, status: Mapping[str, Any], server: str, data_file: Path | None) -> list[tuple[str, str]]:
    """The lines of ``doctor``'s text output, as (name, value)."""
    idx = status.get("vector_search_index") or {}
    rows: list[tuple[str, str]] = [
        ("store", ctx.label(path=data_file is None)),
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
    cluster = status.get("cluster")
    if cluster:  # behind mongos: each collection's shard key with its verdict (docs/scaling.md)
        rows.append(("cluster", "sharded (mongos)"))
        for role, info in cluster.get("shard_keys", {}).items():
            key = info.get("key") or "unsharded"
            rows.append((f"{role} shard key", f"{key}: {info.get('verdict')} ({info.get('advice')})"))
    return rows


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _file_text(path: Path) -> str:
    size = _file_size(path)
    if size is None:
        return f"{path} (not written yet)"
    shown = f"{size:,} bytes" if size < 1024 * 1024 else f"{size / (1024 * 1024):.1f} MB ({size:,} bytes)"
    return f"{path} ({shown})"


def _index_summary(store: MongoStore) -> str:
    cfg = store.index_config
    if not cfg:
        return ""
    return f"dims={cfg.get('dims')}, fields={','.join(cfg.get('fields') or ['$'])}"


#: Seconds between reindex checkpoint lines when no progress bar is drawn.
CHECKPOINT_EVERY = 10.0


def reindex_token(doc_id: str) -> str:
    """A printable, unambiguous form of an item ``_id`` (it holds a NUL): JSON string escapes."""
    return json.dumps(doc_id)[1:-1]


def _checkpoint(doc_id: str) -> str:
    return f"--after {shlex.quote(reindex_token(doc_id))}"


def parse_reindex_token(token: str) -> str:
    try:
        value = json.loads('"' + token + '"')
    except ValueError:
        value = None
    if not isinstance(value, str) or "\x00" not in value:
        raise CLIError(f"--after {token!r} is not a checkpoint printed by reindex")
    return value


def check_reindex(a: argparse.Namespace) -> None:
    """``reindex``'s prefix, ``--batch-size`` and ``--after``, before the store opens."""
    if a.batch_size < 1:
        raise CLIError(f"--batch-size must be at least 1, got {a.batch_size}")
    a.prefix_ns = parse_namespace(a.prefix, what="namespace prefix", allow_empty=True)
    a.after_id = parse_reindex_token(a.after) if a.after else None


def cmd_reindex(ctx: Ctx) -> int:
    a = ctx.args
    store = ctx.store
    if store.vectors_collection is None or store.index_config is None:
        raise CLIError("reindex needs an index: choose an embedder with --embed or MONGOSTORE_EMBED")
    prefix, after = a.prefix_ns, a.after_id
    store.setup()  # the vector index must match the current dims before vectors are written
    now = datetime.now(timezone.utc)
    # The prefix's _id range too: behind mongos the count and every page reach only its shards.
    clauses = [c for c in (prefix_filter(prefix), shard_range_filter(prefix), not_expired(now)) if c]
    if not a.all:
        clauses.append({"vectors": {"$exists": True}})

    def page_filter(last: str | None) -> dict[str, Any]:
        return {"$and": clauses if last is None else [*clauses, {"_id": {"$gt": last}}]}

    total = store.collection.count_documents(page_filter(after))
    projection = {"_id": 1, "namespace": 1, "key": 1, "value": 1, "updated_at": 1, "expires_at": 1, "ttl_minutes": 1}
    progress = Progress("reindex", total, enabled=None if ctx.progress else False)
    done = 0
    batches = 0
    last = after
    logged = time.monotonic()
    try:
        while True:
            docs = list(store.collection.find(page_filter(last), projection).sort("_id", 1).limit(a.batch_size))
            if not docs:
                break
            ids = [d["_id"] for d in docs]
            ops, restore = _reindex_ops(docs, datetime.now(timezone.utc))
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
                ctx.warn(f"reindex: {done:,}/{total:,} item(s); checkpoint {_checkpoint(last)}")
    except (KeyboardInterrupt, PyMongoError, MongoStoreError) as exc:
        progress.close()
        hint = f" {_checkpoint(last)}" if last is not None else ""
        ctx.warn(f"reindex stopped after {done:,} item(s); resume with: mongostore reindex{hint} (same options)")
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CLIError(f"reindex failed: {_one_line(exc)}", EXIT_FAILURE) from exc
    progress.close()
    if ctx.json:
        token = reindex_token(last) if last is not None else None
        ctx.emit(
            {"reindexed": done, "batches": batches, "prefix": list(prefix), "last": token, "embedder": ctx.embedder}
        )
        return EXIT_OK
    ctx.print(f"reindexed {done:,} item(s) under {format_namespace(prefix)} in {batches} batch(es)")
    if last is not None:
        ctx.print(f"checkpoint: {_checkpoint(last)}")
    return EXIT_OK


def _reindex_ops(docs: list[dict[str, Any]], now: datetime) -> tuple[list[PutOp], list[UpdateOne]]:
    """The puts that re-embed ``docs``, and the updates that restore what a put would change."""
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
    return ops, restore
