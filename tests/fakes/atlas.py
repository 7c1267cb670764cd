"""A fake MongoDB Atlas at the driver edge: mongomock plus Atlas Vector Search.

mongomock has no ``$vectorSearch`` and no search-index commands. The wrappers here
add them, so tests execute the store's real ``$vectorSearch`` pipeline instead of
only checking its shape:

- ``AtlasCollection`` / ``AtlasDatabase`` wrap a sync mongomock collection/database;
  ``AsyncAtlasCollection`` / ``AsyncAtlasDatabase`` wrap ``pymongo_async_mock``'s
  (which masquerade as pymongo's ``AsyncCollection``/``AsyncDatabase``). Every other
  attribute is delegated, so find, bulk_write, create_index... behave as mongomock.
- ``AtlasSearch`` is the state of one fake Atlas database: search indexes per
  collection and call counters. Index management and the pipeline evaluation live
  there, once, and both wrappers call them; the wrappers only add cursors/await.

What ``$vectorSearch`` checks, as Atlas does (mongodb-facts.md sections 1-3): first
stage only; the index exists (else no results, no error), is a vectorSearch index and
is queryable (else no results); ``path`` is a vector field of the index; the query
vector has ``numDimensions`` numbers; ``limit``/``numCandidates`` are ints with
``limit <= numCandidates <= 10000`` unless ``exact``; the filter uses only
$eq $ne $gt $gte $lt $lte $in $nin $exists $not $nor $and $or, on paths declared
``{"type": "filter"}``, with scalar (or array of scalar) operands.

Then it selects documents with mongomock's own matcher (``find(filter)``), scores them
with numpy (cosine/dotProduct: ``(1 + s) / 2``; euclidean: ``1 / (1 + d**2)``), keeps
the top ``numCandidates`` (exact candidates: the fake has perfect recall) and
``limit``, and runs the rest of the pipeline on them with mongomock's own aggregation
engine, ``{"$meta": "vectorSearchScore"}`` being rewritten to a hidden field.

Not modelled: ANN recall loss, eventual consistency of writes (documents are
searchable at once), ``vectorSearchScore`` surviving a ``$project`` that drops the
hidden field, BinData vectors other than via ``Binary.as_vector``, ``autoEmbed``,
``$search`` indexes' queries. Error codes for invalid ``$vectorSearch`` specs are not
documented by MongoDB; the fake uses code 8 and says so in the message.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import mongomock
import mongomock.aggregate
import mongomock.filtering
import numpy as np
from bson import ObjectId, Regex
from bson.binary import Binary
from pymongo.errors import ClientBulkWriteException, InvalidOperation, OperationFailure
from pymongo.operations import SearchIndexModel

from mongostore.drivers.mongomock_compat import new_client

__all__ = [
    "SCORE_FIELD",
    "AsyncAtlasClient",
    "AsyncAtlasCollection",
    "AsyncAtlasDatabase",
    "AsyncListCursor",
    "AtlasClient",
    "AtlasCollection",
    "AtlasDatabase",
    "AtlasSearch",
    "ListCursor",
    "VectorSearchRequest",
    "async_atlas_collection",
    "atlas_collection",
]

SCORE_FIELD = "__vs_score"
MAX_NUM_CANDIDATES = 10_000
MAX_DIMENSIONS = 8192
SIMILARITIES = frozenset({"cosine", "dotProduct", "euclidean"})
FIELD_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"})
LOGICAL_OPERATORS = frozenset({"$and", "$or", "$nor"})
STAGE_KEYS = frozenset(
    {
        "index",
        "path",
        "queryVector",
        "numCandidates",
        "limit",
        "filter",
        "exact",
        "explainOptions",
        "returnStoredSource",
        "searchNodePreference",
    }
)
# Error codes (mongodb-facts.md section 3). Codes for invalid $vectorSearch specs are
# not documented by MongoDB: the fake uses 8 (UnknownError) for them (UNVERIFIED).
NAMESPACE_NOT_FOUND = 26
INDEX_NOT_FOUND = 27
INDEX_ALREADY_EXISTS = 68
SEARCH_NOT_ENABLED = 31082
NOT_FIRST_STAGE = 40602
COMMAND_NOT_FOUND = 59
COMMAND_NOT_SUPPORTED = 115
STAGE_ONLY_ON_ATLAS = 6047401
MONGOT_ERROR = 8
BAD_VALUE = 2



def _fail(message: str, code: int = MONGOT_ERROR) -> OperationFailure:
    return OperationFailure(message, code, {"ok": 0, "errmsg": message, "code": code})


# --------------------------------------------------------------------------- cursors


class ListCursor:
    """A sync command cursor over a list (pymongo's ``CommandCursor`` surface)."""

    def __init__(self, docs: Iterable[Mapping[str, Any]]) -> None:
        self._docs: Iterator[Mapping[str, Any]] = iter(list(docs))
        self._alive = True

    def __iter__(self) -> ListCursor:
        return self

    def __next__(self) -> Mapping[str, Any]:
        try:
            return next(self._docs)
        except StopIteration:
            self._alive = False
            raise

    next = __next__

    @property
    def alive(self) -> bool:
        return self._alive

    def to_list(self, length: int | None = None) -> list[Mapping[str, Any]]:
        if length is not None and length < 1:
            raise ValueError("to_list() length must be greater than 0")
        out = list(self._docs) if length is None else list(itertools.islice(self._docs, length))
        if length is None:
            self._alive = False
        return out

    def close(self) -> None:
        self._docs = iter(())
        self._alive = False

    def __enter__(self) -> ListCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncListCursor:
    """An async command cursor over a list (pymongo's ``AsyncCommandCursor`` surface)."""

    def __init__(self, docs: Iterable[Mapping[str, Any]]) -> None:
        self._cursor = ListCursor(docs)

    def __aiter__(self) -> AsyncListCursor:
        return self

    async def __anext__(self) -> Mapping[str, Any]:
        try:
            return next(self._cursor)
        except StopIteration:
            raise StopAsyncIteration from None

    next = __anext__

    @property
    def alive(self) -> bool:
        return self._cursor.alive

    async def to_list(self, length: int | None = None) -> list[Mapping[str, Any]]:
        return self._cursor.to_list(length)

    async def close(self) -> None:
        self._cursor.close()

    async def __aenter__(self) -> AsyncListCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --------------------------------------------------------------------------- state


# mongot's external index states (IndexMapper.ExternalStatus) and the internal state a
# query sees while the index cannot serve (LuceneVectorIndex.throwIfUnavailableForQuerying).
PENDING, BUILDING, READY, FAILED = "PENDING", "BUILDING", "READY", "FAILED"
INDEX_STATES = (PENDING, BUILDING, READY, FAILED)
_INTERNAL_STATE = {PENDING: "NOT_STARTED", BUILDING: "INITIAL_SYNC", FAILED: "FAILED"}


@dataclass
class _SearchIndex:
    """One search index as mongot keeps it: the definition that serves queries (None
    until the first build is done) and the latest definition, which may still be building."""

    id: str
    name: str
    type: str
    latest_definition: dict[str, Any]
    serving: dict[str, Any] | None
    status: str
    polls_left: int
    version: int = 0
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    held: bool = False  # a test pinned the status: builds do not progress
    fails: bool = False  # the build in progress ends FAILED
    message: str = ""

    @property
    def queryable(self) -> bool:
        # A rebuild (or a failed one) keeps serving the old definition: queryable stays true.
        return self.serving is not None

    def start_build(self, polls: int, fails: bool) -> None:
        """A new build of the latest definition: ``polls`` list calls report it unfinished."""
        self.polls_left, self.fails, self.message = polls, fails, ""
        # A first build is PENDING, then BUILDING; a rebuild reports BUILDING at once
        # (IndexMapper.calculateStatus: main index not on the latest version -> INITIAL_SYNC).
        self.status = PENDING if self.serving is None else BUILDING
        if polls == 0 and not self.held:
            self.finish()

    def finish(self) -> None:
        if self.fails:
            self.status = FAILED
            self.message = "Index build failed: the definition could not be applied (fake failure)"
        else:
            self.status = READY
            self.serving = copy.deepcopy(self.latest_definition)
        self.polls_left = 0

    def poll(self) -> dict[str, Any]:
        """The ``$listSearchIndexes`` document; each poll brings a build one step closer."""
        status = self.status
        if not self.held and self.status in (PENDING, BUILDING):
            if self.polls_left > 0:
                self.polls_left -= 1
                self.status = BUILDING
            else:
                self.finish()
                status = self.status
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "status": status,
            "queryable": self.queryable,
            "latestDefinitionVersion": {"version": self.version, "createdAt": self.created_at},
            "latestDefinition": copy.deepcopy(self.latest_definition),
            "statusDetail": [
                {"hostname": "fake-mongot", "status": status, "queryable": self.queryable, "message": self.message}
            ],
        }

    def check_queryable(self) -> dict[str, Any]:
        """The definition a query runs on; mongot refuses queries before the first build."""
        if self.serving is None:
            state = _INTERNAL_STATE.get(self.status, "INITIAL_SYNC")
            # mongot's error reply has no code; mongod reports it as 8 (UnknownError).
            raise _fail(
                f"PlanExecutor error during aggregation :: caused by :: cannot query vector index "
                f"{self.latest_definition} while in state {state}",
                MONGOT_ERROR,
            )
        return self.serving


