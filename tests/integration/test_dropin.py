"""Drop-in behaviour that LangGraph's own store suites rely on, on every backend.

Each test states a behaviour that langgraph-checkpoint's ``test_store.py``
(InMemoryStore), ``checkpoint-postgres`` and ``checkpoint-sqlite``'s
``test_store.py`` exercise, written against our ``make_store`` fixture (sync and
async, every backend). Where InMemoryStore is the reference, it runs side by side.
"""

from __future__ import annotations

import asyncio
import re
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import bson
import pytest
from conftest import Counting, MakeStore, StoreAPI, text_index
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from mongostore import AsyncMongoStore, ConfigurationError, InvalidFilterError, InvalidValueError, MongoStore
from mongostore.tools.embeddings import HashingEmbeddings

# --------------------------------------------------------------------------- 1. ops straight to batch


async def test_put_ops_rooted_at_langgraph_pass_batch_but_not_put(make_store: MakeStore) -> None:
    """checkpoint's test_cannot_put_empty_namespace: "go past the public put api"."""
    api = await make_store()
    await api.batch([PutOp(("langgraph", "foo"), "bar", {"a": "b"})])
    item = await api.get(("langgraph", "foo"), "bar")
    assert item is not None and item.value == {"a": "b"}
    assert [i.key for i in await api.search(("langgraph",))] == ["bar"]
    await api.batch([PutOp(("langgraph", "foo"), "bar", None)])
    assert await api.get(("langgraph", "foo"), "bar") is None
    for ns in [("langgraph", "foo"), ()]:
        with pytest.raises(InvalidNamespaceError):
            await api.put(ns, "k", {"v": 1})
    await api.delete((), "k")  # delete checks labels only, as BaseStore.delete does


# --------------------------------------------------------------------------- 2. lists as namespaces


async def test_lists_work_wherever_a_namespace_goes(make_store: MakeStore) -> None:
    """SqliteStore's test_search / test_list_namespaces call search(["test"]) and prefix=[...]."""
    api = await make_store()
    await api.put(["test", "docs"], "doc1", {"author": "Alice"})  # type: ignore[arg-type]
    await api.put(("test", "docs"), "doc2", {"author": "Bob"})
    await api.put(("test", "images"), "img1", {"author": "Alice"})
    assert len(await api.search(["test"])) == 3  # type: ignore[arg-type]
    docs = await api.search(["test", "docs"])  # type: ignore[arg-type]
    assert sorted(i.key for i in docs) == ["doc1", "doc2"] and all(i.namespace == ("test", "docs") for i in docs)
    assert len(await api.search(["test"], filter={"author": "Alice"})) == 2  # type: ignore[arg-type]
    assert (await api.get(["test", "docs"], "doc1")).namespace == ("test", "docs")  # type: ignore[arg-type,union-attr]
    assert await api.list_namespaces(prefix=["test"]) == [("test", "docs"), ("test", "images")]
    assert await api.list_namespaces(suffix=["images"]) == [("test", "images")]
    results = await api.batch(
        [
            SearchOp(["test"]),  # type: ignore[arg-type]
            GetOp(["test", "docs"], "doc2"),  # type: ignore[arg-type]
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ["test", "*"]),)),  # type: ignore[arg-type]
        ]
    )
    assert len(results[0]) == 3 and results[1].key == "doc2" and len(results[2]) == 2
    await api.delete(["test", "docs"], "doc1")  # type: ignore[arg-type]
    assert await api.get(("test", "docs"), "doc1") is None
    with pytest.raises(InvalidNamespaceError):
        await api.search("test")  # type: ignore[arg-type]  # a str is not a sequence of labels


# --------------------------------------------------------------------------- 3. nested operators


NESTED_DATA = {
    "1": {"meta": {"level": 1, "tag": "a"}, "n": 1},
    "2": {"meta": {"level": 2, "tag": "b"}, "n": 5},
    "3": {"meta": {"level": 3, "tag": "a", "deep": {"x": 10}}, "n": 10},
    "4": {"meta": [{"level": 5}], "n": 2},
    "5": {"meta": {"level": [2, 3]}},
}

