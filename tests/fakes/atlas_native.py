"""Atlas-native stages for the Atlas double: ``autoEmbed`` indexes, ``$search``,
``$rankFusion`` and ``$rerank``, evaluated as MongoDB documents them.

``fakes.atlas`` calls in here (two small hooks): ``check_definition`` when a search
index is created or updated, and ``aggregate`` for any pipeline whose first stage is
``$rankFusion``, ``$search`` or a text-query ``$vectorSearch``, or that holds a ``$rerank``.
Everything else stays with ``fakes.atlas``.

What is modelled (docs/decisions.md, Issue 14, cites each page):

- ``autoEmbed`` fields (``type, modality: text, path, model`` + optional
  ``numDimensions`` 256/512/1024/2048, ``similarity``) in a ``vectorSearch`` index; a
  query ``{"$vectorSearch": {..., "path": <autoEmbed path>, "query": {"text": ...}}}``
  embeds the stored texts and the query with a deterministic stand-in model per model
  name (hashed word buckets seeded by the name), then scores like ``$vectorSearch``;
- ``$search`` with ``text`` or ``compound`` (``must``/``should``/``filter``/``mustNot``
  of ``text`` and ``equals``) on a ``search`` index with static mappings; ``text`` scores
  are BM25 (k1 1.2, b 0.75) with index-wide statistics, as Lucene computes them;
  ``equals`` needs a ``token`` mapping; ``{"$meta": "searchScore"}``;
- ``$rankFusion``: input pipeline names and stages (selection and ranked pipeline
  rules), non-negative weights naming pipelines, and the score
  ``sum(weight / (60 + rank))`` with ranks from 1, in ``{"$meta": "score"}``;
- ``$rerank``: ``query.text``, ``path`` (fields must exist), ``numDocsToRerank`` 1..1000
  (only the first N documents are reranked and returned), ``model`` from the documented
  list; a deterministic scorer (share of query words found in the text, in [0, 1]);
  ``{"$meta": "score"}``; not allowed inside ``$rankFusion`` input pipelines.

``NativeState`` switches features off to play servers without them: ``rerank_enabled``
(8.0 answers ``Unrecognized pipeline stage name: '$rerank'``, code 40324),
``rank_fusion_enabled`` (before 8.0: the same for ``$rankFusion``), ``rank_fusion_flag_off``
(a build with the stage behind a disabled feature flag: 224 QueryFeatureNotAllowed),
``auto_embed_enabled`` (a deployment without Voyage AI models refuses the index).

As mongod and mongot answer (issue 28): ``$rankFusion`` spec errors carry mongod's codes
(``document_source_rank_fusion.cpp``, ``document_source_hybrid_scoring_util.cpp``), its
fused order breaks ties by ``_id`` ascending (``{$sort: {score: {$meta: "score"}, _id: 1}}``);
an autoEmbed field's similarity defaults to dotProduct (euclidean with binary quantization),
its models are voyage-4, voyage-4-large, voyage-4-lite and voyage-code-3, and an update may
not change it (mongot's ``AutoEmbeddingIndexValidator``). Other spec errors of these stages
are not documented with codes; the fake uses 2 (BadValue) for definitions and 8 like
``fakes.atlas`` for queries, and says what was wrong.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mongomock.aggregate
import numpy as np

from .atlas import (
    BAD_VALUE,
    MAX_NUM_CANDIDATES,
    SCORE_FIELD,
    _check_filter,
    _fail,
    _get_path,
    _positive_int,
    _scores,
    server_semantics,
)

__all__ = [
    "AUTO_EMBED_MODELS",
    "NativeState",
    "aggregate",
    "check_definition",
    "check_update",
    "native_state",
    "stand_in_embedding",
]

# A vectorSearch index's autoEmbed models (mongot's VoyageClient and search-index-schema
# autoEmbed.json); voyage-code-4 is only for $search's autoEmbed type.
AUTO_EMBED_MODELS = ("voyage-4-lite", "voyage-4", "voyage-4-large", "voyage-code-3")
AUTO_EMBED_KEYS = frozenset({"type", "modality", "path", "model", "numDimensions", "similarity", "quantization"})
AUTO_EMBED_QUANTIZATIONS = ("float", "scalar", "binary", "binaryNoRescore")
AUTO_EMBED_DIMENSIONS = (256, 512, 1024, 2048)
RERANK_MODELS = ("rerank-2.5", "rerank-2.5-lite", "rerank-2", "rerank-2-lite")
MAX_DOCS_TO_RERANK = 1000
RRF_K = 60
UNRECOGNIZED_STAGE = 40324
QUERY_FEATURE_NOT_ALLOWED = 224
# mongod's $rankFusion codes (document_source_rank_fusion.cpp, document_source_hybrid_scoring_util.cpp).
FUSION_EMPTY_PIPELINE = 9834300
FUSION_NESTED = 10473002
FUSION_SCORE_STAGE = 10614800
FUSION_NOT_RANKED = 9191100
FUSION_NOT_SELECTION = 9191103
FUSION_NEGATIVE_WEIGHT = 9460300
FUSION_MORE_WEIGHTS = 9460301
FUSION_UNKNOWN_PIPELINE = 9967500
FUSION_NOT_FIRST = 10170100
SEARCH_SCORE = "__search_score"
FUSED_SCORE = "__score"
HIDDEN = (SCORE_FIELD, SEARCH_SCORE, FUSED_SCORE)
SELECTION_STAGES = frozenset({"$match", "$search", "$vectorSearch", "$sample", "$geoNear", "$sort", "$skip", "$limit"})
ORDERED_FIRST = frozenset({"$search", "$vectorSearch", "$geoNear"})
FIRST_ONLY = frozenset({"$search", "$vectorSearch", "$rankFusion"})
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class NativeState:
    auto_embed_enabled: bool = True
    rerank_enabled: bool = True
    rank_fusion_enabled: bool = True
    rank_fusion_flag_off: bool = False  # a build with $rankFusion behind a disabled feature flag (224)
    stages: list[dict[str, Any]] = field(default_factory=list)  # every native stage run, for assertions

    def count(self, name: str) -> int:
        return sum(1 for s in self.stages if name in s)


def native_state(atlas: Any) -> NativeState:
    """The native-stage switches and log of one fake Atlas database."""
    state = getattr(atlas, "_native_state", None)
    if state is None:
        state = NativeState()
        atlas._native_state = state
    return state


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def stand_in_embedding(model: str, text: str, dims: int) -> list[float]:
    """A deterministic stand-in for a Voyage model: hashed word buckets seeded by ``model``."""
    vec = np.zeros(dims)
    for word in _words(text):
        h = hashlib.blake2b(f"{model}\x00{word}".encode(), digest_size=8).digest()
        vec[int.from_bytes(h[:4], "little") % dims] += 1.0 if h[4] & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    return (vec / norm).tolist() if norm else vec.tolist()


# --------------------------------------------------------------------------- index definitions


def check_definition(atlas: Any, type_: str, definition: Mapping[str, Any]) -> bool:
    """Check a definition the native stages read; True when it was handled here."""
    if type_ == "search":
        mappings = definition.get("mappings")
        if not isinstance(mappings, Mapping) or not isinstance(mappings.get("dynamic", False), bool):
            raise _fail('search index definition: "mappings" must be a document with a boolean "dynamic"', BAD_VALUE)
        for path, spec in (mappings.get("fields") or {}).items():
            types = spec if isinstance(spec, list) else [spec]
            if not all(isinstance(t, Mapping) and isinstance(t.get("type"), str) for t in types):
                raise _fail(f"search index definition: field {path!r} needs a type", BAD_VALUE)
        return True
    fields = definition.get("fields")
    auto = [f for f in fields or [] if isinstance(f, Mapping) and f.get("type") == "autoEmbed"]
    if not auto:
        return False
    if not native_state(atlas).auto_embed_enabled:
        raise _fail("autoEmbed: no embedding model is registered with this deployment", BAD_VALUE)
    paths: set[str] = set()
    for f in fields or []:
        if not isinstance(f, Mapping) or not isinstance(f.get("path"), str) or f["path"] in paths:
            raise _fail(f"vectorSearch index definition: invalid or repeated field {f!r}", BAD_VALUE)
        paths.add(f["path"])
        if f.get("type") == "autoEmbed":
            if f.get("modality") != "text":
                raise _fail('autoEmbed: "modality" must be "text"', BAD_VALUE)
            if f.get("model") not in AUTO_EMBED_MODELS:
                raise _fail(f"autoEmbed: model {f.get('model')!r} is not one of {list(AUTO_EMBED_MODELS)}", BAD_VALUE)
            if "numDimensions" in f and f["numDimensions"] not in AUTO_EMBED_DIMENSIONS:
                raise _fail(f"autoEmbed: numDimensions must be one of {list(AUTO_EMBED_DIMENSIONS)}", BAD_VALUE)
            if f.get("similarity", "dotProduct") not in ("cosine", "dotProduct", "euclidean"):
                raise _fail("autoEmbed: similarity must be cosine, dotProduct or euclidean", BAD_VALUE)
            unknown = sorted(set(f) - AUTO_EMBED_KEYS)
            if unknown:
                raise _fail(f"autoEmbed: unrecognized field(s) {unknown}", BAD_VALUE)
            if f.get("quantization", "float") not in AUTO_EMBED_QUANTIZATIONS:
                raise _fail(f"autoEmbed: quantization must be one of {list(AUTO_EMBED_QUANTIZATIONS)}", BAD_VALUE)
        elif f.get("type") != "filter":
            raise _fail(f"vectorSearch index definition: unsupported field type {f.get('type')!r}", BAD_VALUE)
    return True


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], name: str) -> None:
    """mongot's ``AutoEmbeddingIndexValidator`` on ``updateSearchIndex``, on every deployment:
    autoEmbed fields cannot change, nor turn into ``vector`` fields."""

    def auto(defn: Mapping[str, Any]) -> list[Any]:
        return [dict(f) for f in defn.get("fields") or [] if isinstance(f, Mapping) and f.get("type") == "autoEmbed"]

    before, after = auto(old), auto(new)
    if not before:
        return
    if not after:
        raise _fail(
            "For a vector search index definition, you cannot convert a type:autoEmbed to a type:vector", BAD_VALUE
        )
    if before != after:
        raise _fail(
            f"Index: {name} cannot update type:autoEmbed fields. To modify an index containing Automated "
            "Embedding fields, please delete the index and create a new one instead",
            BAD_VALUE,
        )


# --------------------------------------------------------------------------- aggregation


def _stage_name(stage: Any) -> str:
    if not isinstance(stage, Mapping) or len(stage) != 1:
        raise _fail(f"a pipeline stage must be a document with one field, got {stage!r}")
    return str(next(iter(stage)))


def _is_native(pipeline: Sequence[Mapping[str, Any]]) -> bool:
    if not pipeline or not isinstance(pipeline[0], Mapping):
        return False
    first = pipeline[0]
    if "$rankFusion" in first or "$search" in first:
        return True
    if "$vectorSearch" in first and isinstance(first["$vectorSearch"], Mapping) and "query" in first["$vectorSearch"]:
        return True
    return any(isinstance(s, Mapping) and "$rerank" in s for s in pipeline)


def aggregate(atlas: Any, db: Any, coll_name: str, pipeline: Sequence[Mapping[str, Any]], kwargs: Any) -> Any:
    """Results of a pipeline with native stages, or None when ``fakes.atlas`` should run it."""
    pipeline = list(pipeline)
    if not _is_native(pipeline):
        return None
    for stage in pipeline[1:]:
        name = _stage_name(stage)
        if name == "$rankFusion":
            raise _fail("$rankFusion is only allowed as the first stage in a pipeline", FUSION_NOT_FIRST)
        if name in FIRST_ONLY:
            raise _fail(f"{name} is only valid as the first stage in a pipeline", 40602)
    docs = _first_stage(atlas, db, coll_name, pipeline[0])
    segment: list[Mapping[str, Any]] = []
    for stage in pipeline[1:]:
        if "$rerank" in stage:
            docs = _run(db, docs, segment, kwargs)
            segment = []
            docs = _rerank(atlas, docs, stage["$rerank"])
        else:
            segment.append(stage)
    docs = _run(db, docs, segment, kwargs)
    return [{k: v for k, v in d.items() if k not in HIDDEN} for d in docs]


def _run(db: Any, docs: list[dict[str, Any]], stages: list[Mapping[str, Any]], kwargs: Any) -> list[dict[str, Any]]:
    if not stages:
        return docs
    with server_semantics():
        run: Any = mongomock.aggregate.process_pipeline
        return list(run(docs, db, _replace_meta(stages), kwargs.get("session")))


def _replace_meta(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        meta = {"vectorSearchScore": SCORE_FIELD, "searchScore": SEARCH_SCORE, "score": FUSED_SCORE}
        if set(obj) == {"$meta"} and obj["$meta"] in meta:
            return "$" + meta[obj["$meta"]]
        return {k: _replace_meta(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace_meta(v) for v in obj]
    return obj


def _first_stage(atlas: Any, db: Any, coll_name: str, stage: Mapping[str, Any]) -> list[dict[str, Any]]:
    name = _stage_name(stage)
    spec = stage[name]
    state = native_state(atlas)
    state.stages.append({name: spec})
    if name == "$rankFusion":
        if not state.rank_fusion_enabled:
            raise _fail("Unrecognized pipeline stage name: '$rankFusion'", UNRECOGNIZED_STAGE)
        if state.rank_fusion_flag_off:
            raise _fail(
                "$rankFusion is not allowed in the current configuration. You may need to enable the "
                "corresponding feature flag",
                QUERY_FEATURE_NOT_ALLOWED,
            )
        return _rank_fusion(atlas, db, coll_name, spec)
    atlas._check_enabled("$search and $vectorSearch aggregation stages")
    if name == "$search":
        return _search(atlas, db, coll_name, spec)
    if name == "$vectorSearch":
        if isinstance(spec, Mapping) and "query" in spec:
            return _auto_vector_search(atlas, db, coll_name, spec)
        return list(atlas._vector_search(db, coll_name, spec))
    return list(db[coll_name].find())


# --------------------------------------------------------------------------- $vectorSearch on autoEmbed


AUTO_KEYS = frozenset({"index", "path", "query", "model", "numCandidates", "limit", "filter", "exact"})


def _auto_vector_search(atlas: Any, db: Any, coll_name: str, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    unknown = set(spec) - AUTO_KEYS
    if unknown:
        raise _fail(f"$vectorSearch: unrecognized field(s) {sorted(unknown)} (queryVector and query are exclusive)")
    for key in ("index", "path", "limit"):
        if key not in spec:
            raise _fail(f'$vectorSearch: "{key}" is required')
    query = spec["query"]
    text = query.get("text") if isinstance(query, Mapping) else query
    if not isinstance(text, str) or not text:
        raise _fail('$vectorSearch: "query.text" must be a non-empty string')
    exact = spec.get("exact", False)
    limit = _positive_int(spec, "limit")
    num_candidates = None
    if not exact:
        if "numCandidates" not in spec:
            raise _fail('$vectorSearch: "numCandidates" is required when "exact" is false or omitted')
        num_candidates = _positive_int(spec, "numCandidates")
        if num_candidates > MAX_NUM_CANDIDATES or limit > num_candidates:
            raise _fail('$vectorSearch: "limit" <= "numCandidates" <= 10000 is required')
    index = atlas.indexes.get(coll_name, {}).get(spec["index"])
    if index is None or coll_name not in db.list_collection_names():
        return []
    fields = index.check_queryable()["fields"]  # the serving definition; code 8 before the first build
    auto = {f["path"]: f for f in fields if f["type"] == "autoEmbed"}
    field = auto.get(spec["path"])
    if field is None:
        raise _fail(f"$vectorSearch: Path '{spec['path']}' needs to be indexed as autoEmbed to query it by text")
    model = spec.get("model", field["model"])
    if model not in AUTO_EMBED_MODELS:
        raise _fail(f"$vectorSearch: model {model!r} is not one of {list(AUTO_EMBED_MODELS)}")
    filt = spec.get("filter")
    if filt:
        _check_filter(filt, {f["path"] for f in fields if f["type"] == "filter"})
    dims = int(field.get("numDimensions", 1024))
    docs, vectors = [], []
    for doc in db[coll_name].find(dict(filt or {})):
        value = _get_path(doc, spec["path"])
        if isinstance(value, str):  # documents without the text are not in the index
            docs.append(doc)
            vectors.append(stand_in_embedding(field["model"], value, dims))
    qvec = np.asarray(stand_in_embedding(model, text, dims))
    scores, keep = _scores(qvec, vectors, field.get("similarity", _default_similarity(field)))
    ranked = sorted(keep, key=lambda i: -scores[i])
    if num_candidates is not None:
        ranked = ranked[:num_candidates]
    out = []
    for i in ranked[:limit]:
        docs[i][SCORE_FIELD] = float(scores[i])
        out.append(docs[i])
    return out


def _default_similarity(field: Mapping[str, Any]) -> str:
    """mongot's default (VectorAutoEmbedFieldSpecification): dotProduct, euclidean for binary quantization."""
    return "euclidean" if field.get("quantization") in ("binary", "binaryNoRescore") else "dotProduct"


