"""The demo graph for the Agent Server, kept at this path for compatibility: see ``mongostore.tools.agent_graph``."""

from mongostore.tools.agent_graph import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.agent_graph import __all__ as __all__
