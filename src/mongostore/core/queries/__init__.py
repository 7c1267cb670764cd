"""Pure builders: filters, pipelines, write requests and index definitions (no I/O); the package holds
its five modules' public names. User input reaches MQL only as values under operators written here:
a filter's names are checked against an allow-list, labels are ``re.escape``-d in a ``$regex``.
"""

from mongostore.core.queries.filters import *  # noqa: F403
from mongostore.core.queries.indexes import *  # noqa: F403
from mongostore.core.queries.sharding import *  # noqa: F403
from mongostore.core.queries.vector_search import *  # noqa: F403
from mongostore.core.queries.writes import *  # noqa: F403