# --------------------------------------------------------------------------- $search


def _mapped(index: Any, path: str, kind: str) -> bool:
    definition = index.check_queryable()  # queries run on the serving definition
    spec = (definition.get("mappings") or {}).get("fields", {}).get(path)
    types = spec if isinstance(spec, list) else [spec] if spec else []
    return any(t.get("type") == kind for t in types) or bool(definition["mappings"].get("dynamic"))


def _search(atlas: Any, db: Any, coll_name: str, spec: Any) -> list[dict[str, Any]]:
    if not isinstance(spec, Mapping):
        raise _fail("$search takes a document")
    operators = [k for k in spec if k not in ("index", "scoreDetails", "count", "highlight")]
    if len(operators) != 1 or operators[0] not in ("text", "compound", "equals"):
        raise _fail(f"$search: exactly one operator of text, compound, equals is modelled, got {operators}")
    index = atlas.indexes.get(coll_name, {}).get(spec.get("index", "default"))
    if index is None or not index.queryable:
        return []
    if index.type != "search":
        raise _fail(f"$search: index {index.name!r} is not a search index")
    docs = list(db[coll_name].find())
    op = operators[0]
    scored = []
    for doc in docs:
        score = _operator(index, docs, op, spec[op], doc)
        if score is not None:
            doc[SEARCH_SCORE] = score
            scored.append(doc)
    return sorted(scored, key=lambda d: -d[SEARCH_SCORE])  # stable: ties in natural order


