"""The embedders, kept at this path for compatibility: see ``mongostore.tools.embeddings``."""

from mongostore.tools.embeddings import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.embeddings import __all__ as __all__