NESTED_FILTERS: list[dict[str, Any]] = [
    {"meta": {"level": {"$gte": 2}}},
    {"meta": {"level": {"$lt": 3}, "tag": "a"}},
    {"meta": {"level": {"$ne": 2}}},
    {"meta": {"deep": {"x": {"$gt": 5}}}},
    {"meta": {"tag": {"$eq": "a"}}, "n": {"$gte": 5}},
]


@pytest.mark.parametrize("filter", NESTED_FILTERS, ids=[str(f) for f in NESTED_FILTERS])
async def test_operators_inside_nested_dicts_match_in_memory_store(make_store: MakeStore, filter: Any) -> None:
    api = await make_store()
    ref = InMemoryStore()
    for key, value in NESTED_DATA.items():
        await api.put(("f",), key, value)
        ref.put(("f",), key, value)
    try:
        expected = sorted(i.key for i in ref.search(("f",), filter=filter))
    except TypeError:  # InMemoryStore's float() on a list or a missing field
        expected = None
    got = sorted(i.key for i in await api.search(("f",), filter=filter))
    if expected is not None:
        assert got == expected
    else:
        # whole-value semantics: arrays and missing fields never satisfy a comparison
        assert "4" not in got and "5" not in got


async def test_misplaced_operators_get_a_message_that_does_not_contradict_itself(make_store: MakeStore) -> None:
    api = await make_store()
    with pytest.raises(InvalidFilterError) as info:
        await api.search(("f",), filter={"$gte": 2})
    assert "must apply to a field" in str(info.value) and "not supported" not in str(info.value)
    with pytest.raises(InvalidFilterError) as info:
        await api.search(("f",), filter={"meta": {"$and": [{"a": 1}]}})
    assert "top level" in str(info.value)


# --------------------------------------------------------------------------- 4. operands BSON cannot encode


class Encoding:
    """A collection proxy that BSON-encodes what it is sent, as a real pymongo client would."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in ("find", "count_documents"):
            return lambda filter, *a, **kw: (bson.encode({"filter": filter}), attr(filter, *a, **kw))[1]
        if name == "aggregate":
            return lambda pipeline, *a, **kw: (bson.encode({"p": pipeline}), attr(pipeline, *a, **kw))[1]
        if name == "bulk_write":

            def bulk_write(models: list[Any], *a: Any, **kw: Any) -> Any:
                for m in models:
                    bson.encode({"q": m._filter, "u": getattr(m, "_doc", {})})
                return attr(models, *a, **kw)

            return bulk_write
        return attr


async def encoding_store(make_store: MakeStore, **kw: Any) -> StoreAPI:
    base = await make_store(**kw)
    return await make_store(collection=Encoding(base.store.collection), setup=False, **kw)


HUGE = [
    ({"n": {"$lt": 10**100}}, ["a", "b", "c"]),
    ({"n": {"$gt": 10**100}}, []),
    ({"n": {"$lte": -(10**100)}}, []),
    ({"n": {"$gte": -(10**100)}}, ["a", "b", "c"]),
    ({"n": {"$lt": 2**64}}, ["a", "b"]),  # exact as a double: c equals it
    ({"n": {"$gt": 2**63}}, ["c"]),  # c holds 2.0**64 (a double)
    ({"n": {"$gte": 2**64}}, ["c"]),
    ({"n": {"$gt": 2**64 + 1}}, []),  # no double between 2**64 and 2**64 + 1
    ({"n": {"$lt": 2**64 + 1}}, ["a", "b", "c"]),
    ({"n": 10**100}, []),
    ({"n": {"$ne": 10**100}}, ["a", "b", "c"]),
    ({"n": {"$in": [10**100, 5]}}, ["b"]),
    ({"n": {"$nin": [10**100, 5]}}, ["a", "c"]),
    ({"n": {"$lt": 10**400}}, ["a", "b", "c"]),  # beyond any double
]


@pytest.mark.parametrize(("filter", "keys"), HUGE, ids=[str(f)[:40] for f, _ in HUGE])
async def test_ints_beyond_int64_compare_exactly(make_store: MakeStore, filter: Any, keys: list[str]) -> None:
    """SqliteStore's tests filter with {"$lt": 10**100}; BSON has no such int."""
    api = await encoding_store(make_store)
    await api.batch([PutOp(("h",), "a", {"n": -3}), PutOp(("h",), "b", {"n": 5}), PutOp(("h",), "c", {"n": 2.0**64})])
    assert sorted(i.key for i in await api.search(("h",), filter=filter)) == keys


