"""The store's core, everything a store operation means with no I/O (internal: the public API is
``mongostore``). What each part is for, and what it may import, is in docs/architecture.md;
``tests/unit/test_architecture.py`` checks the imports.
"""
