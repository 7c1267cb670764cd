"""The drivers: how steps become pymongo calls, without a server.

Stub collections and clients stand in at the I/O edge and record what they were
asked, as httpx's MockTransport does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.base import PutOp
from pymongo import DeleteOne, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException

from mongostore import WriteError
from mongostore.core.plan import PlanContext, batch_plan
from mongostore.core.queries import WriteRequest
from mongostore.core.steps import Capabilities, Find, Parallel, Sleep, Write
from mongostore.drivers.aio import AsyncIO, run_async
from mongostore.drivers.sync import SyncIO, run_sync
from mongostore.store import utcnow


class StubClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[list[Any], bool]] = []
        self.error = error

    def bulk_write(self, models: list[Any], ordered: bool = True, verbose_results: bool = False) -> Any:
        self.calls.append((models, ordered))
        if self.error:
            raise self.error
        return type("R", (), {"deleted_count": 0})()


class StubDatabase:
    def __init__(self, client: StubClient) -> None:
        self.client = client


class StubCollection:
    def __init__(self, name: str, client: StubClient, error: Exception | None = None) -> None:
        self.name = name
        self.full_name = f"db.{name}"
        self.database = StubDatabase(client)
        self.bulk_calls: list[list[Any]] = []
        self.error = error

    def bulk_write(self, models: list[Any], ordered: bool = True) -> Any:
        self.bulk_calls.append(models)
        if self.error:
            raise self.error
        return type("R", (), {"deleted_count": len([m for m in models if isinstance(m, DeleteOne)])})()


def requests() -> tuple[WriteRequest, ...]:
    return (
        WriteRequest("vectors", "update_one", {"_id": "v"}, {"$set": {"x": 1}}, upsert=True, item=(("a",), "k")),
        WriteRequest("items", "update_one", {"_id": "i"}, {"$set": {"x": 1}}, upsert=True, item=(("a",), "k")),
        WriteRequest("items", "delete_one", {"_id": "j"}, item=(("a",), "j")),
    )


def io_with(client: StubClient, client_bulk: bool, items_error: Exception | None = None) -> SyncIO:
    io = SyncIO(StubCollection("memories", client, items_error), StubCollection("memories_vectors", client), None)  # type: ignore[arg-type]
    io.caps = io.server = Capabilities("8.0.4", emulated=False, vector_search=True, client_bulk_write=client_bulk)
    return io


def test_client_level_bulk_write_sends_both_collections_in_one_unordered_call() -> None:
    client = StubClient()
    io = io_with(client, client_bulk=True)
    outcome = io.execute(Write(requests()))
    assert outcome.errors == []
    [(models, ordered)] = client.calls
    assert ordered is False  # every request is tried; each failure is reported on its own
    assert [m._namespace for m in models] == ["db.memories_vectors", "db.memories", "db.memories"]
    assert isinstance(models[0], UpdateOne) and isinstance(models[2], DeleteOne)


def test_without_client_bulk_write_one_bulk_write_per_collection() -> None:
    client = StubClient()
    io = io_with(client, client_bulk=False)
    outcome = io.execute(Write(requests()))
    assert client.calls == []
    assert len(io.vectors.bulk_calls) == 1 and len(io.items.bulk_calls) == 1  # type: ignore[union-attr]
    assert [m._namespace for m in io.items.bulk_calls[0]] == [None, None]  # type: ignore[attr-defined]
    assert outcome.deleted == 1


def test_the_two_bulk_writes_run_at_once_on_a_real_driver() -> None:
    import threading

    both = threading.Barrier(2, timeout=5)  # passes only if both bulk writes are in flight together

    class Concurrent(StubCollection):
        def bulk_write(self, models: list[Any], ordered: bool = True) -> Any:
            both.wait()
            return super().bulk_write(models, ordered)

    client = StubClient()
    io = SyncIO(Concurrent("memories", client), Concurrent("memories_vectors", client), None)  # type: ignore[arg-type]
    io.caps = io.server = Capabilities("7.0", emulated=False, vector_search=True, client_bulk_write=False)
    assert io.execute(Write(requests())).errors == []


def test_client_bulk_errors_are_reported_per_request() -> None:
    exc = ClientBulkWriteException(
        {
            "writeErrors": [{"idx": 1, "code": 2, "errmsg": "boom"}, {"idx": 2, "code": 2, "errmsg": "bang"}],
            "error": None,
        },
        False,
    )
    io = io_with(StubClient(exc), client_bulk=True)
    outcome = io.execute(Write(requests()))
    assert outcome.errors == [(1, "boom"), (2, "bang")]


def test_client_bulk_top_level_error_is_raised_not_swallowed() -> None:
    exc = ClientBulkWriteException({"writeErrors": [], "error": ConnectionError("gone")}, False)
    io = io_with(StubClient(exc), client_bulk=True)
    with pytest.raises(ClientBulkWriteException):
        io.execute(Write(requests()))


def test_per_collection_bulk_errors_map_back_to_request_indexes() -> None:
    exc = BulkWriteError({"writeErrors": [{"index": 1, "code": 2, "errmsg": "bad doc"}]})
    io = io_with(StubClient(), client_bulk=False, items_error=exc)
    outcome = io.execute(Write(requests()))
    assert outcome.errors == [(2, "bad doc")]  # the second request of the items run is request 2


def test_write_errors_become_one_write_error_naming_namespace_and_key() -> None:
    exc = BulkWriteError({"writeErrors": [{"index": 0, "code": 2, "errmsg": "rejected"}]})
    io = io_with(StubClient(), client_bulk=False, items_error=exc)
    ctx = PlanContext("memories", None, None, utcnow())
    with pytest.raises(WriteError) as info:
        run_sync(batch_plan([PutOp(("a",), "k1", {"v": 1}), PutOp(("a",), "k2", {"v": 2})], ctx), io)
    assert info.value.failures == [(("a",), "k1", "rejected")]
    assert "namespace ('a',), key 'k1': not stored: rejected" in str(info.value)
    assert "the rest of the batch was applied" in str(info.value)


WC_ERROR = {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out"}


@pytest.mark.parametrize(
    "details",
    [
        pytest.param({"writeErrors": [], "writeConcernErrors": [WC_ERROR]}, id="only-write-concern"),
        pytest.param(
            {"writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}], "writeConcernErrors": [WC_ERROR]},
            id="with-write-errors",
        ),
    ],
)
def test_bulk_write_concern_errors_raise_never_success(details: dict[str, Any]) -> None:
    """w:"majority" timed out: the writes are not acknowledged as asked, so not success."""
    io = io_with(StubClient(), client_bulk=False, items_error=BulkWriteError(details))
    with pytest.raises(BulkWriteError) as info:
        io.execute(Write(requests()))
    assert info.value.details["writeConcernErrors"] == [WC_ERROR]


@pytest.mark.parametrize(
    "details",
    [
        pytest.param({"writeErrors": [], "writeConcernErrors": [WC_ERROR]}, id="only-write-concern"),
        pytest.param(
            {"writeErrors": [{"idx": 0, "code": 2, "errmsg": "bad"}], "writeConcernErrors": [WC_ERROR]},
            id="with-write-errors",
        ),
    ],
)
def test_client_bulk_write_concern_errors_raise_never_success(details: dict[str, Any]) -> None:
    io = io_with(StubClient(ClientBulkWriteException(details, False)), client_bulk=True)
    with pytest.raises(ClientBulkWriteException):
        io.execute(Write(requests()))


def test_write_concern_errors_reach_every_kind_of_write() -> None:
    """Puts, deletes, TTL refreshes and sweeps all go through one write path: all raise."""
    from mongostore.core.plan import sweep_plan

    exc = BulkWriteError({"writeErrors": [], "writeConcernErrors": [WC_ERROR]})
    ctx = PlanContext("memories", None, None, utcnow())
    for plan in (
        batch_plan([PutOp(("a",), "k", {"v": 1})], ctx),
        batch_plan([PutOp(("a",), "k", None)], ctx),
        sweep_plan(utcnow(), with_vectors=False),
    ):
        io = io_with(StubClient(), client_bulk=False, items_error=exc)
        with pytest.raises(BulkWriteError):
            run_sync(plan, io)


def test_sweep_raises_on_per_item_delete_errors() -> None:
    from mongostore.core.plan import sweep_plan

    exc = BulkWriteError({"writeErrors": [{"index": 0, "code": 2, "errmsg": "delete refused"}]})
    io = io_with(StubClient(), client_bulk=False, items_error=exc)
    with pytest.raises(WriteError, match="the TTL sweep's delete failed: delete refused"):
        run_sync(sweep_plan(utcnow(), with_vectors=False), io)


def test_write_error_says_which_part_failed() -> None:
    """A vector write failed while its item landed: the value is stored, say so."""
    from mongostore.config import index_settings
    from mongostore.tools.embeddings import HashingEmbeddings as Emb

    index = index_settings({"dims": 8, "embed": Emb(8), "fields": ["text"]})
    vec_error = BulkWriteError({"writeErrors": [{"index": 0, "code": 2, "errmsg": "vector too big"}]})
    client = StubClient()
    io = SyncIO(
        StubCollection("memories", client),  # type: ignore[arg-type]
        StubCollection("memories_vectors", client, vec_error),  # type: ignore[arg-type]
        Emb(8),
    )
    io.caps = io.server = Capabilities("7.0", emulated=False, vector_search=False, client_bulk_write=False)

    def answers(step: Any) -> Any:
        return [] if isinstance(step, Find) else io.execute(step)

    ctx = PlanContext("memories", index, None, utcnow())
    plan = batch_plan([PutOp(("a",), "k", {"text": "pizza"})], ctx)
    with pytest.raises(WriteError) as info:
        step = next(plan)
        while True:
            step = plan.send([[] for _ in step.steps] if isinstance(step, Parallel) else answers(step))
    assert info.value.stored == {(("a",), "k")}
    assert "value stored, its vector write failed: vector too big" in str(info.value)


class SlowIO(AsyncIO):
    def __init__(self) -> None:
        super().__init__(None, None, None)
        self.running = 0
        self.peak = 0

    async def execute(self, step: Any) -> Any:
        if isinstance(step, Find):
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(0.01)
            self.running -= 1
            return [step.filter]
        return await super().execute(step)


async def test_async_driver_runs_parallel_steps_concurrently() -> None:
    def plan() -> Any:
        answers = yield Parallel(tuple(Find("items", {"n": i}) for i in range(5)))
        yield Sleep(0)
        return answers

    io = SlowIO()
    assert await run_async(plan(), io) == [[{"n": i}] for i in range(5)]
    assert io.peak == 5


def test_sync_driver_throws_step_errors_into_the_plan() -> None:
    class Boom(Exception):
        pass

    class FailingIO(SyncIO):
        def execute(self, step: Any) -> Any:
            raise Boom()

    def plan() -> Any:
        try:
            yield Find("items", {})
        except Boom:
            return "handled in the plan"
        return "not reached"

    assert run_sync(plan(), FailingIO(None, None, None)) == "handled in the plan"  # type: ignore[arg-type]


def test_sync_driver_overlaps_parallel_reads_on_a_real_driver() -> None:
    """Independent reads of one batch run on threads, so their round trips overlap."""
    import threading

    arrived = threading.Barrier(3, timeout=5)  # passes only if all three reads are in flight at once

    class Cursor(list[Any]):
        pass

    class ThreadedCollection(StubCollection):
        def find(self, filter: Any, projection: Any = None) -> Any:
            arrived.wait()
            return Cursor([filter])

    client = StubClient()
    io = SyncIO(ThreadedCollection("memories", client), None, None)  # type: ignore[arg-type]
    answers = io.execute(Parallel(tuple(Find("items", {"n": i}) for i in range(3))))
    assert answers == [[{"n": 0}], [{"n": 1}], [{"n": 2}]]


# --------------------------------------------------------------------------- issue 10


class RacingDatabase:
    """Another process creates the collection between our check and our create."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def list_collection_names(self) -> list[str]:
        return []

    def create_collection(self, name: str) -> None:
        raise self.error


