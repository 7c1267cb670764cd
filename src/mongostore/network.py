"""Is the server there? The fail-fast check the stores, the ``mongostore`` command and the
Agent Server share (``drivers.connect``), re-exported for the tools as ``mongostore.local``
re-exports the local store's paths.
"""

from __future__ import annotations

from mongostore.drivers.connect import check_reachable, probe_server
from mongostore.errors import ServerUnreachableError

__all__ = ["ServerUnreachableError", "check_reachable", "probe_server"]
