"""Exact vector ranking with numpy, for servers without ``$vectorSearch``.

Scores are what LangGraph's stores report: cosine similarity in [-1, 1] (0 for a
zero vector), the dot product, or minus the Euclidean distance. The same inputs
rank the same way here and on Atlas (which reports a monotone transform of the
same similarity, converted back by the pipeline).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


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
    query: Sequence[float], matrix: npt.NDArray[np.float32] | Sequence[Sequence[float]], similarity: str
) -> npt.NDArray[np.float64]:
    """Similarity of ``query`` to each row of ``matrix``."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.size == 0:
        return np.zeros(0, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if similarity == "euclidean":
        dist: npt.NDArray[np.float64] = np.linalg.norm(m - q, axis=1)
        return -dist
    dots = m @ q
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
