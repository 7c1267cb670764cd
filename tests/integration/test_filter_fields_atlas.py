"""Filter fields on the Atlas double (issue 28): nested filter fields in the ``$vectorSearch``
pre-filter (item 8), and filter fields added to a store that already holds vectors (item 7)."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.atlas import atlas_collection
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from mongostore import ConfigurationError, MongoStore
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.tools.embeddings import HashingEmbeddings

DIMS = 32
PRODUCTS = {
    ("a",): ("id_0", "apples", False),
    ("a", "b", "c"): ("id_1", "oranges", True),
    ("a", "b", "c", "d"): ("id_2", "pears", False),
    ("a", "x"): ("id_3", "ripe pears", True),
}


def cfg(**extra: Any) -> dict[str, Any]:
    return {"dims": DIMS, "embed": HashingEmbeddings(DIMS), "fields": ["product"], **extra}


def puts() -> list[PutOp]:
    return [
        PutOp(ns, key, {"product": product, "metadata": {"available": available, "grade": key[-1]}})
        for ns, (key, product, available) in PRODUCTS.items()
    ]


def keys(found: list[Any]) -> list[tuple[str, float | None]]:
    return [(x.key, None if x.score is None else round(x.score, 9)) for x in found]


def test_nested_filter_fields_go_into_the_vector_search_prefilter() -> None:
    """langgraph-store-mongodb's ``filters=["metadata.available"]``: a nested value field,
    reached by a nested dict filter, is filtered inside ``$vectorSearch``."""
    coll = atlas_collection()
    store = MongoStore(coll, index=cfg(filter_fields=["metadata.available"]))
    store.setup()
    [idx] = list(store.vectors_collection.list_search_indexes())
    assert {"type": "filter", "path": "value.metadata.available"} in idx["latestDefinition"]["fields"]
    store.batch(puts())
    flt = {"metadata": {"available": True}}
    found = store.search(("a",), query="pears", filter=flt)
    assert coll.atlas.requests[-1].filter == {
        "$and": [{"ns_prefixes": "a."}, {"value.metadata.available": {"$eq": True}}]
    }
    assert sorted(x.key for x in found) == ["id_1", "id_3"]
    reference = InMemoryStore(index=cfg())  # type: ignore[arg-type]
    reference.batch(puts())
    assert [x.key for x in found] == [x.key for x in reference.search(("a",), query="pears", filter=flt)]
    local = MongoStore(in_memory_collection(), index=cfg(filter_fields=["metadata.available"]))
    local.batch(puts())
    assert keys(local.search(("a",), query="pears", filter=flt)) == keys(found)
    # the other keys of the nested dict stay a post-filter, with containment's meaning
    both = store.search(("a",), query="pears", filter={"metadata": {"available": True, "grade": "3"}})
    assert [x.key for x in both] == ["id_3"]
    vdoc = store.vectors_collection.find_one({"item_id": {"$regex": "id_1$"}})
    assert vdoc is not None and vdoc["value"] == {"metadata": {"available": True}}


def test_nested_filter_field_names_are_checked() -> None:
    for bad in ("metadata.", ".x", "a..b", "a.$b"):
        with pytest.raises(ConfigurationError, match="dotted path"):
            MongoStore(in_memory_collection(), index=cfg(filter_fields=[bad]))
    with pytest.raises(ConfigurationError, match="one may not hold the other"):
        MongoStore(in_memory_collection(), index=cfg(filter_fields=["metadata", "metadata.available"]))


@pytest.mark.parametrize(
    ("fields", "flt"),
    [(["kind"], {"kind": "fruit"}), (["metadata.available"], {"metadata": {"available": True}})],
)
def test_setup_copies_added_filter_fields_onto_existing_vectors(fields: list[str], flt: dict[str, Any]) -> None:
    """After a filter field is added and setup() runs, a filtered semantic search returns the
    same items as before the change, less those the filter drops (issue 28 item 7)."""
    coll = atlas_collection()
    before = MongoStore(coll, index=cfg())
    before.setup()
    before.batch([PutOp(op.namespace, op.key, {**(op.value or {}), "kind": "fruit"}) for op in puts()])
    before.put(("a",), "veg", {"product": "pear-shaped squash", "kind": "veg", "metadata": {"available": True}})
    unfiltered = keys(before.search(("a",), query="pears", limit=20))
    after = MongoStore(coll, index=cfg(filter_fields=fields))
    after.setup()
    got = keys(after.search(("a",), query="pears", filter=flt, limit=20))
    assert coll.atlas.requests[-1].filter is not None and "$and" in coll.atlas.requests[-1].filter  # pre-filtered
    reference = keys(before.search(("a",), query="pears", filter=flt, limit=20))  # post-filtered, exact
    assert got == reference and got == [kv for kv in unfiltered if kv[0] in {k for k, _ in reference}]
    assert len(got) >= 2