UNENCODABLE = [
    {"n": {"$gt": Decimal("1.5")}},
    {"n": Decimal("1.5")},
    {"tags": {"a", "b"}},
    {"d": date(2026, 1, 1)},
    {"d": {"$lt": date(2026, 1, 1)}},
    {"o": object()},
    {"n": {"$in": [{1, 2}]}},
    {"s": "\ud800"},
    {"meta": {"\udfff": 1}},
    {"name": {"$in": [re.compile("^a")]}},
    {"name": re.compile("^a")},
    {"name": {"$eq": bson.regex.Regex("^a")}},
    {"meta": {"name": {"$nin": [re.compile("a")]}}},
]


@pytest.mark.parametrize("filter", UNENCODABLE, ids=[repr(f)[:40] for f in UNENCODABLE])
async def test_operands_bson_cannot_encode_or_that_run_regexes_are_refused(make_store: MakeStore, filter: Any) -> None:
    api = await encoding_store(make_store)
    await api.put(("h",), "a", {"name": "alice", "n": 1})
    with pytest.raises(InvalidFilterError):
        await api.search(("h",), filter=filter)


async def test_regex_operands_are_refused_on_the_semantic_path_too(make_store: MakeStore) -> None:
    emb = HashingEmbeddings(64)
    api = await make_store(index=text_index(emb, ["text"], filter_fields=["name"]))
    await api.put(("h",), "a", {"name": "alice", "text": "pizza"})
    patterns = [{"name": {"$in": [re.compile("^a")]}}, {"name": re.compile("^a")}, {"x": {"$in": [re.compile("a")]}}]
    for filter in patterns:
        with pytest.raises(InvalidFilterError):
            await api.search(("h",), query="pizza", filter=filter)
    # a huge int on a filter field goes to the post-filter, which compares it exactly
    found = await api.search(("h",), query="pizza", filter={"name": {"$lt": 10**100}})
    assert found == []  # a string is not less than a number


# --------------------------------------------------------------------------- 5./6. timestamps


async def test_every_overwrite_moves_updated_at_forward(make_store: MakeStore) -> None:
    """PostgresStore's test checks that an overwrite's updated_at is later; puts within one
    millisecond used to tie (BSON keeps milliseconds)."""
    api = await make_store()
    await api.put(("t",), "k", {"v": 0})
    first = await api.get(("t",), "k")
    previous = first.updated_at  # type: ignore[union-attr]
    for i in range(1, 30):
        await api.put(("t",), "k", {"v": i})
        item = await api.get(("t",), "k")
        assert item is not None and item.updated_at > previous, i
        assert item.created_at == first.created_at <= item.updated_at  # type: ignore[union-attr]
        previous = item.updated_at


async def test_one_batch_overwriting_many_items_moves_each_forward(make_store: MakeStore) -> None:
    api = await make_store()
    keys = [f"k{i}" for i in range(20)]
    before: dict[str, datetime] = {}
    for round_ in range(3):
        await api.batch([PutOp(("t",), k, {"round": round_}) for k in keys])
        items = {i.key: i for i in await api.search(("t",), limit=50)}
        if round_:
            assert all(items[k].updated_at > before[k] for k in keys)
        assert all(i.created_at <= i.updated_at for i in items.values())
        before = {k: items[k].updated_at for k in keys}


