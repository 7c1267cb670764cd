"""The memory demo, kept at this path for compatibility: see ``mongostore.tools.demo``."""

from __future__ import annotations

from mongostore.tools.demo import (
    CHECK_QUERY,
    DEFAULT_USER,
    DEMO_DB,
    MIN_SCORE,
    THREAD_1,
    THREAD_2,
    Context,
    DemoResult,
    DemoTurn,
    MemoryState,
    answer_from_memory,
    build_graph,
    extract_memories,
    extract_questions,
    memory_key,
    render_demo,
    run_demo,
)

__all__ = [
    "CHECK_QUERY",
    "DEFAULT_USER",
    "DEMO_DB",
    "MIN_SCORE",
    "THREAD_1",
    "THREAD_2",
    "Context",
    "DemoResult",
    "DemoTurn",
    "MemoryState",
    "answer_from_memory",
    "build_graph",
    "extract_memories",
    "extract_questions",
    "memory_key",
    "render_demo",
    "run_demo",
]
