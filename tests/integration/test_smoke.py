from __future__ import annotations

from conftest import MakeStore


async def test_round_trip(make_store: MakeStore) -> None:
    api = await make_store()
    await api.put(("users", "alice"), "k", {"food": "pizza"})
    item = await api.get(("users", "alice"), "k")
    assert item.value == {"food": "pizza"}
    assert [i.key for i in await api.search(("users",))] == ["k"]
    assert await api.list_namespaces() == [("users", "alice")]
