"""Replaying a recording: a store on doubles that give the recorded answers instantly
(decoded from BSON), optionally after a fixed delay per round trip."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from _common import AsyncReplay, CallLog, MemoEmbeddings, SyncReplay, fake_backend, ours_index, theirs_index
from _workloads import COLL, Recording

from mongostore import AsyncMongoStore, MongoStore
from mongostore.drivers.backend import Backend

# The sync replay doubles stand for a server reached through pymongo, which is thread-safe:
# ours' independent reads, and its two bulk writes, overlap in threads as they would there.
# (The doubles sit on a mongomock database, which would otherwise make ours treat them as
# mongomock's engine: one request at a time. The recording ran on mongomock, so no server
# commands or client-level bulk_write either.)
REPLAYED_SERVER = Backend(emulated=True, threads=True)

_REPLAY_DB: Any = None
_REPLAY_ADB: Any = None


def _replay_db() -> Any:
    global _REPLAY_DB
    if _REPLAY_DB is None:
        from mongostore.drivers.mongomock_compat import new_client

        _REPLAY_DB = new_client()["replay"]
    return _REPLAY_DB


def _replay_adb() -> Any:
    global _REPLAY_ADB
    if _REPLAY_ADB is None:
        from pymongo_async_mock import AsyncMongoMockClient

        from mongostore.drivers.mongomock_compat import new_client

        _REPLAY_ADB = AsyncMongoMockClient(mock_mongo_client=new_client())["replay"]
    return _REPLAY_ADB


def theirs_on(collection: Any, indexed: bool, embed: MemoEmbeddings) -> Any:
    """langgraph-store-mongodb's store pointed at ``collection`` (its constructor's I/O done elsewhere)."""
    from langgraph.store.mongodb import MongoDBStore

    store = MongoDBStore(fake_backend("ctor"), index_config=theirs_index(embed) if indexed else None)
    store.collection = collection
    return store


@dataclass
class Replayer:
    """A store on replay doubles for one recording; ``run()`` replays the workload once."""

    rec: Recording
    delay: float
    keyed: bool
    log: CallLog = field(default_factory=CallLog)
    embed: MemoEmbeddings = field(default_factory=MemoEmbeddings)
    store: Any = None

    def __post_init__(self) -> None:
        self.player = self.rec.tape.player(self.keyed)

    def _doubles(self, cls: type[SyncReplay], db: Any) -> tuple[SyncReplay, SyncReplay]:
        items = cls(self.player, self.log, name=COLL, database=db, delay=self.delay)
        vectors = cls(self.player, self.log, name=f"{COLL}_vectors", database=db, delay=self.delay)
        return items, vectors

    def build_sync(self) -> None:
        items, vectors = self._doubles(SyncReplay, _replay_db())
        idx = self.rec.workload.indexed
        if self.rec.side == "ours":
            self.store = MongoStore(
                items,  # type: ignore[arg-type]
                index=ours_index(self.embed) if idx else None,
                vectors_collection=vectors,  # type: ignore[arg-type]
                backend=REPLAYED_SERVER,
            )
        else:
            self.store = theirs_on(items, idx, self.embed)

    async def build_async(self) -> None:
        idx = self.rec.workload.indexed
        if self.rec.side == "ours":
            items, vectors = self._doubles(AsyncReplay, _replay_adb())
            self.store = AsyncMongoStore(
                items, index=ours_index(self.embed) if idx else None, vectors_collection=vectors
            )
        else:
            self.build_sync()

    def _reset(self) -> None:
        """Rewind the tape (ours keeps no client-side state that changes its requests)."""
        self.player.rewind()

    def run_sync(self) -> Any:
        self._reset()
        assert self.rec.workload.sync is not None
        return self.rec.workload.sync(self.store)

    async def run_async(self) -> Any:
        self._reset()
        assert self.rec.workload.aio is not None
        return await self.rec.workload.aio(self.store)
