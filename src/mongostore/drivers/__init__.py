"""The I/O edge: the only code that talks to MongoDB (pymongo, Motor, mongomock) and
to the embedder.

``io`` runs a core plan's steps (``run_sync``/``run_async``); ``mongomock_compat`` makes
mongomock behave (pymongo 4.x compatibility, lookups without a scan); ``embedded`` is the
persistent local store on mongomock's engine. Internal: the public API is ``mongostore``.
"""
