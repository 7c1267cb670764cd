"""Analytics over memories: scoped aggregation pipelines and ready-made reports.

Ask questions of the memories where they live. ``store.aggregate(prefix, pipeline)``
(and ``await store.aaggregate(...)``) runs *your* aggregation pipeline over the
items under a namespace prefix, and nothing else: :func:`scoped_pipeline` puts an
index-friendly ``$match`` on the prefix in front of it and refuses every stage that
could read or write outside that scope or outside the items collection.

The stored fields
=================

One document per item, in the items collection (DESIGN.md section 4)::

    {
      "_id":         "users.alice.memories.\\x00k1",   # path + NUL + key (internal)
      "namespace":   ["users", "alice", "memories"],    # the namespace tuple, as an array
      "path":        "users.alice.memories.",           # labels joined by '.', trailing '.'
      "depth":       3,                                 # len(namespace)
      "key":         "k1",
      "value":       {...},                             # the dict you put, unchanged
      "created_at":  ISODate(...),                      # first put (kept on update), UTC
      "updated_at":  ISODate(...),                      # last put, UTC
      "expires_at":  ISODate(...),                      # only for items with a TTL
      "ttl_minutes": 60.0,                              # only for items with a TTL
      "vectors":     [...],                             # internal: hashes of the indexed texts
    }

- ``namespace.N`` / ``{"$arrayElemAt": ["$namespace", N]}`` is the label at level N
  (0-based): under ``("users",)``, level 1 is the user.
- ``path`` is a string prefix of every descendant's path, so ``path`` (indexed, also
  with ``key`` and with ``updated_at``) is the field to filter namespaces on.
- Value fields are under ``value.``: ``"$value.kind"``.
- Dates are BSON dates in UTC. ``expires_at`` is missing for items that never expire.
  Expired items may linger until the server's TTL monitor removes them (about a
  minute); ``omit_expired`` leaves them out of ``aggregate`` too.

Example: memories per kind for each user under ``("users",)``::

    store.aggregate(("users",), [
        {"$group": {"_id": {"user": {"$arrayElemAt": ["$namespace", 1]}, "kind": "$value.kind"},
                    "n": {"$sum": 1}}},
        {"$sort": {"n": -1}},
        {"$limit": 20},
    ])

What a pipeline may hold
========================

Stages on :data:`ALLOWED_STAGES` only (``$facet`` sub-pipelines are checked the
same way). Refused with a :class:`~mongostore.errors.PipelineError` (a
``ValueError``) naming the stage: stages that write (``$out``, ``$merge``), read
other collections or other namespaces (``$lookup``, ``$graphLookup``,
``$unionWith``, ``$documents``), read server state (``$collStats``,
``$indexStats``, ``$currentOp``, ``$listSessions``, ``$changeStream``...), must be
first (``$search``, ``$vectorSearch``, ``$geoNear``), and anything else not on the
list; and the JavaScript operators ``$where``, ``$function`` and ``$accumulator``
anywhere in any stage.

The embedded mongomock default lacks several allowed stages (see
:data:`MONGOMOCK_MISSING_STAGES`) and operators (``$dateTrunc``, ``$isoWeek``,
``$reduce``, ``$type``...); they work on a real server.

Reports
=======

Each report is a pure pipeline builder (the stages *after* the scoping match), a
frozen dataclass result, a parser from the aggregate output, and a runner taking
anything with an ``aggregate(prefix, pipeline)`` method (:class:`Aggregator`):

============================  =======================================  ==========================
runner                        builder(s)                               result
============================  =======================================  ==========================
:func:`namespace_counts`      :func:`namespace_counts_pipeline`        :class:`NamespaceCountsReport`
:func:`growth`                :func:`growth_pipeline`                  :class:`GrowthReport`
:func:`stale_items`           :func:`stale_summary_pipeline`,          :class:`StaleReport`
                              :func:`stale_oldest_pipeline`
:func:`ttl_outlook`           :func:`ttl_outlook_pipeline`             :class:`TTLOutlookReport`
:func:`value_breakdown`       :func:`value_breakdown_pipeline`         :class:`BreakdownReport`
============================  =======================================  ==========================

:func:`collect_reports` / :func:`acollect_reports` run them all into a
:class:`ReportBundle` (what ``mongostore stats`` prints and ``mongostore report``
renders). Every report pipeline uses only stages and operators that both mongomock
4.3 and MongoDB 7/8 implement, and returns only counts or a few projected fields:
no report pulls whole documents into Python.
"""

from __future__ import annotations

from mongostore.core.scope import (
    ALLOWED_STAGES,
    FORBIDDEN_OPERATORS,
    FORBIDDEN_STAGES,
    MONGOMOCK_MISSING_STAGES,
    check_pipeline,
    scope_filter,
    scoped_pipeline,
)
from mongostore.tools.analytics.collect import (
    Aggregator,
    AsyncAggregator,
    ReportPlan,
    acollect_reports,
    collect_reports,
    growth,
    namespace_counts,
    stale_items,
    ttl_outlook,
    value_breakdown,
)
from mongostore.tools.analytics.pipelines import (
    Period,
    check_value_field,
    growth_pipeline,
    namespace_counts_pipeline,
    stale_oldest_pipeline,
    stale_summary_pipeline,
    ttl_outlook_pipeline,
    value_breakdown_pipeline,
)
from mongostore.tools.analytics.results import (
    BreakdownReport,
    BreakdownRow,
    GrowthPoint,
    GrowthReport,
    NamespaceCount,
    NamespaceCountsReport,
    ReportBundle,
    StaleItem,
    StaleReport,
    Table,
    TTLOutlookReport,
    parse_growth,
    parse_namespace_counts,
    parse_stale,
    parse_ttl_outlook,
    parse_value_breakdown,
)

__all__ = [
    "ALLOWED_STAGES",
    "FORBIDDEN_OPERATORS",
    "FORBIDDEN_STAGES",
    "MONGOMOCK_MISSING_STAGES",
    "Aggregator",
    "AsyncAggregator",
    "BreakdownReport",
    "BreakdownRow",
    "GrowthPoint",
    "GrowthReport",
    "NamespaceCount",
    "NamespaceCountsReport",
    "Period",
    "ReportBundle",
    "ReportPlan",
    "StaleItem",
    "StaleReport",
    "TTLOutlookReport",
    "Table",
    "acollect_reports",
    "check_pipeline",
    "check_value_field",
    "collect_reports",
    "growth",
    "growth_pipeline",
    "namespace_counts",
    "namespace_counts_pipeline",
    "parse_growth",
    "parse_namespace_counts",
    "parse_stale",
    "parse_ttl_outlook",
    "parse_value_breakdown",
    "scope_filter",
    "scoped_pipeline",
    "stale_items",
    "stale_oldest_pipeline",
    "stale_summary_pipeline",
    "ttl_outlook",
    "ttl_outlook_pipeline",
    "value_breakdown",
    "value_breakdown_pipeline",
]
