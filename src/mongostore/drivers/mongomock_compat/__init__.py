"""mongomock as the store uses it: the embedded engine's own clients, and the store's
handle on a mongomock collection a user gave it.

mongomock 4.3 predates pymongo 4.11 (``sort=`` in bulk updates) and evaluates a few of
MongoDB's expressions differently (``$add`` of a date); its TTL clock is
``datetime.utcnow()``, deprecated since Python 3.12; and every filter scans the whole
collection. The store copes with each in classes of its own (``lookups``, whose docstring
lists every change, why, and where MongoDB or pymongo says so), used only for its own
calls: ``adapt_collection`` gives the store a handle on a user's mongomock collection (the
same data; the user's objects and mongomock's classes untouched), ``new_client`` /
``in_memory_collection`` make the embedded engine's own, which alone keep a lookup index
(``index``) so that a get or a put costs what the documents it touches cost.

This is for development and tests only: mongomock keeps everything in memory, has no TTL
monitor (it hides expired documents at read time instead) and no ``$vectorSearch``.
"""

from mongostore.drivers.mongomock_compat.compat import (
    adapt_collection,
    in_memory_collection,
    new_client,
)

__all__ = ["adapt_collection", "in_memory_collection", "new_client"]
