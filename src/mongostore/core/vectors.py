"""Exact vector ranking with numpy, for servers without ``$vectorSearch``.

``VectorCache`` keeps the stored embeddings in the client as one float32 matrix,
reused across searches; ``similarities`` and ``best_per_item`` are the reference
(float64) ranking it must agree with.

Scores are what LangGraph's stores report: cosine similarity in [-1, 1] (0 for a
zero vector), the dot product, or minus the Euclidean distance. The same inputs
rank the same way here and on Atlas (which reports a monotone transform of the
same similarity, converted back by the pipeline).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mongostore.core.kept import Candidates as Candidates
from mongostore.core.kept import KeptCandidates
from mongostore.core.kept import Recall as Recall
from mongostore.core.kept import newest_first as newest_first


def as_matrix(embeddings: Sequence[Any], dims: int) -> npt.NDArray[np.float32]:
    """Stored embeddings as one float32 matrix.

    Each is a float32 BinData vector (two header bytes, then little-endian floats),
    read straight from its bytes; arrays of numbers (older documents) are accepted too.
    """
    out = np.empty((len(embeddings), dims), dtype=np.float32)
    for i, e in enumerate(embeddings):
        if isinstance(e, (bytes, bytearray)):  # bson Binary is a bytes subclass
            out[i] = np.frombuffer(e, dtype="<f4", offset=2)
        else:
            out[i] = np.asarray(e, dtype=np.float32)
    return out


def similarities(
    query: Sequence[float] | npt.NDArray[np.float64],
    matrix: npt.NDArray[np.float32] | Sequence[Sequence[float]],
    similarity: str,
) -> npt.NDArray[np.float64]:
    """Similarity of ``query`` to each row of ``matrix``."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.size == 0:
        return np.zeros(0, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if similarity == "euclidean":
        dist: npt.NDArray[np.float64] = np.linalg.norm(m - q, axis=1)
        return -dist
    # Row by row (a pairwise sum along each row), not ``m @ q``: BLAS may round a row
    # differently with the number of rows around it, and equal vectors must tie exactly
    # whether they are scored among 10 rows or 100,000.
    dots: npt.NDArray[np.float64] = (m * q).sum(axis=1)
    if similarity == "dotProduct":
        return dots
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    out = np.zeros_like(dots)
    np.divide(dots, norms, out=out, where=norms > 0)
    return out


def best_per_item(item_ids: Sequence[str], scores: npt.NDArray[np.float64]) -> list[tuple[str, float]]:
    """Max-pool vector scores per item; best first, ties by item id (a stable order)."""
    best: dict[str, float] = {}
    for iid, score in zip(item_ids, scores.tolist(), strict=True):
        if iid not in best or score > best[iid]:
            best[iid] = score
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


# --------------------------------------------------------------------------- the client-side matrix

# float32 unit roundoff, and a bound on a float32 dot product's error relative to
# |q| |r| for dims terms (the summation, plus rounding the query to float32), with a
# safety factor of 4.
_U32 = 2.0**-24
_VECTOR_HEADER = b"\x27\x00"  # BSON binary vector: dtype float32, no padding


def _error_bound(dims: int) -> float:
    return 4.0 * (dims + 8) * _U32


def _approx_scores(
    dots: npt.NDArray[np.float64], sq: npt.NDArray[Any], q64: npt.NDArray[np.float64], similarity: str, eps: float
) -> tuple[npt.NDArray[np.float64], Any]:
    """float32 scores of the rows (their dot products with the query, squared norms) and
    each score's error bound: the rows that may reach the top are then re-scored exactly."""
    norms = np.sqrt(sq)
    nq = float(np.linalg.norm(q64))
    err: Any
    if similarity == "euclidean":  # rank by -d^2 = -(|r|^2 - 2 r.q + |q|^2)
        approx = -(sq - 2.0 * dots + nq * nq)
        err = 2.0 * eps * norms * nq + 1e-12 * (sq + nq * nq)
    elif similarity == "dotProduct":
        approx = dots
        err = eps * norms * nq
    else:
        denom = norms * nq
        approx = np.zeros_like(dots)
        np.divide(dots, denom, out=approx, where=denom > 0)
        err = eps
    return approx, err


class VectorCache(KeptCandidates):
    """Stored embeddings held in the client as one float32 matrix, reused across searches.

    A row holds the embedding of one (item id, text hash) pair. Vectors are content
    addressed: the hash fixes the text, and a store embeds a text once and never
    rewrites a vector under an unchanged hash, so a row can never be stale. Each
    search still reads its candidate items (ids and the hashes they list: it needs
    them for the filter anyway), maps them onto rows, and fetches only the pairs it
    does not hold: it sees every write, from this process or any other.

    Memory: ``4 x dims`` bytes per vector in the matrix (the capacity grows by
    half when full), plus about 400 bytes of bookkeeping (norm, LRU stamp, the hash
    string, the item's row list, the one-row lookup). Past ``max_rows`` (by default 1 GiB of matrix) the
    least recently ranked quarter is dropped; a later search fetches it again.
    Thread-safe: a store's searches may run in several threads.
    """

    def __init__(self, dims: int, max_rows: int | None = None) -> None:
        self.dims = dims
        self.max_rows = max_rows if max_rows is not None else max(1024, (1 << 30) // (4 * dims))
        self._m = np.zeros((0, dims), dtype=np.float32)
        self._sq = np.zeros(0, dtype=np.float64)  # squared norm of each row (float64)
        self._used = np.zeros(0, dtype=np.int64)  # search clock when last ranked
        self._hash: list[str | None] = []  # None: a free row
        self._item: list[str | None] = []
        self._field: list[str | None] = []
        self._rows: dict[str, list[int]] = {}  # item id -> its rows
        # (item id, hash) -> row, for the items holding exactly one row: the usual case,
        # which ``candidates`` maps in one dict lookup per item (kept by _store and _release)
        self._single: dict[tuple[str, str], int] = {}
        self._free: list[int] = []
        self._n = 0  # rows ever handed out (the matrix's used height)
        self._clock = 0
        self._loaded: set[str] = set()
        self._gen = np.zeros(0, dtype=np.int64)  # per row: times released (a kept mapping holds while unchanged)
        self._memo = OrderedDict()
        self._lock = threading.RLock()
        self.in_use = False  # a local search has used it (until then writes need not fill it)

    # ------------------------------------------------------------------ contents

    def __len__(self) -> int:
        return self._n - len(self._free)

    def nbytes(self) -> int:
        """Bytes of the arrays (matrix, norms, stamps) at their current capacity."""
        return int(self._m.nbytes + self._sq.nbytes + self._used.nbytes)

    def covers(self, prefix_path: str) -> bool:
        """True once every vector under an ancestor of (or exactly) this prefix was read."""
        with self._lock:
            return any(prefix_path.startswith(p) for p in self._loaded)

    def mark_loaded(self, prefix_path: str) -> None:
        with self._lock:
            self._loaded = {p for p in self._loaded if not p.startswith(prefix_path)} | {prefix_path}

    def _row_of(self, item: str, hash_: str) -> int | None:
        for r in self._rows.get(item, ()):
            if self._hash[r] == hash_:
                return r
        return None

    def _allocate(self, count: int) -> list[int]:
        out = self._free[-count:] if count <= len(self._free) else list(self._free)
        del self._free[len(self._free) - len(out) :]
        extra = count - len(out)
        if extra:
            need = self._n + extra
            if need > len(self._m):
                cap = max(need, len(self._m) + len(self._m) // 2, 64)
                m = np.zeros((cap, self.dims), dtype=np.float32)
                m[: self._n] = self._m[: self._n]
                self._m = m
                self._sq = np.concatenate([self._sq[: self._n], np.zeros(cap - self._n)])
                self._used = np.concatenate([self._used[: self._n], np.zeros(cap - self._n, dtype=np.int64)])
                self._gen = np.concatenate([self._gen[: self._n], np.zeros(cap - self._n, dtype=np.int64)])
                self._hash.extend([None] * (cap - len(self._hash)))
                self._item.extend([None] * (cap - len(self._item)))
                self._field.extend([None] * (cap - len(self._field)))
            out.extend(range(self._n, need))
            self._n = need
        return out

    def _store(self, entries: list[tuple[str, str, str, Any]]) -> None:
        """Write (item, field, hash, embedding) entries into free or new rows."""
        rows = self._allocate(len(entries))
        m, width = self._m, 2 + 4 * self.dims
        idx = np.asarray(rows, dtype=np.int64)
        try:
            packed = [e for _, _, _, e in entries]
            if all(isinstance(e, (bytes, bytearray)) and len(e) == width and e[:2] == _VECTOR_HEADER for e in packed):
                # float32 BinData vectors (what the store writes): one copy for the lot
                raw = np.frombuffer(b"".join(packed), dtype=np.uint8).reshape(len(entries), width)
                block = np.ascontiguousarray(raw[:, 2:]).view("<f4")
                if np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
                    m[idx[0] : idx[-1] + 1] = block
                else:
                    m[idx] = block
            else:
                for r, (item, _, _, emb) in zip(rows, entries, strict=True):
                    arr = np.frombuffer(emb, dtype="<f4", offset=2) if isinstance(emb, (bytes, bytearray)) else emb
                    arr = np.asarray(arr, dtype=np.float32).reshape(-1)
                    if arr.shape != (self.dims,):
                        raise ValueError(
                            f"the stored embedding of item {item!r} has {arr.size} dimensions; "
                            f"index['dims'] is {self.dims}"
                        )
                    m[r] = arr
        except BaseException:
            self._free.extend(rows)
            raise
        hash_of, item_of, field_of, rows_of, single = self._hash, self._item, self._field, self._rows, self._single
        for r, (item, field, hash_, _) in zip(rows, entries, strict=True):
            hash_of[r] = hash_
            item_of[r] = item
            field_of[r] = field
            held = rows_of.get(item)
            if held is None:
                rows_of[item] = [r]
                single[item, hash_] = r
            else:
                if len(held) == 1:
                    del single[item, hash_of[held[0]]]  # type: ignore[arg-type]
                held.append(r)
        for start in range(0, idx.size, 16384):  # float64 squared norms, a slice at a time
            part = idx[start : start + 16384]
            block = m[part].astype(np.float64)
            self._sq[part] = np.einsum("ij,ij->i", block, block)
        self._used[idx] = self._clock
        if len(self) > self.max_rows:
            self._evict(len(self) - (self.max_rows * 3) // 4)

    def _release(self, r: int) -> None:
        self._gen[r] += 1
        item = self._item[r]
        if item is not None:
            rows = self._rows.get(item)
            if rows is not None:
                if len(rows) == 1:
                    self._single.pop((item, self._hash[r]), None)  # type: ignore[arg-type]
                rows.remove(r)
                if not rows:
                    del self._rows[item]
                elif len(rows) == 1:
                    self._single[item, self._hash[rows[0]]] = rows[0]  # type: ignore[index]
        self._hash[r] = None
        self._item[r] = None
        self._field[r] = None
        self._free.append(r)

    def _evict(self, count: int) -> None:
        live = np.asarray([r for r in range(self._n) if self._hash[r] is not None], dtype=np.int64)
        oldest = live[np.argsort(self._used[live], kind="stable")[:count]]
        for r in oldest.tolist():
            self._release(int(r))

    def add(self, item: str, field: str, hash_: str, embedding: Any) -> None:
        """Hold one vector (a float32 BinData vector, or numbers)."""
        self.add_many([(item, field, hash_, embedding)])

    def add_many(self, vectors: Sequence[tuple[str, str, str, Any]]) -> None:
        """Hold these (item id, field, text hash, embedding) vectors; pairs already held are skipped."""
        with self._lock:
            # (item, hash) pairs are unique among vector documents (the hash covers the field).
            rows_of, hash_of = self._rows, self._hash
            entries = [
                e for e in vectors if (held := rows_of.get(e[0])) is None or all(hash_of[r] != e[2] for r in held)
            ]
            if entries:
                self._store(entries)

    def add_documents(self, docs: Sequence[dict[str, Any]]) -> None:
        """Hold the vectors of stored vector documents (``item_id``, ``field``, ``text_hash``, ``embedding``)."""
        self.add_many([(d["item_id"], d["field"], d["text_hash"], d["embedding"]) for d in docs])

    def vector_of(self, row: int) -> tuple[str, str, str]:
        """(item id, field, text hash) of a held row."""
        item, field, hash_ = self._item[row], self._field[row], self._hash[row]
        assert item is not None and field is not None and hash_ is not None
        return item, field, hash_

    def drop_rows(self, cands: Candidates, rows: set[int]) -> Candidates:
        """Release rows whose vector documents turned out to be gone; the candidates without them."""
        with self._lock:
            for r in rows:
                if self._hash[r] is not None:
                    self._release(r)
            keep = ~np.isin(cands.rows, np.fromiter(rows, dtype=np.int64, count=len(rows)))
            index = cands.item_index[keep]
            rows_kept = cands.rows[keep]
            return Candidates(
                cands.items,
                index,
                rows_kept,
                int(np.unique(index).size),
                cands.per_item,
                cands.missing,
                cands.unscored,
                self._gen[rows_kept],
            )

    def forget(self, item: str) -> None:
        """Drop an item's rows (it was deleted or re-put with other texts)."""
        with self._lock:
            for r in list(self._rows.get(item, ())):
                self._release(r)
    # ------------------------------------------------------------------ searching

    def candidates(self, items: list[dict[str, Any]]) -> Candidates:
        """Map candidate items (``_id`` and ``vectors``, the hashes they list, or the one hash
        as a string) onto rows.

        Rows of a candidate whose hash it no longer lists are released on the way.
        """
        with self._lock:
            self.in_use = True
            # The usual case in one dict lookup per item: one listed hash (a compact read's
            # string) and one held row with that hash. A listed array is unhashable: then
            # every item takes the general loop below.
            single: dict[Any, int] = self._single
            try:
                found = np.array([single.get((d["_id"], d.get("vectors")), -1) for d in items], dtype=np.int64)
            except TypeError:  # a stored-fields read (the embedded engine): all in the general loop
                found = np.full(len(items), -1, dtype=np.int64)
            quick = np.flatnonzero(found >= 0)
            rest: Sequence[int] = range(len(items))  # none looked up (a stored-fields read)
            if quick.size:
                rest = np.flatnonzero(found < 0).tolist()
            index, rows, missing, unscored, scored, per_item = self._map_general(items, rest)
            item_index, row_ids = quick, found[quick]
            if index:  # the general loop's rows, merged in item order (each item's rows as it gave them)
                item_index = np.concatenate([quick, np.asarray(index, dtype=np.int64)])
                row_ids = np.concatenate([row_ids, np.asarray(rows, dtype=np.int64)])
                if quick.size:
                    order = np.argsort(item_index, kind="stable")
                    item_index, row_ids = item_index[order], row_ids[order]
            cands = Candidates(items, item_index, row_ids, int(quick.size) + scored, per_item, missing, unscored)
            cands.gens = self._gen[cands.rows]
            return cands

    def _map_general(
        self, items: list[dict[str, Any]], positions: Sequence[int]
    ) -> tuple[list[int], list[int], list[str], list[dict[str, Any]], int, int]:
        """``candidates`` for the items at ``positions``: (item positions, rows, missing ids,
        unscored items, items scored, most rows per item); stale rows are released."""
        rows_of, hash_of = self._rows, self._hash
        item_index: list[int] = []
        rows: list[int] = []
        missing: list[str] = []
        unscored: list[dict[str, Any]] = []
        scored, per_item = 0, 1
        stale: list[int] = []
        for i in positions:
            d = items[i]
            listed = d.get("vectors")
            if not listed:
                unscored.append(d)
                continue
            iid = d["_id"]
            held = rows_of.get(iid)
            if held is None:
                missing.append(iid)
                continue
            if listed.__class__ is str:  # a compact read's one hash (local_candidate_reads)
                listed = (listed,)
            if len(held) == 1 and len(listed) == 1 and hash_of[held[0]] == listed[0]:  # a stored-fields read
                item_index.append(i)
                rows.append(held[0])
                scored += 1
                continue
            found = 0
            for r in held:
                if hash_of[r] in listed:
                    item_index.append(i)
                    rows.append(r)
                    found += 1
                else:
                    stale.append(r)
            if found < len(listed):
                missing.append(iid)
            if found:
                scored += 1
                per_item = max(per_item, found)
        for r in stale:
            self._release(r)
        return item_index, rows, missing, unscored, scored, per_item

    def rank(
        self, query: Sequence[float], cands: Candidates, similarity: str, k: int
    ) -> list[tuple[str, float, int]]:
        """The ``k`` best items as (item id, score, row of its best vector), best first, ties by item id.

        Exactly what ``best_per_item(similarities(...))`` over every row gives: the
        matrix is scored in float32, rows that could reach the top ``k`` under a
        rigorous float32 error bound are kept, and those are re-scored in float64.
        """
        rows = cands.rows
        if k <= 0 or rows.size == 0:
            return []
        with self._lock:
            self._clock += 1
            self._used[rows] = self._clock
            q64 = np.asarray(query, dtype=np.float64)
            q32 = q64.astype(np.float32)
            if rows.size * 4 >= self._n:
                dots = (self._m[: self._n] @ q32)[rows].astype(np.float64)
            else:
                dots = (self._m[rows] @ q32).astype(np.float64)
            approx, err = _approx_scores(dots, self._sq[rows], q64, similarity, _error_bound(self.dims))
            lower = approx - err
            want = min(k, cands.scored)
            threshold = -np.inf
            if want < cands.scored:
                m = min(rows.size, want * max(1, cands.per_item))
                top = np.argpartition(-lower, m - 1)[:m] if m < rows.size else np.arange(rows.size)
                top = top[np.argsort(-lower[top], kind="stable")]
                seen: set[int] = set()
                owners = cands.item_index
                for j in top.tolist():
                    seen.add(int(owners[j]))
                    if len(seen) == want:
                        threshold = float(lower[j])
                        break
            keep = np.nonzero(approx + err >= threshold)[0]
            kept = rows[keep]
            exact = similarities(q64, self._m[kept].astype(np.float64), similarity).tolist()
            best: dict[str, tuple[float, int]] = {}
            item_of = self._item
            for score, r in zip(exact, kept.tolist(), strict=True):
                iid = item_of[r]
                assert iid is not None
                if iid not in best or score > best[iid][0]:
                    best[iid] = (score, r)
        ordered = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:k]
        return [(iid, score, r) for iid, (score, r) in ordered]
