"""The pymongo 4.11+ compatibility patches, the entry point that applies every patch, and the
helpers that name a mongomock collection (``is_fake``) or make one (``in_memory_collection``)."""

from __future__ import annotations

import functools
from typing import Any

from mongostore.drivers.mongomock_compat import lookups

_patched = False


def patch_mongomock() -> None:
    """Apply the compatibility patches (idempotent)."""
    global _patched
    if _patched:
        return
    from mongomock.collection import BulkOperationBuilder, Collection

    def drop_sort(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, sort: Any = None, **kwargs: Any) -> Any:
            return fn(self, *args, **kwargs)

        return wrapper

    BulkOperationBuilder.add_update = drop_sort(BulkOperationBuilder.add_update)  # type: ignore[method-assign]
    BulkOperationBuilder.add_replace = drop_sort(BulkOperationBuilder.add_replace)  # type: ignore[method-assign]

    original_create_index: Any = Collection.create_index

    @functools.wraps(original_create_index)
    def create_index(self: Any, key_or_list: Any = None, *args: Any, keys: Any = None, **kwargs: Any) -> Any:
        return original_create_index(self, key_or_list if key_or_list is not None else keys, *args, **kwargs)

    Collection.create_index = create_index  # type: ignore[method-assign]
    _patch_date_add()
    _patch_date_to_long()
    _patch_datetime_walk()
    lookups.install()
    _patched = True


def _patch_datetime_walk() -> None:
    """mongomock's ``patch_datetime_awareness_in_document``, with the same results, faster.

    mongomock copies every document it is given (inserts, update specs, filters) through
    it, to make dates naive UTC milliseconds; it tries ``isinstance`` against four types
    for every value, which was a sixth of 10,000 indexed puts into the embedded store.
    Plain dicts, lists and values with nothing to change take a ``type()`` lookup here;
    everything else (dates, ``Timestamp``, ``OrderedDict``, subclasses) goes to the
    original, whose recursion comes back here through the module's name.
    """
    from bson import Binary, Int64, ObjectId
    from mongomock import helpers

    original: Any = helpers.patch_datetime_awareness_in_document
    leaves = frozenset({str, int, float, bool, type(None), bytes, Binary, Int64, ObjectId})

    def walk(value: Any) -> Any:
        t = type(value)
        if t in leaves:
            return value
        if t is dict:
            return {k: v if type(v) in leaves else walk(v) for k, v in value.items()}
        if t is list or t is tuple:
            return [v if type(v) in leaves else walk(v) for v in value]
        return original(value)

    helpers.patch_datetime_awareness_in_document = walk


def _patch_date_add() -> None:
    """``{"$add": [<date>, <milliseconds>]}`` in expressions (item writes' update pipeline).

    MongoDB adds numbers to a date as milliseconds; mongomock 4.3's ``$add`` asserts
    that every operand is a number. Only ``$add`` with a date operand is changed.
    """
    import datetime

    from mongomock import aggregate

    original: Any = aggregate._Parser._handle_arithmetic_operator

    @functools.wraps(original)
    def handle(self: Any, operator: str, values: Any) -> Any:
        if operator == "$add" and isinstance(values, (list, tuple)):
            parsed = list(self.parse_many(values))
            dates = [v for v in parsed if isinstance(v, datetime.datetime)]
            if dates:
                if any(v is None for v in parsed) or len(dates) > 1:
                    return None
                millis = sum(v for v in parsed if not isinstance(v, datetime.datetime))
                return dates[0] + datetime.timedelta(milliseconds=millis)
        return original(self, operator, values)

    aggregate._Parser._handle_arithmetic_operator = handle  # type: ignore[method-assign]


def _patch_date_to_long() -> None:
    """``{"$toLong": <date>}``: milliseconds since the epoch, as MongoDB converts a date
    (local search candidate reads on a server project their dates so). mongomock 4.3
    calls ``int()`` on the date (``TypeError``); other operands are unchanged.
    """
    import datetime

    from mongomock import aggregate

    from mongostore.core.codec import epoch_ms

    original: Any = aggregate._Parser._handle_type_convertion_operator

    @functools.wraps(original)
    def handle(self: Any, operator: str, values: Any) -> Any:
        if operator == "$toLong":
            try:
                parsed = self.parse(values)
            except KeyError:
                parsed = None
            if isinstance(parsed, datetime.datetime):
                return epoch_ms(parsed)  # a naive date is UTC, as mongomock stores them
        return original(self, operator, values)

    aggregate._Parser._handle_type_convertion_operator = handle  # type: ignore[method-assign]


_FAKE_MODULES = ("mongomock", "mongomock_motor", "pymongo_async_mock")


def is_fake(collection: Any) -> bool:
    """True for mongomock and its async wrappers (no server commands, no client bulk_write).

    Looks through wrappers (counting proxies, test doubles) at the client they sit on.
    """
    for obj in (collection, getattr(getattr(collection, "database", None), "client", None)):
        if obj is not None and any(cls.__module__.startswith(_FAKE_MODULES) for cls in type(obj).__mro__):
            return True
    return False


def is_local_file(collection: Any) -> bool:
    """True for the persistent local store's collections (``drivers.embedded``), also
    behind the async wrapper: the fake whose data lives in a file."""
    inner = getattr(collection, "_collection", collection)
    return type(inner).__module__.startswith("mongostore.drivers.embedded.proxy")


def in_memory_collection(db_name: str = "mongostore", collection_name: str = "memories") -> Any:
    """A fresh mongomock collection (tz-aware, like the store's real clients)."""
    import mongomock

    patch_mongomock()
    client: Any = mongomock.MongoClient(tz_aware=True)
    return client[db_name][collection_name]
