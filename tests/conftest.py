"""Shared fixtures: one behaviour suite, every backend.

``make_store`` is an async factory parametrized over backends; it returns a
``StoreAPI`` whose methods are coroutines whatever the store is, so each behaviour
test is written once and runs against:

- ``sync-mongomock``: ``MongoStore`` on mongomock (always);
- ``async-mock``: ``AsyncMongoStore`` on pymongo-async-mock, which poses as
  pymongo's ``AsyncCollection`` (always);
- ``async-motor-mock``: ``AsyncMongoStore`` on mongomock_motor, a Motor double (always);
- ``async-embedded``: ``AsyncMongoStore.in_memory()``'s own async wrapper over mongomock
  (what the base install runs, without pymongo-async-mock);
- ``sync-file`` / ``async-file``: the persistent embedded store (``MongoStore.local``'s
  collections, in a fresh directory per test; every call locks, reloads if changed, saves);
- ``sync-mongos`` / ``async-mongos``: the store behind the mongos double (``fakes.mongos``),
  items ranged on ``_id`` and vectors on ``item_id`` over three shards, MongoDB 7.0 rules
  (upserts need the shard key); ``MONGOS_NOT_APPLICABLE`` lists the tests whose premise
  does not hold behind mongos;
- ``sync-real`` / ``async-real``: a real server when ``MONGODB_URI`` is set, one
  fresh database per test, dropped afterwards (skipped otherwise, with the reason).

Tests under ``tests/integration`` are marked ``integration``.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.tools.embeddings import HashingEmbeddings

sys.path.insert(0, str(Path(__file__).parent))  # so tests can import fakes.*

MONGODB_URI = os.environ.get("MONGODB_URI")
REAL_SKIP = "needs a real MongoDB: set MONGODB_URI (e.g. `docker compose up -d`, then MONGODB_URI=mongodb://localhost:27017/?directConnection=true)"
# Which server MONGODB_URI points at, when it is not a MongoDB: ".ci/wire" sets "mongoeco".
TEST_SERVER = os.environ.get("MONGOSTORE_TEST_SERVER", "")

# mongoeco's deviations from MongoDB that our tests meet, each with the page that says what
# MongoDB does (docs/real-server.md has a reproduction of each).
NO_TYPE_BRACKETING = pytest.mark.mongoeco_deviation(
    "no type bracketing: {n: {$gt: 5}} matches the string '10'; MongoDB compares only values of the "
    "operand's BSON type (https://www.mongodb.com/docs/manual/reference/mql/query-predicates/type-bracketing/)"
)

SYNC_BACKENDS = ["sync-mongomock", "sync-file", "sync-mongos", "sync-real"]
ASYNC_BACKENDS = ["async-mock", "async-motor-mock", "async-embedded", "async-file", "async-mongos", "async-real"]
ALL_BACKENDS = SYNC_BACKENDS + ASYNC_BACKENDS
REAL_BACKENDS = frozenset({"sync-real", "async-real"})
MONGOS_BACKENDS = frozenset({"sync-mongos", "async-mongos"})

# Behaviour tests whose premise does not hold behind mongos (7.0 rules, the strictest), with why.
MONGOS_NOT_APPLICABLE = {
    "test_aggregate_leaves_out_expired_items_with_omit_expired": (
        "the test moves expires_at with update_one({key: ...}): a single update without the shard key, which "
        "mongos 7.0 refuses (code 72); the store's own writes carry the shard key"
    ),
    "test_a_rejected_write_names_its_item_and_the_rest_lands": (
        "the test creates a unique index on value.email, which a sharded collection refuses (code 67)"
    ),
}


def pytest_configure(config: pytest.Config) -> None:
    if TEST_SERVER and not MONGODB_URI:
        # Else every real-server test would skip and the run would pass having tested nothing.
        raise pytest.UsageError(f"MONGOSTORE_TEST_SERVER={TEST_SERVER} names a server, but MONGODB_URI is not set")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark by folder, mark real-server parametrizations, and expect mongoeco's deviations.

    ``-m realserver`` then selects exactly the tests that need ``MONGODB_URI``. A test
    (or a ``pytest.param``) marked ``mongoeco_deviation("what mongoeco does differently,
    and the MongoDB page that says what MongoDB does")`` is a strict xfail on the real
    backends when ``MONGOSTORE_TEST_SERVER=mongoeco``, and an ordinary test everywhere
    else; docs/real-server.md lists every one.
    """
    for item in items:
        if "/tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        callspec = getattr(item, "callspec", None)
        real = callspec is not None and any(v in REAL_BACKENDS for v in callspec.params.values() if isinstance(v, str))
        if real:
            item.add_marker(pytest.mark.realserver)
        params = [v for v in callspec.params.values() if isinstance(v, str)] if callspec is not None else []
        why = MONGOS_NOT_APPLICABLE.get(getattr(item, "originalname", item.name))
        if why is not None and any(v in MONGOS_BACKENDS for v in params):
            item.add_marker(pytest.mark.skip(reason=why))
        deviation = item.get_closest_marker("mongoeco_deviation")
        if deviation is not None and TEST_SERVER == "mongoeco" and (real or item.get_closest_marker("realserver")):
            reason = f"mongoeco deviates from MongoDB: {deviation.args[0]}"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


