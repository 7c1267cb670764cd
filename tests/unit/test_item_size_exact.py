"""The item document is held to 16 MiB with every stored field counted (issue 26, item 4).

Long labels make the fields besides the value large: the namespace is stored three times
(``namespace``, ``path``, ``ns_key``). An allowance for "the rest" let an item of
16,777,217 bytes through, which the server refused after the send. The size is now the
exact BSON size of the stored document, checked before any I/O.
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from langgraph.store.base import PutOp

from mongostore import InvalidValueError, MongoStore
from mongostore.config import index_settings
from mongostore.core.codec import MAX_DOC_BYTES, item_doc_size, text_hash
from mongostore.core.plan.validate import SizedPut, check_op, check_sizes, item_doc_bound
from mongostore.tools.embeddings import HashingEmbeddings

LONG_LABELS = [
    pytest.param(("a" * 12_000, "b" * 12_000), id="2x12000"),
    pytest.param(tuple(f"{i:02d}" + "l" * 198 for i in range(40)), id="40x200"),
]


def value_of_size(namespace: tuple[str, ...], key: str, total: int, ttl: bool = False) -> dict[str, Any]:
    """A value whose stored item document is exactly ``total`` bytes."""
    base = item_doc_size(namespace, key, {"blob": ""}, ttl=ttl)
    return {"blob": "x" * (total - base)}


@pytest.mark.parametrize("namespace", LONG_LABELS)
@pytest.mark.parametrize("ttl", [None, 5.0])
def test_one_byte_over_is_refused_before_any_io(namespace: tuple[str, ...], ttl: float | None) -> None:
    over = value_of_size(namespace, "k", MAX_DOC_BYTES + 1, ttl=ttl is not None)
    with pytest.raises(InvalidValueError, match="16,777,217 bytes"):
        check_op(PutOp(namespace, "k", over, ttl=ttl))
    fits = value_of_size(namespace, "k", MAX_DOC_BYTES, ttl=ttl is not None)
    op = check_op(PutOp(namespace, "k", fits, ttl=ttl))
    assert isinstance(op, SizedPut) and op.item_bytes == MAX_DOC_BYTES


@pytest.mark.parametrize("namespace", LONG_LABELS)
def test_the_size_is_the_stored_documents_exactly(namespace: tuple[str, ...]) -> None:
    store = MongoStore.in_memory(ttl={"default_ttl": None})
    value = value_of_size(namespace, "k", MAX_DOC_BYTES, ttl=True)
    store.put(namespace, "k", value, ttl=5)
    store.put(namespace, "k", value, ttl=5)  # a re-put: created_at kept, nothing added
    stored = store.collection.find_one({})
    assert stored is not None
    assert len(bson.encode(stored)) == MAX_DOC_BYTES == item_doc_size(namespace, "k", value, ttl=True)


def test_a_batch_with_an_oversized_item_writes_nothing() -> None:
    namespace = ("a" * 12_000, "b" * 12_000)
    store = MongoStore.in_memory()
    over = value_of_size(namespace, "big", MAX_DOC_BYTES + 1)
    with pytest.raises(InvalidValueError, match="16 MiB"):
        store.batch([PutOp(("u",), "small", {"text": "hi"}), PutOp(namespace, "big", over)])
    assert store.collection.count_documents({}) == 0


def test_the_hashes_are_counted_exactly_too() -> None:
    namespace = tuple(f"{i:02d}" + "l" * 198 for i in range(40))
    index_cfg: Any = {"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"]}
    settings = index_settings(index_cfg)
    assert settings is not None
    hashes = [text_hash("text", "hi")]
    base = item_doc_size(namespace, "k", {"text": "hi", "blob": ""}, hashes)
    value = {"text": "hi", "blob": "x" * (MAX_DOC_BYTES - base)}
    assert item_doc_bound(item_doc_size(namespace, "k", value), hashes) == MAX_DOC_BYTES
    check_sizes(namespace, "k", value, hashes, ["text"], settings, item_doc_size(namespace, "k", value))
    store = MongoStore.in_memory(index=index_cfg)
    store.put(namespace, "k", value)
    stored = store.collection.find_one({})
    assert stored is not None and len(bson.encode(stored)) == MAX_DOC_BYTES
    over = {**value, "blob": value["blob"] + "x"}
    with pytest.raises(InvalidValueError, match="16,777,217 bytes"):
        check_sizes(namespace, "k", over, hashes, ["text"], settings, item_doc_size(namespace, "k", over))


def _over_with_hashes(namespace: tuple[str, ...]) -> dict[str, Any]:
    """A value that fits alone but not with the one text hash an index stores on the item."""
    base = item_doc_size(namespace, "k", {"text": "hi", "blob": ""})
    return {"text": "hi", "blob": "x" * (MAX_DOC_BYTES - 5 - base)}


def test_an_indexed_put_too_big_with_its_hashes_fails_before_any_io() -> None:
    """The hashes are known from the value (no read needed): the batch fails before its
    first read, so nothing is read, embedded or written."""
    from mongostore.core.plan import batch_plan
    from mongostore.core.plan.context import PlanContext

    namespace = ("a" * 12_000, "b" * 12_000)
    settings = index_settings({"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"]})
    plan = batch_plan(
        [PutOp(("u",), "small", {"text": "x"}), PutOp(namespace, "k", _over_with_hashes(namespace))],
        PlanContext("items", settings, None, __import__("datetime").datetime.now()),
    )
    with pytest.raises(InvalidValueError) as caught:
        next(plan)
    assert "text hash" in str(caught.value)[-300:]


async def test_in_a_coalesced_async_batch_only_its_caller_fails() -> None:
    import asyncio

    from mongostore import AsyncMongoStore

    namespace = ("a" * 12_000, "b" * 12_000)
    store = AsyncMongoStore.in_memory(index={"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"]})
    big, small = await asyncio.gather(
        store.aput(namespace, "k", _over_with_hashes(namespace)),
        store.aput(("u",), "small", {"text": "fine"}),
        return_exceptions=True,
    )
    assert isinstance(big, InvalidValueError) and small is None
    assert (await store.aget(("u",), "small")) is not None