async def test_a_slow_embedder_does_not_write_an_older_updated_at(make_store: MakeStore) -> None:
    """The write time is taken when the write is built, after the embedding call: a batch
    that started first but embedded slowly lands with the later updated_at."""
    clock_reads: list[datetime] = []

    class SlowEmbeddings(HashingEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            clock_reads.append(datetime.now(timezone.utc))
            import time

            time.sleep(0.05)
            return super().embed_documents(texts)

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            clock_reads.append(datetime.now(timezone.utc))
            await asyncio.sleep(0.05)
            return super().embed_documents(texts)

    api = await make_store(index=text_index(SlowEmbeddings(64), ["text"]))
    await api.put(("t",), "k", {"text": "pizza"})
    item = await api.get(("t",), "k")
    assert item is not None
    # written after the 50 ms embedding, not at the batch's start
    assert (item.updated_at - clock_reads[0]).total_seconds() >= 0.045
    assert item.created_at <= item.updated_at


# --------------------------------------------------------------------------- 7. ttl_config changes


async def test_ttl_config_changes_after_construction_are_honoured(make_store: MakeStore) -> None:
    # No setup(): no TTL index, so expired items linger as they do until the TTL monitor runs.
    api = await make_store(ttl={"default_ttl": 60}, setup=False)
    await api.put(("t",), "old", {"v": 1}, ttl=0.0001)  # expires in 6 ms
    await asyncio.sleep(0.05)
    assert await api.get(("t",), "old", refresh_ttl=False) is not None  # omit_expired is off
    api.store.ttl_config["omit_expired"] = True  # type: ignore[index]
    assert await api.get(("t",), "old", refresh_ttl=False) is None
    assert await api.search(("t",)) == []
    assert await api.list_namespaces() == []
    assert await api.aggregate(("t",), [{"$project": {"_id": 0, "key": 1}}]) == []
    api.store.ttl_config["omit_expired"] = False  # type: ignore[index]
    assert await api.get(("t",), "old", refresh_ttl=False) is not None


async def test_ttl_config_set_later_on_a_store_without_one(make_store: MakeStore) -> None:
    api = await make_store(setup=False)
    await api.put(("t",), "old", {"v": 1}, ttl=0.0001)
    await asyncio.sleep(0.05)
    api.store.ttl_config = {"omit_expired": True}
    assert await api.get(("t",), "old") is None


# --------------------------------------------------------------------------- 12./13. size and input checks


async def test_key_and_labels_count_toward_the_16_mib_document(make_store: MakeStore) -> None:
    api = await make_store()
    value = {"blob": "x" * (15 * 1024 * 1024)}
    with pytest.raises(InvalidValueError, match="16 MiB"):
        await api.put(("t",), "k" * (2 * 1024 * 1024), value)
    with pytest.raises(InvalidValueError, match="16 MiB"):
        await api.put(("t", "l" * (1024 * 1024)), "k", value)
    assert await api.docs() == []


async def test_vector_documents_with_many_ancestor_paths_are_checked_before_any_write(make_store: MakeStore) -> None:
    """200 labels of 1 KB: each vector document holds 200 ancestor paths (~20 MB)."""
    api = await make_store(index=text_index(HashingEmbeddings(64), ["text"]))
    ns = tuple(f"{i:03d}" + "x" * 1000 for i in range(200))
    with pytest.raises(InvalidValueError, match="vector documents"):
        await api.batch([PutOp(("ok",), "first", {"text": "fine"}), PutOp(ns, "k", {"text": "pizza"})])
    assert await api.docs() == [] and await api.docs("vectors") == []


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [150, 1000])
async def test_deep_nesting_is_refused_before_any_write(make_store: MakeStore, depth: int) -> None:
    api = await make_store()
    with pytest.raises(InvalidValueError, match="nests deeper"):
        await api.batch([PutOp(("t",), "ok", {"v": 1}), PutOp(("t",), "deep", nested(depth))])
    with pytest.raises(InvalidFilterError, match="nested deeper"):
        await api.search(("t",), filter=nested(depth))
    assert await api.docs() == []
    await api.put(("t",), "fine", nested(90))
    assert (await api.get(("t",), "fine")).value == nested(90)  # type: ignore[union-attr]


