"""The ``$vectorSearch`` stage and page, its pre-filter split, and the unscored items' reads."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mongostore.config import RecencySettings
from mongostore.core.codec import ITEM_PROJECTION, namespace_path
from mongostore.core.queries.filters import ITEM_SORT, LOGICAL_OPS, all_of, not_expired, search_filter, value_filter
from mongostore.core.queries.sharding import shard_range_filter
from mongostore.core.queries.writes import NO_EXPIRY, float32_vector
from mongostore.core.scoring import blend_expression


def vector_prefilter(
    namespace_prefix: tuple[str, ...],
    filter: Mapping[str, Any] | None,
    filter_fields: Sequence[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a search into the ``$vectorSearch`` pre-filter and the post-filter on items.

    The prefix becomes equality on ``ns_prefixes`` (``$vectorSearch`` has no ``$regex``); entries on declared filter
    fields that mongot accepts go into the pre-filter (on the vector documents' copy ``value.<field>``), the rest is
    applied to the joined items. A nested filter field reached by a nested dict is pre-filtered too, and the whole
    entry stays in the post-filter (containment also constrains the other keys and levels).
    """
    pre: list[dict[str, Any]] = []
    if namespace_prefix:
        pre.append({"ns_prefixes": namespace_path(namespace_prefix)})
    post: dict[str, Any] = {}
    nested_fields = [f for f in filter_fields if "." in f]
    for name, spec in (filter or {}).items():
        if name in filter_fields and _prefilterable(spec):
            pre.append(_condition(name, spec))
        else:
            post[name] = spec
            if nested_fields and name not in LOGICAL_OPS:
                pre.extend(_nested_conditions(name, spec, nested_fields))
    return all_of(pre), post


def _condition(path: str, spec: Any) -> dict[str, Any]:
    # Vector documents copy only scalar values of filter fields, so plain MQL
    # equality here cannot match an array that merely contains the value.
    ops = dict(spec) if isinstance(spec, Mapping) else {"$eq": spec}
    return {f"value.{path}": {op: list(v) if isinstance(v, tuple) else v for op, v in ops.items()}}


def _nested_conditions(path: str, spec: Any, nested_fields: Sequence[str]) -> list[dict[str, Any]]:
    """Pre-filter conditions of the nested filter fields under ``path`` in a containment dict."""
    if not (isinstance(spec, Mapping) and spec) or any(isinstance(k, str) and k.startswith("$") for k in spec):
        return []  # a leaf (or an operator dict) on a field that is not declared
    out: list[dict[str, Any]] = []
    for key, sub in spec.items():
        sub_path = f"{path}.{key}"
        if sub_path in nested_fields and _prefilterable(sub):
            out.append(_condition(sub_path, sub))
        elif any(f.startswith(sub_path + ".") for f in nested_fields):
            out.extend(_nested_conditions(sub_path, sub, nested_fields))
    return out


FILTER_SCALARS = (str, int, float, bool, datetime)


def filter_field_values(value: Mapping[str, Any], filter_fields: Sequence[str]) -> dict[str, Any]:
    """The scalar values of the declared filter fields, copied onto vector documents; a
    nested field at its place when every level above it is a dict (never inside arrays)."""
    out: dict[str, Any] = {}
    for f in filter_fields:
        *parents, leaf = f.split(".")
        node: Any = value
        for part in parents:
            node = node.get(part) if isinstance(node, Mapping) else None
        found = node.get(leaf) if isinstance(node, Mapping) else None
        if not isinstance(found, FILTER_SCALARS):
            continue
        target = out
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = found
    return out


# mongot indexes filter strings up to this many characters (longer values are cut at
# index time, not at query time: a longer operand never matches).
MAX_FILTER_STRING = 8191


