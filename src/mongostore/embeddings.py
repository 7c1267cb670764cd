"""The embedders, kept at this path for compatibility: see ``mongostore.tools.embeddings``."""

from __future__ import annotations

from mongostore.tools.embeddings import (
    MINILM_DIMS,
    MINILM_INSTALL_HINT,
    HashingEmbeddings,
    MiniLMEmbeddings,
    default_embeddings,
)

__all__ = [
    "MINILM_DIMS",
    "MINILM_INSTALL_HINT",
    "HashingEmbeddings",
    "MiniLMEmbeddings",
    "default_embeddings",
]
