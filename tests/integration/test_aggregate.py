"""store.aggregate / aaggregate: user pipelines scoped to a namespace prefix (issue 5)."""

from __future__ import annotations

import pytest
from conftest import MakeStore

from mongostore import PipelineError


async def test_aggregate_sees_only_the_prefix(make_store: MakeStore) -> None:
    api = await make_store()
    for user, n in (("alice", 3), ("alicex", 2), ("bob", 1)):
        for i in range(n):
            await api.put(("users", user, "memories"), f"k{i}", {"kind": "fact" if i else "pref"})
    pipeline = [{"$group": {"_id": "$value.kind", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]
    assert await api.aggregate(("users", "alice"), pipeline) == [{"_id": "fact", "n": 2}, {"_id": "pref", "n": 1}]
    every = await api.aggregate((), [{"$count": "n"}])
    assert every == [{"n": 6}]


@pytest.mark.parametrize(
    "stage",
    [
        {"$out": "stolen"},
        {"$merge": {"into": "stolen"}},
        {"$unionWith": "other"},
        {"$lookup": {"from": "other", "localField": "a", "foreignField": "b", "as": "x"}},
        {"$match": {"$where": "sleep(1000)"}},
        {"$collStats": {}},
    ],
)
async def test_aggregate_refuses_stages_that_leave_the_scope(make_store: MakeStore, stage: dict[str, object]) -> None:
    api = await make_store()
    await api.put(("users",), "k", {"v": 1})
    with pytest.raises(PipelineError):
        await api.aggregate(("users",), [stage])
    assert [i.key for i in await api.search(("users",))] == ["k"]


async def test_aggregate_leaves_out_expired_items_with_omit_expired(make_store: MakeStore) -> None:
    from datetime import datetime, timedelta, timezone

    api = await make_store(ttl={"omit_expired": True}, setup=False)  # no TTL index: nothing deletes them
    await api.put(("t",), "old", {"v": 1}, ttl=1)
    await api.put(("t",), "new", {"v": 2}, ttl=60)
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    coll = api.store.collection
    res = coll.update_one({"key": "old"}, {"$set": {"expires_at": past}})
    if hasattr(res, "__await__"):
        await res
    assert await api.aggregate(("t",), [{"$project": {"_id": 0, "key": 1}}]) == [{"key": "new"}]