class AsyncRacingDatabase(RacingDatabase):
    async def list_collection_names(self) -> list[str]:  # type: ignore[override]
        return []

    async def create_collection(self, name: str) -> None:
        raise self.error


class RacingCollection:
    def __init__(self, database: RacingDatabase) -> None:
        self.name = "memories_vectors"
        self.database = database


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_collection_created_concurrently_is_fine(is_async: bool) -> None:
    from pymongo.errors import OperationFailure

    from mongostore.core.steps import EnsureCollection

    async def ensure(error: Exception) -> None:
        db = AsyncRacingDatabase(error) if is_async else RacingDatabase(error)
        vectors = RacingCollection(db)
        if is_async:
            await AsyncIO(vectors, vectors, None).execute(EnsureCollection("vectors"))
        else:
            SyncIO(vectors, vectors, None).execute(EnsureCollection("vectors"))  # type: ignore[arg-type]

    await ensure(OperationFailure("Collection already exists. NS: db.memories_vectors", 48))
    with pytest.raises(OperationFailure, match="not authorized"):
        await ensure(OperationFailure("not authorized", 13))


def test_type_errors_mean_no_search_only_on_the_fakes() -> None:
    from pymongo.errors import OperationFailure

    from mongostore.core.plan import no_search_reason

    assert no_search_reason(TypeError("mongomock has no such stage"), emulated=True) is not None
    assert no_search_reason(TypeError("a driver bug"), emulated=False) is None
    assert no_search_reason(AttributeError("a driver bug"), emulated=False) is None
    assert no_search_reason(OperationFailure("no code at all"), emulated=False) is not None  # code None: no search
    building = OperationFailure("cannot query vector index {} while in state INITIAL_SYNC", 8)
    assert no_search_reason(building, emulated=False) is None  # building is not "no search"


def test_each_driver_has_one_handler_per_step_type() -> None:
    """The dispatch table (both drivers') covers every step of ``core.steps.Step``, and nothing else."""
    import typing

    from mongostore.core.steps import Step
    from mongostore.drivers import shared

    steps = set(typing.get_args(Step))
    assert steps, "Step is a union of the step types"
    assert set(shared.HANDLERS) == steps


async def test_drivers_refuse_an_unknown_step() -> None:
    class NotAStep:
        pass

    with pytest.raises(TypeError, match="unknown step"):
        SyncIO(None, None, None).execute(NotAStep())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown step"):
        await AsyncIO(None, None, None).execute(NotAStep())  # type: ignore[arg-type]
