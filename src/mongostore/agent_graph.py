"""The demo graph for the Agent Server, kept at this path for compatibility: see ``mongostore.tools.agent_graph``."""

from __future__ import annotations

from mongostore.tools.agent_graph import (
    graph,
)

__all__ = [
    "graph",
]
