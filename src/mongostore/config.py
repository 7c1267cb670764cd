"""User configuration, validated once into frozen settings (no I/O; the caller's dicts are not mutated).

``index=`` takes LangGraph's ``IndexConfig`` plus our extensions (``MongoIndexConfig``),
``ttl=`` LangGraph's ``TTLConfig``; every duration is in minutes, as in LangGraph.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, TTLConfig, ensure_embeddings, tokenize_path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mongostore.errors import ConfigurationError

Similarity = Literal["cosine", "dotProduct", "euclidean"]
VectorSearchMode = Literal["auto", "atlas", "local"]
DEFAULT_INDEX_NAME = "mongostore_vectors"

# --------------------------------------------------------------------------- the retrieval modes' settings

# $vectorSearch: numCandidates is at most 10,000, and limit <= numCandidates (hybrid['depth'] too).
MAX_CANDIDATES = 10_000
# The names of $rankFusion's two input pipelines (and of hybrid['weights']'s keys).
VECTOR_PIPELINE = "vector"
TEXT_PIPELINE = "text"
# The models of a vectorSearch index's autoEmbed field (the autoEmbed docs; mongot's
# VoyageClient and search-index-schema autoEmbed.json). voyage-code-4 exists only for
# $search's autoEmbed type, so a vectorSearch index refuses it (issue 28).
AUTO_EMBED_MODELS = ("voyage-4", "voyage-4-large", "voyage-4-lite", "voyage-code-3")
SEARCH_ONLY_MODELS = ("voyage-code-4",)
AUTO_EMBED_DIMENSIONS = (256, 512, 1024, 2048)
AUTO_EMBED_DEFAULT_DIMENSIONS = 1024
# The $rerank page lists these models; numDocsToRerank must be <= 1000.
RERANK_MODELS = ("rerank-2.5", "rerank-2.5-lite", "rerank-2", "rerank-2-lite")
MAX_DOCS_TO_RERANK = 1000
DEFAULT_TEXT_INDEX_NAME = "mongostore_text"


@dataclass(frozen=True)
class AutoEmbedSettings:
    """``embed="atlas:<model>"``: Atlas embeds the stored text and the query text."""

    model: str
    dims: int = AUTO_EMBED_DEFAULT_DIMENSIONS


@dataclass(frozen=True)
class RerankSettings:
    """``rerank={"model": ..., "candidates": N}``: ``$rerank`` the first N vector hits."""

    model: str
    candidates: int = 100


@dataclass(frozen=True)
class HybridSettings:
    """``hybrid={"weights": {"vector": w, "text": w}, "depth": N}``: RRF of two rankings."""

    vector_weight: float = 1.0
    text_weight: float = 1.0
    depth: int = 100
    index_name: str = DEFAULT_TEXT_INDEX_NAME


@dataclass(frozen=True)
class RecencySettings:
    """``recency={"half_life_days": H, "weight": W}``: each result's score blended with its age,
    ``(1 - W) * score + W * 0.5 ** (age_days / H)`` (``core.scoring``)."""

    half_life_days: float
    weight: float


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _int_in(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer from {low} to {high}, got {value!r}")
    return value


def _only_keys(spec: Mapping[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown} (allowed: {sorted(allowed)})")


def auto_embed_settings(model: str, dims: int | None) -> AutoEmbedSettings:
    """``embed="atlas:<model>"`` (ValueError with what was wrong)."""
    if model not in AUTO_EMBED_MODELS:
        why = " (it is for $search indexes only)" if model in SEARCH_ONLY_MODELS else ""
        raise ValueError(
            f"automated embedding model {model!r} cannot embed for a vectorSearch index{why}; "
            f"use one of {', '.join(AUTO_EMBED_MODELS)}"
        )
    if dims is not None and dims not in AUTO_EMBED_DIMENSIONS:
        raise ValueError(f"dims with automated embedding must be one of {list(AUTO_EMBED_DIMENSIONS)}, got {dims!r}")
    return AutoEmbedSettings(model) if dims is None else AutoEmbedSettings(model, dims)


def rerank_settings(spec: Any) -> RerankSettings:
    """``rerank={"model": ..., "candidates": N}`` (ValueError with what was wrong)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"rerank must be a dict like {{'model': 'rerank-2.5'}}, got {type(spec).__name__}")
    _only_keys(spec, {"model", "candidates"}, "rerank")
    model = spec.get("model")
    if model not in RERANK_MODELS:
        raise ValueError(f"rerank['model'] must be one of {list(RERANK_MODELS)}, got {model!r}")
    candidates = _int_in(spec.get("candidates", 100), "rerank['candidates']", 1, MAX_DOCS_TO_RERANK)
    return RerankSettings(str(model), candidates)


