"""Pure builders: filters, pipelines, write requests and index definitions (no I/O).

User input reaches MQL only as *values* under operators written here: a filter's field names
and operators are checked against an allow-list first, labels are ``re.escape``-d in a ``$regex``.
The package holds the public names of its six modules: ``namespaces`` (prefix and expiry
filters, the list_namespaces pipeline), ``filters`` (the search filter's allow-list),
``vector_search`` (the ``$vectorSearch`` pipeline), ``writes`` (write requests), ``indexes``
and ``sharding`` (shard-key ranges, targeted writes behind mongos).
"""

from mongostore.core.queries.filters import *  # noqa: F403
from mongostore.core.queries.indexes import *  # noqa: F403
from mongostore.core.queries.namespaces import *  # noqa: F403
from mongostore.core.queries.sharding import *  # noqa: F403
from mongostore.core.queries.vector_search import *  # noqa: F403
from mongostore.core.queries.writes import *  # noqa: F403
