"""``VectorCache``: the float32 matrix ranks exactly as the float64 reference does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mongostore.core.queries import float32_vector
from mongostore.core.vectors import VectorCache, similarities

DIMS = 16


def best_per_item(item_ids: list[str], scores: np.ndarray) -> list[tuple[str, float]]:
    """The reference: max-pool vector scores per item; best first, ties by item id."""
    best: dict[str, float] = {}
    for iid, score in zip(item_ids, scores.tolist(), strict=True):
        if iid not in best or score > best[iid]:
            best[iid] = score
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


def reference(query: Any, pairs: list[tuple[str, np.ndarray]], similarity: str, k: int) -> list[tuple[str, float]]:
    ids = [iid for iid, _ in pairs]
    matrix = np.asarray([v for _, v in pairs], dtype=np.float32)
    return best_per_item(ids, similarities(query, matrix, similarity))[:k]


def random_case(
    seed: int,
) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, Any]], list[tuple[str, np.ndarray]]]:
    """Items with 0-3 vectors, many exact and near ties, zero vectors, some unlisted (stale) rows."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((6, DIMS)).astype(np.float32)
    items: list[dict[str, Any]] = []
    vectors: list[tuple[str, str, str, Any]] = []
    valid: list[tuple[str, np.ndarray]] = []
    for i in range(60):
        iid = f"i{i:02d}"
        hashes = []
        for f in range(int(rng.integers(0, 4))):
            kind = rng.integers(4)
            if kind == 0:
                v = base[rng.integers(6)].copy()  # exact ties across items
            elif kind == 1:
                v = (base[rng.integers(6)] + rng.standard_normal(DIMS) * 1e-6).astype(np.float32)  # near ties
            elif kind == 2:
                v = np.zeros(DIMS, dtype=np.float32)
            else:
                v = rng.standard_normal(DIMS).astype(np.float32) * np.float32(rng.uniform(0.1, 10))
            h = f"h{i}-{f}"
            hashes.append(h)
            packed = float32_vector(v.tolist()) if rng.random() < 0.5 else v.tolist()
            vectors.append((iid, f"f{f}", h, packed))
            valid.append((iid, v))
        if rng.random() < 0.2:  # a stale vector: stored, but its item no longer lists it
            vectors.append((iid, "old", f"stale{i}", rng.standard_normal(DIMS).astype(np.float32)))
        items.append({"_id": iid, "vectors": hashes, "updated_at": i})
    return items, vectors, valid


@pytest.mark.parametrize("similarity", ["cosine", "dotProduct", "euclidean"])
@pytest.mark.parametrize("seed", range(8))
def test_rank_equals_the_float64_reference(similarity: str, seed: int) -> None:
    items, vectors, valid = random_case(seed)
    cache = VectorCache(DIMS)
    cache.add_many(vectors)
    rng = np.random.default_rng(100 + seed)
    for query in (rng.standard_normal(DIMS), np.asarray(valid[0][1], dtype=np.float64), np.zeros(DIMS)):
        for k in (1, 3, 10, 200):
            ranking = cache.rank(query.tolist(), items, similarity, k)
            assert ranking.missing == []
            got = [(iid, score) for iid, score, _, _ in ranking.scored]
            want = reference(query, valid, similarity, k)
            assert [iid for iid, _ in got] == [iid for iid, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-12, atol=1e-12)
            assert ranking.n_unscored == sum(1 for d in items if not d["vectors"])
            assert ranking.n_scored == len(items) - ranking.n_unscored


def test_only_listed_pairs_count_and_missing_hashes_are_reported() -> None:
    cache = VectorCache(DIMS)
    v = np.ones(DIMS, dtype=np.float32)
    cache.add_many([("a", "f", "h1", v), ("b", "f", "h2", v)])
    ranking = cache.rank(
        v.tolist(),
        [
            {"_id": "a", "vectors": ["h1"], "updated_at": 1},
            {"_id": "b", "vectors": ["h3"], "updated_at": 2},
            {"_id": "c", "updated_at": 3},
        ],
        "cosine",
        10,
    )
    assert [iid for iid, *_ in ranking.scored] == ["a"]  # b lists h3: its h2 row does not count
    assert ranking.scored[0][2:] == ("f", "h1")  # the field and hash of the best vector
    assert ranking.missing == ["b"]
    assert ranking.absent == ["b"] and ranking.n_unscored == 2 and ranking.n_scored == 1
    gone = cache.rank(
        v.tolist(), [{"_id": "b", "vectors": ["h3"], "updated_at": 2}], "cosine", 10, frozenset({("b", "h3")})
    )
    assert gone.missing == []  # known to have no vector document: not fetched again
    cache.add_many([("b", "f", "h3", v * 2)])
    assert len(cache) == 3
    cache.forget("a")
    cache.drop([("b", "h2")])
    assert len(cache) == 1
    cache.add_many([("d", "f", "h4", v)])
    assert len(cache) == 2 and cache._n == 3  # a released row was reused


