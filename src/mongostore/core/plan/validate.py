"""Client-side checks of ops, before any I/O: namespaces, keys, paging, filters, values, ttl, sizes."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import bson
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    validate_op_namespace,
)

from mongostore.config import MAX_TTL_MINUTES, IndexSettings
from mongostore.core import queries as q
from mongostore.core.codec import (
    MAX_DOC_BYTES,
    ancestor_paths,
    as_namespace,
    check_value,
    item_id,
    namespace_path,
    unencodable,
    vector_id,
)
from mongostore.errors import InvalidFilterError, InvalidValueError


def check_put_namespace(namespace: tuple[str, ...]) -> None:
    """``put()``'s rules (LangGraph's): not empty, not rooted at ``"langgraph"``, and the labels'."""
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    check_labels(namespace)
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')


def dedupe_ops(ops: Sequence[Op]) -> tuple[list[int], list[Op]]:
    """The ops of one coalesced batch, as LangGraph's batching dedupes them: identical reads run once,
    a later put or delete of the same item replaces an earlier one (last write wins). Returns, for each
    op given, the position of the op that answers it, and the ops to run."""
    run: list[Op] = []
    answer: list[int] = []
    writes: dict[tuple[tuple[str, ...], str], int] = {}
    reads: dict[tuple[type, Op], int] = {}  # by type too: ops are tuples, equal to others of equal fields
    for op in ops:
        if isinstance(op, PutOp):
            at = writes.setdefault((op.namespace, op.key), len(run))
            if at == len(run):
                run.append(op)
            else:
                run[at] = op
        else:
            try:
                at = reads.setdefault((type(op), op), len(run))
            except TypeError:  # a filter holding a dict or a list: compared, not hashed
                at = next((i for i, seen in enumerate(run) if type(seen) is type(op) and seen == op), len(run))
            if at == len(run):
                run.append(op)
        answer.append(at)
    return answer, run


def _check_paging(op: SearchOp | ListNamespacesOp) -> None:
    for name in ("limit", "offset"):
        v = getattr(op, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(op).__name__}.{name} must be a non-negative int, got {v!r}")


def check_labels(namespace: tuple[str, ...]) -> None:
    """LangGraph's label rules and ours (UTF-8); a namespace that passed once is remembered."""
    try:
        _labels_ok(namespace)
    except TypeError:  # an unhashable label: checked uncached (LangGraph's rule refuses it)
        _labels_ok.__wrapped__(namespace)


@functools.lru_cache(maxsize=4096)
def _labels_ok(namespace: tuple[str, ...]) -> None:
    validate_op_namespace(GetOp(namespace, ""))
    _check_utf8_labels(namespace)


def _check_utf8_labels(namespace: tuple[str, ...]) -> None:
    for label in namespace:
        if isinstance(label, str) and unencodable(label):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace!r}: it is not valid UTF-8 (a lone surrogate)"
            )


def _check_key(namespace: tuple[str, ...], key: Any) -> None:
    # LangGraph types keys as str; its public get/put/delete str() them. An op given
    # straight to batch() with another type would alias its str() (5 and "5"): refused.
    if not isinstance(key, str):
        raise InvalidValueError(
            namespace,
            repr(key),
            f"the key must be a str, got {type(key).__name__} (put() and get() convert keys "
            "with str(); ops given to batch() must hold str keys)",
        )
    if unencodable(key):
        raise InvalidValueError(namespace, key, "the key is not valid UTF-8 (a lone surrogate)")


def _check_ttl(namespace: tuple[str, ...], key: str, ttl: Any) -> None:
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise InvalidValueError(namespace, key, f"ttl must be a number of minutes or None, got {ttl!r}")
    if not math.isfinite(ttl) or ttl <= 0 or ttl > MAX_TTL_MINUTES:
        raise InvalidValueError(
            namespace, key, f"ttl must be a finite number of minutes in (0, {MAX_TTL_MINUTES:.0f}], got {ttl!r}"
        )


class SizedPut(PutOp):
    """A put ``check_op`` passed: its value is the checked copy, ``item_bytes`` its item document's
    exact ``item_doc_size`` without text hashes (TTL fields included), so the value is encoded once.
    ``texts``: the index and ``{field: (text, text hash)}`` ``AsyncMongoStore.aput`` checked them for."""

    item_bytes: int = -1
    texts: tuple[Any, dict[str, tuple[str, str]]] | None = None


