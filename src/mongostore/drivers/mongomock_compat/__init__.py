"""The embedded default: mongomock, made to work with pymongo 4.11+.

mongomock 4.3 predates two pymongo changes that the store relies on, so ``compat``
patches them once, when the embedded default (or a test) asks for it:

- pymongo >= 4.11 passes ``sort=`` to ``BulkOperationBuilder.add_update`` and
  ``add_replace`` when a ``bulk_write`` holds ``UpdateOne``/``ReplaceOne``;
  mongomock's builders do not take it (``TypeError``).
- ``Collection.create_index`` is called with ``keys=`` by some callers (pymongo's
  own name is ``keys``; mongomock's is ``key_or_list``).

It also gives mongomock lookups that do not scan the collection (the patches of
``lookups``, answering from the index of ``index``): mongomock evaluates every filter
against every document, checks a unique index with another full scan per write, and
scans for expired documents on every access when a TTL index exists, so each upsert or
``_id`` lookup costs O(collection) and a batch of N puts O(N x collection). The patch
answers equality and ``$in`` on ``_id`` from the store's own dict and on indexed fields
from hash maps it keeps in step with every write, then applies the whole filter to those
candidates only: same documents, same order, same errors.

This is for development and tests only: mongomock keeps everything in memory,
has no TTL monitor (it hides expired documents at read time instead) and no
``$vectorSearch``.
"""

from mongostore.drivers.mongomock_compat.compat import in_memory_collection, is_fake, is_local_file, patch_mongomock

__all__ = ["in_memory_collection", "is_fake", "is_local_file", "patch_mongomock"]