def _operator(index: Any, docs: list[dict[str, Any]], op: str, spec: Any, doc: dict[str, Any]) -> float | None:
    """The score of one document for one operator, None when it does not match."""
    if not isinstance(spec, Mapping):
        raise _fail(f"$search {op}: takes a document")
    if op == "text":
        return _text(index, docs, spec, doc)
    if op == "equals":
        path, value = spec.get("path"), spec.get("value")
        if not isinstance(path, str) or "value" not in spec:
            raise _fail('$search equals: "path" and "value" are required')
        if isinstance(value, str) and not _mapped(index, path, "token"):
            raise _fail(f"$search equals: Path '{path}' needs to be indexed as token")
        got = _get_path(doc, path)
        return 1.0 if got == value or (isinstance(got, list) and value in got) else None
    if op == "compound":
        unknown = set(spec) - {"must", "should", "filter", "mustNot", "minimumShouldMatch"}
        if unknown:
            raise _fail(f"$search compound: unknown clause(s) {sorted(unknown)}")
        total = 0.0
        for clause in ("must", "filter", "mustNot", "should"):
            ops = spec.get(clause, [])
            ops = ops if isinstance(ops, list) else [ops]
            for sub in ops:
                [(name, subspec)] = sub.items()
                s = _operator(index, docs, name, subspec, doc)
                if clause in ("must", "filter") and s is None:
                    return None
                if clause == "mustNot" and s is not None:
                    return None
                if clause in ("must", "should") and s is not None:
                    total += s
        return total
    raise _fail(f"$search: operator {op!r} is not modelled")


