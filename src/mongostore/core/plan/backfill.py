"""At ``setup()``, rebuild from the items what vector documents written under an older index config lack
(issue 28): ``text`` (read by ``$search``, ``$rerank`` and automated embedding; a ``$rerank``
candidate without it fails the query) and ``value.<field>`` (the filter fields ``$vectorSearch``
pre-filters on). Not ``$lookup`` + ``$merge``: mongomock has no ``$merge``, and no aggregation
expression does LangGraph's path extraction for ``$`` or ``{a,b}`` paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core.codec import extract_texts, text_hash
from mongostore.core.plan.context import LARGE_BATCH, Plan
from mongostore.core.retrieval import TEXT_PATH
from mongostore.core.steps import Find, Write, WriteOutcome

logger = logging.getLogger("mongostore")

ITEMS_PER_READ = 1000


def text_of(index: IndexSettings, value: dict[str, Any], field: str, hash_: str) -> str | None:
    """The text a vector document of ``field`` was embedded from, if the item still holds it.

    ``field`` is a configured (or per-put) path, or ``path.i`` for the i-th of several texts
    (``extract_texts``' names); only a text whose ``text_hash`` matches is returned.
    """
    candidates = [field]
    base, _, last = field.rpartition(".")
    if base and last.isdigit():
        candidates.append(base)
    for path in candidates:
        try:
            texts = extract_texts(value, index.tokenized((path,)))
        except Exception:  # a path LangGraph cannot parse, or this value cannot be read along
            continue
        text = texts.get(field)
        if text is not None and text_hash(field, text) == hash_:
            return text
    return None


def _per_item(
    docs: list[dict[str, Any]],
    build: Callable[[str, dict[str, Any], list[dict[str, Any]]], list[q.WriteRequest]],
    what: str,
) -> Plan:
    """Vector documents grouped by item; for each chunk of items, read their values and write
    what ``build(item id, value, its vector documents)`` asks (items gone are skipped).
    Returns how many documents were updated."""
    by_item: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_item.setdefault(str(doc["item_id"]), []).append(doc)
    ids = sorted(by_item)
    done = 0
    for start in range(0, len(ids), ITEMS_PER_READ):
        chunk = ids[start : start + ITEMS_PER_READ]
        items = yield Find("items", {"_id": {"$in": chunk}}, {"_id": 1, "value": 1}, batch_size=len(chunk))
        values = {d["_id"]: d.get("value") or {} for d in items}
        requests = [r for iid in chunk if iid in values for r in build(iid, values[iid], by_item[iid])]
        if not requests:
            continue
        outcome: WriteOutcome = yield Write(tuple(requests))
        if outcome.errors:
            logger.warning(
                "setup(): %d of %d %s updates failed: %s", len(outcome.errors), len(requests), what, outcome.errors[:3]
            )
        done += len(requests) - len(outcome.errors)
    return done


def backfill_texts(index: IndexSettings) -> Plan:
    """Give vector documents without ``text`` the text their hash was made from, when a mode reads it
    (``stores_text``); returns how many were updated. Each update is conditional on the document still
    having no text and the same hash, so a put racing it wins."""
    if not index.stores_text:
        return 0
    fields = {"_id": 1, "item_id": 1, "field": 1, "text_hash": 1}
    missing = yield Find("vectors", {TEXT_PATH: {"$exists": False}}, fields, batch_size=LARGE_BATCH)

    def texts(iid: str, value: dict[str, Any], docs: list[dict[str, Any]]) -> list[q.WriteRequest]:
        requests = []
        for doc in docs:
            text = text_of(index, value, str(doc["field"]), str(doc["text_hash"]))
            if text is None:
                continue  # the item holds another text now: the vector is stale anyway
            update: dict[str, Any] = {"$set": {TEXT_PATH: text}}
            if index.auto_embed is not None:
                update["$unset"] = {"embedding": ""}  # Atlas embeds the text
            # item_id: the vectors' recommended shard key, which single-document writes carry
            flt = {"_id": doc["_id"], "item_id": iid, "text_hash": doc["text_hash"], TEXT_PATH: {"$exists": False}}
            requests.append(q.WriteRequest("vectors", "update_one", flt, update))
        return requests

    done: int = yield from _per_item(missing, texts, "vector text")
    if done:
        modes = (
            ("automated embedding", index.auto_embed),
            ("reranking", index.rerank),
            ("hybrid search", index.hybrid),
        )
        turned_on = " and ".join(name for name, on in modes if on is not None)
        logger.info("setup(): gave %d vector documents written before %s was turned on their text", done, turned_on)
    return done


def backfill_filter_fields(index: IndexSettings, added: Sequence[str]) -> Plan:
    """Once filter fields were ``added``, rewrite every vector document's ``value`` (its copies of the
    declared filter fields) that differs from what a put would write now; returns how many were."""
    if not added:
        return 0
    vectors = yield Find("vectors", {}, {"_id": 1, "item_id": 1, "value": 1}, batch_size=LARGE_BATCH)

    def copies(iid: str, value: dict[str, Any], docs: list[dict[str, Any]]) -> list[q.WriteRequest]:
        wanted = q.filter_field_values(value, index.filter_fields)
        update = {"$set": {"value": wanted}} if wanted else {"$unset": {"value": ""}}
        return [
            q.WriteRequest("vectors", "update_one", {"_id": doc["_id"], "item_id": iid}, update)  # with the shard key
            for doc in docs
            if (doc.get("value") or {}) != wanted
        ]

    done: int = yield from _per_item(vectors, copies, "filter field")
    if done:
        logger.info(
            "setup(): copied the filter field(s) %s onto %d vector documents written before they were declared",
            ", ".join(added),
            done,
        )
    return done