@dataclass(frozen=True)
class VectorSearchRequest:
    """One ``$vectorSearch`` the fake was asked to run (for assertions)."""

    collection: str
    index: str
    num_candidates: int | None
    limit: int
    exact: bool
    filter: dict[str, Any] | None


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


class AtlasSearch:
    """Search indexes, switches and counters of one fake Atlas database.

    Index lifecycle, as mongot reports it (``IndexMapper``): a new index is ``PENDING``
    then ``BUILDING`` with ``queryable: false``, and a query meanwhile fails with code 8
    "cannot query vector index ... while in state INITIAL_SYNC"; then ``READY``. After
    ``update_search_index`` it is ``BUILDING`` with ``queryable: true`` and the NEW
    ``latestDefinition``, while queries still run on the OLD definition; a failed build
    is ``FAILED`` (queryable only if an older definition still serves).

    Switches:

    - ``queryable_after``: how many ``list_search_indexes`` polls report a build (new or
      updated index) unfinished before it finishes. 0: builds finish at once.
    - ``hold(state)``: pin indexes in ``PENDING``/``BUILDING`` (builds stop progressing),
      or finish their build now as ``READY``/``FAILED``; ``release()`` lets them go on.
    - ``build_fails``: builds end ``FAILED``.
    - ``updates_fail``: ``update_search_index`` fails, as on Atlas Local (langchain-mongodb
      skips its index update test there).
    - ``search_enabled=False``: a plain mongod: search commands and stages fail with
      31082 (8.x); with ``server_version`` below 7.1, ``$listSearchIndexes`` answers an
      empty list instead and index commands fail with 115 (7.0) or 59 (older).
    - ``server_version``: the double also answers ``buildInfo``/``hello`` (wire 25 from
      8.0, with a client-level ``bulk_write``), so the store treats it as a real server.
    - ``errors``: an exception to raise from ``"list"``, ``"create"``, ``"update"`` or
      ``"query"`` (e.g. code 125 while mongot is unreachable, 13 without privileges).
    """

    def __init__(
        self,
        queryable_after: int = 0,
        search_enabled: bool = True,
        *,
        build_fails: bool = False,
        updates_fail: bool = False,
        server_version: str | None = None,
    ) -> None:
        self.queryable_after = queryable_after
        self.search_enabled = search_enabled
        self.build_fails = build_fails
        self.updates_fail = updates_fail
        self.server_version = server_version
        self.errors: dict[str, Exception] = {}
        self.indexes: dict[str, dict[str, _SearchIndex]] = {}
        self.aggregate_calls = 0
        self.vector_search_calls = 0
        self.list_search_indexes_calls = 0
        self.update_calls = 0
        self.requests: list[VectorSearchRequest] = []
        self.outputs: list[dict[str, Any]] = []  # every document a $vectorSearch pipeline returned
        # Set by ``fakes.mongos.Cluster``: for a sharded collection's name, (its documents' owning
        # shard, the orphan copies ``[(shard, document)]`` left on other shards); None: not sharded.
        self.sharded_view: Any = None

    # ------------------------------------------------------------ assertions and switches

    @property
    def num_candidates_asked(self) -> list[int | None]:
        return [r.num_candidates for r in self.requests]

    @property
    def limits_asked(self) -> list[int]:
        return [r.limit for r in self.requests]

    def _all(self, name: str | None = None) -> list[_SearchIndex]:
        return [i for by_name in self.indexes.values() for i in by_name.values() if name is None or i.name == name]

    def finish_builds(self) -> None:
        """Finish every build in progress now (as if enough time had passed)."""
        for index in self._all():
            index.held = False
            if index.status in (PENDING, BUILDING):
                index.finish()

    def hold(self, state: str, name: str | None = None) -> None:
        """Put indexes (all, or those named ``name``) in ``state`` and keep them there.

        ``PENDING``/``BUILDING``: the build stops progressing (an index that served
        before keeps serving its old definition). ``READY``/``FAILED``: the build in
        progress finishes now, successfully or not.
        """
        if state not in INDEX_STATES:
            raise ValueError(f"state must be one of {INDEX_STATES}")
        for index in self._all(name):
            if state in (PENDING, BUILDING):
                index.held, index.status = True, state
            else:
                index.held, index.fails = False, state == FAILED
                index.finish()

    def release(self) -> None:
        """Let held builds progress again (they finish on the next poll)."""
        for index in self._all():
            if index.held:
                index.held = False
                index.polls_left = 0

    # ------------------------------------------------------------ index management

    @property
    def _old_server(self) -> bool:
        return self.server_version is not None and _version_tuple(self.server_version) < (7, 1)

    def _check_enabled(
        self, what: str = "Atlas Search Database Commands and the $listSearchIndexes aggregation stage"
    ) -> None:
        if self.search_enabled:
            return
        if self._old_server:
            assert self.server_version is not None
            if _version_tuple(self.server_version) >= (7, 0):
                raise _fail("Search index commands are only supported with Atlas.", COMMAND_NOT_SUPPORTED)
            raise _fail("no such command: 'createSearchIndexes'", COMMAND_NOT_FOUND)
        raise _fail(
            f"Using {what} requires additional configuration. "
            "Please connect to Atlas or an AtlasCLI local deployment to enable.",
            SEARCH_NOT_ENABLED,
        )

    def _raise_if_set(self, command: str) -> None:
        exc = self.errors.get(command)
        if exc is not None:
            raise exc

    def create_index(self, db: Any, coll_name: str, model: SearchIndexModel | Mapping[str, Any]) -> str:
        self._raise_if_set("create")
        self._check_enabled()
        doc = dict(model.document if isinstance(model, SearchIndexModel) else SearchIndexModel(**model).document)
        name = str(doc.get("name", "default"))
        type_ = str(doc.get("type", "search"))
        definition = copy.deepcopy(dict(doc["definition"]))
        if coll_name not in db.list_collection_names():
            raise _fail(f"Collection '{db.name}.{coll_name}' does not exist.", NAMESPACE_NOT_FOUND)
        from . import atlas_native  # autoEmbed fields and search mappings (issue 14)

        if atlas_native.check_definition(self, type_, definition):
            pass
        elif type_ == "vectorSearch":
            _check_definition(definition)
        elif type_ != "search":
            raise _fail(f"Invalid search index type {type_!r}", BAD_VALUE)
        by_name = self.indexes.setdefault(coll_name, {})
        if name in by_name:
            raise _fail(f"Index {name} already exists.", INDEX_ALREADY_EXISTS)
        index = _SearchIndex(
            id=str(ObjectId()),
            name=name,
            type=type_,
            latest_definition=definition,
            serving=None,
            status=PENDING,
            polls_left=0,
        )
        by_name[name] = index
        index.start_build(self.queryable_after, self.build_fails)
        return name

    def list_indexes(self, coll_name: str, name: str | None = None) -> list[dict[str, Any]]:
        self.list_search_indexes_calls += 1  # every attempt, failed or not
        self._raise_if_set("list")
        if not self.search_enabled and self._old_server:
            return []  # before 7.1, $listSearchIndexes off Atlas "returns an empty result"
        self._check_enabled()
        by_name = self.indexes.get(coll_name, {})
        return [index.poll() for index in by_name.values() if name is None or index.name == name]

    def update_index(self, db: Any, coll_name: str, name: str, definition: Mapping[str, Any]) -> None:
        self._raise_if_set("update")
        self._check_enabled()
        self.update_calls += 1
        if self.updates_fail:
            raise _fail(f"Failed to update search index {name!r} (fake: updates fail, as on Atlas Local)", 8)
        if coll_name not in db.list_collection_names():
            return  # pymongo swallows NamespaceNotFound for updateSearchIndex
        index = self.indexes.get(coll_name, {}).get(name)
        if index is None:
            raise _fail(f"Search index {name} not found", INDEX_NOT_FOUND)
        latest = copy.deepcopy(dict(definition))
        from . import atlas_native

        if not atlas_native.check_definition(self, index.type, latest) and index.type == "vectorSearch":
            _check_definition(latest)
        if index.type == "vectorSearch":
            atlas_native.check_update(index.latest_definition, latest, name)
        index.latest_definition = latest
        index.version += 1
        index.created_at = datetime.now(timezone.utc)
        index.start_build(self.queryable_after, self.build_fails)

    def drop_index(self, db: Any, coll_name: str, name: str) -> None:
        self._check_enabled()
        if coll_name not in db.list_collection_names():
            return  # pymongo swallows NamespaceNotFound for dropSearchIndex
        if self.indexes.get(coll_name, {}).pop(name, None) is None:
            raise _fail(f"Search index {name} not found", INDEX_NOT_FOUND)

    def forget_collection(self, coll_name: str) -> None:
        """Dropping a collection drops its search indexes."""
        self.indexes.pop(coll_name, None)

    # ------------------------------------------------------------ server commands

    @property
    def wire_version(self) -> int:
        assert self.server_version is not None
        major_minor = _version_tuple(self.server_version)[:2]
        return 25 if major_minor >= (8, 0) else 21 if major_minor >= (7, 0) else 17

    def command(self, name: Any) -> dict[str, Any]:
        """``buildInfo`` / ``hello`` of the pretend server (``server_version`` set)."""
        assert self.server_version is not None
        cmd = name if isinstance(name, str) else next(iter(name))
        if cmd == "buildInfo":
            return {"version": self.server_version, "ok": 1.0}
        if cmd in ("hello", "isMaster", "ismaster"):
            return {"isWritablePrimary": True, "maxWireVersion": self.wire_version, "ok": 1.0}
        if cmd == "ping":
            return {"ok": 1.0}
        raise _fail(f"no such command: '{cmd}'", COMMAND_NOT_FOUND)

    # ------------------------------------------------------------ aggregation

    def aggregate(self, db: Any, coll_name: str, pipeline: Sequence[Mapping[str, Any]], kwargs: Any) -> Any:
        """Results of a pipeline with ``$vectorSearch``, or None to let mongomock run it."""
        self.aggregate_calls += 1
        pipeline = list(pipeline)
        from . import atlas_native  # $rankFusion, $search, $rerank, autoEmbed queries (issue 14)

        native = atlas_native.aggregate(self, db, coll_name, pipeline, kwargs)
        if native is not None:
            return native
        for i, stage in enumerate(pipeline):
            if _mentions_vector_search(stage, top=i == 0):
                raise _fail("$vectorSearch is only valid as the first stage in a pipeline", NOT_FIRST_STAGE)
        if not pipeline or set(pipeline[0]) != {"$vectorSearch"}:
            return None
        self.vector_search_calls += 1
        self._raise_if_set("query")
        if not self.search_enabled and self._old_server:
            assert self.server_version is not None
            if _version_tuple(self.server_version) >= (7, 0):
                raise _fail("$vectorSearch stage is only allowed on MongoDB Atlas", STAGE_ONLY_ON_ATLAS)
            raise _fail("Unrecognized pipeline stage name: '$vectorSearch'", 40324)
        self._check_enabled("$search and $vectorSearch aggregation stages")
        hits = self._vector_search(db, coll_name, pipeline[0]["$vectorSearch"])
        rest = _replace_score_meta(pipeline[1:])
        with server_semantics():
            run: Any = mongomock.aggregate.process_pipeline
            docs = list(run(hits, db, rest, kwargs.get("session")))
        out = [{k: v for k, v in doc.items() if k != SCORE_FIELD} for doc in docs]
        self.outputs.extend(copy.deepcopy(out))
        return out

    def _vector_search(self, db: Any, coll_name: str, spec: Any) -> list[dict[str, Any]]:
        if not isinstance(spec, Mapping):
            raise _fail("$vectorSearch takes a document")
        unknown = set(spec) - STAGE_KEYS
        if unknown:
            raise _fail(f"$vectorSearch: unrecognized field(s) {sorted(unknown)}")
        for key in ("index", "path", "queryVector", "limit"):
            if key not in spec:
                raise _fail(f'$vectorSearch: "{key}" is required')
        exact = spec.get("exact", False)
        if not isinstance(exact, bool):
            raise _fail('$vectorSearch: "exact" must be a boolean')
        limit = _positive_int(spec, "limit")
        num_candidates: int | None = None
        if exact and "numCandidates" in spec:
            # ExactVectorSearchCriteria.fromBson
            raise _fail('$vectorSearch: "numCandidates" must be omitted when "exact" is set to true')
        if not exact:
            if "numCandidates" not in spec:
                raise _fail('$vectorSearch: "numCandidates" is required when "exact" is false or omitted')
            num_candidates = _positive_int(spec, "numCandidates")
            if num_candidates > MAX_NUM_CANDIDATES:
                raise _fail(f'$vectorSearch: "numCandidates" must be less than or equal to {MAX_NUM_CANDIDATES}')
            if limit > num_candidates:
                raise _fail('$vectorSearch: "limit" must be less than or equal to "numCandidates"')
        filt = spec.get("filter")
        if filt is not None and not isinstance(filt, Mapping):
            raise _fail('$vectorSearch: "filter" must be a document')
        self.requests.append(
            VectorSearchRequest(
                coll_name, str(spec["index"]), num_candidates, limit, exact, copy.deepcopy(dict(filt)) if filt else None
            )
        )

        index = self.indexes.get(coll_name, {}).get(spec["index"])
        if index is None or coll_name not in db.list_collection_names():
            return []  # Atlas: an unknown index (or collection) gives no results, not an error
        if index.type != "vectorSearch":
            raise _fail(f"$vectorSearch: index {index.name!r} is not a vectorSearch index")
        fields = index.check_queryable()["fields"]
        vector_fields = {f["path"]: f for f in fields if f["type"] == "vector"}
        filter_paths = {f["path"] for f in fields if f["type"] == "filter"}
        vector_field = vector_fields.get(spec["path"])
        if vector_field is None:
            raise _fail(f"$vectorSearch: Path '{spec['path']}' needs to be indexed as vector")
        dims = vector_field["numDimensions"]
        query = _as_vector(spec["queryVector"])
        if query is None:
            raise _fail('$vectorSearch: "queryVector" must be an array of numbers')
        if len(query) != dims:
            raise _fail(f"$vectorSearch: vector field is indexed with {dims} dimensions but queried with {len(query)}")
        if filt:
            _check_filter(filt, filter_paths)

        # Where each candidate lives: one group (None) on a replica set; behind the mongos double,
        # its owning shard, plus the orphan copies a migration left on other shards (``sharded_view``).
        view = self.sharded_view(coll_name) if self.sharded_view is not None else None
        placed: list[tuple[dict[str, Any], Any, bool]] = [
            (doc, view[0](doc) if view else None, True) for doc in db[coll_name].find(dict(filt or {}))
        ]
        if view:
            placed += [
                (copy.deepcopy(doc), shard, False)
                for shard, doc in view[1]
                if mongomock.filtering.filter_applies(dict(filt or {}), doc)
            ]
        docs, vectors, where = [], [], []
        for doc, shard, owned in placed:
            vec = _as_vector(_get_path(doc, spec["path"]))
            if vec is not None and len(vec) == dims:  # other documents are not in the index
                docs.append(doc)
                vectors.append(vec)
                where.append((shard, owned))
        scores, keep = _scores(np.asarray(query, dtype=np.float64), vectors, vector_field["similarity"])
        ranked = sorted(keep, key=lambda i: -scores[i])  # stable: ties in natural order
        # Each shard's mongot answers its own top ``limit`` (of its ``numCandidates``); the shard's
        # idLookup then drops orphans without topping up, and mongos merges by score.
        merged: list[int] = []
        for shard in dict.fromkeys(where[i][0] for i in ranked):
            local = [i for i in ranked if where[i][0] == shard]
            if num_candidates is not None and not exact:
                local = local[:num_candidates]
            merged += [i for i in local[:limit] if where[i][1]]
        ranked = sorted(merged, key=lambda i: -scores[i])
        out = []
        for i in ranked[:limit]:
            docs[i][SCORE_FIELD] = float(scores[i])
            out.append(docs[i])
        return out


