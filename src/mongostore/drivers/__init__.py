"""The I/O edge: the only code that talks to MongoDB (pymongo, Motor, mongomock) and
to the embedder.

``sync`` and ``aio`` run a core plan's steps (``run_sync``/``run_async``, one dispatch
table each; what both share is in ``shared``); ``mongomock_compat`` makes mongomock
behave (pymongo 4.x compatibility, lookups without a scan); ``embedded`` is the
persistent local store on mongomock's engine. Internal: the public API is ``mongostore``.
"""
