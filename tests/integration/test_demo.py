"""``mongostore demo``: the memory graph on two threads, with MiniLM and with the hashing fallback."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from mongostore import AsyncMongoStore, MongoStore
from mongostore.tools.cli import EXIT_OK, EXIT_USAGE, main
from mongostore.tools.demo import (
    CHECK_QUERY,
    THREAD_2,
    Context,
    answer_from_memory,
    build_graph,
    extract_memories,
    extract_questions,
    memory_key,
)
from mongostore.tools.embeddings import HashingEmbeddings, MiniLMEmbeddings

REAL_URI = os.environ.get("MONGODB_URI")  # read before the autouse fixture clears it
MINILM = pytest.mark.skipif(not MiniLMEmbeddings.available(), reason="the minilm extra is not installed")


pytestmark = pytest.mark.usefixtures("clean_store_env")


def demo_json(capsys: pytest.CaptureFixture[str], *argv: str, store: MongoStore | None = None) -> dict[str, Any]:
    code = main(["demo", "--json", *argv], store=store)
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    data: dict[str, Any] = json.loads(out)
    return data


def answers(result: dict[str, Any]) -> dict[str, str]:
    return {t["user"]: t["assistant"] for t in result["turns"] if t["thread_id"] == "thread-2"}


def first_recalled(result: dict[str, Any], question: str) -> str:
    turn = next(t for t in result["turns"] if t["user"] == question)
    text: str = turn["recalled"][0]["memories"][0]["text"]
    return text


# --------------------------------------------------------------------------- the rules


def test_rules() -> None:
    assert extract_memories("Hi! I like pizza. I am allergic to peanuts. What's up? The sky is blue.") == [
        ("I like pizza", "preference"),
        ("I am allergic to peanuts", "health"),
    ]
    assert extract_memories("My sister lives in Lisbon. I work as a nurse! I'm from Porto") == [
        ("My sister lives in Lisbon", "family"),
        ("I work as a nurse", "work"),
        ("I'm from Porto", "fact"),
    ]
    assert extract_questions("I like tea. What do I like? Where is it") == ["What do I like?"]
    assert answer_from_memory("I am allergic to peanuts") == "You are allergic to peanuts."
    assert answer_from_memory("My sister lives in Lisbon") == "Your sister lives in Lisbon."
    assert memory_key("I like  Pizza") == memory_key("i like pizza")


# --------------------------------------------------------------------------- the demo command


@MINILM
def test_demo_with_minilm(capsys: pytest.CaptureFixture[str]) -> None:
    result = demo_json(capsys)
    assert result["semantic_model"] is True and result["embedder"].startswith("all-MiniLM-L6-v2")
    assert result["store_class"] == "MongoStore" and result["search_path"] == "local"
    assert "embedded in-memory store" in result["store"]
    assert len(result["memories"]) == 4
    # the acceptance check: "What does the user like to eat?" recalls "I like pizza" first
    assert result["check_query"] == CHECK_QUERY
    assert result["check_results"][0]["text"] == "I like pizza"
    assert result["check_results"][0]["score"] > result["check_results"][1]["score"]
    assert answers(result) == {
        "What do I like to eat?": "You like pizza.",
        "Where does my sister live?": "Your sister lives in Lisbon.",
        "What do I do for a living?": "You work as a nurse.",
    }
    assert result["notes"] == []


def test_demo_with_hashing_fallback_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--embed", "hashing"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "Traceback" not in out + err
    assert "user       > Hi! I like pizza. I am allergic to peanuts." in out
    assert "remember   + [preference] 'I like pizza'" in out
    assert "== Thread 2: a new thread (0 messages in its checkpoint)" in out
    assert "recall     0.500  I like pizza" in out  # recalled memories are printed with their scores
    assert "assistant  > You like pizza." in out
    assert "HashingEmbeddings" in out and "pip install 'mongostore[minilm]'" in out
    assert "The in-memory store is gone now" in out
    result = demo_json(capsys, "--embed", "hashing")
    assert result["semantic_model"] is False
    assert result["check_results"][0]["text"] == "I like pizza"
    assert first_recalled(result, "What do I like to eat?") == "I like pizza"
    assert answers(result)["Where does my sister live?"] == "Your sister lives in Lisbon."
    # word overlap only: "living" shares no word with "I work as a nurse"
    assert answers(result)["What do I do for a living?"] == "I don't know that yet."
    assert result["notes"] and "matches words, not meaning" in result["notes"][0]


def test_demo_without_the_extra_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MiniLMEmbeddings, "available", classmethod(lambda cls: False))
    code = main(["demo"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "embedder   HashingEmbeddings (384 dims): a word-overlap test embedder, not a semantic model" in out
    assert "the minilm extra is not installed" in out and "pip install 'mongostore[minilm]'" in out
    assert "assistant  > You like pizza." in out


def test_demo_thread_two_knows_only_what_the_store_knows(capsys: pytest.CaptureFixture[str]) -> None:
    result = demo_json(capsys, "--embed", "hashing", "--user", "bob")
    thread2 = [t for t in result["turns"] if t["thread_id"] == "thread-2"]
    assert thread2[0]["history_before"] == 0  # the new thread's checkpoint is empty
    assert [t["user"] for t in thread2] == list(THREAD_2)
    assert result["namespace"] == ["bob", "memories"]


def test_demo_twice_on_one_store_adds_no_duplicates(capsys: pytest.CaptureFixture[str]) -> None:
    emb = HashingEmbeddings(64)
    store = MongoStore.in_memory(index={"dims": 64, "embed": emb, "fields": ["text"]})
    demo_json(capsys, store=store)
    result = demo_json(capsys, store=store)
    assert len(result["memories"]) == 4
    assert store.collection.count_documents({}) == 4


def test_demo_needs_an_index(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo"], store=MongoStore.in_memory())
    _, err = capsys.readouterr()
    assert code == EXIT_USAGE and "the demo needs semantic search" in err


# --------------------------------------------------------------------------- the graph on the async store


async def test_memory_graph_on_async_store() -> None:
    """The same graph the Agent Server runs, on AsyncMongoStore (pymongo-async-mock)."""
    emb = HashingEmbeddings(64)
    async with AsyncMongoStore.from_conn_string(
        "mongomock://", index={"dims": 64, "embed": emb, "fields": ["text"]}
    ) as store:
        await store.setup()
        graph = build_graph().compile(checkpointer=InMemorySaver(), store=store)
        ctx = Context(user_id="carol")
        one: Any = {"configurable": {"thread_id": "1"}}
        out = await graph.ainvoke({"messages": [HumanMessage("I like ramen. I work as a pilot.")]}, one, context=ctx)
        assert [m["text"] for m in out["saved"]] == ["I like ramen", "I work as a pilot"]
        two: Any = {"configurable": {"thread_id": "2"}}
        out = await graph.ainvoke({"messages": [HumanMessage("What do I like to eat?")]}, two, context=ctx)
        assert out["messages"][-1].text == "You like ramen."
        assert out["store"] == "AsyncMongoStore"
        items = await store.asearch(("carol", "memories"))
        assert {i.value["kind"] for i in items} == {"preference", "work"}


# --------------------------------------------------------------------------- a real server


@pytest.mark.realserver
@pytest.mark.skipif(not REAL_URI, reason="needs a real MongoDB: set MONGODB_URI")
def test_demo_against_a_real_server(capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(REAL_URI)
    db = f"mongostore_demo_test_{uuid.uuid4().hex[:10]}"
    try:
        result = demo_json(capsys, "--uri", uri, "--db", db, "--embed", "hashing")
        assert result["check_results"][0]["text"] == "I like pizza"
        assert answers(result)["What do I like to eat?"] == "You like pizza."
    finally:
        from pymongo import MongoClient

        with MongoClient(uri) as client:
            client.drop_database(db)
