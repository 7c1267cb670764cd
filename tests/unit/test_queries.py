"""The pure builders of ``mongostore.core.queries`` (and the namespace helpers of ``_codec``).

Each test pins the exact MQL a builder returns for one case, and where a regex is
involved, also checks what that regex matches (Python's ``re`` and the server's
PCRE agree on every construct used here: ``^``, ``$``, ``\\.``, ``[^.]``, ``(?:|)``).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from langgraph.store.base import MatchCondition

from mongostore import InvalidFilterError
from mongostore.core import queries as q
from mongostore.core.codec import ancestor_paths, item_id, namespace_path

NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
NOT_EXPIRED = {"expires_at": {"$not": {"$lte": NOW}}}


def eq(value: Any) -> dict[str, Any]:
    """A scalar equality as the builders write it: never matching arrays that contain the value."""
    return {"$eq": value, "$not": {"$type": "array"}}


# --------------------------------------------------------------------------- namespace <-> path


def test_namespace_path_and_ids() -> None:
    assert namespace_path(("users", "alice", "memories")) == "users.alice.memories."
    assert namespace_path(()) == ""
    assert ancestor_paths(("users", "alice")) == ["users.", "users.alice."]
    assert item_id(("a", "b"), "k") == "a.b.\x00k"
    # A key may hold '.' and NUL: the first NUL still separates path and key, so no collision.
    assert item_id(("a", "b"), "k") != item_id(("a",), "b.\x00k")


# --------------------------------------------------------------------------- prefix filter


def test_prefix_filter_is_an_anchored_option_free_regex_string() -> None:
    f = q.prefix_filter(("a", "b"))
    assert f == {"path": {"$regex": "^a\\.b\\."}}
    assert isinstance(f["path"]["$regex"], str)  # never a compiled pattern (its flags defeat the index)
    assert "$options" not in f["path"]


def test_prefix_filter_of_the_root_adds_no_condition() -> None:
    assert q.prefix_filter(()) == {}


def test_prefix_filter_stops_at_label_boundary() -> None:
    pattern = q.prefix_filter(("a",))["path"]["$regex"]
    assert re.search(pattern, "a.b.")
    assert re.search(pattern, "a.")
    assert not re.search(pattern, "ab.")
    pattern = q.prefix_filter(("users", "alice"))["path"]["$regex"]
    assert re.search(pattern, "users.alice.memories.")
    assert not re.search(pattern, "users.alicex.")


@pytest.mark.parametrize(
    ("label", "expected", "would_match_unescaped"),
    [
        ("a+b", "^a\\+b\\.", "aab."),
        ("a*b", "^a\\*b\\.", "b."),
        ("(", "^\\(\\.", None),
        ("[", "^\\[\\.", None),
        ("\\", "^\\\\\\.", None),
        ("^", "^\\^\\.", None),
        ("$", "^\\$\\.", None),
        ("|", "^\\|\\.", "zzz."),
        ("?", "^\\?\\.", None),
        ("x{2}", "^x\\{2\\}\\.", "xx."),
    ],
)
def test_prefix_filter_escapes_regex_metacharacters(
    label: str, expected: str, would_match_unescaped: str | None
) -> None:
    pattern = q.prefix_filter((label,))["path"]["$regex"]
    assert pattern == expected
    assert re.search(pattern, namespace_path((label, "child")))
    if would_match_unescaped is not None:
        # The unescaped label, read as a regex, would leak into this other namespace.
        assert re.search("^" + label + "\\.", would_match_unescaped)
        assert not re.search(pattern, would_match_unescaped)


@pytest.mark.parametrize("label", ["ünïcødé", "日本", "🦜", "naïve café"])
def test_prefix_filter_keeps_unicode_literal(label: str) -> None:
    pattern = q.prefix_filter((label,))["path"]["$regex"]
    assert pattern == "^" + re.escape(label) + "\\."
    assert re.search(pattern, label + ".x.")
    assert not re.search(pattern, label + "x.")


def test_not_expired() -> None:
    assert q.not_expired(NOW) == NOT_EXPIRED


# --------------------------------------------------------------------------- list_namespaces


def test_namespaces_match_without_conditions() -> None:
    assert q.namespaces_match(None) == {}
    assert q.namespaces_match([]) == {}
    assert q.namespaces_match([MatchCondition("prefix", ())]) == {}


def test_namespaces_match_prefix_with_wildcard_checks_length() -> None:
    assert q.namespaces_match([MatchCondition("prefix", ("a", "*"))]) == {
        "path": {"$regex": "^a\\.[^.]+\\."},
        "depth": {"$gte": 2},
    }


def test_namespaces_match_suffix() -> None:
    assert q.namespaces_match([MatchCondition("suffix", ("d", "*"))]) == {
        "path": {"$regex": "(?:^|\\.)d\\.[^.]+\\.$"},
        "depth": {"$gte": 2},
    }


def test_namespaces_match_several_conditions_are_anded() -> None:
    got = q.namespaces_match([MatchCondition("prefix", ("a",)), MatchCondition("prefix", ("x",))])
    assert got == {
        "$and": [
            {"path": {"$regex": "^a\\."}},
            {"depth": {"$gte": 1}},
            {"path": {"$regex": "^x\\."}},
            {"depth": {"$gte": 1}},
        ]
    }


def test_namespaces_match_escapes_literal_labels() -> None:
    assert q.namespaces_match([MatchCondition("prefix", ("a*b", "*"))])["path"] == {"$regex": "^a\\*b\\.[^.]+\\."}


@pytest.mark.parametrize(
    ("cond", "path", "depth", "matches"),
    [
        (MatchCondition("suffix", ("d", "*")), "a.b.d.e.", 4, True),
        (MatchCondition("suffix", ("d", "*")), "a.b.d.", 3, False),
        (MatchCondition("suffix", ("*", "b", "c")), "a.b.c.", 3, True),
        (MatchCondition("suffix", ("*", "b", "c")), "a.c.b.", 3, False),
        (MatchCondition("suffix", ("*", "b", "c")), "b.c.", 2, False),
        (MatchCondition("suffix", ("f",)), "a.f.", 2, True),
        (MatchCondition("suffix", ("f",)), "a.xf.", 2, False),
        (MatchCondition("prefix", ("a", "*")), "a.", 1, False),
        (MatchCondition("prefix", ("a", "*")), "a.b.", 2, True),
        (MatchCondition("prefix", ("a", "*", "f")), "a.c.f.", 3, True),
        (MatchCondition("prefix", ("a", "*", "f")), "a.c.g.", 3, False),
    ],
)
def test_condition_semantics(cond: MatchCondition, path: str, depth: int, matches: bool) -> None:
    """Evaluate the built clause by hand on one stored (path, depth)."""
    clause = q.namespaces_match([cond])
    ok = bool(re.search(clause["path"]["$regex"], path)) and depth >= clause["depth"]["$gte"]
    assert ok is matches


def test_unknown_match_type_is_rejected() -> None:
    with pytest.raises(InvalidFilterError):
        q.namespaces_match([MatchCondition("infix", ("a",))])  # type: ignore[arg-type]


def group_id(pipeline: list[dict[str, Any]]) -> Any:
    (group,) = [stage["$group"] for stage in pipeline if "$group" in stage]
    return group["_id"]


def test_list_namespaces_pipeline_plain() -> None:
    # No $limit before $group (the existing MongoDB store's bug M2): paging is on the groups' ns_key.
    pipeline = q.list_namespaces_pipeline(None, None, None, 0, 10)
    assert pipeline[0] == {"$group": {"_id": "$namespace", "k": {"$min": "$ns_key"}}}


def test_list_namespaces_pipeline_max_depth() -> None:
    assert group_id(q.list_namespaces_pipeline(None, 2, None, 0, 10)) == {"$slice": ["$namespace", 2]}
    # max_depth=0 groups everything into the root namespace () without relying on $slice 0.
    assert group_id(q.list_namespaces_pipeline(None, 0, None, 0, 10)) == {"$literal": []}


def test_list_namespaces_pipeline_conditions_and_expiry() -> None:
    conds = [MatchCondition("prefix", ("a",))]
    plain = q.list_namespaces_pipeline(conds, None, None, 0, 10)
    assert plain[0] == {"$match": {"path": {"$regex": "^a\\."}, "depth": {"$gte": 1}}}
    assert group_id(plain) == "$namespace"
    expiring = q.list_namespaces_pipeline(conds, 1, NOW, 0, 10)
    assert expiring[0] == {"$match": {"$and": [{"path": {"$regex": "^a\\."}, "depth": {"$gte": 1}}, NOT_EXPIRED]}}
    assert group_id(expiring) == {"$slice": ["$namespace", 1]}
    assert q.list_namespaces_pipeline(None, None, NOW, 0, 10)[0] == {"$match": NOT_EXPIRED}


# --------------------------------------------------------------------------- value filters


def test_empty_filter() -> None:
    assert q.value_filter(None) == {}
    assert q.value_filter({}) == {}


def test_scalar_equality_excludes_arrays() -> None:
    assert q.value_filter({"c": "red"}) == {"value.c": eq("red")}
    assert q.value_filter({"n": 5}) == {"value.n": eq(5)}
    assert q.value_filter({"b": True}) == {"value.b": eq(True)}


def test_string_that_looks_like_an_operator_is_data() -> None:
    assert q.value_filter({"a": "$where"}) == {"value.a": eq("$where")}


NOT_ARRAY = {"$not": {"$type": "array"}}


@pytest.mark.parametrize("op", ["$eq", "$gt", "$gte", "$lt", "$lte"])
def test_each_comparison_operator_compares_the_whole_value(op: str) -> None:
    assert q.value_filter({"n": {op: 2}}) == {"value.n": {op: 2, **NOT_ARRAY}}


def test_ne_lets_arrays_through_as_a_whole_value_never_equals_a_scalar() -> None:
    assert q.value_filter({"n": {"$ne": 2}}) == {"$or": [{"value.n": {"$ne": 2}}, {"value.n": {"$type": "array"}}]}


def test_operators_combine_on_one_field() -> None:
    assert q.value_filter({"n": {"$gte": 1, "$lt": 5}}) == {"value.n": {"$gte": 1, "$lt": 5, **NOT_ARRAY}}


def test_list_operands_of_eq_and_ne_are_exact_list_comparisons() -> None:
    exact = {"$and": [{"value.t": {"$eq": ["x"]}}, {"$expr": {"$eq": ["$value.t", {"$literal": ["x"]}]}}]}
    assert q.value_filter({"t": {"$eq": ["x"]}}) == exact
    assert q.value_filter({"t": {"$ne": ["x"]}}) == {"$nor": [exact]}


def test_several_fields_are_anded() -> None:
    assert q.value_filter({"c": "red", "n": {"$gt": 1}}) == {
        "$and": [{"value.c": eq("red")}, {"value.n": {"$gt": 1, **NOT_ARRAY}}]
    }


def test_nested_dict_is_containment_that_never_looks_inside_arrays() -> None:
    assert q.value_filter({"meta": {"a": 1}}) == {"$and": [{"value.meta": NOT_ARRAY}, {"value.meta.a": eq(1)}]}
    assert q.value_filter({"meta": {"a": 1, "b": {"c": "x"}}}) == {
        "$and": [
            {"value.meta": NOT_ARRAY},
            {"value.meta.a": eq(1)},
            {"value.meta.b": NOT_ARRAY},
            {"value.meta.b.c": eq("x")},
        ]
    }
    assert q.value_filter({"meta": {}}) == {"value.meta": {"$type": "object", **NOT_ARRAY}}


def test_list_equality_is_exact() -> None:
    assert q.value_filter({"tags": ["x", "y"]}) == {
        "$and": [{"value.tags": {"$eq": ["x", "y"]}}, {"$expr": {"$eq": ["$value.tags", {"$literal": ["x", "y"]}]}}]
    }
    assert q.value_filter({"tags": ("x",)}) == q.value_filter({"tags": ["x"]})


def test_none_matches_missing_or_null_but_not_arrays_holding_null() -> None:
    assert q.value_filter({"missing": None}) == {"value.missing": eq(None)}


def test_extension_operators() -> None:
    assert q.value_filter({"n": {"$in": [1, 2]}}) == {"value.n": {"$in": [1, 2]}}
    assert q.value_filter({"n": {"$nin": (1, 2)}}) == {"value.n": {"$nin": [1, 2]}}
    assert q.value_filter({"n": {"$exists": False}}) == {"value.n": {"$exists": False}}


def test_logical_operators() -> None:
    assert q.value_filter({"$or": [{"c": "red"}, {"n": {"$gt": 3}}]}) == {
        "$or": [{"value.c": eq("red")}, {"value.n": {"$gt": 3, **NOT_ARRAY}}]
    }
    assert q.value_filter({"$and": [{"c": "red"}, {"$or": [{"n": 1}, {"n": 2}]}]}) == {
        "$and": [{"value.c": eq("red")}, {"$or": [{"value.n": eq(1)}, {"value.n": eq(2)}]}]
    }


def test_base_prefix() -> None:
    assert q.value_filter({"c": "red"}, base="item.value") == {"item.value.c": eq("red")}


@pytest.mark.parametrize(
    "bad",
    [
        {"$where": "this.value.n > 1"},
        {"$expr": {"$gt": ["$value.n", 1]}},
        {"$function": {"body": "return true", "args": [], "lang": "js"}},
        {"$nor": [{"a": 1}]},
        {"$not": {"a": 1}},
        {"$text": {"$search": "x"}},
        {"a": {"$function": {"body": "return true", "args": [], "lang": "js"}}},
        {"a": {"$where": "1"}},
        {"a": {"$regex": "x"}},
        {"a": {"$elemMatch": {"b": 1}}},
        {"a": {"$expr": 1}},
        {"a": {"$not": {"$eq": 1}}},
        {"a": {"$size": 1}},
        {"a": {"$eq": {"$where": "x"}}},
        {"a": {"$in": [{"$where": "x"}]}},
        {"a": {"$ne": [{"b": {"$function": {}}}]}},
        {"a": {"$gt": 1, "b": 2}},
        {"meta": {"a": {"$where": "x"}}},
        {"meta.a": 1},
        {"meta": {"x.y": 1}},
        {"": 1},
        {"a\x00b": 1},
        {1: 2},
        {"a": {"$in": "xy"}},
        {"a": {"$exists": 1}},
        {"$and": []},
        {"$or": {"a": 1}},
        {"$and": ["a"]},
        {"$or": [{"$where": "x"}]},
    ],
)
def test_rejections(bad: dict[Any, Any]) -> None:
    with pytest.raises(InvalidFilterError) as info:
        q.value_filter(bad)
    assert isinstance(info.value, ValueError)


def test_filter_must_be_a_dict() -> None:
    with pytest.raises(InvalidFilterError):
        q.value_filter(["a"])  # type: ignore[arg-type]


def test_search_filter() -> None:
    assert q.search_filter((), None, None) == {}
    assert q.search_filter(("a",), None, None) == {"path": {"$regex": "^a\\."}}
    assert q.search_filter((), {"c": "red"}, None) == {"value.c": eq("red")}
    assert q.search_filter(("a",), {"c": "red"}, NOW) == {
        "$and": [{"path": {"$regex": "^a\\."}}, {"value.c": eq("red")}, NOT_EXPIRED]
    }


def test_item_sort_is_newest_first_then_path_then_key() -> None:
    """Ties go by ``_id``, which orders as (path, key) does: namespaces that prefix others, keys with
    dots, NUL and non-ASCII, labels around the NUL that separates path and key."""
    from mongostore.core.codec import item_id, namespace_path

    assert q.ITEM_SORT == [("updated_at", -1), ("_id", 1)]
    namespaces = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a!",), ("a", " "), ("é",), ("a", "\x01")]
    keys = ["", "k", "k.1", "k\x00z", "\x00", "é", "~", " "]
    pairs = [(ns, k) for ns in namespaces for k in keys]
    by_path_key = sorted(pairs, key=lambda p: (namespace_path(p[0]).encode(), p[1].encode()))
    by_id = sorted(pairs, key=lambda p: item_id(*p).encode())
    assert by_id == by_path_key


# --------------------------------------------------------------------------- write requests


UPDATED_AT = {"$max": [NOW, {"$add": ["$updated_at", 1]}]}
CREATED_AT = {"$set": {"created_at": {"$ifNull": ["$created_at", "$updated_at"]}}}


def test_put_item_request_is_an_update_pipeline_without_reads() -> None:
    req = q.put_item_request(("a", "b"), "k", {"v": 1}, NOW, None, None)
    assert req == q.WriteRequest(
        "items",
        "update_one",
        {"_id": "a.b.\x00k"},
        [
            {
                "$set": {
                    "namespace": {"$literal": ["a", "b"]},
                    "path": {"$literal": "a.b."},
                    "depth": 2,
                    "ns_key": {"$literal": "a\x00b"},
                    "key": {"$literal": "k"},
                    "value": {"$literal": {"v": 1}},
                    # strictly later than the stored updated_at, whatever the clock says
                    "updated_at": UPDATED_AT,
                }
            },
            # set on insert only, from the same updated_at: created_at <= updated_at
            CREATED_AT,
            {"$project": {"expires_at": 0, "ttl_minutes": 0}},
        ],
        upsert=True,
    )
    assert req.item == (("a", "b"), "k")


def test_put_item_request_keeps_dollar_strings_literal() -> None:
    req = q.put_item_request(("$a",), "$k", {"s": "$path", "l": ["$x"]}, NOW, None, None)
    assert isinstance(req.update, list)
    set_ = req.update[0]["$set"]
    assert set_["value"] == {"$literal": {"s": "$path", "l": ["$x"]}}
    assert set_["key"] == {"$literal": "$k"} and set_["namespace"] == {"$literal": ["$a"]}


def test_put_item_request_with_fractional_ttl() -> None:
    req = q.put_item_request(("a",), "k", {}, NOW, 1.5, None)
    assert isinstance(req.update, list)
    assert req.update[0]["$set"]["expires_at"] == NOW + timedelta(seconds=90)
    assert req.update[0]["$set"]["ttl_minutes"] == 1.5
    assert len(req.update) == 2  # nothing to remove


def test_put_item_request_stores_ttl_as_float() -> None:
    req = q.put_item_request(("a",), "k", {}, NOW, 2, None)
    assert isinstance(req.update, list)
    ttl = req.update[0]["$set"]["ttl_minutes"]
    assert ttl == 2.0 and isinstance(ttl, float)


def test_put_item_request_vector_hashes() -> None:
    with_hashes = q.put_item_request(("a",), "k", {}, NOW, 1, ["h1", "h2"])
    assert isinstance(with_hashes.update, list)
    assert with_hashes.update[0]["$set"]["vectors"] == {"$literal": ["h1", "h2"]}
    none_left = q.put_item_request(("a",), "k", {}, NOW, 1, [])
    assert none_left.update == [
        {
            "$set": {
                "namespace": {"$literal": ["a"]},
                "path": {"$literal": "a."},
                "depth": 1,
                "ns_key": {"$literal": "a"},
                "key": {"$literal": "k"},
                "value": {"$literal": {}},
                "updated_at": UPDATED_AT,
                "expires_at": NOW + timedelta(minutes=1),
                "ttl_minutes": 1.0,
            }
        },
        CREATED_AT,
        {"$project": {"vectors": 0}},
    ]


def test_delete_item_requests() -> None:
    assert q.delete_item_requests(("a",), "k", with_vectors=False) == [
        q.WriteRequest("items", "delete_one", {"_id": "a.\x00k"})
    ]
    # vectors: only those not written for VECTOR_GRACE (a younger one may be listed by a write in flight)
    assert q.delete_item_requests(("a",), "k", with_vectors=True, now=NOW) == [
        q.WriteRequest("vectors", "delete_many", {"item_id": "a.\x00k", "updated_at": {"$lte": NOW - q.VECTOR_GRACE}}),
        q.WriteRequest("items", "delete_one", {"_id": "a.\x00k"}),
    ]


def test_refresh_ttl_requests_one_update_per_distinct_ttl() -> None:
    reqs = q.refresh_ttl_requests("items", {1.0: ["x", "y"], 0.5: ["z"]}, NOW)
    alive = {"expires_at": {"$gt": NOW - q.VECTOR_GRACE / 2}}  # an item long expired is not revived
    assert reqs == [
        q.WriteRequest(
            "items",
            "update_many",
            {"_id": {"$in": ["z"]}, "ttl_minutes": 0.5, **alive},  # (only while the TTL is the one read)
            {"$set": {"expires_at": NOW + timedelta(seconds=30)}},
        ),
        q.WriteRequest(
            "items",
            "update_many",
            {"_id": {"$in": ["x", "y"]}, "ttl_minutes": 1.0, **alive},
            {"$set": {"expires_at": NOW + timedelta(minutes=1)}},
        ),
    ]
    # A refresh never touches updated_at: it is not a modification.
    assert all("updated_at" not in (r.update or {})["$set"] for r in reqs)


def test_refresh_ttl_requests_on_vectors_use_item_id_and_outlive_the_item() -> None:
    (req,) = q.refresh_ttl_requests("vectors", {2.0: ["x"]}, NOW, id_field="item_id")
    assert req.filter == {"item_id": {"$in": ["x"]}, "expires_at": {"$ne": None}}  # (a put may have dropped it)
    assert req.role == "vectors"
    # never earlier than it is (a put may have set a longer TTL)
    assert req.update == {"$max": {"expires_at": NOW + timedelta(minutes=2) + q.VECTOR_GRACE}}


def test_stale_vectors_request() -> None:
    assert q.stale_vectors_request(("a",), "k", ["h"], NOW) == q.WriteRequest(
        "vectors",
        "delete_many",
        {"item_id": "a.\x00k", "text_hash": {"$nin": ["h"]}, "updated_at": {"$lte": NOW - q.VECTOR_GRACE}},
    )
    every = q.stale_vectors_request(("a",), "k", [], NOW)
    assert every.filter == {"item_id": "a.\x00k", "updated_at": {"$lte": NOW - q.VECTOR_GRACE}}


def test_put_vector_request_writes_the_whole_document_keyed_by_its_text() -> None:
    req = q.put_vector_request(("a",), "k", "text", "h1", [0.5, 0.5], {}, NOW, 1.0)
    assert req.filter == {"_id": "a.\x00k\x00h1"} and req.upsert
    set_ = req.update["$set"]  # type: ignore[call-overload]
    assert set_["text_hash"] == "h1" and set_["updated_at"] == NOW
    # the latest expiry any writer of this text asked (another's put may land after this one's item)
    assert req.update["$max"] == {"expires_at": NOW + timedelta(minutes=1) + q.VECTOR_GRACE}  # type: ignore[call-overload]
    never = q.put_vector_request(("a",), "k", "text", "h1", None, {}, NOW, None, vid="legacy")
    assert never.filter == {"_id": "legacy"}
    assert never.update["$max"] == {"expires_at": q.NO_EXPIRY} and "expires_at" not in never.update["$set"]  # type: ignore[call-overload]


# --------------------------------------------------------------------------- indexes


def test_item_indexes() -> None:
    assert q.item_indexes() == [
        q.IndexSpec((("path", 1), ("key", 1)), "path_key", unique=True),
        q.IndexSpec((("path", 1), ("updated_at", -1)), "path_updated_at"),
        q.IndexSpec((("expires_at", 1),), "expires_at_ttl", expire_after_seconds=0),
    ]


def test_namespace_keys_sort_as_tuples() -> None:
    from mongostore.core.codec import namespace_key

    labels = ["a", "a-b", "a b", "ab", "a!", "b", "Z", "é", "a\x01", "aa", "~", "\U0001f600", "\uff5a"]
    namespaces = [(x,) for x in labels] + [(x, y) for x in labels[:6] for y in labels[:6]]
    namespaces += [("a", "b", "c"), ("a", "b", "c", "d")]
    by_key = sorted(namespaces, key=namespace_key)
    assert by_key == sorted(namespaces)
    # MongoDB compares strings by their UTF-8 bytes (simple binary collation)
    assert sorted(namespaces, key=lambda ns: namespace_key(ns).encode()) == sorted(namespaces)


def test_list_namespaces_pipeline_paged_on_the_server() -> None:
    assert q.list_namespaces_pipeline(None, 2, None, 5, 10) == [
        {"$group": {"_id": {"$slice": ["$namespace", 2]}, "k": {"$min": "$ns_key"}}},
        {"$sort": {"k": 1}},
        {"$skip": 5},
        {"$limit": 10},
        {"$project": {"_id": 1}},
    ]


def test_query_vectors_are_sent_packed_as_float32_bindata() -> None:
    """``$vectorSearch`` takes a BinData float32 queryVector (mongot: ``Vector.fromBson``)
    and ranks in float32 either way: packed, 384 dims cost ~2 us to encode, not ~25 us."""
    import numpy as np
    from bson.binary import Binary, BinaryVectorDtype

    query = [0.1, -0.25, 1e-3, 0.7]
    stages = [q.vector_search_stage("v", query, 20, 10, {})["$vectorSearch"]]
    for stage in stages:
        sent = stage["queryVector"]
        assert isinstance(sent, Binary) and sent.subtype == 9
        vec = sent.as_vector()
        assert vec.dtype == BinaryVectorDtype.FLOAT32
        assert vec.data == np.asarray(query, dtype=np.float32).tolist()


def test_items_missing_vectors_counts_as_the_pipeline_does() -> None:
    """The in-process count (two plain reads) agrees with ``missing_vectors_pipeline`` on every shape:
    no list, an empty list, all held, one missing, a duplicate, vectors of another item, none at all."""
    import mongomock

    db = mongomock.MongoClient()["db"]
    items = [
        {"_id": "a"},
        {"_id": "b", "vectors": []},
        {"_id": "c", "vectors": ["h1", "h2"]},
        {"_id": "d", "vectors": ["h1", "h3"]},
        {"_id": "e", "vectors": ["h1", "h1"]},
        {"_id": "f", "vectors": ["h9"]},
        {"_id": "g", "vectors": ["h1"]},
    ]
    vectors = [
        {"_id": "c/1", "item_id": "c", "text_hash": "h1"},
        {"_id": "c/2", "item_id": "c", "text_hash": "h2"},
        {"_id": "d/1", "item_id": "d", "text_hash": "h1"},
        {"_id": "e/1", "item_id": "e", "text_hash": "h1"},
        {"_id": "x/1", "item_id": "x", "text_hash": "h9"},
    ]
    db["m"].insert_many([dict(d) for d in items])
    db["v"].insert_many([dict(d) for d in vectors])
    by_pipeline = list(db["m"].aggregate(q.missing_vectors_pipeline("v")))
    assert by_pipeline == [{"n": 3}]  # d, f, g
    assert q.items_missing_vectors(items, vectors) == 3
