"""The example graph for LangGraph's Agent Server: mongostore's memory graph.

``langgraph.json`` names the module ``mongostore.tools.agent_graph`` (this file re-exports it, for
reading): ``langgraph dev --config examples/langgraph.json`` from the repository root,
or ``langgraph dev`` in ``examples/``, serves it as ``memory``, with the
store built by ``mongostore.tools.server.make_store`` (an ``AsyncMongoStore`` configured
from ``MONGODB_URI`` and ``MONGOSTORE_*``) as ``runtime.store`` in every node.

The graph (see ``mongostore.tools.demo``): ``remember`` stores each first-person statement
of the user under ``(user_id, "memories")``; ``respond`` answers questions from the
memories that semantic search recalls. Pass the user with the run's context::

    await client.runs.wait(thread_id, "memory",
                           input={"messages": [{"role": "user", "content": "I like pizza."}]},
                           context={"user_id": "alice"})

The server supplies the checkpointer and the store, so the graph is compiled without them.
"""

from __future__ import annotations

from mongostore.tools.agent_graph import graph

__all__ = ["graph"]
