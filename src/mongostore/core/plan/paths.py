"""The search path of a semantic search, chosen once per search (``search_path``).

A path says which reads the search joins the batch's one ``Parallel`` with, and how it
ranks and pages from their answers (given back in the order it asked for them):

- ``LOCAL``: exact ranking in the client (``search.local_search_plan``), for servers
  without ``$vectorSearch``;
- ``ATLAS``: ``$vectorSearch`` pages (``search.atlas_search_plan``);
- ``ModesPath``: a retrieval mode (automated embedding, reranking, hybrid fusion) on Atlas
  or, where the mode allows it, fused locally (``retrieval_plan``).

Adding a mode means a builder of its pipeline in ``retrieval`` (queries) and its reads
and page in ``retrieval_plan``; the batch sees only this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mongostore.core import retrieval_plan as modes
from mongostore.core.codec import namespace_path
from mongostore.core.paging import initial_k
from mongostore.core.plan.context import Plan
from mongostore.core.plan.search import atlas_pipeline, atlas_search_plan, local_candidate_reads, local_search_plan
from mongostore.core.plan.state import BatchState, PendingSearch
from mongostore.core.steps import Aggregate, Step


class SearchPath(Protocol):
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        """The reads this search joins the batch's reads with."""
        ...

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        """The page, ``[(item document, score or None)]``, from the answers of ``reads``."""
        ...


class _Local:
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        ctx = state.ctx
        cache = ctx.vector_cache
        with_vectors = cache is None or not cache.covers(namespace_path(s.op.namespace_prefix))
        return local_candidate_reads(s.op, ctx.expiry_cutoff, with_vectors, ctx.sharded)

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        assert state.index is not None
        candidates = (first[0], first[1] if len(first) > 1 else None)
        return (yield from local_search_plan(s, state.index, state.ctx, candidates))


class _Atlas:
    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        assert state.index is not None
        return [Aggregate("vectors", atlas_pipeline(s, state.index, state.ctx, initial_k(s.op, state.index)))]

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        assert state.index is not None
        return (yield from atlas_search_plan(s, state.index, state.ctx, first[0]))


@dataclass(frozen=True)
class ModesPath:
    where: modes.Path  # "atlas", or "local" (a mode fused in the client)

    def reads(self, s: PendingSearch, state: BatchState) -> list[Step]:
        ctx, index = state.ctx, state.index
        assert index is not None
        return modes.first_reads(s.op, index, ctx.items_name, ctx.expiry_cutoff, s.query_vector, self.where)

    def rank(self, s: PendingSearch, state: BatchState, first: list[Any]) -> Plan:
        ctx, index = state.ctx, state.index
        assert index is not None
        return (
            yield from modes.search_plan(
                s.op,
                index,
                ctx.items_name,
                ctx.expiry_cutoff,
                s.query_vector,
                self.where,
                first,
                ctx.vectors_collection,
                ctx.vector_cache,
            )
        )


LOCAL: SearchPath = _Local()
ATLAS: SearchPath = _Atlas()


def search_path(state: BatchState) -> SearchPath:
    """The path of the batch's semantic searches now (``$vectorSearch`` may have been refused
    since: the reads are then built again); an Atlas-only mode on a server without it raises."""
    index = state.index
    if modes.uses_modes(index):
        assert index is not None and state.caps is not None
        return ModesPath(modes.path_for(index, state.caps, state.use_atlas))
    return ATLAS if state.use_atlas else LOCAL