@pytest.mark.parametrize("ttl", [float("inf"), float("nan"), 1e10, -1, 0, True])
async def test_bad_ttls_are_refused_naming_the_item(make_store: MakeStore, ttl: Any) -> None:
    api = await make_store()
    with pytest.raises(InvalidValueError, match="ttl") as info:
        await api.put(("t",), "k", {"v": 1}, ttl=ttl)
    assert info.value.key == "k"
    assert await api.docs() == []


@pytest.mark.parametrize("default_ttl", [float("inf"), float("nan"), 1e10, 0, -5])
def test_bad_default_ttl_is_a_configuration_error(default_ttl: float) -> None:
    with pytest.raises(ConfigurationError, match="default_ttl"):
        MongoStore.in_memory(ttl={"default_ttl": default_ttl})


@pytest.mark.parametrize("minutes", [0, -1, float("nan"), float("inf")])
async def test_bad_sweep_intervals_are_configuration_errors(make_store: MakeStore, minutes: Any) -> None:
    with pytest.raises(ConfigurationError, match="sweep_interval_minutes"):
        MongoStore.in_memory(ttl={"sweep_interval_minutes": minutes})
    api = await make_store()
    with pytest.raises(ConfigurationError, match="sweep_interval_minutes"):
        if isinstance(api.store, AsyncMongoStore):
            await api.store.start_ttl_sweeper(minutes)
        else:
            api.store.start_ttl_sweeper(minutes)


async def test_lone_surrogates_anywhere_are_refused_before_any_write(make_store: MakeStore) -> None:
    api = await make_store()
    counting = Counting(api.store.collection)
    api2 = await make_store(collection=counting, setup=False)
    cases = [
        (("t", "\ud800"), "k", {"v": 1}, InvalidNamespaceError),
        (("t",), "\ud800", {"v": 1}, InvalidValueError),
        (("t",), "k", {"v": "\ud800"}, InvalidValueError),
        (("t",), "k", {"\ud800": 1}, InvalidValueError),
        (("t",), "k", {"l": ["ok", "\udfff"]}, InvalidValueError),
    ]
    for ns, key, value, error in cases:
        with pytest.raises(error):
            await api2.batch([PutOp(("t",), "good", {"v": 0}), PutOp(ns, key, value)])
    assert counting.calls == []


# --------------------------------------------------------------------------- 15. keys


async def test_non_string_keys_do_not_alias_through_batch(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("t",), "5", {"v": "str"})
    with pytest.raises(InvalidValueError, match="must be a str"):
        await api.batch([PutOp(("t",), 5, {"v": "int"})])  # type: ignore[arg-type]
    assert (await api.get(("t",), "5")).value == {"v": "str"}  # type: ignore[union-attr]


# --------------------------------------------------------------------------- 16. aggregate


class Shifty(list[Any]):
    """A pipeline that shows one thing when checked and another when iterated again."""

    def __init__(self, first: list[Any], later: list[Any]) -> None:
        super().__init__(first)
        self.later = later
        self.seen = 0

    def __iter__(self) -> Any:
        self.seen += 1
        return iter(super().copy() if self.seen == 1 else self.later)


async def test_aggregate_sends_exactly_the_pipeline_it_checked(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("a",), "k", {"v": 1})
    await api.put(("b",), "k", {"v": 2})
    shifty = Shifty([{"$count": "n"}], [{"$unionWith": "other"}, {"$count": "n"}])
    assert await api.aggregate(("a",), shifty) == [{"n": 1}]
    stage = {"$match": {"value.v": 1}}
    pipeline = [stage]
    assert len(await api.aggregate(("a",), pipeline)) == 1
    stage["$match"] = {"value.v": 2}  # the caller's objects are not what was sent
    assert pipeline == [{"$match": {"value.v": 2}}]
