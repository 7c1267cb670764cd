"""Analytics over memories: scoped aggregation pipelines and ready-made reports.

``store.aggregate(prefix, pipeline)`` (``await store.aaggregate(...)``) runs *your* pipeline over
the items under a namespace prefix, and nothing else: :func:`scoped_pipeline` puts an
index-friendly ``$match`` on the prefix in front of it and refuses every stage that could read or
write outside that scope or outside the items collection.

The stored fields (one document per item; README, "How it stores memories")
==========================================================================

- ``{"$arrayElemAt": ["$namespace", N]}`` is the label at level N (0-based): under
  ``("users",)``, level 1 is the user. Value fields are under ``value.``: ``"$value.kind"``.
- ``path`` is a string prefix of every descendant's path, so ``path`` (indexed, also with
  ``key`` and with ``updated_at``) is the field to filter namespaces on.
- Dates are BSON dates in UTC. ``expires_at`` is missing for items that never expire. Expired
  items may linger until the server's TTL monitor removes them (about a minute);
  ``omit_expired`` leaves them out of ``aggregate`` too.

What a pipeline may hold
========================

Stages on :data:`ALLOWED_STAGES` only (``$facet`` sub-pipelines are checked the same way), and
no ``$where``, ``$function`` or ``$accumulator`` anywhere; anything else is refused with a
:class:`~mongostore.errors.PipelineError` (a ``ValueError``) naming the stage. The embedded
mongomock engine lacks some allowed stages (:data:`MONGOMOCK_MISSING_STAGES`) and operators
(``$dateTrunc``, ``$isoWeek``, ``$reduce``, ``$type``...); they work on a real server.

Reports
=======

Each report is a pure pipeline builder (``pipelines``), a result and its parser (``results``) and a
runner (``collect``); :func:`collect_reports` runs them all (``mongostore stats`` and ``report``).
They use only what mongomock 4.3 and MongoDB 7/8 both implement, and read no whole documents.
"""

from __future__ import annotations

from mongostore.core.scope import ALLOWED_STAGES as ALLOWED_STAGES
from mongostore.core.scope import FORBIDDEN_OPERATORS as FORBIDDEN_OPERATORS
from mongostore.core.scope import FORBIDDEN_STAGES as FORBIDDEN_STAGES
from mongostore.core.scope import MONGOMOCK_MISSING_STAGES as MONGOMOCK_MISSING_STAGES
from mongostore.core.scope import check_pipeline as check_pipeline
from mongostore.core.scope import scope_filter as scope_filter
from mongostore.core.scope import scoped_pipeline as scoped_pipeline
from mongostore.tools.analytics.collect import *  # noqa: F403
from mongostore.tools.analytics.pipelines import *  # noqa: F403
from mongostore.tools.analytics.results import *  # noqa: F403
