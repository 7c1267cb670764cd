"""A put of a key the store wrote itself needs no read first (``core.hashes``, ``plan.one_trip``).

On every ``make_store`` backend, with local ranking: the round trips a put and a coalesced
agent step make when the store knows the stored hashes, that unchanged texts are still
never embedded again, and that what another store instance (another process) wrote in
between is repaired, never lost: searches agree with a store that knows nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import Counting, MakeStore, StoreAPI, text_index
from langgraph.store.base import PutOp

from mongostore import AsyncMongoStore
from mongostore.core.codec import item_id
from mongostore.embeddings import HashingEmbeddings

NS = ("users", "alice")


def index(e: HashingEmbeddings) -> dict[str, Any]:
    return text_index(e, ["text"], vector_search="local")


async def counted_store(make_store: MakeStore) -> tuple[StoreAPI, Counting, Counting, HashingEmbeddings]:
    e = HashingEmbeddings(384)
    base = await make_store(index=index(e))
    items, vectors = Counting(base.store.collection), Counting(base.store.vectors_collection)
    api = await make_store(index=index(e), collection=items, vectors_collection=vectors, setup=False)
    return api, items, vectors, e


def hash_reads(vectors: Counting) -> int:
    """The reads of stored hashes before a put: a find on ``item_id $in``."""
    return sum(1 for name, a in vectors.args if name == "find" and a and set(a[0]) == {"item_id"})


async def ranking(api: StoreAPI, query: str) -> list[tuple[str, float | None]]:
    return [(r.key, r.score) for r in await api.search(NS, query=query, limit=20)]


async def cold_ranking(api: StoreAPI, make_store: MakeStore, e: HashingEmbeddings, query: str) -> Any:
    cold = await make_store(index=index(e), collection=api.store.collection, setup=False)
    return await ranking(cold, query)


async def test_a_put_of_a_key_this_store_wrote_reads_nothing_first(make_store: MakeStore) -> None:
    api, items, vectors, e = await counted_store(make_store)
    await api.put(NS, "k", {"text": "likes pizza"})
    assert hash_reads(vectors) == 1  # a key it knows nothing of: read, embed, write

    items.reset(), vectors.reset(), e.reset_counters()
    await api.put(NS, "k", {"text": "likes sushi"})
    assert hash_reads(vectors) == 0 and items.count("find", "aggregate") == 0
    assert items.count("bulk_write") == 1 and (e.calls, e.texts_embedded) == (1, 1)

    vectors.reset(), e.reset_counters()
    await api.put(NS, "k", {"text": "likes sushi", "n": 2})  # unchanged text: never embedded again
    assert hash_reads(vectors) == 0 and e.texts_embedded == 0
    assert await ranking(api, "sushi") == await cold_ranking(api, make_store, e, "sushi")
    [(key, score)] = await ranking(api, "sushi")
    assert key == "k" and score is not None and score > 0.5


async def test_a_coalesced_agent_step_sends_its_reads_and_writes_at_once(make_store: MakeStore) -> None:
    api, items, vectors, e = await counted_store(make_store)
    if not isinstance(api.store, AsyncMongoStore):
        return  # (sync calls are never coalesced; the sync put is covered above)
    store = api.store
    await store.abatch([PutOp(NS, f"k{i}", {"text": f"memory {i} about pizza"}) for i in range(5)])
    items.reset(), vectors.reset(), e.reset_counters()
    found, *_, got = await asyncio.gather(
        store.asearch(NS, query="pizza", limit=3),
        *(store.aput(NS, f"k{i}", {"text": f"memory {i} about sushi"}) for i in range(3)),
        store.aget(NS, "k4"),
    )
    assert hash_reads(vectors) == 0
    assert (e.calls, e.texts_embedded) == (1, 4)  # the query and the 3 changed texts, in one call
    assert got is not None and got.value == {"text": "memory 4 about pizza"}
    assert len(found) == 3
    assert await ranking(api, "sushi") == await cold_ranking(api, make_store, e, "sushi")


async def test_a_text_another_store_changed_meanwhile_gets_its_vector_back(make_store: MakeStore) -> None:
    """A's hashes say "pizza" is stored; B stored "sushi"; A puts "pizza" again: the condition
    on the unchanged vector fails, A reads the stored hashes and writes the vector."""
    e = HashingEmbeddings(384)
    a = await make_store(index=index(e))
    b = await make_store(index=index(e), collection=a.store.collection, setup=False)
    await a.put(NS, "k", {"text": "likes pizza"})
    await b.put(NS, "k", {"text": "likes sushi"})
    e.reset_counters()
    await a.put(NS, "k", {"text": "likes pizza"})
    assert e.texts_embedded == 1  # the stored vector is sushi's: pizza's must be embedded again
    expected = await cold_ranking(a, make_store, e, "pizza")
    assert expected[0][0] == "k" and expected[0][1] is not None and expected[0][1] > 0.5
    assert await ranking(a, "pizza") == expected
    assert a.store._text_hashes.get(item_id(NS, "k")) is not None  # type: ignore[union-attr]


async def test_a_vector_another_store_deleted_meanwhile_is_written_again(make_store: MakeStore) -> None:
    e = HashingEmbeddings(384)
    a = await make_store(index=index(e))
    b = await make_store(index=index(e), collection=a.store.collection, setup=False)
    await a.put(NS, "k", {"text": "likes pizza"})
    await b.delete(NS, "k")
    await a.put(NS, "k", {"text": "likes pizza"})
    [(key, score)] = await cold_ranking(a, make_store, e, "pizza")
    assert key == "k" and score is not None and score > 0.5  # scored: its vector is back
    assert len(await a.docs("vectors")) == 1


async def test_a_rejected_put_is_forgotten(make_store: MakeStore) -> None:
    """A put the server rejects leaves no belief behind: the next put of its key reads first."""
    from mongostore import WriteError

    api, _items, vectors, e = await counted_store(make_store)
    await api.put(NS, "k", {"text": "likes pizza", "email": "a@x"})
    await api.put(NS, "other", {"text": "likes jazz", "email": "b@x"})
    iid = item_id(NS, "k")
    assert api.store._text_hashes.get(iid) is not None  # type: ignore[union-attr]
    coll = api.store.collection
    if api.is_async:
        await coll.create_index("value.email", unique=True)
    else:
        coll.create_index("value.email", unique=True)
    try:
        await api.put(NS, "k", {"text": "likes sushi", "email": "b@x"})
    except WriteError:
        pass
    else:
        raise AssertionError("the duplicate email was accepted")
    assert api.store._text_hashes.get(iid) is None  # type: ignore[union-attr]
    vectors.reset()
    await api.put(NS, "k", {"text": "likes sushi", "email": "c@x"})
    assert hash_reads(vectors) == 1
    assert await ranking(api, "sushi") == await cold_ranking(api, make_store, e, "sushi")
