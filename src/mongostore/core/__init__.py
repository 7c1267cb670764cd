"""The store's core: everything a store operation means, with no I/O.

``codec`` (namespaces, documents, values), ``queries`` (filters, pipelines, write
requests, index definitions), ``steps`` (the I/O a plan may ask for), ``plan`` (batch,
setup, probe, sweep and status plans), ``vectors`` (exact local ranking and the
client-side matrix), ``retrieval``/``retrieval_plan`` (hybrid, rerank, automated
embedding) and ``scope`` (scoped aggregation pipelines). Nothing here imports pymongo's
network API, a driver, a store or a tool: ``tests/unit/test_architecture.py`` checks it.
Internal: the public API is ``mongostore``.
"""
