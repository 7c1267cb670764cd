"""The state a batch's phases share (``BatchState``), and what a batch reports (``BatchOutcome``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

from mongostore.config import IndexSettings
from mongostore.core.codec import item_id
from mongostore.core.plan.context import PlanContext
from mongostore.core.steps import Capabilities
from mongostore.errors import WriteError


@dataclass
class PendingPut:
    """A put or delete (``value`` None) of the batch, the last one per (namespace, key)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    ttl: float | None
    texts: dict[str, tuple[str, str]]  # its indexed texts, {field: (text, text hash)}
    id: str = ""

    def __post_init__(self) -> None:
        self.id = item_id(self.namespace, self.key)


@dataclass
class PendingSearch:
    """A search of the batch at op position ``pos``; semantic ones get their query vector."""

    pos: int
    op: SearchOp
    semantic: bool
    query_vector: list[float] | None = None
    path: Any = None  # its ``plan.paths.SearchPath``, chosen when the batch's reads are built
    n_reads: int = 0  # how many of the batch's reads are its path's
    first: list[Any] = field(default_factory=list)  # their answers, in the order the path asked


@dataclass
class BatchOutcome:
    """Every op's result, and what of the write failed: ``failures`` (namespace, key) -> the server's
    message, ``stored`` those whose value landed (only their vectors failed), ``write_error`` what the
    whole write raised (network, write concern: the reads are answered, the writes unknown)."""

    results: list[Result]
    failures: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)
    stored: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    write_error: Exception | None = None
    refreshing: set[int] = field(default_factory=set)  # positions of reads whose TTL refresh was written

    def error_for(self, pos: int, op: Op) -> Exception | None:
        """The exception the caller of op ``pos`` must see, or None: a whole write's error concerns
        the puts and the reads whose refresh it held; a rejected item, its put only."""
        if self.write_error is not None and (isinstance(op, PutOp) or pos in self.refreshing):
            return self.write_error
        if not isinstance(op, PutOp):
            return None
        target = (op.namespace, op.key)
        if target in self.failures:
            return WriteError([(*target, self.failures[target])], self.stored & {target})
        return None

    def raise_any(self) -> None:
        if self.write_error is not None:
            raise self.write_error
        if self.failures:
            raise WriteError([(ns, key, msg) for (ns, key), msg in self.failures.items()], self.stored)


@dataclass
class BatchState:
    """What the phases of ``batch_outcome_plan`` hand on to each other (filled in phase order)."""

    ctx: PlanContext
    results: list[Result]
    gets: list[tuple[int, GetOp]] = field(default_factory=list)
    searches: list[PendingSearch] = field(default_factory=list)
    listings: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[tuple[str, ...], str], PendingPut] = field(default_factory=dict)
    use_atlas: bool = False  # query_phase: the search path
    caps: Capabilities | None = None
    stored: dict[str, dict[str, str]] = field(default_factory=dict)  # item id -> {field: text_hash} stored
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

    @property
    def put_list(self) -> list[PendingPut]:
        return list(self.puts.values())

    def note_refresh(self, pos: int, docs: list[dict[str, Any]], wanted: bool) -> None:
        """Read ``pos`` returned ``docs``; with ``refresh_ttl`` (``wanted``) the write refreshes their TTLs."""
        if not wanted:
            return
        for doc in docs:
            if doc.get("ttl_minutes") is not None:
                iid = item_id(tuple(doc["namespace"]), doc["key"])
                self.refresh[iid] = float(doc["ttl_minutes"])
                self.refreshers.setdefault(iid, []).append(pos)
