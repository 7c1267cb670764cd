"""Namespaces <-> stored fields, documents <-> Items, and value checks. No I/O.

An item is stored as (DESIGN.md section 4)::

    {_id: "<path>\\x00<key>", namespace: [...], path: "a.b.", depth: 2, key, value,
     created_at, updated_at, expires_at?, ttl_minutes?, vectors?: [text_hash, ...]}

Labels cannot hold ``.`` or NUL (LangGraph rejects both), so ``path`` is
unambiguous and a namespace prefix is a string prefix of ``path``. A key may hold
anything, so ``_id`` separates path and key with NUL, which no path contains.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import bson
from bson.errors import InvalidDocument
from langgraph.store.base import Item, SearchItem, get_text_at_path

from mongostore.errors import InvalidValueError

# 16 MiB is the server's document limit; keep room for our own metadata fields.
MAX_VALUE_BYTES = 16 * 1024 * 1024 - 64 * 1024

ITEM_PROJECTION = {
    "_id": 0,
    "namespace": 1,
    "key": 1,
    "value": 1,
    "created_at": 1,
    "updated_at": 1,
    "ttl_minutes": 1,
}


@functools.lru_cache(maxsize=4096)
def namespace_path(namespace: tuple[str, ...]) -> str:
    """``("users", "alice")`` -> ``"users.alice."``; ``()`` -> ``""`` (the whole store)."""
    return "".join(label + "." for label in namespace)


def namespace_key(namespace: tuple[str, ...] | list[str]) -> str:
    """The labels joined with NUL: strings that sort exactly as LangGraph's namespace tuples.

    No label contains NUL (LangGraph rejects it) and NUL sorts before every other
    character, so ``("a",) < ("a", "b") < ("a-b",) < ("ab",)`` holds for the keys too,
    by code point in Python and by UTF-8 bytes (MongoDB's binary string order) alike.
    """
    return "\x00".join(namespace)


def ancestor_paths(namespace: tuple[str, ...]) -> list[str]:
    """Every prefix path of a namespace, itself included: ``["users.", "users.alice."]``."""
    return [namespace_path(namespace[: i + 1]) for i in range(len(namespace))]


def item_id(namespace: tuple[str, ...], key: str) -> str:
    return namespace_path(namespace) + "\x00" + key


def vector_id(item: str, field: str) -> str:
    return item + "\x00" + field


def text_hash(field: str, text: str) -> str:
    """Identifies one indexed text of one field; a vector is valid while its item lists it."""
    return hashlib.sha256(f"{field}\x00{text}".encode()).hexdigest()[:24]


def as_utc(value: datetime) -> datetime:
    """Stored dates come back naive (UTC) unless the client is tz_aware; make them aware."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def doc_to_item(doc: Mapping[str, Any]) -> Item:
    return Item(
        value=doc["value"],
        key=doc["key"],
        namespace=tuple(doc["namespace"]),
        created_at=as_utc(doc["created_at"]),
        updated_at=as_utc(doc["updated_at"]),
    )


def doc_to_search_item(doc: Mapping[str, Any], score: float | None = None) -> SearchItem:
    return SearchItem(
        tuple(doc["namespace"]),
        doc["key"],
        doc["value"],
        as_utc(doc["created_at"]),
        as_utc(doc["updated_at"]),
        score,
    )


def _bad_field_name(obj: Any, where: str = "value") -> str | None:
    """The first field name MongoDB would refuse to store, described, or None."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if not isinstance(k, str):
                return f"field name {k!r} in {where} is not a string"
            if k.startswith("$"):
                return f"field name {k!r} in {where} starts with '$'"
            if "\x00" in k:
                return f"field name {k!r} in {where} contains a NUL byte"
            found = _bad_field_name(v, f"{where}.{k}")
            if found:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = _bad_field_name(v, f"{where}[{i}]")
            if found:
                return found
    return None


def check_value(namespace: tuple[str, ...], key: str, value: Any) -> dict[str, Any]:
    """Return the value as a plain dict, or raise ``InvalidValueError`` naming ns and key."""
    if not isinstance(value, Mapping):
        raise InvalidValueError(namespace, key, f"the value must be a dict, got {type(value).__name__}")
    bad = _bad_field_name(value)
    if bad:
        raise InvalidValueError(namespace, key, bad)
    doc = dict(value)
    try:
        size = len(bson.encode({"value": doc}))
    except (InvalidDocument, OverflowError, TypeError) as exc:
        raise InvalidValueError(namespace, key, f"not storable as BSON ({exc})") from exc
    if size > MAX_VALUE_BYTES:
        raise InvalidValueError(
            namespace, key, f"the value is {size:,} bytes as BSON; MongoDB's limit is 16 MiB per document"
        )
    return doc


def extract_texts(
    value: Mapping[str, Any], tokenized: list[tuple[str, list[str]]]
) -> dict[str, str]:
    """Indexed texts by vector field name, named as LangGraph names them.

    A path that yields one text is named by the path, several texts by ``path.i``.
    Missing fields yield nothing and are skipped.
    """
    out: dict[str, str] = {}
    for path, tokens in tokenized:
        if tokens == ["$"]:
            texts = [json.dumps(value, sort_keys=True, ensure_ascii=False)]
        else:
            texts = get_text_at_path(value, tokens)
        if len(texts) == 1:
            out[path] = texts[0]
        else:
            for i, text in enumerate(texts):
                out[f"{path}.{i}"] = text
    return out
