"""User configuration, normalised once into frozen settings.

``index=`` takes LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) plus
our extensions (see ``MongoIndexConfig``); ``ttl=`` takes LangGraph's ``TTLConfig``.
Every duration is in **minutes**, as in LangGraph. The caller's dicts are never
mutated; the stores keep only the frozen ``IndexSettings`` / ``TTLSettings``.
Nothing here does I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, TTLConfig, ensure_embeddings, tokenize_path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mongostore.errors import ConfigurationError

__all__ = [
    "DEFAULT_INDEX_NAME",
    "IndexSettings",
    "MongoIndexConfig",
    "Similarity",
    "TTLSettings",
    "VectorSearchMode",
    "index_settings",
    "ttl_settings",
]

Similarity = Literal["cosine", "dotProduct", "euclidean"]
VectorSearchMode = Literal["auto", "atlas", "local"]
DEFAULT_INDEX_NAME = "mongostore_vectors"


class MongoIndexConfig(IndexConfig, total=False):
    """LangGraph's ``IndexConfig`` plus mongostore's extensions.

    similarity: ``cosine`` (default), ``dotProduct`` or ``euclidean``; scores are
        reported as cosine similarity, dot product, or minus the Euclidean distance.
    filter_fields: top-level ``value`` fields declared as ``filter`` fields in the Atlas
        vector index, so equality/range filters on them run inside ``$vectorSearch``.
    index_name: the Atlas vector search index name (default ``mongostore_vectors``).
    vector_search: ``auto`` (ask the server once), ``atlas`` or ``local`` (exact numpy ranking).
    candidate_factor: numCandidates = factor x vectors asked for (Atlas recommends >= 20).
    setup_timeout: seconds ``setup()`` waits for the vector index to become queryable.
    """

    similarity: Similarity
    filter_fields: list[str]
    index_name: str
    vector_search: VectorSearchMode
    candidate_factor: int
    setup_timeout: float


class _IndexOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    dims: int = Field(gt=0, le=8192)
    embed: Any
    fields: list[str] | None = None
    similarity: Similarity = "cosine"
    filter_fields: list[str] = Field(default_factory=list)
    index_name: str = Field(default=DEFAULT_INDEX_NAME, min_length=1)
    vector_search: VectorSearchMode = "auto"
    candidate_factor: int = Field(default=20, ge=1, le=10_000)
    setup_timeout: float = Field(default=120.0, gt=0)

    @field_validator("filter_fields")
    @classmethod
    def _plain_field_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name or name.startswith("$") or "\x00" in name:
                raise ValueError(f"filter field {name!r} must be a plain value field name")
        return names


@dataclass(frozen=True)
class IndexSettings:
    """Normalised semantic-search settings."""

    dims: int
    embeddings: Embeddings
    fields: tuple[str, ...]
    similarity: Similarity
    filter_fields: tuple[str, ...]
    index_name: str
    vector_search: VectorSearchMode
    candidate_factor: int
    setup_timeout: float

    def tokenized(self, fields: tuple[str, ...] | None = None) -> list[tuple[str, list[str]]]:
        """Each field path with its tokens, as LangGraph's ``get_text_at_path`` takes them."""
        return _tokenized(fields or self.fields)


@functools.lru_cache(maxsize=256)
def _tokenized(fields: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    # Callers only read the tokens; one list per field tuple, parsed once.
    return [(f, ["$"] if f in ("$", "") else tokenize_path(f)) for f in fields]


@dataclass(frozen=True)
class TTLSettings:
    """Normalised TTL settings; every duration in minutes."""

    default_ttl: float | None = None
    refresh_on_read: bool = True
    omit_expired: bool = False
    sweep_interval_minutes: float | None = None


def _message(exc: ValidationError, what: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or what
        parts.append(f"{what}[{loc!r}]: {err['msg']}")
    return "; ".join(parts)


def index_settings(index: Mapping[str, Any] | None) -> IndexSettings | None:
    """Validate ``index=`` and return frozen settings (``None`` means no semantic search)."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise ConfigurationError(f"index= must be a dict (IndexConfig), got {type(index).__name__}")
    try:
        opts = _IndexOptions.model_validate(dict(index))
    except ValidationError as exc:
        raise ConfigurationError(_message(exc, "index")) from None
    if opts.embed is None:
        raise ConfigurationError("index['embed'] must be provided (Embeddings, a function or a provider string)")
    try:
        embeddings = ensure_embeddings(opts.embed)
    except Exception as exc:  # ensure_embeddings raises ValueError/ImportError for bad specs
        raise ConfigurationError(f"index['embed'] is not usable: {exc}") from exc
    fields = tuple(opts.fields) if opts.fields else ("$",)
    for f in fields:
        if f not in ("$", ""):
            try:
                tokenize_path(f)
            except Exception as exc:
                raise ConfigurationError(f"index['fields']: bad path {f!r}: {exc}") from exc
    return IndexSettings(
        dims=opts.dims,
        embeddings=embeddings,
        fields=fields,
        similarity=opts.similarity,
        filter_fields=tuple(opts.filter_fields),
        index_name=opts.index_name,
        vector_search=opts.vector_search,
        candidate_factor=opts.candidate_factor,
        setup_timeout=opts.setup_timeout,
    )


class _TTLOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_ttl: float | None = Field(default=None, gt=0)
    refresh_on_read: bool = True
    omit_expired: bool = False
    sweep_interval_minutes: float | None = Field(default=None, gt=0)


def ttl_settings(ttl: TTLConfig | Mapping[str, Any] | None) -> TTLSettings | None:
    """Validate ``ttl=`` (minutes) and return frozen settings (``None`` when not given)."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigurationError(f"ttl= must be a dict (TTLConfig), got {type(ttl).__name__}")
    try:
        opts = _TTLOptions.model_validate(dict(ttl))
    except ValidationError as exc:
        raise ConfigurationError(_message(exc, "ttl")) from None
    return TTLSettings(
        default_ttl=opts.default_ttl,
        refresh_on_read=opts.refresh_on_read,
        omit_expired=opts.omit_expired,
        sweep_interval_minutes=opts.sweep_interval_minutes,
    )