def _mongot_type(value: Any) -> str | None:
    """mongot's ``ValueType`` of an operand we may send (``Value.fromBson``), else None.

    bool, number, string and date are distinct types; null is left to the post-filter
    (vector documents do not copy missing or non-scalar values, so its meaning differs).
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number" if not isinstance(value, int) or -(2**63) <= value < 2**63 else None
    if isinstance(value, str):
        return "string" if len(value) <= MAX_FILTER_STRING else None
    if isinstance(value, datetime):
        return "date"
    return None


def _prefilterable(spec: Any) -> bool:
    """Only what mongot accepts, with the post-filter's meaning; the rest is post-filtered.

    Equality on a bool, number, string or date; ranges on numbers, strings and dates; ``$in`` of a non-empty list whose
    elements are all of one type (``InOperator``: "must have elements of the same type"; null is not allowed).
    ``$ne``/``$nin`` stay in the post-filter: how ``$vectorSearch`` treats documents that lack the field (vector
    documents copy only scalar values) is not documented.
    """
    if not (isinstance(spec, Mapping) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec)):
        return not isinstance(spec, Mapping) and _mongot_type(spec) is not None
    for op, v in spec.items():
        if op == "$eq":
            ok = _mongot_type(v) is not None
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = _mongot_type(v) in ("number", "string", "date")
        elif op == "$in":
            types = {_mongot_type(x) for x in v} if isinstance(v, (list, tuple)) and v else {None}
            ok = len(types) == 1 and None not in types
        else:
            ok = False
        if not ok:
            return False
    return True


def vector_search_stage(
    index_name: str,
    query_vector: Sequence[float] | None,
    num_candidates: int,
    k: int,
    pre_filter: Mapping[str, Any],
    query_text: str | None = None,
) -> dict[str, Any]:
    """The one ``$vectorSearch`` stage (every Atlas path): the ``k`` nearest vectors that pass
    the pre-filter, by vector (``path: embedding``) or, with automated embedding, by the
    query's text (``path: text``, ``query: {text}``)."""
    stage: dict[str, Any] = {"index": index_name, "numCandidates": num_candidates, "limit": k}
    if query_text is not None:
        stage.update(path="text", query={"text": query_text})
    else:
        assert query_vector is not None
        # Packed float32, as the stored vectors are: mongot ranks in float32 either way
        # (Vector.fromBson), and 384 doubles cost the client ~25 us to encode, BinData ~2 us.
        stage.update(path="embedding", queryVector=float32_vector(query_vector))
    if pre_filter:
        stage["filter"] = dict(pre_filter)
    return {"$vectorSearch": stage}


def scored_page_stages(
    similarity: str | None,
    post_filter: Mapping[str, Any],
    items_collection: str,
    offset: int,
    limit: int,
    now: datetime | None,
    recency: tuple[RecencySettings, datetime] | None = None,
) -> list[dict[str, Any]]:
    """Everything after the search stage(s) of an Atlas page (every mode): ids and scores.

    ``recency``: the settings and the read time; each item's score is then blended with its age
    (``scoring.blend_expression``) before the page is sorted, and ``floor`` holds the lowest hit's
    raw score (what an item not among the hits could at most have: ``_Atlas.rank`` asks again when
    such an item could still reach the page).

    The score: ``vectorSearchScore`` converted back to the index's ``similarity`` (cosine / dotProduct ``(1 + s) / 2``
    -> ``s``, euclidean ``1 / (1 + d^2)`` -> ``-d``), or (None) the fused or reranked ``score`` as it is. ``$facet``:
    ``hits``, the raw hits (fewer than ``k``: every candidate was seen); ``scored``, the items that matched; ``page``,
    the best valid vector per item (its hash still listed, the item passing the filters) as ``{_id, score}``. Never
    whole items in it (``$facet`` caps: 100 MB per output, 16 MiB per document): the page is unwound after, one row per
    entry, each joining its item.
    """
    if similarity is None:
        score: dict[str, Any] = {"$meta": "score"}
        final: Any = 1
    else:
        score = {"$meta": "vectorSearchScore"}
        final = {"$subtract": [{"$multiply": [2, "$score"]}, 1]}
        if similarity == "euclidean":
            final = {"$multiply": [-1, {"$sqrt": {"$subtract": [{"$divide": [1, "$score"]}, 1]}}]}
    group: dict[str, Any] = {"_id": "$item_id", "score": {"$max": "$score"}}  # its best vector's
    if recency is not None:  # and its age (the blend rises with the score: the best vector's is the best)
        group["updated_at"] = {"$first": "$item.updated_at"}
    # $in needs an array: an item without `vectors` (index=False) has no valid vector.
    listed = {"$expr": {"$in": ["$text_hash", {"$ifNull": ["$item.vectors", []]}]}}
    unexpired = {"item.expires_at": {"$not": {"$lte": now}}} if now is not None else {}
    valid: list[dict[str, Any]] = [
        {"$unwind": "$item"},
        {"$match": all_of([listed, value_filter(post_filter, base="item.value"), unexpired])},
        {"$group": group},
    ]
    page: list[dict[str, Any]] = [
        *valid,
        {"$sort": {"score": -1, "_id": 1}},
        {"$skip": offset},
        {"$limit": limit},
        {"$project": {"_id": 1, "score": final}},
    ]
    kept: dict[str, Any] = {"_id": 0, "item_id": 1, "text_hash": 1, "score": 1, "item.vectors": 1}
    if now is not None:
        kept["item.expires_at"] = 1
    kept.update({f"item.value.{name}": 1 for name in filter_field_names(post_filter)})
    facet: dict[str, Any] = {"hits": [{"$count": "n"}], "scored": [*valid, {"$count": "n"}], "page": page}
    if recency is not None:
        settings, read_time = recency
        kept["item.updated_at"] = 1
        blended = blend_expression("$score" if similarity is None else final, "$updated_at", read_time, settings)
        facet["page"] = [
            *valid,
            {"$project": {"_id": 1, "score": blended}},
            {"$sort": {"score": -1, "_id": 1}},
            {"$skip": offset},
            {"$limit": limit},
        ]
        facet["floor"] = [{"$group": {"_id": None, "s": {"$min": "$score"}}}]
    return [
        {"$project": {"_id": 0, "item_id": 1, "text_hash": 1, "score": score}},
        {"$lookup": {"from": items_collection, "localField": "item_id", "foreignField": "_id", "as": "item"}},
        {"$project": kept},
        {"$facet": facet},
        {"$unwind": {"path": "$page", "preserveNullAndEmptyArrays": True}},
        {"$lookup": {"from": items_collection, "localField": "page._id", "foreignField": "_id", "as": "item"}},
        {"$project": {"_id": 0, "hits": 1, "scored": 1, "page": 1, "floor": 1, **_ITEM_FIELDS}},
    ]


