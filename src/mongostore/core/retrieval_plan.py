"""The retrieval modes' server checks: the path a search takes (``path_for``), a refused
stage (``refused_stage``), and ``setup()``'s checks and search indexes. Automated embedding
and reranking need Atlas (elsewhere ``setup()`` and every search raise a ``ConfigurationError``
naming the feature); hybrid fuses locally (``plan.paths.FUSION``) where ``$rankFusion`` is not.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator
from typing import Any, Literal

from pymongo.errors import OperationFailure

from mongostore.config import IndexSettings
from mongostore.core import retrieval as r
from mongostore.core.steps import Capabilities, CreateSearchIndex, ListSearchIndexes, Step, UpdateSearchIndex
from mongostore.errors import ConfigurationError, VectorIndexError

logger = logging.getLogger("mongostore")

Plan = Generator[Step, Any, Any]
Path = Literal["atlas", "local"]
RANK_FUSION_VERSION = (8, 0)
RERANK_VERSION = (8, 3)

# A stage the server does not know (40324), a stage behind a disabled feature flag (224
# QueryFeatureNotAllowed: $rankFusion on builds with featureFlagRankFusion off), or an
# uncoded refusal from a server that only speaks the protocol.
UNRECOGNIZED_STAGE = 40324
QUERY_FEATURE_NOT_ALLOWED = 224
_REFUSALS_LOGGED: set[str] = set()  # only for logging: each refusal is warned about once per process


def uses_modes(index: IndexSettings | None) -> bool:
    """Whether this index has a retrieval mode (whose path depends on the server's stages)."""
    return index is not None and index.stores_text


def _at_least(caps: Capabilities, wanted: tuple[int, int]) -> bool:
    """Emulated engines report no version: they say what they support by answering."""
    found = caps.version
    return caps.emulated or found is None or found >= wanted


def needs_atlas(index: IndexSettings, detail: str) -> ConfigurationError | None:
    """The error for a mode that cannot run off Atlas, naming the feature (None: it can)."""
    if index.auto_embed is not None:
        return ConfigurationError(
            f"automated embedding (index['embed']='atlas:{index.auto_embed.model}') needs MongoDB Atlas "
            f"(or MongoDB 8.3+ with mongot and Voyage AI keys); this server cannot run it ({detail})"
        )
    if index.rerank is not None:
        return ConfigurationError(
            f"reranking (index['rerank'], $rerank with {index.rerank.model}) needs MongoDB Atlas 8.3+ with "
            f"Native Reranking enabled; this server cannot run it ({detail})"
        )
    return None


@dataclasses.dataclass(frozen=True)
class NoRankFusion(Capabilities):
    """The server has ``$vectorSearch`` but refused ``$rankFusion`` (``refused_stage``):
    hybrid searches of this batch fuse locally; plain vector search stays on."""


def path_for(index: IndexSettings, caps: Capabilities, use_atlas: bool) -> Path:
    """``atlas`` or ``local`` for a search of this index; raises for Atlas-only modes."""
    if use_atlas:
        rank_fusion = not isinstance(caps, NoRankFusion) and _at_least(caps, RANK_FUSION_VERSION)
        if index.hybrid is not None and not rank_fusion:
            if index.auto_embed is not None or index.rerank is not None:
                raise ConfigurationError(
                    f"index['hybrid'] with automated embedding or reranking needs $rankFusion (MongoDB 8.0+); "
                    f"this server is {caps.server_version} ({caps.detail})"
                )
            return "local"
        return "atlas"
    err = needs_atlas(index, caps.detail or caps.server_version)
    if err is not None:
        raise err
    return "local"


def refused_stage(exc: BaseException, index: IndexSettings, caps: Capabilities) -> Capabilities | None:
    """A search read failed: was it the server refusing ``$rerank`` or ``$rankFusion``?

    Read narrowly (issue 28): an unknown stage (40324), a feature-flagged one (224) or an
    uncoded refusal, naming the stage. ``$rankFusion``: the capabilities for this batch,
    hybrid searches fusing locally. ``$rerank``: raises. Neither switches off
    ``$vectorSearch``. None: not such a refusal (read as for any search).
    """
    if not isinstance(exc, OperationFailure) or exc.code not in (UNRECOGNIZED_STAGE, QUERY_FEATURE_NOT_ALLOWED, None):
        return None
    message = str((exc.details or {}).get("errmsg") or exc)
    if index.rerank is not None and "$rerank" in message:
        raise ConfigurationError(
            f"reranking (index['rerank'], $rerank with {index.rerank.model}): the server refused $rerank "
            f"({message}). $rerank needs MongoDB Atlas 8.3+ with Native Reranking enabled in the Atlas project "
            "(setup() cannot see that setting); remove index['rerank'] to search without reranking"
        ) from exc
    if index.hybrid is not None and ("$rankFusion" in message or exc.code == QUERY_FEATURE_NOT_ALLOWED):
        # Not remembered between batches (each hybrid search asks once): say it once per answer.
        log = logger.debug if message in _REFUSALS_LOGGED else logger.warning
        _REFUSALS_LOGGED.add(message)
        log("the server refused $rankFusion (%s): hybrid searches fuse locally, with the same formula", message)
        return NoRankFusion(**{**vars(caps), "detail": f"$rankFusion refused: {message}"})
    return None


# --------------------------------------------------------------------------- setup


def setup_checks(index: IndexSettings, caps: Capabilities) -> None:
    """Refuse, at ``setup()`` on a server with search, a mode it cannot run (before any index is made)."""
    if index.rerank is None:
        return
    if not _at_least(caps, RERANK_VERSION):
        raise ConfigurationError(
            f"reranking (index['rerank'], $rerank) needs MongoDB 8.3+ on Atlas; this server is {caps.server_version}"
        )
    # setup() cannot see the project's Native Reranking setting, nor tell Atlas from a
    # self-managed 8.3 (which has no $rerank): the first reranked search reports either.
    logger.info(
        "reranking with %s: this server has search (MongoDB %s); whether $rerank runs (Atlas with Native "
        "Reranking enabled in the project) is not visible to setup(): the first reranked search reports it",
        index.rerank.model,
        caps.server_version,
    )


def create_vector_index(name: str, definition: dict[str, Any], index: IndexSettings) -> Plan:
    """``createSearchIndexes`` for the vector index, naming automated embedding when it fails."""
    try:
        yield CreateSearchIndex("vectors", name, definition)
    except OperationFailure as exc:
        if index.auto_embed is None:
            raise
        raise VectorIndexError(
            f"automated embedding (autoEmbed, model {index.auto_embed.model}) is not available on this server: "
            f"{exc}. It needs MongoDB Atlas, or MongoDB 8.3+ with mongot and Voyage AI keys"
        ) from exc


def auto_embed_change(name: str, existing: dict[str, Any], wanted: dict[str, Any]) -> VectorIndexError | None:
    """The error for an update that would change an automated-embedding field (None: it may
    run): mongot never updates ``autoEmbed`` fields (``AutoEmbeddingIndexValidator``)."""

    def auto(defn: dict[str, Any]) -> list[Any]:
        return [f for f in defn.get("fields") or () if isinstance(f, dict) and f.get("type") == "autoEmbed"]

    def key(fields: list[Any]) -> list[Any]:
        return [(f.get("path"), f.get("model"), f.get("numDimensions")) for f in fields]

    before, after = auto(existing), auto(wanted)
    # (None before: a vector index may become an automated-embedding one; the server says if not.)
    if not before or key(before) == key(after):
        return None
    return VectorIndexError(
        f"vector search index {name!r} would have to change its automated embedding (autoEmbed) field "
        f"({before or 'none'} -> {after or 'none'}); MongoDB never updates autoEmbed fields in place, on Atlas "
        f"or anywhere else: drop the index and let setup() create it again "
        f"(vectors_collection.drop_search_index({name!r}), then store.setup(); searches fail until it is built), "
        "or set index_name to a new name to build the new index next to the old one"
    )


def text_index_plan(index: IndexSettings, caps: Capabilities) -> Plan:
    """Create (or update) the hybrid mode's ``$search`` index -> ``(name, definition)`` for
    ``setup_plan`` to wait on (``READY`` on it, as for the vector index), or None."""
    hybrid = index.hybrid
    if hybrid is None:
        return None
    if not _at_least(caps, RANK_FUSION_VERSION):
        logger.info("no $rankFusion before MongoDB 8.0 (%s): hybrid searches fuse locally", caps.server_version)
        return None
    wanted = r.text_index_definition()  # on the vectors collection setup_plan made
    existing = yield ListSearchIndexes("vectors", hybrid.index_name)
    if not existing:
        logger.info("creating search index %r for hybrid search", hybrid.index_name)
        yield CreateSearchIndex("vectors", hybrid.index_name, wanted, type="search")
    elif (existing[0].get("latestDefinition") or {}) != wanted:
        logger.info("updating search index %r (its mappings changed)", hybrid.index_name)
        yield UpdateSearchIndex("vectors", hybrid.index_name, wanted)
    return hybrid.index_name, wanted
