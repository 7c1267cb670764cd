"""mongomock as the store uses it: the embedded engine's own clients, and the store's
handle on a mongomock collection a user gave it.

mongomock 4.3 predates pymongo 4.11, evaluates ``$add`` of a date unlike MongoDB, reads a
deprecated TTL clock and scans every collection for every filter; ``lookups`` lists each
change the store makes for its own calls, why, and the source. For development and tests
only: everything in memory, no TTL monitor (expired documents are hidden at read time), no
``$vectorSearch``.
"""

from mongostore.drivers.mongomock_compat.compat import in_memory_collection, new_client

__all__ = ["in_memory_collection", "new_client"]