def similarity_of(raw: float, similarity: str | None) -> float:
    """A raw ``vectorSearchScore`` as the index's similarity (``scored_page_stages``' conversion, in
    Python); a fused or reranked score (``similarity`` None) as it is."""
    if similarity is None:
        return raw
    if similarity == "euclidean":
        return -math.sqrt(max(0.0, 1 / raw - 1)) if raw > 0 else -math.inf
    return 2 * raw - 1


# The stored fields of a page's items, as ``ITEM_PROJECTION`` keeps them, under ``item``.
_ITEM_FIELDS = {f"item.{name}": 1 for name, keep in {**ITEM_PROJECTION, "_id": 1}.items() if keep}


def page_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The answer of ``scored_page_stages``: the ``$facet`` and the page's items by id (an
    item deleted meanwhile is absent). No rows at all reads as an empty facet."""
    if not rows:
        return {"hits": [], "scored": [], "page": [], "floor": []}, {}
    page = [r["page"] for r in rows if r.get("page")]
    items = {r["page"]["_id"]: r["item"][0] for r in rows if r.get("page") and r.get("item")}
    first = rows[0]
    facet = {"hits": first.get("hits") or [], "scored": first.get("scored") or [], "page": page}
    return {**facet, "floor": first.get("floor") or []}, items


def filter_field_names(filter: Mapping[str, Any] | None) -> list[str]:
    """The top-level ``value`` fields a search filter reads (through ``$and``/``$or``), sorted."""
    names: set[str] = set()

    def walk(f: Mapping[str, Any]) -> None:
        for name, spec in f.items():
            if name in LOGICAL_OPS:
                for sub in spec if isinstance(spec, (list, tuple)) else ():
                    if isinstance(sub, Mapping):
                        walk(sub)
            else:
                names.add(str(name))

    walk(filter or {})
    return sorted(names)


def vector_candidates_filter(
    namespace_prefix: tuple[str, ...], now: datetime | None, sharded: bool = False
) -> dict[str, Any]:
    """The local path's vector documents under the prefix (multikey index on ns_prefixes);
    ``sharded``: the prefix's ``item_id`` range too, for mongos to target."""
    shard_range = shard_range_filter(namespace_prefix, "vectors") if sharded else {}
    prefix = {"ns_prefixes": namespace_path(namespace_prefix)} if namespace_prefix else {}
    return all_of([shard_range, prefix, not_expired(now)])


