"""The scoping of user aggregation pipelines (``MongoStore.aggregate``): the prefix's ``$match`` first,
and a stage allow-list. What a pipeline may hold is described in ``mongostore.tools.analytics``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import InvalidNamespaceError

from mongostore.core.queries import not_expired, prefix_filter, shard_range_filter
from mongostore.errors import PipelineError

#: Stages a user pipeline may hold: each reads only the documents flowing into it.
ALLOWED_STAGES = frozenset(
    {
        "$match",
        "$project",
        "$addFields",
        "$set",
        "$unset",
        "$group",
        "$sort",
        "$skip",
        "$limit",
        "$count",
        "$unwind",
        "$bucket",
        "$bucketAuto",
        "$facet",
        "$replaceRoot",
        "$replaceWith",
        "$sample",
        "$sortByCount",
        "$redact",
        "$setWindowFields",
        "$densify",
        "$fill",
    }
)

#: Allowed stages that mongomock 4.3 does not implement (they raise NotImplementedError
#: there); they work on a real server.
MONGOMOCK_MISSING_STAGES = frozenset(
    {"$unset", "$bucketAuto", "$replaceWith", "$sortByCount", "$redact", "$setWindowFields", "$densify", "$fill"}
)

#: Stages refused with a specific reason (anything else off the allow-list is refused too).
FORBIDDEN_STAGES: Mapping[str, str] = {
    "$out": "it writes to another collection",
    "$merge": "it writes to another collection",
    "$unionWith": "it reads another collection",
    "$lookup": "it reads another collection or items outside the namespace prefix",
    "$graphLookup": "it reads another collection or items outside the namespace prefix",
    "$documents": "it reads documents from outside the items collection",
    "$collStats": "it reads collection statistics",
    "$indexStats": "it reads index statistics",
    "$planCacheStats": "it reads the server's plan cache",
    "$currentOp": "it reads the server's operations",
    "$listSessions": "it reads the server's sessions",
    "$listLocalSessions": "it reads the server's sessions",
    "$listSearchIndexes": "it reads index definitions",
    "$listSampledQueries": "it reads the server's sampled queries",
    "$queryStats": "it reads the server's query statistics",
    "$shardedDataDistribution": "it reads cluster metadata",
    "$changeStream": "it opens a change stream",
    "$changeStreamSplitLargeEvent": "it belongs to change streams",
    "$search": "it must be the first stage, and the store's scoping $match comes first",
    "$searchMeta": "it must be the first stage, and the store's scoping $match comes first",
    "$vectorSearch": "it must be the first stage, and the store's scoping $match comes first",
    "$rankFusion": "it must be the first stage, and the store's scoping $match comes first",
    "$scoreFusion": "it must be the first stage, and the store's scoping $match comes first",
    "$geoNear": "it must be the first stage, and the store's scoping $match comes first",
}

#: Operators refused anywhere in any stage: they run server-side JavaScript.
FORBIDDEN_OPERATORS: Mapping[str, str] = {
    "$where": "it runs server-side JavaScript",
    "$function": "it runs server-side JavaScript",
    "$accumulator": "it runs server-side JavaScript",
}


def _find_forbidden_operator(spec: Any) -> str | None:
    """The first forbidden operator name found anywhere in ``spec`` (keys, at any depth)."""
    if isinstance(spec, Mapping):
        for k, v in spec.items():
            if isinstance(k, str) and k in FORBIDDEN_OPERATORS:
                return k
            found = _find_forbidden_operator(v)
            if found:
                return found
    elif isinstance(spec, (list, tuple)):
        for v in spec:
            found = _find_forbidden_operator(v)
            if found:
                return found
    return None


def check_pipeline(pipeline: Sequence[Mapping[str, Any]], _where: str = "") -> None:
    """Raise ``PipelineError`` unless every stage (and ``$facet`` sub-pipeline) is allowed; the
    message names the stage's position (0-based) and name."""
    if isinstance(pipeline, (str, bytes, Mapping)) or not isinstance(pipeline, Sequence):
        raise PipelineError(
            f"a pipeline{_where and ' at ' + _where} must be a list of stages, got {type(pipeline).__name__}"
        )
    for index, stage in enumerate(pipeline):
        where = f"{_where} > stage {index}" if _where else f"stage {index}"
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise PipelineError(f"pipeline {where} must be a dict with exactly one stage name, got {stage!r}")
        ((name, spec),) = stage.items()
        if not isinstance(name, str) or not name.startswith("$"):
            raise PipelineError(f"pipeline {where}: {name!r} is not a stage name (stage names start with '$')")
        if name in FORBIDDEN_STAGES or name not in ALLOWED_STAGES:
            reason = FORBIDDEN_STAGES.get(name, f"it is not on the allow-list ({' '.join(sorted(ALLOWED_STAGES))})")
            raise PipelineError(f"pipeline {where} ({name}) is not allowed: {reason}")
        if name == "$facet":
            if not isinstance(spec, Mapping) or not spec:
                raise PipelineError(f"pipeline {where} ($facet) takes a dict of named sub-pipelines")
            for facet_name, sub in spec.items():
                check_pipeline(sub, f"{where} ($facet) > {facet_name!r}")
            continue
        operator = _find_forbidden_operator(spec)
        if operator:
            reason = FORBIDDEN_OPERATORS[operator]
            raise PipelineError(f"pipeline {where} ({name}) uses {operator}, which is not allowed: {reason}")


def _check_prefix(namespace_prefix: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(namespace_prefix, str) or not isinstance(namespace_prefix, (tuple, list)):
        raise InvalidNamespaceError(f"a namespace prefix must be a tuple of labels, got {namespace_prefix!r}")
    for label in namespace_prefix:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace prefix {namespace_prefix!r}: labels are non-empty strings without '.' or NUL"
            )
    return tuple(namespace_prefix)


def scope_filter(
    namespace_prefix: tuple[str, ...], now: datetime | None = None, sharded: bool = False
) -> dict[str, Any]:
    """The scoping ``$match`` filter: the prefix's anchored ``path`` regex, unexpired when ``now``, and
    ``sharded`` (behind mongos) the prefix's ``_id`` range, so mongos targets its shards."""
    prefix = _check_prefix(namespace_prefix)
    scope = prefix_filter(prefix)
    if sharded:
        scope.update(shard_range_filter(prefix))
    scope.update(not_expired(now))
    return scope


def scoped_pipeline(
    namespace_prefix: tuple[str, ...],
    pipeline: Sequence[Mapping[str, Any]],
    *,
    now: datetime | None = None,
    sharded: bool = False,
) -> list[dict[str, Any]]:
    """The pipeline to send: the scoping ``$match`` first (``now``: unexpired items only, given when
    ``omit_expired`` is set), then the user's checked stages. Raises ``PipelineError`` for a refused
    stage or operator, ``InvalidNamespaceError`` for a malformed prefix.
    """
    scope = scope_filter(namespace_prefix, now, sharded)
    # One deep copy, checked and then sent: what is sent is exactly what was checked,
    # whatever the caller's objects do afterwards (or on a second iteration).
    stages: Any = pipeline if isinstance(pipeline, Mapping) else _plain_copy(pipeline)
    check_pipeline(stages)
    return [{"$match": scope}, *stages]


def _plain_copy(obj: Any) -> Any:
    """``obj`` rebuilt from plain dicts and lists (tuples become lists, as BSON stores them)."""
    if isinstance(obj, Mapping):
        return {k: _plain_copy(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [_plain_copy(v) for v in obj]
    return obj