# --------------------------------------------------------------------------- the evaluation's pieces


@contextlib.contextmanager
def server_semantics() -> Iterator[None]:
    """Run mongomock's aggregation with the server's answer for empty input.

    On MongoDB, ``$count`` and ``$group`` output no document when their input is
    empty (``$count`` docs: "If the input dataset is empty, $count doesn't return a
    result"); mongomock 4.3 outputs ``{n: 0}`` / one group. A store that reads
    ``hits[0]["n"]`` would pass on mongomock and fail on Atlas.
    """
    handlers = mongomock.aggregate._PIPELINE_HANDLERS
    saved = {name: handlers[name] for name in ("$count", "$group")}

    def empty_in_empty_out(handler: Any) -> Any:
        def run(in_collection: Any, database: Any, options: Any) -> Any:
            in_collection = list(in_collection)
            return [] if not in_collection else handler(in_collection, database, options)

        return run

    for name, handler in saved.items():
        handlers[name] = empty_in_empty_out(handler)
    try:
        yield
    finally:
        handlers.update(saved)


def _check_definition(definition: Mapping[str, Any]) -> None:
    fields = definition.get("fields")
    if not isinstance(fields, list) or not fields:
        raise _fail('vectorSearch index definition: "fields" must be a non-empty array', BAD_VALUE)
    paths: set[str] = set()
    for f in fields:
        if not isinstance(f, Mapping) or not isinstance(f.get("path"), str):
            raise _fail(f"vectorSearch index definition: invalid field {f!r}", BAD_VALUE)
        if f["path"] in paths:
            raise _fail(f"vectorSearch index definition: path {f['path']!r} is indexed twice", BAD_VALUE)
        paths.add(f["path"])
        if f.get("type") == "vector":
            dims = f.get("numDimensions")
            if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= MAX_DIMENSIONS:
                raise _fail(f"vectorSearch index definition: numDimensions must be 1..{MAX_DIMENSIONS}", BAD_VALUE)
            if f.get("similarity") not in SIMILARITIES:
                raise _fail(f"vectorSearch index definition: similarity must be one of {sorted(SIMILARITIES)}")
        elif f.get("type") != "filter":
            raise _fail(f"vectorSearch index definition: unsupported field type {f.get('type')!r}", BAD_VALUE)
    if not any(f["type"] == "vector" for f in fields):
        raise _fail("vectorSearch index definition: needs a field of type vector", BAD_VALUE)


