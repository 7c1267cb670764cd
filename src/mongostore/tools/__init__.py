"""The tools built on the store: the ``mongostore`` command, analytics and reports, the demo,
the Agent Server factory and the embedders. They use only the public API (``mongostore``,
``mongostore.errors``, ``mongostore.config``, ``mongostore.drivers.embedded.paths``, the stores) and the pure
builders (``_codec``, ``_queries``, ``_scope``); nothing in the core imports them.
"""
