"""Documents -> Items at the decode edge of ``mongostore.core.codec`` (no database)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import bson
import pytest
from bson.int64 import Int64
from langgraph.store.base import get_text_at_path
from langgraph.store.base.embed import tokenize_path

from mongostore.core.codec import _bad_field_name, doc_to_item, doc_to_search_item, extract_texts, plain_value
from mongostore.core.plan import aggregate_plan
from mongostore.core.steps import Aggregate

NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)
VALUE: dict[str, Any] = {"big": 2**31, "small": 5, "neg": -(2**40), "list": [2**33, [2**34]], "deep": {"n": 2**35}}


def types_of(value: Any) -> Any:
    """The shape of ``value`` with each leaf replaced by its exact type."""
    if isinstance(value, dict):
        return {k: types_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [types_of(v) for v in value]
    return type(value)


def stored(value: dict[str, Any]) -> dict[str, Any]:
    """An item document as pymongo decodes it from a real server (BSON round trip)."""
    doc = {"namespace": ["a"], "key": "k", "value": value, "created_at": NOW, "updated_at": NOW}
    return bson.decode(bson.encode(doc))


def test_bson_gives_int64_for_ints_outside_int32() -> None:
    """The premise: what pymongo returns from any server for these values."""
    decoded = stored(VALUE)["value"]
    assert type(decoded["big"]) is Int64 and type(decoded["deep"]["n"]) is Int64 and type(decoded["small"]) is int


def test_items_get_back_the_ints_the_user_put() -> None:
    doc = stored(VALUE)
    assert types_of(doc_to_item(doc).value) == types_of(VALUE)
    assert types_of(doc_to_search_item(doc, 0.5).value) == types_of(VALUE)
    assert doc_to_item(doc).value == VALUE


def test_plain_value_copies_only_what_changed() -> None:
    untouched = {"a": [1, "x", {"b": 2.5}], "c": None}
    assert plain_value(untouched) is untouched
    mixed = {"keep": {"x": 1}, "fix": Int64(7)}
    out = plain_value(mixed)
    assert out == {"keep": {"x": 1}, "fix": 7} and type(out["fix"]) is int
    assert out["keep"] is mixed["keep"] and type(mixed["fix"]) is Int64  # the input is not mutated


def test_plain_value_walks_every_container_a_document_class_may_give() -> None:
    """A client with another ``document_class`` (SON, OrderedDict) decodes values into it:
    their Int64s come back as ints too, in the same class; untouched ones are the input."""
    from collections import OrderedDict

    from bson.son import SON

    for cls in (SON, OrderedDict):
        value = cls([("n", Int64(5)), ("deep", [1, cls([("m", Int64(2**40))])]), ("s", "x")])
        out = plain_value(value)
        assert type(out) is cls and out == {"n": 5, "deep": [1, {"m": 2**40}], "s": "x"}
        assert type(out["n"]) is int and type(out["deep"][1]["m"]) is int
        same = cls([("a", 1), ("b", [2.5, None, True])])
        assert plain_value(same) is same
    assert plain_value(Int64(3)) == 3 and type(plain_value(Int64(3))) is int


def test_as_utc_gives_the_same_instant_in_timezone_utc_for_every_decoding() -> None:
    from datetime import datetime, timedelta, timezone

    from bson.tz_util import FixedOffset, utc

    from mongostore.core.codec import as_utc

    instant = datetime(2026, 3, 8, 2, 30, 15, 123000, tzinfo=timezone.utc)
    for decoded in (
        instant.replace(tzinfo=None),  # tz_aware=False (pymongo's default)
        instant,  # tzinfo=timezone.utc
        instant.astimezone(utc),  # tz_aware=True: bson's own UTC
        instant.astimezone(FixedOffset(-300, "EST")),  # tz_aware with a tzinfo
        instant.astimezone(timezone(timedelta(hours=5, minutes=30))),
    ):
        got = as_utc(decoded)
        assert got == instant and got.tzinfo is timezone.utc and got.isoformat() == instant.isoformat()


def test_aggregate_results_hold_plain_ints() -> None:
    plan = aggregate_plan([{"$match": {}}])
    step = next(plan)
    assert isinstance(step, Aggregate)
    try:
        plan.send([{"_id": Int64(2**40), "n": Int64(3), "values": [Int64(1)]}])
    except StopIteration as stop:
        (row,) = stop.value
    assert types_of(row) == {"_id": int, "n": int, "values": [int]}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    cur = value
    for _ in range(depth):
        cur["n"] = {}
        cur = cur["n"]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": [1, {"$x": {"y\x00": 1}}]}, "field name 'y\\x00' in value.a[1].$x contains a NUL byte"),
        ({"a": {"b\x00": 1}}, "field name 'b\\x00' in value.a contains a NUL byte"),
        ({"a": ["ok", "\ud800"]}, "the string at value.a[1] is not valid UTF-8 (a lone surrogate)"),
        ({"a": (1, {"b": {"c": "\udc00"}})}, "the string at value.a[1].b.c is not valid UTF-8 (a lone surrogate)"),
        ({"é\ud800": 1}, "field name 'é\\ud800' in value is not valid UTF-8 (a lone surrogate)"),
        ({1: 2}, "field name 1 in value is not a string"),
        ({"{where}": {"$k": {2: 1}}}, "field name 2 in value.{where}.$k is not a string"),
        (_nested(100), "value" + ".n" * 99 + " nests deeper than 98 levels; MongoDB allows 100 per document"),
    ],
)
def test_a_refused_value_names_the_path_to_what_is_wrong(value: dict[Any, Any], message: str) -> None:
    assert _bad_field_name(value) == message


def test_a_storable_value_is_not_refused() -> None:
    value = {"s": "ascii", "u": "ünïcode", "n": [1, 2.5, None, True, Int64(7)], "d": {"x.y": _nested(96)}}  # 98 deep
    assert _bad_field_name(value) is None


@pytest.mark.parametrize(
    "value",
    [
        {"text": "plain"},
        {"text": 5},
        {"text": None},
        {"text": ["a", "b"]},
        {"text": {"nested": "x"}},
        {"other": "x"},
        {"text": "", "title": "t"},
    ],
)
def test_extract_texts_names_texts_as_get_text_at_path_does(value: dict[str, Any]) -> None:
    # A top-level string field takes a shortcut; every path must give what LangGraph gives.
    paths = ["text", "title", "text[*]", "text.nested", "*", "{text,title}"]
    for path in paths:
        texts = get_text_at_path(value, tokenize_path(path))
        want = {path: texts[0]} if len(texts) == 1 else {f"{path}.{i}": t for i, t in enumerate(texts)}
        assert extract_texts(value, [(path, tokenize_path(path))]) == want, path