def _text(index: Any, docs: list[dict[str, Any]], spec: Mapping[str, Any], doc: dict[str, Any]) -> float | None:
    query, path = spec.get("query"), spec.get("path")
    if not isinstance(query, str) or not isinstance(path, str):
        raise _fail('$search text: "query" (string) and "path" (string) are required')
    if not _mapped(index, path, "string"):
        return None  # an unindexed field matches nothing
    value = _get_path(doc, path)
    if not isinstance(value, str):
        return None
    corpus = [_words(v) for v in (_get_path(d, path) for d in docs) if isinstance(v, str)]
    words = _words(value)
    n = len(corpus)
    avg = sum(len(c) for c in corpus) / n if n else 1.0
    score = 0.0
    matched = False
    for term in set(_words(query)):
        tf = words.count(term)
        if not tf:
            continue
        matched = True
        df = sum(1 for c in corpus if term in c)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / (avg or 1.0)))
    return score if matched else None


# --------------------------------------------------------------------------- $rankFusion


RANK_PIPELINE_MSG = (
    "All subpipelines to the $rankFusion stage must begin with one of $search, $vectorSearch, $geoNear, "
    "or have a custom $sort in the pipeline."
)
RANKED_FIRST = frozenset({"$search", "$vectorSearch", "$geoNear", "$rankFusion", "$scoreFusion"})
HYBRID_STAGES = frozenset({"$rankFusion", "$scoreFusion"})