def hybrid_settings(spec: Any) -> HybridSettings:
    """``hybrid={"weights": {...}, "depth": N, "index_name": ...}`` (ValueError)."""
    if spec is True:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"hybrid must be a dict like {{'weights': {{'vector': 1, 'text': 1}}}}, got {spec!r}")
    _only_keys(spec, {"weights", "depth", "index_name"}, "hybrid")
    weights = spec.get("weights", {})
    if not isinstance(weights, Mapping):
        raise ValueError(f"hybrid['weights'] must be a dict with 'vector' and/or 'text', got {weights!r}")
    _only_keys(weights, {VECTOR_PIPELINE, TEXT_PIPELINE}, "hybrid['weights']")
    vw = _number(weights.get(VECTOR_PIPELINE, 1.0), "hybrid['weights']['vector']")
    tw = _number(weights.get(TEXT_PIPELINE, 1.0), "hybrid['weights']['text']")
    if vw < 0 or tw < 0 or vw + tw == 0:
        raise ValueError("hybrid weights must be non-negative and not both zero ($rankFusion's rule)")
    depth = _int_in(spec.get("depth", 100), "hybrid['depth']", 1, MAX_CANDIDATES)
    name = spec.get("index_name", DEFAULT_TEXT_INDEX_NAME)
    if not isinstance(name, str) or not name:
        raise ValueError(f"hybrid['index_name'] must be a non-empty string, got {name!r}")
    return HybridSettings(vw, tw, depth, name)


def recency_settings(spec: Any) -> RecencySettings | None:
    """``recency={"half_life_days": H, "weight": W}`` (ValueError); None for ``weight`` 0 (no blend at all)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"recency must be a dict like {{'half_life_days': 30, 'weight': 0.2}}, got {spec!r}")
    _only_keys(spec, {"half_life_days", "weight"}, "recency")
    missing = sorted({"half_life_days", "weight"} - set(spec))
    if missing:
        needs = " and ".join(repr(m) for m in missing)
        raise ValueError(f"recency needs {needs} (e.g. {{'half_life_days': 30, 'weight': 0.2}})")
    half_life = _number(spec["half_life_days"], "recency['half_life_days']")
    weight = _number(spec["weight"], "recency['weight']")
    if half_life <= 0:
        raise ValueError(
            f"recency['half_life_days'] must be positive (days for a score's age part to halve), got {half_life!r}"
        )
    if not 0 <= weight <= 1:
        raise ValueError(f"recency['weight'] must be from 0 (similarity only) to 1 (age only), got {weight!r}")
    return RecencySettings(half_life, weight) if weight > 0 else None


# --------------------------------------------------------------------------- index= and ttl=

_Options = TypeVar("_Options", bound=BaseModel)


class MongoIndexConfig(IndexConfig, total=False):
    """LangGraph's ``IndexConfig`` plus mongostore's extensions (the README's "Semantic search").

    filter_fields: ``value`` fields (nested ones dotted) that filters on run inside ``$vectorSearch``.
    vector_search: ``auto`` (ask the server), ``atlas`` or ``local`` (exact numpy ranking).
    candidate_factor: numCandidates = factor x vectors asked for (Atlas recommends >= 20).
    setup_timeout: seconds ``setup()`` waits for the vector index to become queryable.
    rerank: ``{"model": "rerank-2.5", "candidates": 100}``: Atlas ``$rerank`` (MongoDB 8.3+).
    hybrid: ``{"weights": {"vector": 1.0, "text": 1.0}, "depth": 100}``: ``$rankFusion`` (MongoDB 8.0+).
    recency: ``{"half_life_days": 30, "weight": 0.2}``: newer memories rank higher (every search path).
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
    recency: dict[str, Any]


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
    recency: Any = None

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
    recency: RecencySettings | None = None

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
    recency = checked("recency", recency_settings, opts.recency) if opts.recency is not None else None
    embeddings: Embeddings
    if auto is not None:
        embeddings, dims = AtlasEmbeddings(auto.model), auto.dims
    elif (local := _local_embedder(opts.embed, opts.dims)) is not None:
        embeddings, dims = local
    elif isinstance(opts.embed, str) and ":" not in opts.embed:  # not a name we know, nor provider:model
        raise _unknown_embedder(opts.embed)
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
    resolved["recency"] = recency
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
    """``embed="minilm"`` / ``"hashing"``: the project's offline embedders, by the CLI's names
    (``dims`` may then be left out). ``tools.embeddings`` is a leaf module, imported lazily:
    its model runtime is an optional extra."""
    if not isinstance(embed, str):
        return None
    from mongostore.tools.embeddings import local_embedder

    resolved = local_embedder(embed, dims)
    return None if resolved is None else (resolved[0], resolved[1])


def _unknown_embedder(name: str) -> ConfigurationError:
    """``embed="minlm"``: said as the CLI says it, not as a missing ``dims`` or a missing langchain."""
    from mongostore.tools.embeddings import unknown_embedder

    error = unknown_embedder(
        name,
        "'minilm' or 'hashing' (offline), a LangChain provider string such as "
        "'openai:text-embedding-3-small' (with index['dims']), 'atlas:<voyage model>', "
        "or an Embeddings object or function",
    )
    return ConfigurationError(f"index['embed']: {error}")


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
    """Validated TTL settings; every duration in minutes.

    ``default_for_none`` (ours): a put with ``ttl=None`` gets ``default_ttl`` too, not only one that
    leaves ``ttl`` out. LangGraph's rule (off by default) reads ``ttl=None`` as "never expires", but
    the Agent Server's ``/store`` API and a graph's ``PutOp`` can only say "no ttl given" as ``None``;
    the Agent Server factory turns it on (docs/decisions.md, "A default TTL and puts that say nothing").
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    default_ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)
    refresh_on_read: bool = True
    omit_expired: bool = False
    default_for_none: bool = False
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