class StoreAPI:
    """The same awaitable surface over a sync or an async store."""

    def __init__(self, store: MongoStore | AsyncMongoStore, backend: str) -> None:
        self.store = store
        self.backend = backend
        self.is_async = isinstance(store, AsyncMongoStore)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return await getattr(self.store, "a" + name)(*args, **kwargs)
        return getattr(self.store, name)(*args, **kwargs)

    async def put(self, *a: Any, **kw: Any) -> None:
        await self._call("put", *a, **kw)

    async def get(self, *a: Any, **kw: Any) -> Any:
        return await self._call("get", *a, **kw)

    async def delete(self, *a: Any, **kw: Any) -> None:
        await self._call("delete", *a, **kw)

    async def search(self, *a: Any, **kw: Any) -> Any:
        return await self._call("search", *a, **kw)

    async def list_namespaces(self, **kw: Any) -> Any:
        return await self._call("list_namespaces", **kw)

    async def batch(self, ops: list[Any]) -> Any:
        return await self._call("batch", ops)

    async def setup(self) -> None:
        if self.is_async:
            await self.store.setup()  # type: ignore[misc]
        else:
            self.store.setup()

    async def sweep_ttl(self) -> int:
        if self.is_async:
            return await self.store.sweep_ttl()  # type: ignore[misc, no-any-return]
        return self.store.sweep_ttl()  # type: ignore[return-value]

    async def sweep_after_grace(self) -> int:
        """The sweep as it runs once ``VECTOR_GRACE`` has passed: vector documents no item lists
        are gone then (issue 34: a delete or a re-put leaves younger ones, which a write in flight
        may still list); items expiring within the grace go too."""
        from datetime import datetime, timedelta, timezone

        from mongostore.core import queries as q
        from mongostore.core.plan import sweep_plan
        from mongostore.drivers.aio import run_async
        from mongostore.drivers.sync import run_sync

        later = datetime.now(timezone.utc) + q.VECTOR_GRACE + timedelta(seconds=1)
        plan = sweep_plan(later, self.store.vectors_collection is not None, self.store.collection.name)
        if self.is_async:
            return await run_async(plan, self.store._io)  # type: ignore[arg-type, no-any-return]
        return run_sync(plan, self.store._io)  # type: ignore[arg-type, no-any-return]

    async def aggregate(self, prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.is_async:
            return await self.store.aaggregate(prefix, pipeline)  # type: ignore[union-attr]
        return self.store.aggregate(prefix, pipeline)  # type: ignore[union-attr]

    async def status(self) -> dict[str, Any]:
        if self.is_async:
            return await self.store.status()  # type: ignore[misc, no-any-return]
        return self.store.status()  # type: ignore[return-value]

    async def docs(self, role: str = "items", filter: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Raw stored documents, for assertions on the document shape."""
        coll = self.store.collection if role == "items" else self.store.vectors_collection
        cur = coll.find(filter or {})
        if self.is_async:
            return list(await cur.to_list(length=None))
        return list(cur)


def _mongos_collection(name: str, version: str) -> Any:
    """A collection behind the mongos double (``fakes.mongos``): items ranged on ``_id``, vectors
    on ``item_id``, three shards split at ``"m"`` and ``"t"``; ``version`` picks 7.0 or 8.0 rules."""
    from fakes.mongos import Cluster

    cluster = Cluster(version)
    cluster.shard_collection(f"test.{name}", {"_id": 1}, ["m", "t"])
    cluster.shard_collection(f"test.{name}_vectors", {"item_id": 1}, ["m", "t"])
    return cluster.client()["test"][name]


def _sync_collection(backend: str, request: pytest.FixtureRequest, name: str) -> Any:
    if backend == "sync-mongos":
        return _mongos_collection(name, "7.0.12")
    if backend == "sync-mongomock":
        import mongomock

        return mongomock.MongoClient(tz_aware=True)["test"][name]
    if backend == "sync-file":
        return _file_collection(request, name)
    if not MONGODB_URI:
        pytest.skip(REAL_SKIP)
    from pymongo import MongoClient

    client: MongoClient[Any] = MongoClient(MONGODB_URI, tz_aware=True)
    db_name = f"mongostore_test_{uuid.uuid4().hex[:12]}"

    def drop() -> None:
        client.drop_database(db_name)
        client.close()

    request.addfinalizer(drop)
    return client[db_name][name]


def _file_collection(request: pytest.FixtureRequest, name: str) -> Any:
    """A collection of a fresh local store (its own engine: nothing cached between tests)."""
    from mongostore.drivers.embedded import LocalCollection, LocalDB

    directory = request.getfixturevalue("tmp_path") / "local-store"
    return LocalCollection(LocalDB(directory, "test"), name)


async def _async_collection(
    backend: str, cleanups: list[Callable[[], Awaitable[None]]], name: str, request: pytest.FixtureRequest | None = None
) -> Any:
    if backend == "async-mongos":
        from fakes.mongos import AsyncMongosCollection

        return AsyncMongosCollection(_mongos_collection(name, "7.0.12"))
    if backend == "async-file":
        from mongostore.drivers.embedded import AsyncCollection

        assert request is not None
        return AsyncCollection(_file_collection(request, name))
    if backend == "async-embedded":
        from mongostore.drivers.embedded import AsyncCollection

        return AsyncCollection(in_memory_collection("test", name))
    if backend == "async-mock":
        from pymongo_async_mock import AsyncMongoMockClient

        return AsyncMongoMockClient(tz_aware=True)["test"][name]
    if backend == "async-motor-mock":
        from mongomock_motor import AsyncMongoMockClient as MotorMockClient

        return MotorMockClient(tz_aware=True)["test"][name]
    if not MONGODB_URI:
        pytest.skip(REAL_SKIP)
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient[Any] = AsyncMongoClient(MONGODB_URI, tz_aware=True)
    db_name = f"mongostore_test_{uuid.uuid4().hex[:12]}"

    async def drop() -> None:
        await client.drop_database(db_name)
        await client.close()

    cleanups.append(drop)
    return client[db_name][name]


MakeStore = Callable[..., Awaitable[StoreAPI]]


@pytest.fixture(params=ALL_BACKENDS)
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """``api = await make_store(index=..., ttl=..., setup=True)`` on the parametrized backend."""
    backend: str = request.param
    cleanups: list[Callable[[], Awaitable[None]]] = []
    made: list[StoreAPI] = []

    async def make(*, setup: bool = True, collection: Any = None, **kwargs: Any) -> StoreAPI:
        name = f"memories_{len(made)}"
        if backend.startswith("sync"):
            coll = collection if collection is not None else _sync_collection(backend, request, name)
            api = StoreAPI(MongoStore(coll, **kwargs), backend)
        else:
            coll = collection if collection is not None else await _async_collection(backend, cleanups, name, request)
            api = StoreAPI(AsyncMongoStore(coll, **kwargs), backend)
        if setup:
            await api.setup()
        made.append(api)
        return api

    yield make
    for api in made:
        if api.is_async:
            await api.store.stop_ttl_sweeper()  # type: ignore[misc]
        else:
            api.store.stop_ttl_sweeper()
    for cleanup in cleanups:
        await cleanup()


@pytest.fixture
def sync_store() -> Iterator[MongoStore]:
    """A plain ``MongoStore`` on mongomock, for tests that need no backend matrix."""
    store = MongoStore.in_memory()
    store.setup()
    yield store
    store.stop_ttl_sweeper()


class Counting:
    """A proxy that counts the calls reaching a collection (sync or async)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[str] = []
        self.args: list[tuple[str, tuple[Any, ...]]] = []  # (name, positional arguments) per call

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if callable(attr) and name in {
            "find",
            "find_one",
            "aggregate",
            "distinct",
            "bulk_write",
            "update_one",
            "update_many",
            "insert_one",
            "insert_many",
            "delete_one",
            "delete_many",
            "count_documents",
            "find_one_and_update",
        }:

            def counted(*a: Any, **kw: Any) -> Any:
                self.calls.append(name)
                self.args.append((name, a))
                return attr(*a, **kw)

            return counted
        return attr

    def count(self, *names: str) -> int:
        return sum(1 for c in self.calls if not names or c in names)

    def reset(self) -> None:
        self.calls.clear()
        self.args.clear()


# --------------------------------------------------------------------------- semantic search

SEMANTIC_BACKENDS = [
    "sync-local",
    "async-local",
    "sync-mongos",
    "sync-atlas",
    "async-atlas",
    "sync-real",
    "async-real",
]


class CountingEmbeddings(HashingEmbeddings):
    """The tests' hashing embedder, counting the texts it embeds (an unchanged re-put embeds none)."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims)
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return super().embed_documents(texts)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


def text_index(embed: Any, fields: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An ``index=`` config for the tests' hashing embedder (384 dims)."""
    cfg: dict[str, Any] = {"dims": embed.dims, "embed": embed, **extra}
    if fields is not None:
        cfg["fields"] = fields
    return cfg


@pytest.fixture(params=SEMANTIC_BACKENDS)
async def make_semantic_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """Like ``make_store``, over the two search paths: local numpy ranking (mongomock)
    and ``$vectorSearch`` (the Atlas test double, or a real server with MONGODB_URI).

    The made ``StoreAPI`` has ``.atlas`` (the fake's counters) on the ``*-atlas`` backends.
    """
    backend: str = request.param
    cleanups: list[Callable[[], Awaitable[None]]] = []
    made: list[StoreAPI] = []

    async def make(*, setup: bool = True, search_opts: dict[str, Any] | None = None, **kwargs: Any) -> StoreAPI:
        name = f"memories_{len(made)}"
        atlas = None
        if backend == "sync-local":
            coll: Any = _sync_collection("sync-mongomock", request, name)
        elif backend == "sync-mongos":  # local ranking behind the mongos double
            coll = _sync_collection("sync-mongos", request, name)
        elif backend == "async-local":
            coll = await _async_collection("async-mock", cleanups, name)
        elif backend == "sync-atlas":
            from fakes.atlas import atlas_collection

            coll = atlas_collection(coll_name=name, **(search_opts or {}))
            atlas = coll.atlas
        elif backend == "async-atlas":
            from fakes.atlas import async_atlas_collection

            coll = async_atlas_collection(coll_name=name, **(search_opts or {}))
            atlas = coll.atlas
        elif backend == "sync-real":
            coll = _sync_collection("sync-real", request, name)
        else:
            coll = await _async_collection("async-real", cleanups, name)
        if backend.startswith("sync"):
            api = StoreAPI(MongoStore(coll, **kwargs), backend)
        else:
            api = StoreAPI(AsyncMongoStore(coll, **kwargs), backend)
        api.atlas = atlas  # type: ignore[attr-defined]
        if setup:
            await api.setup()
        made.append(api)
        return api

    yield make
    for cleanup in cleanups:
        await cleanup()


@pytest.fixture
def clean_store_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MONGODB_URI / MONGOSTORE_* from the shell: CLI and demo tests choose their store.

    The local store (the CLI's default) goes to a fresh directory, returned; never the user's.
    """
    from mongostore.tools import server

    for name in (
        server.ENV_URI,
        server.ENV_DB,
        server.ENV_COLLECTION,
        server.ENV_EMBED,
        server.ENV_DIMS,
        server.ENV_FIELDS,
        server.ENV_TIMEOUT,
        "MONGOSTORE_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)
    data_dir = tmp_path / "mongostore-data"
    monkeypatch.setenv(server.ENV_DATA_DIR, str(data_dir))
    return data_dir


class Run:
    """``mongostore`` run in this process (``cli.main``), with the test embedder: ``run(*argv)``
    -> (exit code, stdout, stderr); ``run.json(*argv)`` -> the command's ``--json`` document."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        from mongostore.tools.cli import main

        code = main(["--embed", "hashing", *argv])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *argv: str) -> Any:
        import json

        from mongostore.tools.cli import EXIT_OK

        code, out, err = self(*argv, "--json")
        assert code == EXIT_OK, err
        return json.loads(out)