def _check_input_pipeline(name: str, stages: Any) -> None:
    """mongod's ``rankFusionBsonPipelineValidator``, in its order, with its codes."""
    if not isinstance(stages, list) or not stages:
        raise _fail(f"$rankFusion input pipeline cannot be empty. {RANK_PIPELINE_MSG}", FUSION_EMPTY_PIPELINE)
    names = [_stage_name(s) for s in stages]
    if any(n in HYBRID_STAGES for n in names):
        raise _fail(
            f"$rankFusion input pipeline has a nested hybrid search stage ($rankFusion/$scoreFusion). "
            f"{RANK_PIPELINE_MSG}",
            FUSION_NESTED,
        )
    if "$score" in names:
        raise _fail("$rankFusion input pipelines must not contain a $score stage.", FUSION_SCORE_STAGE)
    if names[0] not in RANKED_FIRST and "$sort" not in names:
        raise _fail(
            "Pipeline did not begin with a ranked stage and did not contain an explicit $sort stage. "
            + RANK_PIPELINE_MSG,
            FUSION_NOT_RANKED,
        )
    for n, stage in zip(names, stages, strict=True):
        spec = stage[n]
        if n == "$search" and isinstance(spec, Mapping) and spec.get("returnStoredSource"):
            bad = "$search is only a selection stage if 'returnStoredSource' is false"
        elif n == "$geoNear" and isinstance(spec, Mapping) and ({"distanceField", "includeLocs"} & set(spec)):
            bad = "$geoNear is only a selection stage if 'includeLocs' and 'distanceField' are not specified"
        elif n not in SELECTION_STAGES:
            bad = f"{n} is not a selection stage because it modifies or transforms the input documents."
        else:
            continue
        raise _fail(
            f"{bad} (input pipeline {name!r}) Only stages that retrieve, limit, or order documents are allowed.",
            FUSION_NOT_SELECTION,
        )


