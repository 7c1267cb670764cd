"""Paging through Atlas's ranked answers, for every Atlas path (plain vectors and the
retrieval modes): how many candidates to ask for, and the one paging plan.

No I/O: ``atlas_paging_plan`` yields the steps its driver runs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from langgraph.store.base import SearchOp

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core.steps import Step

Plan = Generator[Step, Any, Any]

MAX_CANDIDATES = 10_000


def initial_k(op: SearchOp, index: IndexSettings) -> int:
    """Vectors to ask for: enough for the page when items have a few vectors each."""
    return min(MAX_CANDIDATES, max((op.offset + op.limit) * max(2, len(index.fields)), 10))


def num_candidates(k: int, index: IndexSettings) -> int:
    """``$vectorSearch``'s ``numCandidates`` for ``k`` results (at least 100, at most the cap)."""
    return min(MAX_CANDIDATES, max(k * index.candidate_factor, 100, k))


def atlas_paging_plan(
    op: SearchOp,
    first: list[dict[str, Any]],
    k: int,
    more: Callable[[int], Step],
    convert: Callable[[Any], float],
    fixed: bool,
    unscored: Callable[[int, int], Step],
) -> Plan:
    """Page through Atlas's answers (every Atlas path: plain vectors and the retrieval modes).

    ``first`` is the first answer (it came with the batch's reads), each page entry with its
    item (``q.page_rows``). When a page comes back short while more candidates exist, ask
    again with four times more (``more(k)``), unless the candidate set is ``fixed`` (fusion,
    reranking). Once every scored item was seen, the page is filled with the items that
    have no valid vector, newest first, as InMemoryStore does (``unscored(skip, limit)``).
    """
    out = first
    while True:
        facet, docs = q.page_rows(out)
        hits = facet["hits"][0]["n"] if facet["hits"] else 0
        scored = facet["scored"][0]["n"] if facet["scored"] else 0
        ranked = [(d["_id"], convert(d["score"])) for d in facet["page"]]
        exhausted = fixed or hits < k
        if len(ranked) >= op.limit or exhausted or k >= MAX_CANDIDATES:
            break
        k = min(MAX_CANDIDATES, k * 4)
        out = yield more(k)
    page: list[tuple[dict[str, Any], float | None]] = [(docs[iid], score) for iid, score in ranked if iid in docs]
    if len(page) < op.limit and exhausted:
        tail = yield unscored(max(0, op.offset - scored), op.limit - len(page))
        page.extend((d, None) for d in tail)
    return page
