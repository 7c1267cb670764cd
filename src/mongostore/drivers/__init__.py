"""The I/O edge: the only code that talks to MongoDB (pymongo, Motor, mongomock) and to the
embedder. Internal: the public API is ``mongostore``; ``docs/architecture.md`` maps the modules.
"""
