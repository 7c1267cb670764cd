"""Candidates of a local search, and what a store keeps of them between searches.

``Candidates`` maps a search's candidate items onto the rows of a ``VectorCache``;
``KeptCandidates`` (a part of ``VectorCache``) keeps those mappings per prefix and filter
while the collections' write versions say nothing changed, and patches them with the
items that did (``mongostore.drivers.mongomock_compat.versions``; decisions, issue 13).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from mongostore.core.codec import epoch_ms

__all__ = ["Candidates", "KeptCandidates", "Recall", "newest_first"]


@dataclass
class Candidates:
    """A search's candidate items mapped onto the cache's rows.

    ``item_index[j]`` is the position in ``items`` of the item that row ``rows[j]``
    belongs to; ``missing`` lists items that name a text hash the cache does not hold.
    """

    items: list[dict[str, Any]]
    item_index: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]
    scored: int  # items with at least one row
    per_item: int  # most rows of any one item
    missing: list[str]
    unscored: list[dict[str, Any]]  # items that list no hash at all
    gens: npt.NDArray[np.int64] | None = None  # each row's generation when mapped (see ``remember``)


@dataclass
class _Memo:
    """A search's candidates kept for the next search of the same prefix and filter.

    Positions number the candidate items; ``owners[j]`` is the position of the item that
    row ``rows[j]`` belongs to, ``pos_of`` the position of each item that has rows.
    """

    items_version: int
    vectors_version: int
    rows: npt.NDArray[np.int64]
    owners: npt.NDArray[np.int64]
    gens: npt.NDArray[np.int64]
    pos_of: dict[str, int]
    next_pos: int
    per_item: int
    leftover: list[dict[str, Any]]  # the candidates without a row, newest first
    until: datetime | None  # the earliest expiry among the candidates (None: none expires)

    def candidates(self) -> Candidates:
        return Candidates([], self.owners, self.rows, len(self.pos_of), self.per_item, [], [], self.gens)


@dataclass
class Recall:
    """What ``VectorCache.recall`` found: the candidates (``cands``, ``leftover``), or the ids
    of the items that changed since they were kept (``changed``: read those, then ``patch``)."""

    cands: Candidates | None = None
    leftover: list[dict[str, Any]] = dataclass_field(default_factory=list)
    changed: list[str] = dataclass_field(default_factory=list)
    since: int = 0


def newest_first(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unscored items in their page order: newest first, ties by id."""
    return sorted(docs, key=lambda d: (-epoch_ms(d["updated_at"]), d["_id"]))


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


class KeptCandidates:
    """The kept candidates of a ``VectorCache`` (which holds the lock and the row generations)."""

    _lock: threading.RLock
    _gen: npt.NDArray[np.int64]  # per row: times released
    _memo: OrderedDict[Any, _Memo]

    MEMO_SIZE = 32  # prefixes x filters whose candidates are kept

    def remember(
        self,
        key: Any,
        version: tuple[int, int],
        cands: Candidates,
        leftover: list[dict[str, Any]],
        until: datetime | None,
    ) -> None:
        """Keep a search's candidates (mapped onto rows) for the next searches of ``key``.

        ``version``: the (items, vectors) write versions read before the candidates were.
        Held per vector: its row, owner and generation (24 bytes), and per item its id in
        ``pos_of``; the items without a row are kept whole.
        """
        assert cands.gens is not None
        owners = np.unique(cands.item_index).tolist()
        memo = _Memo(
            version[0],
            version[1],
            cands.rows,
            cands.item_index,
            cands.gens,
            {cands.items[i]["_id"]: i for i in owners},
            len(cands.items),
            cands.per_item,
            leftover,
            until,
        )
        with self._lock:
            self._memo[key] = memo
            self._memo.move_to_end(key)
            while len(self._memo) > self.MEMO_SIZE:
                self._memo.popitem(last=False)

    def kept_since(self, key: Any) -> int | None:
        """The items version of what is kept for ``key`` (None: nothing kept)."""
        with self._lock:
            memo = self._memo.get(key)
            return None if memo is None else memo.items_version

    def _holds(self, memo: _Memo) -> bool:
        return bool(np.array_equal(self._gen[memo.rows], memo.gens))

    def recall(self, key: Any, items: Any, vectors: Any, now: datetime | None) -> Recall | None:
        """What is kept for ``key``, given the collections' write states (``Version`` answers:
        ``(version, changes)``, or None on a server) and the expiry cut-off ``now``.

        None: read every candidate (nothing kept, no versions, a candidate expired, a row was
        released, too many changes to tell, or a vector landed for an item kept as unscored).
        """
        if items is None or vectors is None:
            return None
        with self._lock:
            memo = self._memo.get(key)
            if memo is None:
                return None
            fresh = now is None or memo.until is None or now < memo.until
            vectors_moved = vectors[0] != memo.vectors_version
            if not fresh or (vectors_moved and any(d.get("vectors") for d in memo.leftover)):
                del self._memo[key]
                return None
            if items[0] == memo.items_version:
                if not self._holds(memo):
                    del self._memo[key]
                    return None
                memo.vectors_version = vectors[0]
                self._memo.move_to_end(key)
                return Recall(memo.candidates(), memo.leftover)
            changes = items[1]
            if changes is None:
                del self._memo[key]
                return None
            changed = list(dict.fromkeys(k for v, k in changes if v > memo.items_version and isinstance(k, str)))
            return Recall(changed=changed, since=memo.items_version)

    def patch(
        self,
        key: Any,
        since: int,
        version: tuple[int, int],
        changed: list[str],
        fresh: Candidates,
        until: datetime | None,
    ) -> tuple[Candidates, list[dict[str, Any]]] | None:
        """Bring what is kept for ``key`` (at items version ``since``) up to ``version``: the
        ``changed`` items leave, and ``fresh`` (the changed items that are candidates now,
        mapped by ``candidates``) join. None when it no longer holds: read everything."""
        assert fresh.gens is not None
        with self._lock:
            memo = self._memo.get(key)
            if memo is None or memo.items_version != since:
                return None
            dead = np.zeros(memo.next_pos, dtype=bool)
            gone = [memo.pos_of.pop(k) for k in changed if k in memo.pos_of]
            dead[gone] = True
            keep = ~dead[memo.owners]
            changed_set = set(changed)
            memo.rows, memo.owners, memo.gens = memo.rows[keep], memo.owners[keep], memo.gens[keep]
            if not self._holds(memo):
                del self._memo[key]
                return None
            base = memo.next_pos
            memo.rows = np.concatenate([memo.rows, fresh.rows])
            memo.owners = np.concatenate([memo.owners, fresh.item_index + base])
            memo.gens = np.concatenate([memo.gens, fresh.gens])
            for i in np.unique(fresh.item_index).tolist():
                memo.pos_of[fresh.items[i]["_id"]] = base + i
            memo.next_pos = base + len(fresh.items)
            memo.per_item = max(memo.per_item, fresh.per_item)
            with_rows = set(fresh.item_index.tolist())
            memo.leftover = newest_first(
                [d for d in memo.leftover if d["_id"] not in changed_set]
                + [d for i, d in enumerate(fresh.items) if i not in with_rows]
            )
            memo.until = _earliest(memo.until, until)
            memo.items_version, memo.vectors_version = version
            self._memo.move_to_end(key)
            return memo.candidates(), memo.leftover
