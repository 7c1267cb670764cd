"""Values with ``$``-prefixed and dotted field names are stored and returned (issue 29, item 7).

JSON Schema's ``$ref``, ``$schema``, ``$id`` and ``$defs`` are ordinary data for
InMemoryStore, SqliteStore and PostgresStore. MongoDB 5.0+ stores such names in nested
documents written by an insert, an upsert or an update pipeline, where the store's item
``value`` goes as a ``$literal`` (manual: "Field Names with Periods and Dollar Signs").
Filters cannot name them: MongoDB reads ``$name`` in a filter as an operator.
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from conftest import MakeStore, text_index
from langgraph.store.memory import InMemoryStore

from mongostore import InvalidFilterError, InvalidValueError
from mongostore.core.codec import plain_value
from mongostore.tools.embeddings import HashingEmbeddings

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://example.com/person.json",
    "$ref": "#/$defs/person",
    "$defs": {"person": {"type": "object", "$comment": "a person", "properties": {"name": {"type": "string"}}}},
    "both": {"$ref": "#/x", "$id": "y"},  # pymongo decodes this shape as a DBRef: it comes back a dict
    "list": [{"$inc": 1}, {"$set": {"$where": "1"}}],
    "price.usd": 45.99,
    "text": "a JSON schema for a person",
    "kind": "schema",
}


async def test_values_with_dollar_keys_round_trip(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("schemas",), "person", SCHEMA)
    await api.put(("schemas",), "person", SCHEMA)  # the update path (an existing document)
    item = await api.get(("schemas",), "person")
    assert item is not None and item.value == SCHEMA
    found = await api.search(("schemas",), filter={"kind": "schema"})
    assert [i.value for i in found] == [SCHEMA]
    reference = InMemoryStore()
    reference.put(("schemas",), "person", SCHEMA)
    assert reference.get(("schemas",), "person").value == item.value  # type: ignore[union-attr]


async def test_filters_cannot_name_a_dollar_field_and_say_why(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("schemas",), "person", SCHEMA)
    for filt in ({"$schema": SCHEMA["$schema"]}, {"$defs": {"person": {"type": "object"}}}, {"both": {"$ref": "#/x"}}):
        with pytest.raises(InvalidFilterError) as info:
            await api.search(("schemas",), filter=filt)
        message = str(info.value)
        assert "field of your values" in message and "$getField" in message, message
    with pytest.raises(InvalidFilterError) as where:
        await api.search(("schemas",), filter={"$where": "1"})
    assert "field of your values" not in str(where.value)  # a MongoDB operator is not taken for a field


def test_semantic_search_returns_them() -> None:
    from mongostore import MongoStore

    embed = HashingEmbeddings(64)
    store = MongoStore.in_memory(index=text_index(embed, ["text"]))
    store.put(("schemas",), "person", SCHEMA)
    hits = store.search(("schemas",), query="schema for a person")
    assert [h.value for h in hits] == [SCHEMA]


def test_a_dbref_shaped_subdocument_comes_back_as_the_dict_put() -> None:
    decoded = bson.decode(bson.encode({"value": SCHEMA}))["value"]
    assert decoded != SCHEMA  # "both" decodes as a DBRef
    assert plain_value(decoded) == SCHEMA


async def test_what_mongodb_cannot_store_is_still_refused_and_named(make_store: MakeStore) -> None:
    api = await make_store()
    for value, reason in (
        ({"$ref": {"a\x00b": 1}}, "contains a NUL byte"),
        ({"$ref": {1: 2}}, "is not a string"),
        ({"$ref": "\ud800"}, "not valid UTF-8"),
    ):
        with pytest.raises(InvalidValueError, match=reason):
            await api.put(("a",), "k", value)
    assert await api.docs() == []


@pytest.mark.usefixtures("clean_store_env")
def test_the_cli_puts_gets_exports_and_imports_them(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from mongostore.tools.cli import EXIT_OK, main

    def run(*argv: str) -> Any:
        code = main(["--embed", "hashing", *argv, "--json"])
        out, err = capsys.readouterr()
        assert code == EXIT_OK, err
        return json.loads(out) if out.strip().startswith("{") else out

    value = SCHEMA
    run("put", "schemas", "person", json.dumps(value))  # a top-level $ref with $id: not a DBRef
    assert run("get", "schemas", "person")["item"]["value"] == value
    run("export", "-o", str(tmp_path / "all.jsonl"))
    run("rm", "schemas", "person")
    assert run("import", str(tmp_path / "all.jsonl"))["written"] == 1
    assert run("get", "schemas", "person")["item"]["value"] == value
