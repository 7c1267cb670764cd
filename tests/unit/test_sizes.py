"""A put's value is encoded once: the size checks after it bound the documents by arithmetic.

``check_op`` encodes the item document once (``SizedPut.item_bytes``); ``check_sizes``
then bounds the item with its text hashes and each vector document from that size and
encodes again only when a bound is over MongoDB's 16 MiB. These tests hold the bounds
to the documents the store really writes, and the decisions to the exact ones.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import bson
import pytest
from langgraph.store.base import PutOp

from mongostore import InvalidValueError
from mongostore.config import IndexSettings, index_settings
from mongostore.core import queries as q
from mongostore.core.codec import MAX_DOC_BYTES, item_doc_size, text_hash
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes, item_doc_bound, vector_doc_bound
from mongostore.tools.embeddings import HashingEmbeddings

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def settings(dims: int = 8, filter_fields: list[str] | None = None) -> IndexSettings:
    cfg: dict[str, Any] = {"dims": dims, "embed": HashingEmbeddings(dims), "fields": ["text"]}
    if filter_fields:
        cfg["filter_fields"] = filter_fields
    s = index_settings(cfg)
    assert s is not None
    return s


CASES = [
    (("u",), "k", {"text": "hi"}, ["text"], []),
    (("users", "alice", "memories"), "k" * 300, {"text": "x" * 5000, "n": 3}, ["text"], ["n"]),
    (tuple(f"é{i}" * 40 for i in range(60)), "ключ", {"text": "ü" * 100, "tag": "ß" * 900}, ["text"], ["tag"]),
    (("a",), "k", {"text": ["a", "b", "c"], "tag": "t" * 70_000}, ["text.0", "text.1", "text.2"], ["tag"]),
    (("a",), "k", {"f" * 2000: "v"}, ["f" * 2000], []),
]


@pytest.mark.parametrize(("namespace", "key", "value", "fields", "filters"), CASES)
def test_bounds_are_never_below_the_documents_written(
    namespace: tuple[str, ...], key: str, value: dict[str, Any], fields: list[str], filters: list[str]
) -> None:
    dims = 384
    item_bytes = item_doc_size(namespace, key, value)
    hashes = [text_hash(f, "t") for f in fields]
    assert item_doc_size(namespace, key, value, hashes) <= item_doc_bound(item_bytes, hashes)
    vector = q.float32_vector([0.5] * dims)
    for field in fields:
        filter_values = q.filter_field_values(value, filters)
        req = q.put_vector_request(namespace, key, field, hashes[0], vector, filter_values, NOW, 60.0)
        assert isinstance(req.update, dict)
        written = {**req.filter, **req.update["$set"]}
        field_bytes = max(len(f.encode()) for f in fields)
        assert len(bson.encode(written)) <= vector_doc_bound(namespace, item_bytes, field_bytes, dims)


def test_check_op_encodes_a_value_once_and_keeps_its_size() -> None:
    value = {"text": "hello", "n": [1, 2, {"x": None}]}
    op = check_op(PutOp(("u", "a"), "k", value))
    assert isinstance(op, SizedPut) and isinstance(op, PutOp)
    assert op.item_bytes == item_doc_size(("u", "a"), "k", value)
    assert op.value == value and op.value is not value  # the checked copy
    assert check_op(op) is op  # a checked put is not walked again (the async queue checks first)
    assert not isinstance(check_op(PutOp(("u",), "k", None)), SizedPut)  # a delete has no value


def test_a_value_at_the_limit_is_checked_exactly() -> None:
    index = settings()
    hashes = [text_hash("text", "hi")]
    base = item_doc_size(("u",), "k", {"text": "hi", "blob": ""}, hashes)
    value = {"text": "hi", "blob": "x" * (MAX_DOC_BYTES - base)}  # exactly the limit, with the hash
    item_bytes = item_doc_size(("u",), "k", value)
    assert item_doc_bound(item_bytes, hashes) == MAX_DOC_BYTES == item_doc_size(("u",), "k", value, hashes)
    assert vector_doc_bound(("u",), item_bytes, 4, index.dims) > MAX_DOC_BYTES  # but blob is no filter field
    check_sizes(("u",), "k", value, hashes, ["text"], index, item_bytes)  # passes: exact sizes fit


def test_hashes_that_push_the_item_over_the_limit_are_refused() -> None:
    value = {"text": ["t"] * 2000, "blob": "x" * (MAX_DOC_BYTES - 60_000)}
    fields = [f"text.{i}" for i in range(2000)]
    hashes = [text_hash(f, "t") for f in fields]
    item_bytes = item_doc_size(("u",), "k", value)
    assert item_bytes <= MAX_DOC_BYTES < item_doc_size(("u",), "k", value, hashes)
    with pytest.raises(InvalidValueError, match=r"with its 2000 text hash\(es\) is [\d,]+ bytes"):
        check_sizes(("u",), "k", value, hashes, fields, settings(), item_bytes)


def test_a_filter_field_that_makes_vector_documents_too_large_is_refused() -> None:
    # 9 MB in the item, copied onto each vector document with 8 MB of ancestor paths.
    namespace = tuple(f"l{i:03d}" + "p" * 4500 for i in range(60))
    value = {"text": "hi", "tag": "x" * 9_000_000}
    op = check_op(PutOp(namespace, "k", value))
    assert isinstance(op, SizedPut)
    with pytest.raises(InvalidValueError, match="vector documents would be"):
        check_sizes(namespace, "k", value, [text_hash("text", "hi")], ["text"], settings(filter_fields=["tag"]),
                    op.item_bytes)
    # Without the copy, the same put fits.
    check_sizes(namespace, "k", value, [text_hash("text", "hi")], ["text"], settings(), op.item_bytes)
