"""Atlas Vector Search as mongot really behaves (issue 10), on both stores.

Every test runs on ``MongoStore`` and ``AsyncMongoStore`` over the Atlas double
(``tests/fakes/atlas.py``), whose indexes go through mongot's lifecycle: PENDING and
BUILDING (queries fail with code 8), READY, a rebuild that keeps serving the old
definition, FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import StoreAPI, text_index
from fakes.atlas import AtlasSearch, async_atlas_collection, atlas_collection
from langgraph.store.base import PutOp
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore import AsyncMongoStore, ConfigurationError, MongoStore, VectorIndexError
from mongostore.config import DEFAULT_INDEX_NAME
from mongostore.core.retrieval import vector_index_definition
from mongostore.tools.embeddings import HashingEmbeddings

Make = Callable[..., Awaitable[StoreAPI]]


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str) -> Make:
    """``await make(coll=None, setup=True, search_opts..., **index)``: a store on the double.

    Pass ``coll=`` to put a second store on the same collection (a changed config).
    """

    async def build(*, coll: Any = None, setup: bool = True, dims: int = 64, fields: tuple[str, ...] = ("text",),
                    search: dict[str, Any] | None = None, **index: Any) -> StoreAPI:
        if coll is None:
            coll = (atlas_collection if kind == "sync" else async_atlas_collection)(**(search or {}))
        cfg = text_index(HashingEmbeddings(dims), list(fields), **index)
        store: Any = MongoStore(coll, index=cfg) if kind == "sync" else AsyncMongoStore(coll, index=cfg)
        api = StoreAPI(store, f"{kind}-atlas")
        api.atlas = coll.atlas  # type: ignore[attr-defined]
        api.coll = coll  # type: ignore[attr-defined]
        if setup:
            await api.setup()
        return api

    return build


def atlas(api: StoreAPI) -> AtlasSearch:
    return api.atlas  # type: ignore[attr-defined, no-any-return]


async def vectors_call(api: StoreAPI, method: str, *args: Any) -> Any:
    out = getattr(api.store.vectors_collection, method)(*args)
    return await out if api.is_async else out


async def list_indexes(api: StoreAPI) -> list[dict[str, Any]]:
    cur = await vectors_call(api, "list_search_indexes")
    return list(await cur.to_list() if api.is_async else cur)


async def seed(api: StoreAPI) -> None:
    await api.batch(
        [
            PutOp(("u",), "pizza", {"text": "I like pizza", "kind": "food"}),
            PutOp(("u",), "work", {"text": "I work at night", "kind": "work"}),
        ]
    )


# --------------------------------------------------------------------------- 1. setup waits for READY


async def test_setup_after_a_dims_change_returns_when_the_new_definition_serves(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    first = await make(search={"queryable_after": 3})
    await seed(first)
    second = await make(coll=first.coll, setup=False, dims=32)  # type: ignore[attr-defined]
    with caplog.at_level(logging.INFO, logger="mongostore"):
        await second.setup()
    assert "waiting for vector search index" in caplog.text  # progress while it rebuilds
    [doc] = await list_indexes(second)
    assert doc["status"] == "READY"
    # a search right after setup() runs on the new definition (no "indexed with 64 dimensions")
    await second.put(("u",), "new", {"text": "I like pizza"})
    found = await second.search(("u",), query="I like pizza")
    assert found[0].key == "new" and found[0].score == pytest.approx(1.0)
    assert atlas(second).vector_search_calls >= 1


async def test_setup_after_a_filter_field_change_returns_when_it_can_be_filtered(make: Make) -> None:
    first = await make(search={"queryable_after": 3})
    second = await make(coll=first.coll, filter_fields=["kind"])  # type: ignore[attr-defined]
    await seed(second)
    # the filter on the new field runs inside $vectorSearch (no "needs to be indexed as filter")
    found = await second.search(("u",), query="pizza", filter={"kind": "food"})
    assert [r.key for r in found] == ["pizza"]
    assert atlas(second).requests[-1].filter == {"$and": [{"ns_prefixes": "u."}, {"value.kind": {"$eq": "food"}}]}


async def test_a_failed_rebuild_is_reported_although_the_index_stays_queryable(make: Make) -> None:
    first = await make()
    atlas(first).build_fails = True
    second = await make(coll=first.coll, setup=False, filter_fields=["kind"])  # type: ignore[attr-defined]
    with pytest.raises(VectorIndexError, match=r"failed to build \(the previous definition still serves") as exc:
        await second.setup()
    assert "drop_search_index('mongostore_vectors')" in str(exc.value)
    [doc] = await list_indexes(second)
    assert (doc["status"], doc["queryable"]) == ("FAILED", True)


async def test_a_failed_first_build_is_reported(make: Make) -> None:
    with pytest.raises(VectorIndexError, match="failed to build"):
        await make(search={"build_fails": True})


async def test_setup_wait_is_bounded_and_says_what_it_saw(make: Make) -> None:
    api = await make(setup=False, setup_timeout=0.3, search={"queryable_after": 10_000})
    with pytest.raises(VectorIndexError, match=r"not ready on the wanted definition after 0s \(status BUILDING"):
        await api.setup()


async def test_update_failure_says_how_to_drop_and_recreate(make: Make) -> None:
    first = await make(search={"updates_fail": True})
    second = await make(coll=first.coll, setup=False, dims=32)  # type: ignore[attr-defined]
    with pytest.raises(VectorIndexError, match="Atlas Local may not support updating it") as exc:
        await second.setup()
    assert "drop_search_index('mongostore_vectors')" in str(exc.value)
    assert isinstance(exc.value.__cause__, OperationFailure)


# --------------------------------------------------------------------------- 2. queries during the first build


async def recreate_building(api: StoreAPI) -> None:
    """Another process dropped and re-created the index; its first build is in progress."""
    await vectors_call(api, "drop_search_index", DEFAULT_INDEX_NAME)
    atlas(api).queryable_after = 10**6
    model = SearchIndexModel(definition=vector_index_definition(64, "cosine", []), name=DEFAULT_INDEX_NAME,
                             type="vectorSearch")
    await vectors_call(api, "create_search_index", model)
    atlas(api).hold("BUILDING")


async def test_a_query_during_the_first_build_ranks_locally_and_logs_once(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make()
    await seed(api)
    await recreate_building(api)
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        first = await api.search(("u",), query="I like pizza")
        calls = atlas(api).vector_search_calls
        second = await api.search(("u",), query="I like pizza")
    assert first[0].key == second[0].key == "pizza" and first[0].score == pytest.approx(1.0)
    assert atlas(api).vector_search_calls == calls  # the second search did not ask mongot again
    assert caplog.text.count("cannot serve queries yet") == 1
    assert "INITIAL_SYNC" in caplog.text
    # once it is ready (and the store asks again), searches use $vectorSearch again
    atlas(api).finish_builds()
    api.store._io.recheck_seconds = 0
    assert (await api.search(("u",), query="I like pizza"))[0].key == "pizza"
    assert atlas(api).vector_search_calls > calls


async def test_a_store_that_finds_the_index_building_ranks_locally(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make(search={"queryable_after": 10_000}, setup=False)
    await seed(api)
    await vectors_call(
        api, "create_search_index",
        SearchIndexModel(definition=vector_index_definition(64, "cosine", []), name=DEFAULT_INDEX_NAME,
                         type="vectorSearch"),
    )
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        found = await api.search(("u",), query="I like pizza")
    assert found[0].key == "pizza"
    assert atlas(api).vector_search_calls == 0
    assert "is PENDING for 0s and cannot serve queries yet" in caplog.text
    assert (await api.status())["search_path"] == "local"


async def test_forced_atlas_raises_while_the_index_builds(make: Make) -> None:
    api = await make(vector_search="atlas")
    await seed(api)
    await recreate_building(api)
    with pytest.raises(VectorIndexError, match=r"cannot serve queries yet.*building"):
        await api.search(("u",), query="pizza")


# --------------------------------------------------------------------------- 3. missing or misspelled index


async def test_a_missing_index_ranks_locally_instead_of_answering_nothing(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make(setup=False)
    await seed(api)
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        found = await api.search(("u",), query="I like pizza")
    assert found[0].key == "pizza" and found[0].score == pytest.approx(1.0)
    assert "no vector search index 'mongostore_vectors'" in caplog.text and "run setup()" in caplog.text
    # setup() creates it, and searches use it from then on
    await api.setup()
    await api.search(("u",), query="I like pizza")
    assert atlas(api).vector_search_calls == 1


async def test_a_misspelled_index_name_is_named_with_the_ones_that_exist(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    good = await make()
    await seed(good)
    typo = await make(coll=good.coll, setup=False, index_name="mongostore_vectros")  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        assert (await typo.search(("u",), query="I like pizza"))[0].key == "pizza"
    assert "'mongostore_vectros'" in caplog.text and "found: mongostore_vectors" in caplog.text


async def test_forced_atlas_refuses_a_missing_index(make: Make) -> None:
    api = await make(setup=False, vector_search="atlas")
    with pytest.raises(VectorIndexError, match="no vector search index 'mongostore_vectors'"):
        await api.search(("u",), query="pizza")


# --------------------------------------------------------------------------- 4. the probe


async def test_an_empty_index_list_from_a_pre_7_1_server_is_not_search(make: Make) -> None:
    api = await make(setup=False, search={"search_enabled": False, "server_version": "7.0.1"})
    await api.setup()  # createSearchIndexes fails with 115: caught, local ranking
    await seed(api)
    assert (await api.search(("u",), query="I like pizza"))[0].key == "pizza"
    assert atlas(api).vector_search_calls == 0
    status = await api.status()
    assert status["search_path"] == "local"
    assert status["server_version"] == "7.0.1"


async def test_a_pre_7_0_server_answers_59_on_create(make: Make) -> None:
    api = await make(search={"search_enabled": False, "server_version": "6.0.5"})
    assert "code 59" in (await api.status())["detail"]


async def test_an_uncoded_search_error_means_no_search(make: Make, caplog: pytest.LogCaptureFixture) -> None:
    api = await make(setup=False)
    await seed(api)
    atlas(api).errors["list"] = OperationFailure("unrecognized command: $listSearchIndexes")  # code None
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        await api.setup()
        assert (await api.search(("u",), query="I like pizza"))[0].key == "pizza"
    assert "unrecognized command: $listSearchIndexes" in caplog.text
    assert atlas(api).vector_search_calls == 0


async def test_a_type_error_from_a_real_server_is_not_no_search(make: Make) -> None:
    api = await make(setup=False, search={"server_version": "8.0.4"})
    await seed(api)
    atlas(api).errors["list"] = TypeError("a driver bug")
    with pytest.raises(TypeError, match="a driver bug"):
        await api.search(("u",), query="pizza")


# --------------------------------------------------------------------------- 5. writes without the search probe


@pytest.mark.parametrize(
    "error",
    [
        OperationFailure("Error connecting to Search Index Management service.", 125),
        OperationFailure("not authorized to list search indexes", 13),
    ],
)
@pytest.mark.parametrize("server", [None, "8.0.4", "7.0.12"])
async def test_puts_and_deletes_need_no_search_probe(make: Make, error: Exception, server: str | None) -> None:
    api = await make(setup=False, search={"server_version": server} if server else {})
    atlas(api).errors["list"] = error
    await seed(api)
    await api.delete(("u",), "work")
    assert [i.key for i in await api.search(("u",))] == ["pizza"]
    await api.sweep_after_grace()  # its vector, written within VECTOR_GRACE, goes with the sweep
    assert len(await api.docs("vectors")) == 1
    assert atlas(api).list_search_indexes_calls == 0
    with pytest.raises(OperationFailure):  # a semantic search does need it
        await api.search(("u",), query="pizza")


# --------------------------------------------------------------------------- 6. $facet carries no items


async def test_the_facet_carries_ids_and_scores_and_each_row_after_it_one_item(make: Make) -> None:
    api = await make(filter_fields=["kind"])
    big = "x" * 200_000
    await api.batch([PutOp(("u",), f"k{i}", {"text": f"pizza {i}", "blob": big, "n": i}) for i in range(5)])
    found = await api.search(("u",), query="pizza 3", filter={"n": {"$gte": 1}}, limit=3)
    assert found[0].key == "k3" and found[0].value["blob"] == big
    assert len(found) == 3
    rows = atlas(api).outputs[-3:]  # one row per page entry, in page order
    assert all(set(r["page"]) == {"_id", "score"} and len(r["item"]) == 1 for r in rows)
    assert [r["item"][0]["key"] for r in rows] == [f.key for f in found]


# --------------------------------------------------------------------------- 7. pre-filter types


@pytest.mark.parametrize(
    ("filt", "expected"),
    [
        ({"kind": {"$in": ["food", 1]}}, {"pizza", "one"}),  # mixed types: mongot refuses
        ({"kind": {"$in": ["food", None]}}, {"pizza"}),  # null in $in: mongot refuses
        ({"kind": {"$in": [True, 1]}}, {"one"}),  # bool is not a number
        ({"kind": {"$eq": ["food"]}}, set()),  # arrays are not operands
        ({"kind": "x" * 9000}, set()),  # longer than mongot indexes filter strings
    ],
)
async def test_filters_mongot_refuses_go_to_the_post_filter(
    make: Make, filt: dict[str, Any], expected: set[str]
) -> None:
    api = await make(filter_fields=["kind"])
    await seed(api)
    await api.put(("u",), "one", {"text": "pizza", "kind": 1})
    found = await api.search(("u",), query="pizza", filter=filt)
    assert {r.key for r in found} == expected
    assert atlas(api).requests[-1].filter == {"ns_prefixes": "u."}


async def test_a_same_type_in_is_pre_filtered(make: Make) -> None:
    api = await make(filter_fields=["kind"])
    await seed(api)
    found = await api.search(("u",), query="pizza", filter={"kind": {"$in": ["work"]}})
    assert [r.key for r in found] == ["work"]
    assert atlas(api).requests[-1].filter == {"$and": [{"ns_prefixes": "u."}, {"value.kind": {"$in": ["work"]}}]}


# --------------------------------------------------------------------------- 9. the smaller ones


async def test_sweep_counts_items_only_on_the_client_bulk_write_path(make: Make) -> None:
    # no setup(): mongomock would honour the TTL index itself and leave the sweep nothing
    api = await make(setup=False, search={"server_version": "8.0.4"})
    await api.put(("u",), "a", {"text": "pizza"}, ttl=0.001)  # 60 ms
    await api.put(("u",), "b", {"text": "pasta"})
    await asyncio.sleep(0.1)
    assert api.store._io.server.client_bulk_write  # type: ignore[union-attr]
    assert await api.sweep_ttl() == 1
    assert [i.key for i in await api.search(("u",))] == ["b"]
    # a's vector expires VECTOR_GRACE after its item (issue 34: a TTL refresh racing the sweep finds it)
    assert sorted(v["item_id"] for v in await api.docs("vectors")) == ["u.\x00a", "u.\x00b"]


async def test_vectors_in_another_database_are_refused(kind: str) -> None:
    coll = atlas_collection() if kind == "sync" else async_atlas_collection()
    other = coll.database.client["elsewhere"]["vectors"]
    cls: Any = MongoStore if kind == "sync" else AsyncMongoStore
    with pytest.raises(ConfigurationError, match="must be in the items' database 'test', not 'elsewhere'"):
        cls(coll, index=text_index(HashingEmbeddings(8), ["text"]), vectors_collection=other)


async def test_malformed_dotted_filter_fields_are_refused(kind: str) -> None:
    """Nested filter fields are dotted paths ("meta.kind", issue 28); empty or $ segments are not."""
    cls: Any = MongoStore if kind == "sync" else AsyncMongoStore
    coll = atlas_collection() if kind == "sync" else async_atlas_collection()
    cls(coll, index=text_index(HashingEmbeddings(8), ["text"], filter_fields=["meta.kind"]))
    with pytest.raises(ConfigurationError, match="dotted path"):
        cls(coll, index=text_index(HashingEmbeddings(8), ["text"], filter_fields=["meta..kind"]))


def test_atlas_local_uris_in_docstrings_say_direct_connection() -> None:
    import mongostore.tools.cli.app

    for doc in (MongoStore.__doc__, AsyncMongoStore.__doc__, mongostore.tools.cli.app.__doc__):
        assert doc is not None and "localhost:27017" in doc
        assert "localhost:27017/?directConnection=true" in doc