def _mentions_vector_search(obj: Any, top: bool) -> bool:
    """``$vectorSearch`` anywhere but as the first stage itself (sub-pipelines included)."""
    if isinstance(obj, Mapping):
        return any((k == "$vectorSearch" and not top) or _mentions_vector_search(v, top=False) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_mentions_vector_search(v, top=False) for v in obj)
    return False


def _replace_score_meta(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        if dict(obj) == {"$meta": "vectorSearchScore"}:
            return "$" + SCORE_FIELD
        return {k: _replace_score_meta(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace_score_meta(v) for v in obj]
    return obj


def _positive_int(spec: Mapping[str, Any], key: str) -> int:
    value = spec[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _fail(f'$vectorSearch: "{key}" must be a positive integer, got {value!r}')
    return value


def _as_vector(value: Any) -> list[float] | None:
    if isinstance(value, Binary) and value.subtype == 9:
        value = list(value.as_vector().data)
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        return None
    return [float(x) for x in value]


def _get_path(doc: Mapping[str, Any], path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _scores(query: Any, vectors: list[list[float]], similarity: str) -> tuple[Any, list[int]]:
    """Atlas's normalised scores, and which documents the index holds."""
    if not vectors:
        return np.zeros(0), []
    m = np.asarray(vectors, dtype=np.float64)
    keep = list(range(len(vectors)))
    if similarity == "euclidean":
        return 1.0 / (1.0 + np.sum((m - query) ** 2, axis=1)), keep
    dots = m @ query
    if similarity == "dotProduct":
        # Lucene's DOT_PRODUCT scaling clips at 0 (vectors that are not unit length can go below -1).
        return np.maximum((1.0 + dots) / 2.0, 0.0), keep
    norms = np.linalg.norm(m, axis=1)
    qnorm = float(np.linalg.norm(query))
    # cosine is undefined for zero vectors: Atlas cannot index them; a zero query scores 0.5.
    keep = [i for i in keep if norms[i] > 0]
    cos = np.zeros_like(dots)
    np.divide(dots, norms * qnorm, out=cos, where=(norms * qnorm) > 0)
    return np.maximum((1.0 + np.clip(cos, -1.0, 1.0)) / 2.0, 0.0), keep


def _check_filter(filt: Mapping[str, Any], filter_paths: set[str]) -> None:
    for key, value in filt.items():
        if not isinstance(key, str):
            raise _fail(f"$vectorSearch filter: invalid field name {key!r}")
        if key in LOGICAL_OPERATORS:
            if not isinstance(value, list) or not value or not all(isinstance(v, Mapping) for v in value):
                raise _fail(f"$vectorSearch filter: {key} takes a non-empty array of documents")
            for sub in value:
                _check_filter(sub, filter_paths)
        elif key.startswith("$"):
            raise _fail(f"$vectorSearch filter: operator {key} is not supported")
        else:
            if key not in filter_paths:
                raise _fail(f"$vectorSearch filter: Path '{key}' needs to be indexed as filter")
            _check_condition(key, value)


def _check_condition(path: str, cond: Any) -> None:
    if isinstance(cond, Mapping) and cond and all(isinstance(k, str) and k.startswith("$") for k in cond):
        for op, operand in cond.items():
            if op not in FIELD_OPERATORS:
                raise _fail(f"$vectorSearch filter on '{path}': operator {op} is not supported")
            if op == "$not":
                if not (isinstance(operand, Mapping) and operand and all(str(k).startswith("$") for k in operand)):
                    raise _fail(f"$vectorSearch filter on '{path}': $not takes an operator document")
                _check_condition(path, operand)
            elif op in ("$in", "$nin"):
                _check_in(path, op, operand)
            elif op == "$exists":
                if not isinstance(operand, bool):
                    raise _fail(f"$vectorSearch filter on '{path}': $exists takes a boolean")
            else:
                _check_operand(path, operand)
    else:
        _check_operand(path, cond)


def _value_type(value: Any) -> str:
    """mongot's ``ValueType`` of an operand (``Value.fromBson``); bool is not a number."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "date"
    if isinstance(value, ObjectId):
        return "objectId"
    if isinstance(value, uuid.UUID) or (isinstance(value, Binary) and value.subtype == 4):
        return "uuid"
    if isinstance(value, Binary):
        raise _fail("$vectorSearch filter: binary value must be UUID subtype 4")
    what = "regular expression" if isinstance(value, (Regex, re.Pattern)) else type(value).__name__
    raise _fail(
        f"$vectorSearch filter: a {what} value cannot be filtered on "
        "(expected boolean, objectId, number, string, date, uuid, or null)"
    )


def _check_operand(path: str, value: Any) -> None:
    """One operand of $eq/$ne/ranges: a single value of mongot's types, never an array."""
    _value_type(value)


def _check_in(path: str, op: str, operand: Any) -> None:
    """mql ``InOperator``: a non-empty array of non-null values, all of one type."""
    if not isinstance(operand, list) or not operand:
        raise _fail(f"$vectorSearch filter on '{path}': {op} takes a non-empty array")
    types = {_value_type(v) for v in operand}
    if "null" in types:
        raise _fail(f"$vectorSearch filter on '{path}': {op} values cannot be null")
    if len(types) > 1:
        raise _fail(f"$vectorSearch filter on '{path}': {op} must have elements of the same type")


# --------------------------------------------------------------------------- sync wrappers


class AtlasDatabase:
    """A mongomock ``Database`` whose collections are ``AtlasCollection``s."""

    def __init__(self, database: Any, atlas: AtlasSearch) -> None:
        self._db = database
        self._atlas = atlas

    @property
    def atlas(self) -> AtlasSearch:
        return self._atlas

    @property
    def delegate(self) -> Any:
        return self._db

    @property
    def mongomock_db(self) -> Any:
        """The mongomock ``Database`` underneath (to seed or inspect data directly)."""
        return self._db

    @property
    def client(self) -> Any:
        """mongomock's client, or (with ``server_version``) one that looks like a real server's."""
        if self._atlas.server_version is None:
            return self._db.client
        return AtlasClient(self._db.client, self._atlas)

    def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        if self._atlas.server_version is None:
            return self._db.command(command, *args, **kwargs)
        return self._atlas.command(command)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> AtlasCollection:
        return AtlasCollection(self._db.get_collection(name, *args, **kwargs), self)

    def __getitem__(self, name: str) -> AtlasCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._db, name)
        return AtlasCollection(value, self) if isinstance(value, mongomock.Collection) else value

    def create_collection(self, name: str, *args: Any, **kwargs: Any) -> AtlasCollection:
        return AtlasCollection(self._db.create_collection(name, *args, **kwargs), self)

    def drop_collection(self, name_or_collection: Any, *args: Any, **kwargs: Any) -> Any:
        name = name_or_collection if isinstance(name_or_collection, str) else name_or_collection.name
        self._atlas.forget_collection(name)
        return self._db.drop_collection(name, *args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AtlasDatabase):
            return bool(self._db == other._db)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._db)

    def __repr__(self) -> str:
        return f"AtlasDatabase({self._db!r})"


class AtlasCollection:
    """A mongomock ``Collection`` with ``$vectorSearch`` and the search-index methods."""

    def __init__(self, collection: Any, database: AtlasDatabase) -> None:
        self._coll = collection
        self._database = database

    @property
    def atlas(self) -> AtlasSearch:
        return self._database.atlas

    @property
    def database(self) -> AtlasDatabase:
        return self._database

    @property
    def delegate(self) -> Any:
        return self._coll

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._coll, name)
        return AtlasCollection(value, self._database) if isinstance(value, mongomock.Collection) else value

    def with_options(self, *args: Any, **kwargs: Any) -> AtlasCollection:
        return AtlasCollection(self._coll.with_options(*args, **kwargs), self._database)

    def aggregate(self, pipeline: Sequence[Mapping[str, Any]], *args: Any, **kwargs: Any) -> Any:
        docs = self.atlas.aggregate(self._coll.database, self._coll.name, pipeline, kwargs)
        if docs is None:
            with server_semantics():
                return ListCursor(self._coll.aggregate(pipeline, *args, **kwargs))
        return ListCursor(docs)

    def list_search_indexes(self, name: str | None = None, *args: Any, **kwargs: Any) -> ListCursor:
        return ListCursor(self.atlas.list_indexes(self._coll.name, name))

    def create_search_index(self, model: SearchIndexModel | Mapping[str, Any], *args: Any, **kwargs: Any) -> str:
        return self.atlas.create_index(self._coll.database, self._coll.name, model)

    def create_search_indexes(self, models: Sequence[SearchIndexModel], *args: Any, **kwargs: Any) -> list[str]:
        return [self.create_search_index(m) for m in models]

    def update_search_index(self, name: str, definition: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        self.atlas.update_index(self._coll.database, self._coll.name, name, definition)

    def drop_search_index(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.atlas.drop_index(self._coll.database, self._coll.name, name)

    def drop(self, *args: Any, **kwargs: Any) -> None:
        self.atlas.forget_collection(self._coll.name)
        self._coll.drop(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AtlasCollection):
            return bool(self._coll == other._coll)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._coll)

    def __repr__(self) -> str:
        return f"AtlasCollection({self._coll!r})"


def _client_bulk_write(client: Any, atlas: AtlasSearch, models: Sequence[Any], verbose: bool) -> Any:
    """MongoClient.bulk_write on mongomock: each model on its ``db.coll``, unordered."""
    if atlas.wire_version < 25:
        raise InvalidOperation("MongoClient.bulk_write requires MongoDB server version 8.0+ (wire version 25)")
    errors: list[dict[str, Any]] = []
    deleted: dict[int, Any] = {}
    total = 0
    for i, model in enumerate(models):
        db_name, _, coll_name = str(model._namespace).partition(".")
        try:
            res = client[db_name][coll_name].bulk_write([model], ordered=True)
        except mongomock.BulkWriteError as exc:
            for err in exc.details.get("writeErrors", []):
                errors.append({"idx": i, "code": err.get("code", 2), "errmsg": err.get("errmsg", str(exc))})
            continue
        if res.deleted_count or type(model).__name__.startswith("Delete"):
            deleted[i] = SimpleNamespace(deleted_count=res.deleted_count)
            total += res.deleted_count
    if errors:
        raise ClientBulkWriteException({"writeErrors": errors, "writeConcernErrors": [], "error": None}, verbose)
    return SimpleNamespace(
        deleted_count=total, delete_results=deleted if verbose else None, has_verbose_results=verbose
    )


class AtlasClient:
    """mongomock's client posing as a real one (``server_version`` set): answers a
    client-level ``bulk_write`` on 8.0+; everything else is delegated."""

    def __init__(self, client: Any, atlas: AtlasSearch) -> None:
        self._client = client
        self._atlas = atlas

    def bulk_write(self, models: Sequence[Any], *args: Any, verbose_results: bool = False, **kwargs: Any) -> Any:
        return _client_bulk_write(self._client, self._atlas, models, verbose_results)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def atlas_collection(db_name: str = "test", coll_name: str = "memories", **search_opts: Any) -> AtlasCollection:
    """A collection of a fresh fake Atlas database (``search_opts`` go to ``AtlasSearch``)."""
    client: Any = new_client()  # the embedded engine's mongomock: tz-aware, pymongo 4.11+'s calls
    return AtlasDatabase(client[db_name], AtlasSearch(**search_opts))[coll_name]


# --------------------------------------------------------------------------- async wrappers


def _is_async_mock_collection(value: Any) -> bool:
    from pymongo_async_mock import AsyncMongoMockCollection

    return isinstance(value, AsyncMongoMockCollection)


class AsyncAtlasDatabase:
    """A ``pymongo_async_mock`` database whose collections are ``AsyncAtlasCollection``s."""

    def __init__(self, database: Any, atlas: AtlasSearch) -> None:
        self._db = database  # pymongo_async_mock's AsyncMongoMockDatabase
        self._atlas = atlas

    @property
    def atlas(self) -> AtlasSearch:
        return self._atlas

    @property
    def delegate(self) -> Any:
        return self._db

    @property
    def mongomock_db(self) -> Any:
        """The mongomock ``Database`` underneath (shared data; to seed or inspect directly)."""
        return self._db.delegate

    @property
    def client(self) -> Any:
        if self._atlas.server_version is None:
            return self._db.client
        return AsyncAtlasClient(self._db.delegate.client, self._atlas)

    async def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        if self._atlas.server_version is None:
            return await self._db.command(command, *args, **kwargs)
        return self._atlas.command(command)

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> AsyncAtlasCollection:
        return AsyncAtlasCollection(self._db.get_collection(name, *args, **kwargs), self)

    def __getitem__(self, name: str) -> AsyncAtlasCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._db, name)
        return AsyncAtlasCollection(value, self) if _is_async_mock_collection(value) else value

    async def create_collection(self, name: str, *args: Any, **kwargs: Any) -> AsyncAtlasCollection:
        await self._db.create_collection(name, *args, **kwargs)
        return self.get_collection(name)

    async def drop_collection(self, name_or_collection: Any, *args: Any, **kwargs: Any) -> Any:
        name = name_or_collection if isinstance(name_or_collection, str) else name_or_collection.name
        self._atlas.forget_collection(name)
        return await self._db.drop_collection(name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"AsyncAtlasDatabase({self._db.delegate!r})"


class AsyncAtlasCollection:
    """``pymongo_async_mock``'s collection with ``$vectorSearch`` and search-index coroutines.

    ``isinstance(coll, pymongo.asynchronous.collection.AsyncCollection)`` holds, as for
    the wrapped collection.
    """

    def __init__(self, collection: Any, database: AsyncAtlasDatabase) -> None:
        self._coll = collection  # pymongo_async_mock's AsyncMongoMockCollection
        self._database = database

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return self._coll.__class__  # type: ignore[no-any-return]

    @property
    def atlas(self) -> AtlasSearch:
        return self._database.atlas

    @property
    def database(self) -> AsyncAtlasDatabase:
        return self._database

    @property
    def delegate(self) -> Any:
        return self._coll

    @property
    def _sync_db(self) -> Any:
        return self._database.mongomock_db

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._coll, name)
        return AsyncAtlasCollection(value, self._database) if _is_async_mock_collection(value) else value

    async def aggregate(self, pipeline: Sequence[Mapping[str, Any]], *args: Any, **kwargs: Any) -> Any:
        docs = self.atlas.aggregate(self._sync_db, self._coll.name, pipeline, kwargs)
        if docs is None:
            with server_semantics():  # pymongo_async_mock runs the pipeline inside this await
                return AsyncListCursor(await (await self._coll.aggregate(pipeline, *args, **kwargs)).to_list())
        return AsyncListCursor(docs)

    async def list_search_indexes(self, name: str | None = None, *args: Any, **kwargs: Any) -> AsyncListCursor:
        return AsyncListCursor(self.atlas.list_indexes(self._coll.name, name))

    async def create_search_index(self, model: SearchIndexModel | Mapping[str, Any], *args: Any, **kwargs: Any) -> str:
        return self.atlas.create_index(self._sync_db, self._coll.name, model)

    async def create_search_indexes(self, models: Sequence[SearchIndexModel], *args: Any, **kwargs: Any) -> list[str]:
        return [self.atlas.create_index(self._sync_db, self._coll.name, m) for m in models]

    async def update_search_index(self, name: str, definition: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        self.atlas.update_index(self._sync_db, self._coll.name, name, definition)

    async def drop_search_index(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.atlas.drop_index(self._sync_db, self._coll.name, name)

    async def drop(self, *args: Any, **kwargs: Any) -> None:
        self.atlas.forget_collection(self._coll.name)
        await self._coll.drop(*args, **kwargs)

    def __repr__(self) -> str:
        return f"AsyncAtlasCollection({self._coll.name!r})"


class AsyncAtlasClient:
    """The async twin of ``AtlasClient`` (on the mongomock client underneath)."""

    def __init__(self, client: Any, atlas: AtlasSearch) -> None:
        self._client = client  # the sync mongomock client: the data is shared
        self._atlas = atlas

    async def bulk_write(self, models: Sequence[Any], *args: Any, verbose_results: bool = False, **kwargs: Any) -> Any:
        return _client_bulk_write(self._client, self._atlas, models, verbose_results)


def async_atlas_collection(
    db_name: str = "test", coll_name: str = "memories", **search_opts: Any
) -> AsyncAtlasCollection:
    """A collection of a fresh fake async Atlas database (``search_opts`` go to ``AtlasSearch``)."""
    from pymongo_async_mock import AsyncMongoMockClient

    client = AsyncMongoMockClient(mock_mongo_client=new_client())
    return AsyncAtlasDatabase(client[db_name], AtlasSearch(**search_opts))[coll_name]