def check_op(op: Op) -> Op:
    """Every client-side check of one op (namespace, key, paging, filter, value, ttl, index), before
    any I/O; returns it with its namespaces as tuples (lists are accepted), a put with a value as a
    ``SizedPut``. ``AsyncMongoStore`` runs it before queueing an op, so a bad call fails only its caller.
    """
    if type(op) is SizedPut:
        return op
    if isinstance(op, (GetOp, PutOp)):
        ns = as_namespace(op.namespace)
        op = op if ns is op.namespace else op._replace(namespace=ns)
        check_labels(ns)  # (LangGraph's validate_op_namespace included)
        _check_key(ns, op.key)
    if isinstance(op, PutOp):
        # Labels only: "non-empty, not rooted at 'langgraph'" is put()'s rule, not the op's (LangGraph
        # 4.3: "write-only rules belong to put, not to op validation"); InMemoryStore and the Agent
        # Server write such ops through batch().
        if op.index not in (None, False) and not (
            isinstance(op.index, list) and all(isinstance(f, str) for f in op.index)
        ):
            raise ValueError(f"PutOp.index must be None, False or a list of field paths, got {op.index!r}")
        _check_ttl(op.namespace, op.key, op.ttl)
        if op.value is not None:
            value, size = check_value(op.namespace, op.key, op.value, ttl=op.ttl is not None)
            sized = SizedPut(op.namespace, op.key, value, op.index, op.ttl)
            sized.item_bytes = size
            return sized
    elif isinstance(op, SearchOp):
        ns = as_namespace(op.namespace_prefix, "namespace prefix")
        op = op if ns is op.namespace_prefix else op._replace(namespace_prefix=ns)
        if ns:
            check_labels(ns)
        _check_paging(op)
        q.value_filter(op.filter)
    elif isinstance(op, ListNamespacesOp):
        conds = tuple(
            c if isinstance(c.path, tuple) else c._replace(path=as_namespace(c.path, "match path"))
            for c in op.match_conditions or ()
        )
        op = op._replace(match_conditions=conds) if op.match_conditions else op
        validate_op_namespace(op)  # the match paths (LangGraph allows "*" wildcards in them)
        for cond in conds:
            _check_utf8_labels(cond.path)
        _check_paging(op)
        if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 0):
            raise ValueError(f"max_depth must be a non-negative int or None, got {op.max_depth!r}")
        for cond in conds:
            if cond.match_type not in ("prefix", "suffix"):
                raise InvalidFilterError(f"unknown match_type {cond.match_type!r}: use 'prefix' or 'suffix'")
    elif not isinstance(op, GetOp):
        raise ValueError(f"Unknown operation type: {type(op).__name__}")
    return op


def item_doc_bound(item_bytes: int, hashes: list[str]) -> int:
    """Exactly ``item_doc_size`` with ``hashes``, from its size without them (no encoding)."""
    if not hashes:
        return item_bytes
    # "vectors": type byte, name and NUL, then an array document: int32 length, per element
    # (type byte, decimal index and NUL, int32 length, UTF-8 text and NUL), the final NUL.
    elements = sum(1 + len(str(i)) + 1 + 4 + len(h.encode()) + 1 for i, h in enumerate(hashes))
    return item_bytes + 1 + len("vectors") + 1 + 4 + elements + 1


def vector_doc_bound(namespace: tuple[str, ...], item_bytes: int, field_bytes: int, dims: int) -> int:
    """At least the BSON size of the item's vector documents, from its item document's size: a vector
    document holds the id twice, the value's filter fields, every ancestor path (none longer than the
    item's), the field name, the vector and a few dates and names (256 bytes, as in the exact check)."""
    path_bytes = len(namespace_path(namespace).encode()) + 17  # an ns_prefixes element: its text and 17 bytes
    return 64 + 2 * item_bytes + len(namespace) * path_bytes + 3 * field_bytes + dims * 4 + 256


def check_sizes(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    hashes: list[str],
    fields: list[str],
    index: IndexSettings,
    item_bytes: int,
) -> None:
    """The item and each vector document (every ancestor path of the item: 200 labels of 1 KB make
    20 MB) fit MongoDB's 16 MiB, from ``item_bytes`` by arithmetic, encoding only over the bound."""
    size = item_doc_bound(item_bytes, hashes)
    if size > MAX_DOC_BYTES:
        raise InvalidValueError(
            namespace,
            key,
            f"the item with its {len(hashes)} text hash(es) is {size:,} bytes as BSON; "
            f"MongoDB's limit is 16 MiB ({MAX_DOC_BYTES:,} bytes) per document",
        )
    if not fields:
        return
    field_bytes = max(len(f.encode()) for f in fields)
    if vector_doc_bound(namespace, item_bytes, field_bytes, index.dims) <= MAX_DOC_BYTES:
        return
    iid = item_id(namespace, key)
    base = len(
        bson.encode(
            {
                "_id": vector_id(iid, max(fields, key=len)),  # (a text hash's 24 bytes: in the 256)
                "item_id": iid,
                "ns_prefixes": ancestor_paths(namespace),
                "value": q.filter_field_values(value, index.filter_fields),
            }
        )
    )
    vec = base + 2 * field_bytes + index.dims * 4 + 256
    if vec > MAX_DOC_BYTES:
        raise InvalidValueError(
            namespace,
            key,
            f"its vector documents would be {vec:,} bytes as BSON (each holds every "
            f"ancestor path of the namespace, {len(namespace)} labels); MongoDB's limit is 16 MiB per document",
        )