def _check_weights(weights: Any, pipelines: Mapping[str, Any]) -> None:
    """``hybrid_scoring_util::validateWeights``: negative, too many, unknown names."""
    if not isinstance(weights, Mapping):
        raise _fail("$rankFusion: combination.weights must be a document", BAD_VALUE)
    invalid = []
    for name, w in weights.items():
        if name not in pipelines:
            invalid.append(name)
            continue
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise _fail(f"$rankFusion: weight of {name!r} must be a number, got {w!r}", 14)  # TypeMismatch
        if w < 0:
            raise _fail(
                f"rankFusion's pipeline weight must be non-negative, but given {w} for pipeline {name!r}.",
                FUSION_NEGATIVE_WEIGHT,
            )
    if len(weights) > len(pipelines):
        raise _fail(
            f"$rankFusion input has more weights ({len(weights)}) than pipelines ({len(pipelines)}). "
            f"Possible extraneous specified weights = [{', '.join(invalid)}]",
            FUSION_MORE_WEIGHTS,
        )
    if invalid:
        raise _fail(
            f"$rankFusion stage contained ({len(invalid)}) weight(s) in 'combination.weights' that did not "
            f"reference valid pipeline names: {invalid}",
            FUSION_UNKNOWN_PIPELINE,
        )


