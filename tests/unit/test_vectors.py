"""``VectorCache``: the float32 matrix ranks exactly as the float64 reference does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mongostore.core.queries import float32_vector
from mongostore.core.vectors import VectorCache, best_per_item, similarities

DIMS = 16


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
        items.append({"_id": iid, "vectors": hashes})
    return items, vectors, valid


@pytest.mark.parametrize("similarity", ["cosine", "dotProduct", "euclidean"])
@pytest.mark.parametrize("seed", range(8))
def test_rank_equals_the_float64_reference(similarity: str, seed: int) -> None:
    items, vectors, valid = random_case(seed)
    cache = VectorCache(DIMS)
    cache.add_many(vectors)
    cands = cache.candidates(items)
    assert cands.missing == []
    rng = np.random.default_rng(100 + seed)
    for query in (rng.standard_normal(DIMS), np.asarray(valid[0][1], dtype=np.float64), np.zeros(DIMS)):
        for k in (1, 3, 10, 200):
            got = [(iid, score) for iid, score, _ in cache.rank(query.tolist(), cands, similarity, k)]
            want = reference(query, valid, similarity, k)
            assert [iid for iid, _ in got] == [iid for iid, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-12, atol=1e-12)


def test_rows_are_reused_and_missing_hashes_reported() -> None:
    cache = VectorCache(DIMS)
    v = np.ones(DIMS, dtype=np.float32)
    cache.add_many([("a", "f", "h1", v), ("b", "f", "h2", v)])
    cands = cache.candidates([{"_id": "a", "vectors": ["h1"]}, {"_id": "b", "vectors": ["h3"]}, {"_id": "c"}])
    assert cands.missing == ["b"] and [d["_id"] for d in cands.unscored] == ["c"]
    assert len(cache) == 1  # b's row for h2 is no longer listed: released
    cache.add("b", "f", "h3", v * 2)
    assert len(cache) == 2 and cache._n == 2  # the released row was reused
    cache.forget("a")
    assert len(cache) == 1


def test_past_max_rows_the_least_recently_ranked_go() -> None:
    cache = VectorCache(DIMS, max_rows=8)
    rng = np.random.default_rng(0)
    cache.add_many([(f"i{i}", "f", "h", rng.standard_normal(DIMS)) for i in range(8)])
    recent = cache.candidates([{"_id": f"i{i}", "vectors": ["h"]} for i in range(4, 8)])
    cache.rank(rng.standard_normal(DIMS).tolist(), recent, "cosine", 2)
    cache.add_many([(f"j{i}", "f", "h", rng.standard_normal(DIMS)) for i in range(2)])
    held = cache.candidates([{"_id": f"i{i}", "vectors": ["h"]} for i in range(8)])
    assert len(cache) <= 8
    assert set(held.missing) <= {f"i{i}" for i in range(4)}  # the ones not ranked lately


def test_a_stored_embedding_of_the_wrong_size_is_named() -> None:
    cache = VectorCache(DIMS)
    with pytest.raises(ValueError, match=r"item 'x' has 3 dimensions; index\['dims'\] is 16"):
        cache.add("x", "f", "h", [1.0, 2.0, 3.0])


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


@pytest.fixture
def local_tz_ahead_of_utc(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A machine clock 5 hours ahead of UTC: a naive date read as local time would be 5 h off."""
    import time

    monkeypatch.setenv("TZ", "Etc/GMT-5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_candidate_dates_in_any_shape_read_as_utc_whatever_the_local_zone(local_tz_ahead_of_utc: Any) -> None:
    """Candidate dates come back aware, naive (UTC), or as a server's ``$toLong``
    milliseconds (compact reads): ordering the unscored items and the earliest expiry
    read every shape as the same UTC instant."""
    from datetime import datetime, timedelta, timezone

    from mongostore.core.kept import newest_first
    from mongostore.core.plan.search import _earliest_expiry

    base = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    ms = int(base.timestamp() * 1000)
    docs = [
        {"_id": "aware-older", "updated_at": base},
        {"_id": "naive-newer", "updated_at": (base + timedelta(hours=1)).replace(tzinfo=None)},
        {"_id": "ms-newest", "updated_at": ms + 2 * 3_600_000},
        {"_id": "ms-tie-b", "updated_at": ms + 1_000},
        {"_id": "aware-tie-a", "updated_at": base + timedelta(seconds=1)},
    ]
    assert [d["_id"] for d in newest_first(docs)] == [
        "ms-newest", "naive-newer", "aware-tie-a", "ms-tie-b", "aware-older"
    ]
    ends = [
        {"expires_at": (base + timedelta(hours=3)).replace(tzinfo=None)},
        {"expires_at": base + timedelta(hours=4)},
        {"expires_at": None},  # $toLong of no date
        {},
    ]
    assert _earliest_expiry(ends) == base + timedelta(hours=3)
    assert _earliest_expiry([*ends, {"expires_at": ms + 60_000}]) == base + timedelta(minutes=1)
    assert _earliest_expiry(ends[2:]) is None



def test_compact_candidate_reads_map_onto_the_same_rows_as_the_stored_fields() -> None:
    """A server shapes candidate items for decoding (``compact``): one listed hash as a
    string, dates as epoch milliseconds. On mongomock (whose ``$toLong`` of a date the
    compat layer makes MongoDB's), the cache maps both shapes onto the same rows and
    the unscored items come out in the same order."""
    from datetime import datetime, timedelta, timezone

    from langgraph.store.base import SearchOp

    from mongostore.core import kept
    from mongostore.core.plan.search import _earliest_expiry, local_candidate_reads
    from mongostore.core.steps import Aggregate, Find
    from mongostore.drivers.mongomock_compat import in_memory_collection

    base = datetime(2026, 3, 1, 9, 30, 15, 123000, tzinfo=timezone.utc)
    coll = in_memory_collection(collection_name="compact")
    ns = ["users", "a"]
    docs = [
        {"_id": "one", "vectors": ["h1"]},
        {"_id": "two", "vectors": ["h2", "h3"]},
        {"_id": "stale", "vectors": ["h9"]},  # its row holds another hash
        {"_id": "empty", "vectors": []},
        {"_id": "none"},
        {"_id": "unlisted", "vectors": ["h5"]},  # no row at all: missing
    ]
    for n, d in enumerate(docs):
        d.update(namespace=ns, path="users.a.", key=d["_id"], updated_at=base + timedelta(minutes=n))
    docs[1]["expires_at"] = base + timedelta(days=1)
    coll.insert_many(docs)
    op = SearchOp(("users",), query="q")
    [find] = local_candidate_reads(op, base, with_vectors=False)
    [agg] = local_candidate_reads(op, base, with_vectors=False, compact=True)
    assert isinstance(find, Find) and isinstance(agg, Aggregate)
    stored = list(coll.find(find.filter, find.projection))
    compact = list(coll.aggregate(agg.pipeline))
    by_id = {d["_id"]: d for d in compact}
    assert by_id["one"]["vectors"] == "h1" and by_id["two"]["vectors"] == ["h2", "h3"]
    assert by_id["empty"]["vectors"] == [] and not by_id["none"].get("vectors")
    assert by_id["one"]["updated_at"] == int(base.timestamp() * 1000)
    assert by_id["two"]["expires_at"] == int((base + timedelta(days=1)).timestamp() * 1000)
    assert _earliest_expiry(compact) == _earliest_expiry(stored) == base + timedelta(days=1)

    def mapped(items: list[dict[str, Any]]) -> tuple[Any, ...]:
        cache = VectorCache(DIMS)
        vec = np.ones(DIMS, dtype=np.float32)
        rows = [("one", "t", "h1"), ("two", "t", "h2"), ("two", "u", "h3"), ("stale", "t", "h0")]
        cache.add_many([(*r, vec) for r in rows])
        c = cache.candidates(items)
        return (
            [items[i]["_id"] for i in c.item_index.tolist()],
            [cache.vector_of(r) for r in c.rows.tolist()],
            c.scored, c.per_item, c.missing, [d["_id"] for d in kept.newest_first(c.unscored)],
        )

    assert mapped(compact) == mapped(stored)
    assert mapped(compact)[4] == ["stale", "unlisted"]


def _single_invariant(cache: VectorCache) -> None:
    """``_single`` is exactly the (item, hash) -> row of the items holding one row."""
    want = {(item, cache._hash[rows[0]]): rows[0] for item, rows in cache._rows.items() if len(rows) == 1}
    assert cache._single == want


def _compact(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as a server's compact read gives them (one listed hash as a string)."""
    out = []
    for d in items:
        v = d.get("vectors")
        out.append({**d, "vectors": v[0]} if isinstance(v, list) and len(v) == 1 else dict(d))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_the_one_lookup_mapping_agrees_with_the_general_one(seed: int) -> None:
    """``candidates`` maps items listing one hash held in one row by a dict lookup, the rest
    by the general loop (stale rows released, missing hashes reported): both shapes of the
    same items give the same mapping, whichever way each item went, and the lookup's
    dict stays exactly the items holding one row through adds, releases and evictions."""
    items, vectors, _ = random_case(seed)
    rng = np.random.default_rng(seed)
    singles_only = [d for d in items if len(d["vectors"]) <= 1]
    for case in (items, singles_only):
        caches = []
        for shape in (case, _compact(case)):
            cache = VectorCache(DIMS, max_rows=10_000)
            cache.add_many(vectors)
            _single_invariant(cache)
            c = cache.candidates(shape)
            _single_invariant(cache)  # stale rows were released
            caches.append((cache, c))
        (a, ca), (b, cb) = caches
        assert ca.item_index.tolist() == cb.item_index.tolist()
        assert [a.vector_of(r) for r in ca.rows.tolist()] == [b.vector_of(r) for r in cb.rows.tolist()]
        assert (ca.scored, ca.per_item, ca.missing) == (cb.scored, cb.per_item, cb.missing)
        assert [d["_id"] for d in ca.unscored] == [d["_id"] for d in cb.unscored]
        assert np.all(np.diff(ca.item_index) >= 0)  # item order
    cache = VectorCache(DIMS, max_rows=40)
    for step in range(30):
        batch = [vectors[int(j)] for j in rng.integers(0, len(vectors), 8)]
        cache.add_many(batch)  # past max_rows: evictions
        if step % 3 == 0:
            cache.forget(batch[0][0])
        if step % 4 == 0:
            cache.candidates(_compact(items) if step % 8 == 0 else items)
        _single_invariant(cache)
