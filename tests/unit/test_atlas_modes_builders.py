"""Pure builders of issue 28: nested filter fields, the backfill's pieces, refusals read narrowly."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.errors import OperationFailure

from mongostore.config import index_settings
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core.codec import text_hash
from mongostore.core.plan import paths as modes
from mongostore.core.plan.setup import added_filter_fields, auto_embed_change, text_of
from mongostore.core.steps import Capabilities
from mongostore.errors import ConfigurationError
from mongostore.tools.embeddings import HashingEmbeddings


def settings(**extra: Any) -> Any:
    return index_settings({"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"], **extra})


def test_nested_filter_fields_prefilter_and_keep_the_whole_entry_in_the_post_filter() -> None:
    flt = {"meta": {"level": {"$gte": 2}, "tags": ["a"]}, "kind": "x"}
    pre, post = q.vector_prefilter(("u",), flt, ["meta.level", "kind"])
    assert pre == {"$and": [{"ns_prefixes": "u."}, {"value.meta.level": {"$gte": 2}}, {"value.kind": {"$eq": "x"}}]}
    assert post == {"meta": {"level": {"$gte": 2}, "tags": ["a"]}}
    # not pre-filterable (a list operand), or a field that is not declared: post-filter only
    assert q.vector_prefilter((), {"meta": {"level": [1, 2]}}, ["meta.level"])[0] == {}
    assert q.vector_prefilter((), {"meta": {"other": 1}}, ["meta.level"])[0] == {}
    assert q.vector_prefilter((), {"meta": {"a": {"b": True}}}, ["meta.a.b"])[0] == {"value.meta.a.b": {"$eq": True}}


def test_nested_filter_values_are_copied_at_their_place_through_dicts_only() -> None:
    value = {"meta": {"level": 3, "deep": {"ok": True}}, "list": [{"x": 1}], "kind": "k"}
    fields = ["meta.level", "meta.deep.ok", "list.x", "kind", "meta.missing"]
    assert q.filter_field_values(value, fields) == {"meta": {"level": 3, "deep": {"ok": True}}, "kind": "k"}
    assert q.filter_field_values({"meta": [{"level": 1}]}, ["meta.level"]) == {}


def test_added_filter_fields_compare_the_definitions() -> None:
    old = r.vector_index_definition(8, "cosine", ["kind"])
    new = r.vector_index_definition(8, "cosine", ["kind", "meta.level"])
    assert added_filter_fields(old, new) == ["meta.level"]
    assert added_filter_fields(None, new) == ["kind", "meta.level"]
    assert added_filter_fields(new, old) == []


@pytest.mark.parametrize(
    ("fields", "value", "field", "text"),
    [
        (["text"], {"text": "pizza"}, "text", "pizza"),
        (["notes[*]"], {"notes": ["a", "b"]}, "notes[*].1", "b"),
        (["a.b"], {"a": {"b": "deep"}}, "a.b", "deep"),
    ],
)
def test_text_of_finds_the_text_a_put_stored(fields: list[str], value: dict[str, Any], field: str, text: str) -> None:
    index = settings(fields=fields)
    assert text_of(index, value, field, text_hash(field, text)) == text
    assert text_of(index, value, field, "another hash") is None


def test_auto_embed_change_refuses_only_autoembed_field_changes() -> None:
    auto = r.AutoEmbedSettings("voyage-4")
    a = r.vector_index_definition(1024, "cosine", [], auto)
    b = r.vector_index_definition(1024, "cosine", ["kind"], auto)
    lite = r.vector_index_definition(1024, "cosine", [], r.AutoEmbedSettings("voyage-4-lite"))
    plain = r.vector_index_definition(8, "cosine", [], None)
    assert auto_embed_change("i", a, b) is None  # filter fields may change
    assert auto_embed_change("i", plain, a) is None  # the server decides
    for wanted in (lite, plain):
        err = auto_embed_change("i", a, wanted)
        assert err is not None and "never updates autoEmbed fields" in str(err)


def test_refused_stage_reads_only_refusals_that_name_the_stage() -> None:
    caps = Capabilities("8.0.4", emulated=False, vector_search=True, client_bulk_write=True)
    hybrid = settings(hybrid={})
    rerank = settings(rerank={"model": "rerank-2.5"})

    def fail(message: str, code: int | None) -> OperationFailure:
        return OperationFailure(message, code, {"errmsg": message, "code": code})

    flagged = modes.refused_stage(fail("$rankFusion is not allowed ...", 224), hybrid, caps)
    assert isinstance(flagged, modes.NoRankFusion) and flagged.vector_search
    assert modes.path_for(hybrid, flagged, True) == "local" and modes.path_for(hybrid, caps, True) == "atlas"
    assert isinstance(
        modes.refused_stage(fail("Unrecognized pipeline stage name: '$rankFusion'", 40324), hybrid, caps),
        modes.NoRankFusion,
    )
    with pytest.raises(ConfigurationError, match=r"refused \$rerank"):
        modes.refused_stage(fail("Unrecognized pipeline stage name: '$rerank'", 40324), rerank, caps)
    assert modes.refused_stage(fail("Unrecognized pipeline stage name: '$vectorSearch'", 40324), hybrid, caps) is None
    assert modes.refused_stage(fail("$rankFusion bad spec", 9191100), hybrid, caps) is None
    assert modes.refused_stage(fail("no search", 31082), rerank, caps) is None


def test_rerank_is_guarded_against_documents_without_text() -> None:
    stages = r.atlas_pipeline(
        type("Op", (), {"query": "q", "namespace_prefix": (), "filter": None, "offset": 0, "limit": 5})(),
        settings(rerank={"model": "rerank-2.5", "candidates": 10}),
        "items",
        None,
        [0.1] * 8,
        10,
    )
    names = [next(iter(s)) for s in stages]
    at = names.index("$rerank")
    assert stages[at - 1] == {"$match": {"text": {"$type": "string"}}}
