"""``AsyncMongoStore`` made outside a running loop: one clear error, no ``__del__`` traceback
(issue 29, item 9)."""

from __future__ import annotations

import gc
import subprocess
import sys
from typing import Any

import pytest

from mongostore import AsyncMongoStore


def test_in_memory_outside_a_loop_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(RuntimeError, match=r"AsyncMongoStore needs a running event loop.*MongoStore"):
        AsyncMongoStore.in_memory()
    gc.collect()
    assert unraisable == []  # AsyncBatchedBaseStore.__del__ found its _task


def test_the_process_prints_one_traceback_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from mongostore import AsyncMongoStore; AsyncMongoStore.in_memory()"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert "needs a running event loop" in proc.stderr
    assert "Exception ignored" not in proc.stderr and "_task" not in proc.stderr


async def test_inside_a_loop_it_works() -> None:
    async with AsyncMongoStore.in_memory() as store:
        await store.aput(("a",), "k", {"v": 1})
        item = await store.aget(("a",), "k")
        assert item is not None and item.value == {"v": 1}