def test_past_max_rows_the_least_recently_ranked_go() -> None:
    cache = VectorCache(DIMS, max_rows=8)
    rng = np.random.default_rng(0)
    cache.add_many([(f"i{i}", "f", "h", rng.standard_normal(DIMS)) for i in range(8)])
    cache.rank(
        rng.standard_normal(DIMS).tolist(),
        [{"_id": f"i{i}", "vectors": ["h"], "updated_at": i} for i in range(4, 8)],
        "cosine",
        2,
    )
    cache.add_many([(f"j{i}", "f", "h", rng.standard_normal(DIMS)) for i in range(2)])
    held = cache.rank(
        rng.standard_normal(DIMS).tolist(),
        [{"_id": f"i{i}", "vectors": ["h"], "updated_at": i} for i in range(8)],
        "cosine",
        8,
    )
    assert len(cache) <= 8
    assert held.missing and set(held.missing) <= {f"i{i}" for i in range(4)}  # the ones not ranked lately


def test_shared_by_threads_every_ranking_is_consistent() -> None:
    """Threads add, drop, forget and rank at once (evictions included): no error, and every
    ranking lists each item once with the score of one of its listed vectors."""
    import threading

    items, vectors, _ = random_case(3)
    cache = VectorCache(DIMS, max_rows=60)
    allowed = {(iid, h) for iid, _, h, _ in vectors}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        rng = np.random.default_rng(n)
        start.wait()
        try:
            for step in range(300):
                cache.add_many([vectors[int(j)] for j in rng.integers(0, len(vectors), 6)])
                if step % 7 == 0:
                    cache.forget(items[int(rng.integers(len(items)))]["_id"])
                if step % 5 == 0:
                    cache.drop([vectors[int(rng.integers(len(vectors)))][::2][:2]])
                ranking = cache.rank(rng.standard_normal(DIMS).tolist(), items, "cosine", 10)
                ids = [iid for iid, *_ in ranking.scored]
                assert len(ids) == len(set(ids))
                assert all((iid, h) in allowed for iid, _, _, h in ranking.scored)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]


def test_a_stored_embedding_of_the_wrong_size_is_named() -> None:
    cache = VectorCache(DIMS)
    with pytest.raises(ValueError, match=r"item 'x' has 3 dimensions; index\['dims'\] is 16"):
        cache.add_many([("x", "f", "h", [1.0, 2.0, 3.0])])


def test_packing_matches_binary_from_vector() -> None:
    from bson.binary import Binary, BinaryVectorDtype

    m = np.random.default_rng(1).standard_normal((5, 7)) * 1e3
    for row in m:
        want = Binary.from_vector(row.tolist(), BinaryVectorDtype.FLOAT32)
        assert float32_vector(row.tolist()) == want == float32_vector(row) == float32_vector(row.astype(np.float32))
    with pytest.raises(ValueError, match="too large for float32"):
        float32_vector([1e39, 0.0])
    with pytest.raises(ValueError, match="too large for float32"):
        float32_vector(np.array([1e39, 0.0]))
    with pytest.raises(ValueError, match="not all numbers"):
        float32_vector([0.5, "x"])  # type: ignore[list-item]


def test_unscored_items_order_newest_first_whatever_the_date_shape() -> None:
    from datetime import datetime, timedelta, timezone

    from mongostore.core.vectors import newest_first

    base = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    docs = [
        {"_id": "aware-older", "updated_at": base},
        {"_id": "naive-newer", "updated_at": (base + timedelta(hours=1)).replace(tzinfo=None)},
        {"_id": "b-tie", "updated_at": base + timedelta(seconds=1)},
        {"_id": "a-tie", "updated_at": (base + timedelta(seconds=1)).replace(tzinfo=None)},
    ]
    assert [d["_id"] for d in newest_first(docs)] == ["naive-newer", "a-tie", "b-tie", "aware-older"]


@pytest.mark.parametrize("similarity", ["cosine", "dotProduct", "euclidean"])
def test_score_documents_is_the_float64_reference_and_survives_eviction(similarity: str) -> None:
    """The local hybrid fusion scores every vector in scope through the same matrix as the
    plain path's ranking: the same numbers as the reference, also for a row evicted at once."""
    rng = np.random.default_rng(7)
    docs = [
        {
            "item_id": f"i{i}",
            "field": "text",
            "text_hash": f"h{i}",
            "embedding": float32_vector(rng.standard_normal(DIMS)),
        }
        for i in range(12)
    ]
    query = rng.standard_normal(DIMS)
    want = similarities(query, [np.frombuffer(d["embedding"], "<f4", offset=2) for d in docs], similarity).tolist()
    for cache in (VectorCache(DIMS), VectorCache(DIMS, max_rows=4)):  # (the second evicts as it adds)
        assert cache.score_documents(query.tolist(), docs, similarity) == want
        assert cache.score_documents(query.tolist(), docs, similarity) == want  # held now (what still fits)
