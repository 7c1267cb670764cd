"""Namespaces <-> stored fields, documents <-> Items, and value checks (no I/O). An item is stored as::

    {_id: "<path>\\x00<key>", namespace: [...], path: "a.b.", depth: 2, ns_key, key, value,
     created_at, updated_at, expires_at?, ttl_minutes?, vectors?: [text_hash, ...]}

Labels hold no ``.`` nor NUL (LangGraph), so a prefix is a string prefix of ``path``, and NUL parts path and key.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import bson
from bson.dbref import DBRef
from bson.errors import InvalidDocument
from bson.int64 import Int64
from langgraph.store.base import InvalidNamespaceError, Item, SearchItem, get_text_at_path

from mongostore.errors import InvalidValueError

# The server's document limit; item_doc_size() counts every field of an item document exactly.
MAX_DOC_BYTES = 16 * 1024 * 1024
# The server refuses nesting over 100 levels: the document and ``value`` are two of them.
MAX_VALUE_DEPTH = 98

ITEM_PROJECTION = {
    "_id": 0,
    "namespace": 1,
    "key": 1,
    "value": 1,
    "created_at": 1,
    "updated_at": 1,
    "ttl_minutes": 1,
}


def as_namespace(namespace: Any, what: str = "namespace") -> tuple[str, ...]:
    """Any sequence of labels as a tuple (PostgresStore and SqliteStore take lists too), a ``str`` refused:
    the type is fixed once, at the edge (label rules are LangGraph's ``validate_op_namespace``)."""
    if isinstance(namespace, tuple):
        return namespace
    if isinstance(namespace, (str, bytes)) or not isinstance(namespace, Sequence):
        raise InvalidNamespaceError(f"a {what} must be a tuple (or list) of labels, got {namespace!r}")
    return tuple(namespace)


def unencodable(text: str) -> bool:
    """True for strings BSON cannot hold (lone surrogates are not valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@functools.lru_cache(maxsize=4096)
def namespace_path(namespace: tuple[str, ...]) -> str:
    """``("users", "alice")`` -> ``"users.alice."``; ``()`` -> ``""`` (the whole store)."""
    return "".join(label + "." for label in namespace)


def namespace_key(namespace: tuple[str, ...] | list[str]) -> str:
    """The labels joined with NUL, which no label holds and which sorts before every other character:
    the keys sort as the tuples do (``("a",) < ("a", "b") < ("a-b",)``), by code point and by UTF-8 bytes."""
    return "\x00".join(namespace)


def ancestor_paths(namespace: tuple[str, ...]) -> list[str]:
    """Every prefix path of a namespace, itself included: ``["users.", "users.alice."]``."""
    return list(_ancestor_paths(namespace))


@functools.lru_cache(maxsize=4096)
def _ancestor_paths(namespace: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(namespace_path(namespace[: i + 1]) for i in range(len(namespace)))


def item_id(namespace: tuple[str, ...], key: str) -> str:
    return namespace_path(namespace) + "\x00" + key


def vectors_name(items_name: str) -> str:
    """The vectors collection of an items collection, unless one is given: ``<items>_vectors``."""
    return f"{items_name}_vectors"


def vector_id(item: str, hash_: str) -> str:
    """One vector document per (item, text hash): a text's vector is never overwritten by another's.
    (Stores written before issue 34 keyed it by field, ``item + NUL + field``: read and rewritten as found.)"""
    return item + "\x00" + hash_


def text_hash(field: str, text: str) -> str:
    """Identifies one indexed text of one field; a vector is valid while its item lists it."""
    return hashlib.sha256(f"{field}\x00{text}".encode()).hexdigest()[:24]


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)


def as_utc(value: datetime) -> datetime:
    """Stored dates come back naive (UTC) unless the client is tz_aware; make them aware
    (by date arithmetic: ~60 ns against ~600 ns for ``replace(tzinfo=...)``, twice per item read)."""
    tz = value.tzinfo
    if tz is None:
        return _EPOCH + (value - _NAIVE_EPOCH)
    if tz is timezone.utc:
        return value
    return value.astimezone(timezone.utc)


def plain_value(value: Any) -> Any:
    """``value`` with every ``bson.Int64`` (pymongo's int64: ``bson._get_int64``) back to the ``int`` the
    user put, every ``DBRef`` to its dict; containers are copied only when something in them changed."""
    t = type(value)
    if t in _PLAIN_LEAVES:
        return value
    if t is dict or isinstance(value, dict):  # or a document_class such as SON: copied as its class
        changed: dict[str, Any] | None = None
        for k, v in value.items():
            if type(v) in _PLAIN_LEAVES:
                continue
            p = plain_value(v)
            if p is not v:
                if changed is None:
                    changed = type(value)(value)
                changed[k] = p
        return value if changed is None else changed
    if t is list or isinstance(value, list):
        out = [v if type(v) in _PLAIN_LEAVES else plain_value(v) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    if isinstance(value, Int64):
        return int(value)
    if isinstance(value, DBRef):
        # pymongo decodes a subdocument holding "$ref" and "$id" as a DBRef: the user put a dict.
        return plain_value(dict(value.as_doc()))
    return value


# Exact types that hold no Int64: what a decoded value mostly is.
_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None), datetime})


def doc_to_item(doc: Mapping[str, Any]) -> Item:
    return Item(
        value=plain_value(doc["value"]),
        key=doc["key"],
        namespace=tuple(doc["namespace"]),
        created_at=as_utc(doc["created_at"]),
        updated_at=as_utc(doc["updated_at"]),
    )


def doc_to_search_item(doc: Mapping[str, Any], score: float | None = None) -> SearchItem:
    return SearchItem(
        tuple(doc["namespace"]),
        doc["key"],
        plain_value(doc["value"]),
        as_utc(doc["created_at"]),
        as_utc(doc["updated_at"]),
        score,
    )


# Values that hold no field names or strings: nothing in them for _bad_field_name to refuse.
_LEAVES = frozenset({int, float, bool, type(None), datetime, Int64})
_NESTS = f" nests deeper than {MAX_VALUE_DEPTH} levels; MongoDB allows 100 per document"


def _bad_field_name(value: Any) -> str | None:
    """The first field name, string or nesting MongoDB would refuse, described, or None. Names with
    ``$`` or ``.`` are stored (MongoDB 5.0+; manual: "Field Names with Periods and Dollar Signs")."""
    found = _first_bad(value, 0)
    if found is None:
        return None
    before, after, trail = found
    return before + "value" + "".join(reversed(trail)) + after


def _first_bad(obj: Any, depth: int) -> tuple[str, str, list[str]] | None:
    """``_bad_field_name``'s walk: the words before and after the path, and the path, innermost first
    (built only once something is found: every put's value is walked)."""
    t = type(obj)
    if isinstance(obj, str):
        return None if obj.isascii() or not unencodable(obj) else ("the string at ", _BAD_STRING, [])
    if t in _LEAVES:
        return None
    is_map = t is dict or isinstance(obj, Mapping)
    if not is_map and not isinstance(obj, (list, tuple)):
        return None
    if depth > MAX_VALUE_DEPTH:
        return "", _NESTS, []
    for label, v in obj.items() if is_map else enumerate(obj):
        if is_map:
            if type(label) is not str and not isinstance(label, str):
                return f"field name {label!r} in ", " is not a string", []
            if "\x00" in label:
                return f"field name {label!r} in ", " contains a NUL byte", []
            if not label.isascii() and unencodable(label):
                return f"field name {label!r} in ", " is not valid UTF-8 (a lone surrogate)", []
        tv = type(v)
        if tv in _LEAVES or (tv is str and v.isascii()):
            continue
        found = _first_bad(v, depth + 1)
        if found is not None:
            found[2].append(f".{label}" if is_map else f"[{label}]")
            return found
    return None


_BAD_STRING = " is not valid UTF-8 (a lone surrogate)"


def item_doc_size(
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    hashes: Sequence[str] = (),
    ttl: bool = False,
) -> int:
    """The exact BSON size of the item document ``queries.put_item_request`` stores: every field
    is encoded (``ttl``: with ``expires_at`` and ``ttl_minutes``); a date is 8 bytes whatever it holds."""
    doc: dict[str, Any] = {
        "_id": item_id(namespace, key),
        "namespace": list(namespace),
        "path": namespace_path(namespace),
        "depth": len(namespace),
        "ns_key": namespace_key(namespace),  # queries.filters.NS_KEY
        "key": key,
        "value": value,
        "created_at": _EPOCH,
        "updated_at": _EPOCH,
    }
    if ttl:
        doc["expires_at"] = _EPOCH
        doc["ttl_minutes"] = 0.0
    if hashes:
        doc["vectors"] = list(hashes)
    return len(bson.encode(doc))


def check_value(namespace: tuple[str, ...], key: str, value: Any, ttl: bool = False) -> tuple[dict[str, Any], int]:
    """The value as a plain dict and the item document's exact ``item_doc_size`` without text hashes (encoded
    once), or ``InvalidValueError`` naming ns and key; ``ttl``: the put stores ``expires_at`` and ``ttl_minutes``."""
    if not isinstance(value, Mapping):
        raise InvalidValueError(namespace, key, f"the value must be a dict, got {type(value).__name__}")
    bad = _bad_field_name(value)
    if bad:
        raise InvalidValueError(namespace, key, bad)
    doc = dict(value)
    try:
        size = item_doc_size(namespace, key, doc, ttl=ttl)
    except (InvalidDocument, OverflowError, TypeError, ValueError) as exc:
        raise InvalidValueError(namespace, key, f"not storable as BSON ({exc})") from exc
    if size > MAX_DOC_BYTES:
        raise InvalidValueError(
            namespace,
            key,
            f"the item as stored (value, key, namespace, its path and sort key, dates) is {size:,} bytes "
            f"as BSON; MongoDB's limit is 16 MiB ({MAX_DOC_BYTES:,} bytes) per document",
        )
    return doc, size


@functools.lru_cache(maxsize=256)
def _plain_field(path: str) -> bool:
    """A path that names one top-level field: no wildcard, index or multi-field token."""
    return path != "*" and not any(c in path for c in ".[]{}")


def extract_texts(value: Mapping[str, Any], tokenized: list[tuple[str, list[str]]]) -> dict[str, str]:
    """Indexed texts by vector field name, as LangGraph names them: ``path`` for one text, ``path.i`` for several."""
    out: dict[str, str] = {}
    for path, tokens in tokenized:
        if tokens == ["$"]:
            texts = [json.dumps(value, sort_keys=True, ensure_ascii=False)]
        elif len(tokens) == 1 and type(found := value.get(path)) is str and _plain_field(path):
            out[path] = found  # what get_text_at_path gives for a top-level string field, faster
            continue
        else:
            texts = get_text_at_path(value, tokens)
        if len(texts) == 1:
            out[path] = texts[0]
        else:
            for i, text in enumerate(texts):
                out[f"{path}.{i}"] = text
    return out
