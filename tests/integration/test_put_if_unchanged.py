"""``put_if_unchanged`` (issue 36.2): a put that lands only on the item the caller read; of concurrent
callers expecting the same item, exactly one wins; a loser writes and embeds nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from conftest import CountingEmbeddings, MakeStore, StoreAPI
from langgraph.store.base import Item

from mongostore import AsyncMongoStore, MongoStore
from mongostore.tools.embeddings import HashingEmbeddings


async def cas(api: StoreAPI, key: str, value: dict[str, Any], expected: Item | None, **kw: Any) -> bool:
    if api.is_async:
        return await api.store.aput_if_unchanged(("u",), key, value, expected=expected, **kw)  # type: ignore[no-any-return]
    return api.store.put_if_unchanged(("u",), key, value, expected=expected, **kw)  # type: ignore[union-attr]


async def test_create_then_change_only_what_was_read(make_store: MakeStore) -> None:
    emb = CountingEmbeddings(16)
    api = await make_store(index={"dims": 16, "embed": emb, "fields": ["text"]})
    assert await cas(api, "k", {"text": "one"}, None)
    assert not await cas(api, "k", {"text": "other"}, None)  # create-only: it exists now
    first = await api.get(("u",), "k")
    assert first is not None and first.value == {"text": "one"}
    assert await cas(api, "k", {"text": "two"}, first)
    embedded = list(emb.texts)
    assert not await cas(api, "k", {"text": "three"}, first)  # stale: written since
    assert emb.texts == embedded  # the loser embedded nothing
    now = await api.get(("u",), "k")
    assert now is not None and now.value == {"text": "two"}
    found = await api.search(("u",), query="two")
    assert [i.key for i in found] == ["k"] and found[0].score == pytest.approx(1.0)
    assert await cas(api, "k", {"text": "four"}, found[0])  # a search result is an expected item too
    await api.delete(("u",), "k")
    assert not await cas(api, "k", {"text": "five"}, now)  # gone since
    assert await api.get(("u",), "k") is None
    assert await cas(api, "k", {"text": "five"}, None)


async def test_a_ttl_refresh_is_no_change(make_store: MakeStore) -> None:
    api = await make_store()
    assert await cas(api, "k", {"v": 1}, None, ttl=60)
    read = await api.get(("u",), "k", refresh_ttl=True)
    again = await api.get(("u",), "k", refresh_ttl=True)  # moves expires_at, not the item
    assert read is not None and again == read
    assert await cas(api, "k", {"v": 2}, read)


async def test_bad_arguments_are_refused_before_any_io(make_store: MakeStore) -> None:
    api = await make_store(setup=False)
    other = Item(value={}, key="x", namespace=("u",), created_at=None, updated_at=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not"):
        await cas(api, "k", {"v": 1}, other)
    with pytest.raises(TypeError, match="expected must be"):
        await cas(api, "k", {"v": 1}, {"key": "k"})  # type: ignore[arg-type]
    with pytest.raises(Exception, match=r"Namespace cannot be empty"):
        if api.is_async:
            await api.store.aput_if_unchanged((), "k", {"v": 1}, expected=None)  # type: ignore[union-attr]
        else:
            api.store.put_if_unchanged((), "k", {"v": 1}, expected=None)  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_eight_threads_with_one_expected_item_make_one_winner(kind: str, tmp_path: Any) -> None:
    index = {"dims": 16, "embed": HashingEmbeddings(16), "fields": ["text"]}
    store = MongoStore.in_memory(index=index) if kind == "memory" else MongoStore.local(tmp_path, index=index)
    for round_ in range(5):
        store.put(("u",), "k", {"text": f"base {round_}"})
        read = store.get(("u",), "k")
        wins = _race(lambda i, read=read: store.put_if_unchanged(("u",), "k", {"text": f"t{i}"}, expected=read))
        assert sorted(wins) == [False] * 7 + [True]
        winner = store.get(("u",), "k")
        assert winner is not None and winner.value["text"].startswith("t")
        assert [i.key for i in store.search(("u",), query=winner.value["text"])][:1] == ["k"]
    # create-only races too
    created = _race(lambda i: store.put_if_unchanged(("u",), "new", {"text": f"n{i}"}, expected=None))
    assert sorted(created) == [False] * 7 + [True]


def _race(call: Callable[[int], bool], n: int = 8) -> list[bool]:
    """``call(i)`` from ``n`` threads released together; their answers."""
    barrier = threading.Barrier(n)
    answers: list[bool] = []

    def go(i: int) -> None:
        barrier.wait()
        answers.append(call(i))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return answers


async def test_eight_async_callers_make_one_winner(tmp_path: Any) -> None:
    for store in (AsyncMongoStore.in_memory(), AsyncMongoStore.local(tmp_path)):
        await store.aput(("u",), "k", {"v": 0})
        read = await store.aget(("u",), "k")
        wins = await asyncio.gather(
            *(store.aput_if_unchanged(("u",), "k", {"v": i}, expected=read) for i in range(1, 9))
        )
        assert sorted(wins) == [False] * 7 + [True]
        got = await store.aget(("u",), "k")
        assert got is not None and got.value == {"v": wins.index(True) + 1}
