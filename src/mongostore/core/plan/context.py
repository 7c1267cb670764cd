"""What every plan shares: the ``Plan`` type, the store's ``PlanContext``, the write clock; and the state a
batch's phases share (``BatchState``) and what a batch reports (``BatchOutcome``)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

from langgraph.store.base import GetOp, ListNamespacesOp, Result, SearchOp

from mongostore.config import IndexSettings, TTLSettings
from mongostore.core import vectors as _vectors
from mongostore.core.codec import item_id, vectors_name
from mongostore.core.steps import Capabilities, Step

# Cursor batch size for reads whose every document is needed (the server caps a batch at 16 MiB).
LARGE_BATCH = 100_000

R = TypeVar("R")

#: A plan answering ``R``: it yields steps, is sent their answers, and returns its result.
Plan = Generator[Step, Any, R]


def write_clock() -> datetime:
    """Now, in UTC, cut to the millisecond BSON dates keep (so date arithmetic stays exact)."""
    now = datetime.now(timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class PlanContext:
    """What a plan needs to know about its store (no I/O handles). ``now``: the read time (expiry cut-off);
    ``clock`` is read again for the writes, so a batch that waited on its embedder writes no older dates."""

    items_name: str
    index: IndexSettings | None
    ttl: TTLSettings | None
    now: datetime
    clock: Callable[[], datetime] = field(default=write_clock, compare=False)
    vectors_name: str = ""
    # The store's client-side matrix of stored embeddings (local ranking); None: a fresh one per search.
    vector_cache: _vectors.VectorCache | None = None
    # Prefix reads carry the shard-key range, vector writes their item_id (``queries.sharding``): behind mongos
    # (so it targets shards), and on the local store (whose SQLite indexes read the range): ``Capabilities.ranges``.
    ranges: bool = False
    # list_namespaces reads the distinct paths (``Capabilities.distinct_scan``) rather than a grouping pipeline.
    distinct_paths: bool = False

    @property
    def expiry_cutoff(self) -> datetime | None:
        """``now`` when expired items must be hidden (``omit_expired``), else None."""
        return self.now if self.ttl is not None and self.ttl.omit_expired else None

    @property
    def vectors_collection(self) -> str:
        return self.vectors_name or vectors_name(self.items_name)


@dataclass
class PendingPut:
    """A put or delete (``value`` None) of the batch, the last one per (namespace, key)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    ttl: float | None
    texts: dict[str, tuple[str, str]]  # its indexed texts, {field: (text, text hash)}
    id: str = ""
    revision: Any = None  # a compare-and-set's ``queries.Revision`` (None: an unconditional put)

    def __post_init__(self) -> None:
        self.id = item_id(self.namespace, self.key)


@dataclass
class PendingSearch:
    """A search of the batch at op position ``pos``; semantic ones get their query vector."""

    pos: int
    op: SearchOp
    semantic: bool
    query_vector: list[float] | None = None
    path: Any = None  # its ``plan.paths.SearchPath``, chosen when its reads are built (None: not yet)
    first: list[Any] = field(default_factory=list)  # its path's first answers, in the order the path asked


@dataclass
class BatchState:
    """What the phases of ``batch_outcome_plan`` hand on to each other (filled in phase order)."""

    ctx: PlanContext
    results: list[Result]
    gets: list[tuple[int, GetOp]] = field(default_factory=list)
    searches: list[PendingSearch] = field(default_factory=list)
    listings: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[tuple[str, ...], str], PendingPut] = field(default_factory=dict)
    use_atlas: bool = False  # probe_phase: the search path
    caps: Capabilities | None = None
    # item id -> {text hash: its stored vector document (_id, embedding)}
    stored: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    packed: dict[str, Any] = field(default_factory=dict)  # text -> its new float32 BinData vector
    refresh: dict[str, float] = field(default_factory=dict)  # item id -> its ttl_minutes, for refresh_ttl
    refreshers: dict[str, list[int]] = field(default_factory=dict)  # item id -> positions of reads refreshing it

    @property
    def index(self) -> IndexSettings | None:
        return self.ctx.index

    @property
    def semantic(self) -> list[PendingSearch]:
        """The semantic searches that want a page (limit > 0)."""
        return [s for s in self.searches if s.semantic and s.op.limit > 0]

    def note_refresh(self, pos: int, docs: list[dict[str, Any]], wanted: bool) -> None:
        """Read ``pos`` returned ``docs``; with ``refresh_ttl`` (``wanted``) the write refreshes their TTLs."""
        if not wanted:
            return
        for doc in docs:
            if doc.get("ttl_minutes") is not None:
                iid = item_id(tuple(doc["namespace"]), doc["key"])
                self.refresh[iid] = float(doc["ttl_minutes"])
                self.refreshers.setdefault(iid, []).append(pos)
