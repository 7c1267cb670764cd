"""User configuration, validated once into frozen settings (no I/O; the caller's dicts are not mutated).

``index=`` takes LangGraph's ``IndexConfig`` plus our extensions (``MongoIndexConfig``),
``ttl=`` LangGraph's ``TTLConfig``; every duration is in minutes, as in LangGraph.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, TTLConfig, ensure_embeddings, tokenize_path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mongostore.core.retrieval import (
    AutoEmbedSettings,
    HybridSettings,
    RerankSettings,
    auto_embed_settings,
    hybrid_settings,
    rerank_settings,
)
from mongostore.errors import ConfigurationError

Similarity = Literal["cosine", "dotProduct", "euclidean"]
VectorSearchMode = Literal["auto", "atlas", "local"]
DEFAULT_INDEX_NAME = "mongostore_vectors"
_Options = TypeVar("_Options", bound=BaseModel)


class MongoIndexConfig(IndexConfig, total=False):
    """LangGraph's ``IndexConfig`` plus mongostore's extensions (the README's "Semantic search").

    filter_fields: ``value`` fields (nested ones dotted) that filters on run inside ``$vectorSearch``.
    vector_search: ``auto`` (ask the server), ``atlas`` or ``local`` (exact numpy ranking).
    candidate_factor: numCandidates = factor x vectors asked for (Atlas recommends >= 20).
    setup_timeout: seconds ``setup()`` waits for the vector index to become queryable.
    rerank: ``{"model": "rerank-2.5", "candidates": 100}``: Atlas ``$rerank`` (MongoDB 8.3+).
    hybrid: ``{"weights": {"vector": 1.0, "text": 1.0}, "depth": 100}``: ``$rankFusion`` (MongoDB 8.0+).
    ``embed="atlas:<voyage model>"``: Atlas embeds (automated embedding); ``dims`` is optional.
    """

    similarity: Similarity
    filter_fields: list[str]
    index_name: str
    vector_search: VectorSearchMode
    candidate_factor: int
    setup_timeout: float
    rerank: dict[str, Any]
    hybrid: dict[str, Any]


class _IndexOptions(BaseModel):
    """``index=`` as given, checked."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    dims: int | None = Field(default=None, gt=0, le=8192)
    embed: Any
    fields: tuple[str, ...] | None = None
    similarity: Similarity = "cosine"
    filter_fields: tuple[str, ...] = ()
    index_name: str = Field(default=DEFAULT_INDEX_NAME, min_length=1)
    vector_search: VectorSearchMode = "auto"
    candidate_factor: int = Field(default=20, ge=1, le=10_000)
    setup_timeout: float = Field(default=120.0, gt=0)
    rerank: Any = None
    hybrid: Any = None

    @field_validator("filter_fields")
    @classmethod
    def _plain_field_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:  # a value field, or a nested one as a dotted path (as langgraph-store-mongodb)
            if not name or "\x00" in name or any(not p or p.startswith("$") for p in name.split(".")):
                raise ValueError(
                    f"filter field {name!r} must be a value field name or a dotted path of them, "
                    "like 'metadata.available'"
                )
            if names.count(name) > 1:
                raise ValueError(f"filter field {name!r} is listed twice")
            nested = [other for other in names if other.startswith(name + ".")]
            if nested:
                raise ValueError(f"filter field {name!r} and {nested[0]!r}: one may not hold the other")
        return names


class IndexSettings(_IndexOptions):
    """The checked ``index=`` with its embedder resolved: what the plans read."""

    dims: int
    embeddings: Embeddings
    fields: tuple[str, ...]
    auto_embed: AutoEmbedSettings | None = None
    rerank: RerankSettings | None = None
    hybrid: HybridSettings | None = None

    @property
    def stores_text(self) -> bool:
        """Vector documents carry their text (``$search``, ``$rerank`` and autoEmbed read it)."""
        return self.auto_embed is not None or self.rerank is not None or self.hybrid is not None

    def tokenized(self, fields: tuple[str, ...] | None = None) -> list[tuple[str, list[str]]]:
        """Each field path with its tokens, as LangGraph's ``get_text_at_path`` takes them."""
        return _tokenized(fields or self.fields)


@functools.lru_cache(maxsize=256)
def _tokenized(fields: tuple[str, ...]) -> list[tuple[str, list[str]]]:  # callers only read it
    return [(f, ["$"] if f in ("$", "") else tokenize_path(f)) for f in fields]


def _validated(model: type[_Options], given: object, what: str, kind: str) -> _Options:
    """``given`` checked by ``model``; the ``ConfigurationError`` names each bad key as ``what['key']``."""
    if not isinstance(given, Mapping):
        raise ConfigurationError(f"{what}= must be a dict ({kind}), got {type(given).__name__}")
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        locs = [(".".join(str(p) for p in err["loc"]) or what, err["msg"]) for err in exc.errors()]
        raise ConfigurationError("; ".join(f"{what}[{loc!r}]: {msg}" for loc, msg in locs)) from None


# PostgresStore's names for its vector settings (``PostgresIndexConfig``), and ours.
_POSTGRES_DISTANCE = {"cosine": "cosine", "l2": "euclidean", "inner_product": "dotProduct"}


def _check_postgres_keys(index: Mapping[str, Any]) -> None:
    """Refuse PostgresStore's index keys with the name to use here, not just "extra input"."""
    if "distance_type" in index:
        given = index["distance_type"]
        ours = _POSTGRES_DISTANCE.get(given) if isinstance(given, str) else None
        example = f": distance_type={given!r} is similarity={ours!r}" if ours else ""
        raise ConfigurationError(
            "index['distance_type'] is PostgresStore's name: use index['similarity'] "
            f"('cosine', 'euclidean' or 'dotProduct'){example}"
        )
    if "ann_index_config" in index:
        raise ConfigurationError(
            "index['ann_index_config'] is PostgresStore's pgvector index setting: remove it (MongoDB's "
            "vector index needs none; index['similarity'] sets the metric, 'dims' the vector size)"
        )


def index_settings(index: Mapping[str, Any] | None) -> IndexSettings | None:
    """Validate ``index=`` and return frozen settings (``None`` means no semantic search)."""
    if index is None:
        return None
    if isinstance(index, Mapping):
        _check_postgres_keys(index)
    opts = _validated(_IndexOptions, index, "index", "IndexConfig")
    if opts.embed is None:
        raise ConfigurationError("index['embed'] must be provided (Embeddings, a function or a provider string)")

    def checked(key: str, build: Callable[..., Any], *args: Any) -> Any:
        try:
            return build(*args)
        except ValueError as exc:
            raise ConfigurationError(f"index[{key!r}]: {exc}") from None

    model = _auto_model(opts.embed)
    auto: AutoEmbedSettings | None = None if model is None else checked("embed", auto_embed_settings, model, opts.dims)
    rerank = checked("rerank", rerank_settings, opts.rerank) if opts.rerank is not None else None
    hybrid = checked("hybrid", hybrid_settings, opts.hybrid) if opts.hybrid not in (None, False) else None
    embeddings: Embeddings
    if auto is not None:
        embeddings, dims = AtlasEmbeddings(auto.model), auto.dims
    elif (local := _local_embedder(opts.embed, opts.dims)) is not None:
        embeddings, dims = local
    elif opts.dims is None:
        raise ConfigurationError("index['dims'] is required (the embedder's vector length)")
    else:
        try:
            embeddings, dims = ensure_embeddings(opts.embed), opts.dims
        except Exception as exc:  # ensure_embeddings raises ValueError/ImportError for bad specs
            raise ConfigurationError(f"index['embed'] is not usable: {exc}") from exc
    fields = opts.fields or ("$",)
    for f in fields:
        if f not in ("$", ""):
            try:
                tokenize_path(f)
            except Exception as exc:
                raise ConfigurationError(f"index['fields']: bad path {f!r}: {exc}") from exc
    resolved = {"dims": dims, "embeddings": embeddings, "auto_embed": auto, "rerank": rerank, "hybrid": hybrid}
    return IndexSettings(**{**dict(opts), **resolved, "fields": fields})


class AtlasEmbeddings(Embeddings):
    """``IndexSettings.embeddings`` under automated embedding: Atlas embeds, so a call fails loudly."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.refusal = f"automated embedding (embed='atlas:{model}'): Atlas embeds the texts; nothing is embedded here"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError(self.refusal)

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError(self.refusal)


def _local_embedder(embed: Any, dims: int | None) -> tuple[Embeddings, int] | None:
    """``embed="minilm"`` / ``"hashing"``: the project's own offline embedders, as the CLI's
    ``--embed`` takes them (``tools.settings.resolve_embeddings``: one rule for both; ``dims``
    may then be left out). Imported here, lazily: the one place configuration reaches a tool."""
    if not isinstance(embed, str) or embed.strip().lower() not in ("minilm", "hashing"):
        return None
    from mongostore.tools.settings import resolve_embeddings

    resolved = resolve_embeddings(embed, dims)
    assert resolved is not None and not isinstance(resolved[0], str)
    return resolved[0], resolved[1]


def _auto_model(embed: Any) -> str | None:
    """The Voyage model of ``embed="atlas:<model>"`` or of langchain-mongodb's ``AutoEmbeddings``."""
    if isinstance(embed, str) and embed.startswith("atlas:"):
        return embed.removeprefix("atlas:")
    if type(embed).__name__ in ("AutoEmbeddings", "AtlasEmbeddings") and isinstance(getattr(embed, "model", None), str):
        return str(embed.model)
    return None


# 1,000 years: every expiry stays a date Python and BSON hold (the same bound as a put's ttl).
MAX_TTL_MINUTES = 1000 * 365.25 * 24 * 60


class TTLSettings(BaseModel):
    """Validated TTL settings; every duration in minutes."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    default_ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)
    refresh_on_read: bool = True
    omit_expired: bool = False
    sweep_interval_minutes: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)


def sweep_minutes(value: Any, what: str = "sweep_interval_minutes") -> float:
    """A sweep interval in minutes: a finite number > 0, or ``ConfigurationError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{what} must be a number of minutes, got {value!r}")
    if not math.isfinite(value) or not 0 < value <= MAX_TTL_MINUTES:
        raise ConfigurationError(f"{what} must be a finite number of minutes > 0, got {value!r}")
    return float(value)


def ttl_settings(ttl: TTLConfig | Mapping[str, Any] | None) -> TTLSettings | None:
    """Validate ``ttl=`` (minutes) and return frozen settings (``None`` when not given)."""
    if ttl is None:
        return None
    return _validated(TTLSettings, ttl, "ttl", "TTLConfig")
