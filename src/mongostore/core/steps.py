"""The I/O steps a plan yields to its driver (``mongostore.drivers``), and what each answers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mongostore.core.queries import IndexSpec, Role, WriteRequest


@dataclass(frozen=True)
class Find:
    """``collection.find(...)`` -> list of documents."""

    role: Role
    filter: dict[str, Any]
    projection: dict[str, Any] | None = None
    sort: list[tuple[str, int]] | None = None
    skip: int = 0
    limit: int = 0
    batch_size: int = 0  # 0: the driver's default (101 documents in the first batch)


@dataclass(frozen=True)
class Aggregate:
    """``collection.aggregate(pipeline)`` -> list of documents."""

    role: Role
    pipeline: list[dict[str, Any]]
    batch_size: int = 0


@dataclass(frozen=True)
class Distinct:
    """``collection.distinct(field, filter)`` -> the distinct values (only where ``Capabilities.distinct_scan``)."""

    role: Role
    field: str
    filter: dict[str, Any]


@dataclass(frozen=True)
class Count:
    """``collection.count_documents(filter)`` -> int."""

    role: Role
    filter: dict[str, Any]


@dataclass(frozen=True)
class Write:
    """One unordered bulk write (client-level on MongoDB 8.0+, else one per collection, the two at
    once; a collection's requests keep their order) -> ``WriteOutcome``."""

    requests: tuple[WriteRequest, ...]


@dataclass(frozen=True)
class WriteOutcome:
    errors: list[tuple[int, str]] = field(default_factory=list)  # (request index, message)
    deleted: int = 0  # items deleted
    vectors_deleted: int = 0
    items_matched: int = 0  # items updated or inserted (matched or upserted) by the items' update requests


@dataclass(frozen=True)
class Embed:
    """``embed_documents(texts)`` (``aembed_documents`` in the async store) -> vectors."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Parallel:
    """Independent steps; the async driver runs them concurrently -> list of answers."""

    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Capabilities:
    """What the server can do (``ServerInfo``) and whether searches use ``$vectorSearch`` (``Probe``).

    ``search_commands``: the server answers search-index commands (None: not asked, or it cannot
    tell, as servers before 7.1 that list none). ``index_status``: the vector index's, ``MISSING``
    when absent. ``recheck``: the answer may change (index missing or building): ask again later.
    """

    server_version: str
    emulated: bool
    vector_search: bool
    client_bulk_write: bool
    detail: str = ""
    search_commands: bool | None = None
    index_status: str = ""
    recheck: bool = False
    sharded: bool = False  # behind mongos (``hello`` says ``msg: "isdbgrid"``)
    ranges: bool = False  # prefix reads carry the ``_id`` / ``item_id`` range: behind mongos, and on the local store
    # ``distinct`` of an indexed field skips through its index, one lookup per value (the local store):
    # list_namespaces reads the distinct paths instead of grouping every item.
    distinct_scan: bool = False

    @property
    def version(self) -> tuple[int, int] | None:
        """(major, minor) of ``server_version``; None when it names no version (an emulated engine)."""
        parts = re.findall(r"\d+", self.server_version)[:2]
        return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None

    def at_least(self, wanted: tuple[int, int]) -> bool:
        """Emulated engines report no version: they say what they support by answering."""
        found = self.version
        return self.emulated or found is None or found >= wanted


@dataclass(frozen=True)
class ServerInfo:
    """Server version and client-level bulk_write only (``hello``/``buildInfo``), asked
    once per store: what writes need -> ``Capabilities`` (search not asked)."""


@dataclass(frozen=True)
class Probe:
    """``ServerInfo`` plus the search state (``$listSearchIndexes``) -> ``Capabilities``, remembered per
    store; asked again after ``recheck_seconds`` while the index is missing or building, at once with ``refresh``."""

    index_name: str = ""
    refresh: bool = False


@dataclass(frozen=True)
class ServerCommand:
    """``database.command(name)`` (``buildInfo``, ``hello``) -> the reply document."""

    name: str


@dataclass(frozen=True)
class DisableVectorSearch:
    """Searches rank locally from now on: the server has no search (for good), or the
    index cannot serve yet (``temporary``: asked again after ``recheck_seconds``)."""

    reason: str
    temporary: bool = False
    index_status: str = ""


@dataclass(frozen=True)
class CreateIndexes:
    role: Role
    specs: tuple[IndexSpec, ...]


@dataclass(frozen=True)
class ListIndexes:
    """Names of the B-tree indexes -> list[str]."""

    role: Role


@dataclass(frozen=True)
class EnsureCollection:
    """Create the collection if missing (search indexes need an existing collection)."""

    role: Role


@dataclass(frozen=True)
class ListSearchIndexes:
    role: Role
    name: str | None = None


@dataclass(frozen=True)
class PutSearchIndex:
    """``createSearchIndexes``, or with ``update`` ``updateSearchIndex`` (which keeps the index's type)."""

    role: Role
    name: str
    definition: dict[str, Any]
    type: str = "vectorSearch"  # or "search" (the hybrid mode's text index)
    update: bool = False


@dataclass(frozen=True)
class ShardKeys:
    """The collections' shard keys from ``config.collections`` (behind mongos) ->
    ``{role: key pattern or None (unsharded)}``; roles without a collection are left out."""


@dataclass(frozen=True)
class ShardCollection:
    """``shardCollection`` of the role's collection on ``key`` (an admin command through
    mongos) -> the server's answer. Only ``shard_plan`` asks it, on the user's explicit opt-in."""

    role: Role
    key: dict[str, Any]


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = (
    Find
    | Aggregate
    | Distinct
    | Count
    | Write
    | Embed
    | Parallel
    | Probe
    | ServerInfo
    | ServerCommand
    | DisableVectorSearch
    | CreateIndexes
    | ListIndexes
    | EnsureCollection
    | ListSearchIndexes
    | PutSearchIndex
    | ShardKeys
    | ShardCollection
    | Sleep
)
