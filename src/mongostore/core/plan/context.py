"""What every plan shares: the ``Plan`` type, the store's ``PlanContext``, the write clock."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from mongostore.config import IndexSettings, TTLSettings
from mongostore.core import vectors as _vectors
from mongostore.core.codec import vectors_name
from mongostore.core.steps import Embed, Step

# Cursor batch size for reads whose every document is needed (the server caps a batch at 16 MiB).
LARGE_BATCH = 100_000

Plan = Generator[Step, Any, Any]


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
    # Behind mongos: prefix reads carry the shard-key range, vector writes their item_id (``queries.sharding``).
    sharded: bool = False

    @property
    def expiry_cutoff(self) -> datetime | None:
        """``now`` when expired items must be hidden (``omit_expired``), else None."""
        return self.now if self.ttl is not None and self.ttl.omit_expired else None

    @property
    def vectors_collection(self) -> str:
        return self.vectors_name or vectors_name(self.items_name)


def embed_texts(texts: tuple[str, ...], index: IndexSettings) -> Plan:
    """One embedding call, its answer checked before anything is written; returns ``{text: vector}``,
    each as the embedder gave it (puts pack it straight to float32, queries take plain floats)."""
    embedded = yield Embed(texts)
    if len(embedded) != len(texts):
        raise ValueError(f"the embedder returned {len(embedded)} vectors for {len(texts)} texts")
    for vec in embedded:
        if len(vec) != index.dims:
            raise ValueError(f"the embedder returned {len(vec)} dimensions; index['dims'] is {index.dims}")
    return dict(zip(texts, embedded, strict=True))