def unscored_pipeline(
    namespace_prefix: tuple[str, ...],
    filter: Mapping[str, Any] | None,
    vectors_collection: str,
    cutoff: datetime | None,
    skip: int,
    limit: int,
    sharded: bool = False,
) -> list[dict[str, Any]]:
    """Items under the prefix that pass the filter and have no valid vector, newest first:
    none listed, or none of the listed hashes has a vector document (a failed vector write, or
    one removed behind the store's rule: docs/decisions.md, issue 34)."""
    pipeline: list[dict[str, Any]] = []
    base = search_filter(namespace_prefix, filter, cutoff, sharded)
    if base:
        pipeline.append({"$match": base})
    pipeline += [
        _vectors_lookup(vectors_collection),
        {"$match": {"$expr": {"$eq": [{"$size": _BACKED_HASHES}, 0]}}},
        {"$sort": dict(ITEM_SORT)},
    ]
    if skip:
        pipeline.append({"$skip": skip})
    pipeline += [{"$limit": limit}, {"$project": ITEM_PROJECTION}]
    return pipeline


def missing_vectors_pipeline(vectors_collection: str) -> list[dict[str, Any]]:
    """Count the items listing hashes some of which have no vector document (repairable:
    their next put re-embeds the missing texts)."""
    return [
        {"$match": {"vectors": {"$exists": True}}},
        _vectors_lookup(vectors_collection),
        {"$match": {"$expr": {"$gt": [{"$size": {"$ifNull": ["$vectors", []]}}, {"$size": _BACKED_HASHES}]}}},
        {"$count": "n"},
    ]


def items_missing_vectors(items: Iterable[Mapping[str, Any]], vectors: Iterable[Mapping[str, Any]]) -> int:
    """``missing_vectors_pipeline``'s count from the items' listed hashes and the vectors' (item, hash)
    pairs, read as they are (where a read costs no round trip: an engine in this process)."""
    held: dict[str, set[str]] = {}
    for v in vectors:
        held.setdefault(v["item_id"], set()).add(v["text_hash"])
    return sum(1 for d in items if d.get("vectors") and not set(d["vectors"]) <= held.get(d["_id"], set()))


def stale_vectors_pipeline(
    items_collection: str, cutoff: datetime | None, dead_before: datetime | None = None
) -> list[dict[str, Any]]:
    """Vector documents whose item does not list their hash (or is gone), written at or before
    ``cutoff`` (None: whenever): ``{_id, item_id}`` each. A put lists a hash only with its vector
    written in the same request, so one of these older than ``VECTOR_GRACE`` stays unlisted
    (``stale_vectors_request``, docs/decisions.md "Issue 34 (parts 1-2)"). ``dead_before``: an item
    that expired then lists nothing (the sweep: it deletes that item in the same write, and no
    refresh revives it, ``refresh_ttl_requests``)."""
    pipeline: list[dict[str, Any]] = [{"$match": {"updated_at": {"$lte": cutoff}}}] if cutoff is not None else []
    listed = {"$ifNull": [{"$arrayElemAt": ["$_item.vectors", 0]}, []]}
    # $eq false, not $not: mongomock 4.3's $not answers false for everything.
    unlisted: dict[str, Any] = {"$eq": [{"$in": ["$text_hash", listed]}, False]}
    if dead_before is not None:
        expiry = {"$ifNull": [{"$arrayElemAt": ["$_item.expires_at", 0]}, NO_EXPIRY]}
        unlisted = {"$or": [unlisted, {"$lte": [expiry, dead_before]}]}
    return [
        *pipeline,
        {"$lookup": {"from": items_collection, "localField": "item_id", "foreignField": "_id", "as": "_item"}},
        {"$match": {"$expr": unlisted}},
        {"$project": {"_id": 1, "item_id": 1}},
    ]


def unlisted_vectors(items: Iterable[Mapping[str, Any]], vectors: Iterable[Mapping[str, Any]]) -> list[Any]:
    """``stale_vectors_pipeline``'s documents from the items' listed hashes and the vectors, read as
    they are (an engine in this process: two plain reads, no ``$lookup`` per vector; for ``dead_before``,
    the caller reads no item that expired then)."""
    listed = {(d["_id"], h) for d in items for h in d.get("vectors") or ()}
    return [v for v in vectors if (v["item_id"], v["text_hash"]) not in listed]


def _vectors_lookup(vectors_collection: str) -> dict[str, Any]:
    return {"$lookup": {"from": vectors_collection, "localField": "_id", "foreignField": "item_id", "as": "_vectors"}}


# The item's listed text hashes that have a vector document (after _vectors_lookup).
# $filter + $in rather than the $set* operators, which mongomock 4.3 lacks.
_BACKED_HASHES: dict[str, Any] = {
    "$filter": {
        "input": {"$ifNull": ["$vectors", []]},
        "as": "h",
        "cond": {"$in": ["$$h", {"$ifNull": ["$_vectors.text_hash", []]}]},
    }
}