def _id_key(value: Any) -> Any:
    """A sort key for ``_id`` ascending (the store's ids are strings; numbers before strings, as BSON)."""
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def _rank_fusion(atlas: Any, db: Any, coll_name: str, spec: Any) -> list[dict[str, Any]]:
    if not isinstance(spec, Mapping) or set(spec) - {"input", "combination", "scoreDetails"}:
        raise _fail("$rankFusion takes input, combination and scoreDetails", 40415)  # IDL: unknown field
    inp = spec.get("input")
    pipelines = inp.get("pipelines") if isinstance(inp, Mapping) else None
    if not isinstance(pipelines, Mapping) or not pipelines:
        # Not documented with a code; the IDL parse refuses it.
        raise _fail("$rankFusion: input.pipelines must contain at least one pipeline", BAD_VALUE)
    for name, stages in pipelines.items():
        _check_input_pipeline(name, stages)
        if not isinstance(name, str) or not name or name.startswith("$") or "\x00" in name or "." in name:
            raise _fail(
                f"$rankFusion pipeline names must follow the naming rules of field path expressions: {name!r}",
                16410,  # FieldPath::validateFieldName
            )
    _check_weights((spec.get("combination") or {}).get("weights", {}), pipelines)
    weights = (spec.get("combination") or {}).get("weights", {})
    fused: dict[Any, float] = {}
    first_seen: dict[Any, dict[str, Any]] = {}
    for name, stages in pipelines.items():
        if _stage_name(stages[0]) in ("$search", "$vectorSearch"):
            docs = _run(db, _first_stage(atlas, db, coll_name, stages[0]), stages[1:], {})
        else:
            docs = _run(db, list(db[coll_name].find()), stages, {})
        weight = float(weights.get(name, 1))
        for rank, doc in enumerate(docs, start=1):
            fused[doc["_id"]] = fused.get(doc["_id"], 0.0) + weight / (RRF_K + rank)
            first_seen.setdefault(doc["_id"], {k: v for k, v in doc.items() if k not in HIDDEN})
    # mongod sorts {score: {$meta: "score"}, _id: 1}: ties by _id ascending.
    order = sorted(first_seen, key=lambda key: (-fused[key], _id_key(key)))
    out = []
    for key in order:
        doc = dict(first_seen[key])
        doc[FUSED_SCORE] = fused[key]
        out.append(doc)
    return out


# --------------------------------------------------------------------------- $rerank


def rerank_score(query: str, text: str) -> float:
    """The fake reranker: the share of the query's words found in the text, in [0, 1]."""
    terms = set(_words(query))
    return len(terms & set(_words(text))) / len(terms) if terms else 0.0


def _rerank(atlas: Any, docs: list[dict[str, Any]], spec: Any) -> list[dict[str, Any]]:
    state = native_state(atlas)
    state.stages.append({"$rerank": spec})
    if not state.rerank_enabled:
        raise _fail("Unrecognized pipeline stage name: '$rerank'", UNRECOGNIZED_STAGE)
    if not isinstance(spec, Mapping) or set(spec) - {"query", "path", "numDocsToRerank", "model"}:
        raise _fail("$rerank takes query, path, numDocsToRerank and model")
    query = spec.get("query")
    text = query.get("text") if isinstance(query, Mapping) else None
    if not isinstance(text, str) or not text:
        raise _fail('$rerank: "query.text" must be a non-empty string')
    paths = spec.get("path")
    paths = [paths] if isinstance(paths, str) else paths
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise _fail('$rerank: "path" must be a string or an array of strings')
    n = spec.get("numDocsToRerank")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_DOCS_TO_RERANK:
        raise _fail(f'$rerank: "numDocsToRerank" must be an integer from 1 to {MAX_DOCS_TO_RERANK}, got {n!r}')
    if spec.get("model") not in RERANK_MODELS:
        raise _fail(f"$rerank: model {spec.get('model')!r} is not one of {list(RERANK_MODELS)}")
    chosen = docs[:n]
    for doc in chosen:
        missing = [p for p in paths if _get_path(doc, p) is None]
        if missing:
            raise _fail(f"$rerank: field(s) {missing} do not exist in a document; $match or $set them first")
        doc[FUSED_SCORE] = rerank_score(text, " ".join(str(_get_path(doc, p)) for p in paths))
    return sorted(chosen, key=lambda d: -d[FUSED_SCORE])
