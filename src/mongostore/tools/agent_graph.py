"""The memory graph of ``mongostore demo``, compiled for LangGraph's Agent Server (which supplies the
checkpointer and the store). ``examples/langgraph.json`` names it as a module, not a file, so
``langgraph dev`` works from any directory (it resolves file paths against the current one).
"""

from __future__ import annotations

from mongostore.tools.demo import build_graph

__all__ = ["graph"]

graph = build_graph().compile(name="memory")
