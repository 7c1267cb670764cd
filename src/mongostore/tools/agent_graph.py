"""The memory graph of ``mongostore demo``, compiled for LangGraph's Agent Server.

``examples/langgraph.json`` names it as a module (``mongostore.tools.agent_graph:graph``), not
a file, so ``langgraph dev --config examples/langgraph.json`` works from any directory
(file paths in ``langgraph.json`` are resolved against the current directory). The
server supplies the checkpointer and the store, so the graph is compiled without them.
"""

from __future__ import annotations

from mongostore.tools.demo import build_graph

__all__ = ["graph"]

graph = build_graph().compile(name="memory")
