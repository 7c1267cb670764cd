"""Pure builders: filters, pipelines, write requests and index definitions.

Everything here takes arguments and returns dicts, lists or small frozen
dataclasses; nothing touches the network or a store. User input reaches MQL only
as *values* under operators this module wrote itself: field names and operators
from a filter are checked against an allow-list first, and namespace labels are
``re.escape``-d before they go into a ``$regex``.

The builders live in six modules: ``namespaces`` (prefix and expiry filters, the
list_namespaces pipeline), ``filters`` (the search filter's allow-list), ``vector_search``
(the ``$vectorSearch`` pipeline and its pre-filter), ``writes`` (write requests),
``indexes`` (index specs and the vector index definition) and ``sharding`` (shard-key
ranges and targeted writes behind mongos). Import them from here.
"""

from __future__ import annotations

from mongostore.core.queries.filters import (
    COMPARISON_OPS,
    EXTENSION_OPS,
    INT64_MAX,
    INT64_MIN,
    ITEM_SORT,
    LITERAL_TYPES,
    LOGICAL_OPS,
    MAX_FILTER_DEPTH,
    NEVER,
    NOT_ARRAY,
    SCALARS,
    search_filter,
    value_filter,
)
from mongostore.core.queries.indexes import (
    IndexSpec,
    item_indexes,
    vector_index_definition,
    vector_indexes,
)
from mongostore.core.queries.namespaces import (
    NS_KEY,
    list_namespaces_pipeline,
    namespaces_match,
    not_expired,
    prefix_filter,
)
from mongostore.core.queries.sharding import (
    KEY_FIELD,
    RECOMMENDED_KEYS,
    SUPPORTED_KEYS,
    held_vectors_filter,
    literal_prefix,
    prefix_range,
    shard_key_verdict,
    shard_range_filter,
    targeted_writes,
    with_shard_range,
)
from mongostore.core.queries.vector_search import (
    FILTER_SCALARS,
    MAX_FILTER_STRING,
    atlas_score_to_similarity,
    filter_field_names,
    filter_field_values,
    missing_vectors_pipeline,
    page_rows,
    scored_page_stages,
    unscored_pipeline,
    vector_candidates_filter,
    vector_prefilter,
    vector_search_pipeline,
    vector_search_stage,
)
from mongostore.core.queries.writes import (
    Role,
    WriteRequest,
    delete_item_requests,
    float32_vector,
    prune_vectors_request,
    put_item_request,
    put_vector_request,
    refresh_ttl_requests,
    retag_vectors_request,
)

__all__ = [
    "COMPARISON_OPS",
    "EXTENSION_OPS",
    "FILTER_SCALARS",
    "INT64_MAX",
    "INT64_MIN",
    "ITEM_SORT",
    "KEY_FIELD",
    "LITERAL_TYPES",
    "LOGICAL_OPS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_STRING",
    "NEVER",
    "NOT_ARRAY",
    "NS_KEY",
    "RECOMMENDED_KEYS",
    "SCALARS",
    "SUPPORTED_KEYS",
    "IndexSpec",
    "Role",
    "WriteRequest",
    "atlas_score_to_similarity",
    "delete_item_requests",
    "filter_field_names",
    "filter_field_values",
    "float32_vector",
    "held_vectors_filter",
    "item_indexes",
    "list_namespaces_pipeline",
    "literal_prefix",
    "missing_vectors_pipeline",
    "namespaces_match",
    "not_expired",
    "page_rows",
    "prefix_filter",
    "prefix_range",
    "prune_vectors_request",
    "put_item_request",
    "put_vector_request",
    "refresh_ttl_requests",
    "retag_vectors_request",
    "scored_page_stages",
    "search_filter",
    "shard_key_verdict",
    "shard_range_filter",
    "targeted_writes",
    "unscored_pipeline",
    "value_filter",
    "vector_candidates_filter",
    "vector_index_definition",
    "vector_indexes",
    "vector_prefilter",
    "vector_search_pipeline",
    "vector_search_stage",
    "with_shard_range",
]
