"""The setup plan: B-tree and TTL indexes, the vector (and hybrid's text) search index, the backfill of
vector documents from an older index config; behind mongos, the shard-key checks and the opt-in ``shard_plan``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from pymongo.errors import OperationFailure

from mongostore.config import IndexSettings
from mongostore.core import queries as q
from mongostore.core import retrieval as r
from mongostore.core.codec import extract_texts, text_hash
from mongostore.core.plan.context import LARGE_BATCH, Plan
from mongostore.core.plan.paths import RANK_FUSION_VERSION, refuse_off_atlas
from mongostore.core.plan.probe import no_search_reason
from mongostore.core.steps import (
    Capabilities,
    CreateIndexes,
    DisableVectorSearch,
    EnsureCollection,
    Find,
    ListSearchIndexes,
    Probe,
    PutSearchIndex,
    ServerInfo,
    ShardCollection,
    ShardKeys,
    Sleep,
    Write,
    WriteOutcome,
)
from mongostore.errors import ConfigurationError, VectorIndexError

logger = logging.getLogger("mongostore")

INDEX_ALREADY_EXISTS = 68
INDEX_CONFLICT_CODES = frozenset({85, 86})  # an index of that name exists with other options / keys
CANNOT_SHARD_CODES = frozenset({72})  # InvalidOptions: e.g. a unique index the key does not prefix
ITEMS_PER_READ = 1000  # the backfill's
RERANK_VERSION = (8, 3)


def _fields(defn: dict[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    """A search index definition's fields of one ``type`` (``vector``, ``filter``, ``autoEmbed``)."""
    return [f for f in (defn or {}).get("fields") or () if isinstance(f, dict) and f.get("type") == kind]


def _definition_key(defn: dict[str, Any] | None) -> tuple[Any, ...]:
    """What decides whether a vector index definition is the wanted one: vector, filter, autoEmbed fields."""
    return (
        [(f.get("path"), f.get("numDimensions"), f.get("similarity")) for f in _fields(defn, "vector")],
        sorted(f.get("path") for f in _fields(defn, "filter")),
        [(f.get("path"), f.get("model"), f.get("numDimensions")) for f in _fields(defn, "autoEmbed")],
    )


def added_filter_fields(existing: dict[str, Any] | None, wanted: dict[str, Any]) -> list[str]:
    """The filter field names of ``wanted`` (``value.<field>`` paths) that the existing definition lacks."""
    added = set(_definition_key(wanted)[1]) - set(_definition_key(existing)[1])
    return sorted(p[len("value.") :] for p in added if p.startswith("value."))


def auto_embed_change(name: str, existing: dict[str, Any], wanted: dict[str, Any]) -> VectorIndexError | None:
    """The error for an update that would change an automated-embedding field (None: it may
    run): mongot never updates ``autoEmbed`` fields (``AutoEmbeddingIndexValidator``)."""
    before, after = _definition_key(existing)[2], _definition_key(wanted)[2]
    # (None before: a vector index may become an automated-embedding one; the server says if not.)
    if not before or before == after:
        return None
    return VectorIndexError(
        f"vector search index {name!r} would have to change its automated embedding (autoEmbed) field "
        f"({_fields(existing, 'autoEmbed')} -> {_fields(wanted, 'autoEmbed') or 'none'}); MongoDB never updates "
        "autoEmbed fields in place, on Atlas or anywhere else: drop the index and let setup() create it again "
        f"(vectors_collection.drop_search_index({name!r}), then store.setup(); searches fail until it is built), "
        "or set index_name to a new name to build the new index next to the old one"
    )


def _recreate_advice(name: str) -> str:
    return (
        f"drop it and let setup() create it again: vectors_collection.drop_search_index({name!r}), "
        "then store.setup() (searches rank locally while it builds), or change index_name to build a new "
        "index next to the old one"
    )


def setup_plan(index: IndexSettings | None) -> Plan[None]:
    """Create B-tree and TTL indexes, and the vector index when the server has search.

    Behind mongos (``Capabilities.sharded``) it first refuses a shard key the store cannot target (``cluster_checks``),
    creates ``path_key`` non-unique, and never shards a collection itself (docs/scaling.md).
    """
    server: Capabilities = yield ServerInfo()
    specs = q.item_indexes(sharded=server.sharded)
    if server.sharded:
        yield from cluster_checks(with_vectors=index is not None)
        yield from _path_key_on_cluster(specs[0])
        specs = specs[1:]
    yield CreateIndexes("items", tuple(specs))
    if index is None:
        return None
    yield CreateIndexes("vectors", tuple(q.vector_indexes()))
    yield from backfill_texts(index)  # vector documents from before a mode that reads their text
    if index.vector_search == "local":
        refuse_off_atlas(index, "vector_search='local' set in index config")
        logger.info("vector_search='local' set in index config: searches rank locally")
        return None
    wanted = r.vector_index_definition(index.dims, index.similarity, index.filter_fields, index.auto_embed)
    yield EnsureCollection("vectors")
    try:
        existing = yield ListSearchIndexes("vectors", index.index_name)
    except Exception as exc:
        if (yield from _rank_locally(exc, index, server)):
            return None
        raise
    yield from _mode_checks(index, server)  # the server answers search-index commands
    latest = (existing[0].get("latestDefinition") or {}) if existing else None
    if not (yield from _create_or_update(index, latest, wanted, server)):
        return None
    yield from backfill_filter_fields(index, added_filter_fields(latest, wanted))  # before the index is ready
    yield from wait_until_ready(
        index.index_name,
        "vector search index",
        lambda d: _definition_key(d) == _definition_key(wanted),
        index.setup_timeout,
    )
    yield Probe(index.index_name, refresh=True)  # searches use the index from now on
    return None


def shard_verdicts(with_vectors: bool) -> Plan[dict[q.Role, tuple[Any, str, str]]]:
    """``{role: (key, verdict, advice)}`` of the store's collections, from ``config.collections``."""
    keys = yield ShardKeys()
    return {
        role: (key, *q.shard_key_verdict(role, key)) for role, key in keys.items() if role == "items" or with_vectors
    }


def cluster_checks(with_vectors: bool) -> Plan[dict[q.Role, tuple[Any, str, str]]]:
    """Behind mongos: refuse a shard key the store cannot target, with the command that fixes
    it; log the others' verdicts. Returns ``shard_verdicts``, or ``{}`` (with a warning) for a
    cluster whose catalog cannot be read (no privilege on ``config``)."""
    try:
        verdicts: dict[q.Role, tuple[Any, str, str]] = yield from shard_verdicts(with_vectors)
    except OperationFailure as exc:
        logger.warning("could not read the shard keys from config.collections (%s): not checked", exc)
        return {}
    for role, (key, verdict, advice) in verdicts.items():
        if verdict == "unsupported":
            raise ConfigurationError(f"the {role} collection is sharded on {key}: {advice}")
        logger.info("sharded cluster: %s collection %s (%s): %s", role, key or "unsharded", verdict, advice)
    return verdicts


def shard_plan(with_vectors: bool, hashed: bool = False) -> Plan[dict[str, dict[str, Any]]]:
    """``shard_collections()``, behind mongos: shard the unsharded collections on the recommended keys
    (or hashed ones); returns ``{role: key}`` of those it sharded. Run ``setup()`` first: the ranged
    vectors key needs the ``item_id`` index it creates."""
    server: Capabilities = yield ServerInfo()
    if not server.sharded:
        raise ConfigurationError(
            "shard_collections() needs a sharded cluster: this server is not mongos (hello has no msg: 'isdbgrid')"
        )
    verdicts = yield from cluster_checks(with_vectors)
    if not verdicts:
        raise ConfigurationError(
            "could not read the collections' shard keys from config.collections: shard them yourself "
            "(docs/scaling.md has the commands)"
        )
    done: dict[str, dict[str, Any]] = {}
    for role, (_key, verdict, _advice) in verdicts.items():
        if verdict != "unsharded":
            continue
        field = q.KEY_FIELD[role]
        key = {field: "hashed" if hashed else 1}
        if hashed:  # mongod refuses to hash a collection that holds documents without this index (code 72)
            yield from _ensure_index(role, q.hashed_index(field))
        try:
            yield ShardCollection(role, key)
        except OperationFailure as exc:
            if exc.code not in CANNOT_SHARD_CODES:
                raise
            raise ConfigurationError(
                f"could not shard the {role} collection on {key}: {exc}. {_shard_advice(exc)}"
            ) from exc
        logger.info("sharded the %s collection on %s", role, key)
        done[role] = key
    return done


def _shard_advice(exc: OperationFailure) -> str:
    """What to do about a ``shardCollection`` refused with code 72 (InvalidOptions), from its message:
    an incompatible unique index (the unique ``path_key`` of a store set up on a replica set), or no
    index that supports the key (``shard_key_util.cpp`` words both; the others are said as they are)."""
    message = str((exc.details or {}).get("errmsg") or exc)
    if "unique index" in message or "Uniqueness" in message:
        return (
            "A store set up before on a replica set has a unique path_key: drop it "
            "(db.<items>.dropIndex('path_key')), run setup() through mongos, then shard_collections() again "
            "(docs/scaling.md)"
        )
    if "create an index" in message:
        return (
            "The collection holds documents and has no index that supports the key: run setup() first (it "
            "creates the item_id index), or create the key's index, then shard_collections() again (docs/scaling.md)"
        )
    return "See docs/scaling.md for the commands to run by hand"


def _ensure_index(role: q.Role, spec: q.IndexSpec) -> Plan[None]:
    """Create one index; an equivalent one under another name (85/86) is as good."""
    try:
        yield CreateIndexes(role, (spec,))
    except OperationFailure as exc:
        if exc.code not in INDEX_CONFLICT_CODES:
            raise


def _path_key_on_cluster(spec: q.IndexSpec) -> Plan[None]:
    """``path_key`` behind mongos: non-unique. A unique one from before (possible only while the
    items collection is unsharded) is left, with the migration in the log."""
    try:
        yield CreateIndexes("items", (spec,))
    except OperationFailure as exc:
        if exc.code not in INDEX_CONFLICT_CODES:
            raise
        logger.warning(
            "the items collection keeps its unique index %r from before (%s); to shard it, drop that index first "
            "(db.<items>.dropIndex(%r)), run setup() again (it creates it non-unique), then shardCollection "
            "(docs/scaling.md, 'Migrating a deployment that has the unique index')",
            spec.name,
            exc,
            spec.name,
        )


def _rank_locally(exc: Exception, index: IndexSettings, server: Capabilities) -> Plan[bool]:
    """When ``exc`` says the server has no search (never with ``vector_search='atlas'``): searches
    rank locally, a mode that cannot fails here. Returns whether it did (else the caller raises)."""
    why = None if index.vector_search == "atlas" else no_search_reason(exc, server.emulated)
    if why is None:
        return False
    refuse_off_atlas(index, why)
    logger.info("no vector search on this server (%s): searches rank locally", why)
    yield DisableVectorSearch(why)
    return True


def _create_or_update(
    index: IndexSettings, latest: dict[str, Any] | None, wanted: dict[str, Any], server: Capabilities
) -> Plan[bool]:
    """Create the vector index (``latest`` None), or update it when its definition changed;
    False when the server turned out to have no search (searches rank locally)."""
    if latest is not None and _definition_key(latest) == _definition_key(wanted):
        return True
    refused = auto_embed_change(index.index_name, latest, wanted) if latest is not None else None
    if refused is not None:  # before any I/O: mongot never updates autoEmbed fields
        raise refused
    try:
        if latest is None:
            logger.info("creating vector search index %r", index.index_name)
        else:
            logger.info("updating vector search index %r (dims, similarity or filters changed)", index.index_name)
        yield PutSearchIndex("vectors", index.index_name, wanted, update=latest is not None)
    except Exception as exc:
        if latest is None and index.auto_embed is not None and isinstance(exc, OperationFailure):
            raise VectorIndexError(
                f"automated embedding (autoEmbed, model {index.auto_embed.model}) is not available on this server: "
                f"{exc}. It needs MongoDB Atlas, or MongoDB 8.3+ with mongot and Voyage AI keys"
            ) from exc
        # e.g. 115/59 from a pre-7.1 server whose empty index list told nothing
        if (yield from _rank_locally(exc, index, server)):
            return False
        if not isinstance(exc, OperationFailure):
            raise
        if exc.code == INDEX_ALREADY_EXISTS:
            return True  # another process created it at the same moment: wait for it like ours
        if latest is not None:
            raise VectorIndexError(
                f"could not update vector search index {index.index_name!r} ({exc}); "
                f"Atlas Local may not support updating it: {_recreate_advice(index.index_name)}"
            ) from exc
        raise
    return True


def _mode_checks(index: IndexSettings, server: Capabilities) -> Plan[None]:
    """On a server with search: refuse reranking before 8.3; create (or update) the hybrid mode's ``$search`` index
    next to the vector index and wait until it is ``READY`` (before 8.0 hybrid searches fuse locally)."""
    if index.rerank is not None:
        if not server.at_least(RERANK_VERSION):
            raise ConfigurationError(
                f"reranking (index['rerank'], $rerank) needs MongoDB 8.3+ on Atlas; this server is "
                f"{server.server_version}"
            )
        # setup() cannot see the project's Native Reranking setting, nor tell Atlas from a
        # self-managed 8.3 (which has no $rerank): the first reranked search reports either.
        logger.info(
            "reranking with %s: this server has search (MongoDB %s); whether $rerank runs (Atlas with Native "
            "Reranking enabled in the project) is not visible to setup(): the first reranked search reports it",
            index.rerank.model,
            server.server_version,
        )
    hybrid = index.hybrid
    if hybrid is None:
        return
    if not server.at_least(RANK_FUSION_VERSION):
        logger.info("no $rankFusion before MongoDB 8.0 (%s): hybrid searches fuse locally", server.server_version)
        return
    wanted = r.text_index_definition()  # on the vectors collection setup_plan made
    found = yield ListSearchIndexes("vectors", hybrid.index_name)
    if not found or (found[0].get("latestDefinition") or {}) != wanted:
        logger.info("%s search index %r for hybrid search", "updating" if found else "creating", hybrid.index_name)
        yield PutSearchIndex("vectors", hybrid.index_name, wanted, type="search", update=bool(found))
    yield from wait_until_ready(hybrid.index_name, "search index", lambda d: d == wanted, index.setup_timeout)


def wait_until_ready(name: str, what: str, matches: Callable[[dict[str, Any]], bool], timeout: float) -> Plan[None]:
    """Poll a search index until it is ``READY`` on the wanted definition (``matches``), for at most
    ``timeout`` seconds: during a rebuild mongot reports ``queryable: true`` and the new
    ``latestDefinition`` while the old one still serves, so only ``READY`` counts."""
    start = time.monotonic()
    delay = 0.2
    while True:
        found = yield ListSearchIndexes("vectors", name)
        doc = found[0] if found else {}
        status = str(doc.get("status", "MISSING"))
        queryable = doc.get("queryable")
        if status == "FAILED":
            serving = " (the previous definition still serves queries)" if queryable else ""
            details = doc.get("statusDetail") or ()
            message = "; ".join(str(d["message"]) for d in details if isinstance(d, dict) and d.get("message"))
            raise VectorIndexError(
                f"{what} {name!r} failed to build{serving}: {message or status}; "
                f"fix the cause, then {_recreate_advice(name)}"
            )
        if status == "READY" and matches(doc.get("latestDefinition") or {}):
            logger.info("%s %r is ready", what, name)
            return None
        waited = time.monotonic() - start
        if waited >= timeout:
            raise VectorIndexError(
                f"{what} {name!r} not ready on the wanted definition after "
                f"{timeout:.0f}s (status {status}, queryable {queryable}); "
                "raise index['setup_timeout'] or check the search node's logs"
            )
        logger.info("waiting for %s %r: status %s, queryable %s (%.0fs)", what, name, status, queryable, waited)
        yield Sleep(delay)
        delay = min(delay * 2, 2.0)


# --------------------------------------------------------------------------- backfill
# Rebuilt from the items: what vector documents written under an older index config lack (issue 28): ``text`` (read by
# ``$search``, ``$rerank`` and automated embedding; a ``$rerank`` candidate without it fails the query) and
# ``value.<field>`` (the filter fields ``$vectorSearch`` pre-filters on). Not ``$lookup`` + ``$merge``: mongomock has
# no ``$merge``, and no aggregation expression does LangGraph's path extraction for ``$`` or ``{a,b}`` paths.


def text_of(index: IndexSettings, value: dict[str, Any], field: str, hash_: str) -> str | None:
    """The text a vector document of ``field`` was embedded from, if the item still holds it.

    ``field`` is a configured (or per-put) path, or ``path.i`` for the i-th of several texts
    (``extract_texts``' names); only a text whose ``text_hash`` matches is returned.
    """
    candidates = [field]
    base, _, last = field.rpartition(".")
    if base and last.isdigit():
        candidates.append(base)
    for path in candidates:
        try:
            texts = extract_texts(value, index.tokenized((path,)))
        except Exception:  # a path LangGraph cannot parse, or this value cannot be read along
            continue
        text = texts.get(field)
        if text is not None and text_hash(field, text) == hash_:
            return text
    return None


def _per_item(
    docs: list[dict[str, Any]],
    build: Callable[[str, dict[str, Any], list[dict[str, Any]]], list[q.WriteRequest]],
    what: str,
) -> Plan[int]:
    """Vector documents grouped by item; for each chunk of items, read their values and write what ``build(item id,
    value, its vector documents)`` asks (items gone are skipped). Returns how many documents were updated."""
    by_item: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_item.setdefault(str(doc["item_id"]), []).append(doc)
    ids = sorted(by_item)
    done = 0
    for start in range(0, len(ids), ITEMS_PER_READ):
        chunk = ids[start : start + ITEMS_PER_READ]
        items = yield Find("items", {"_id": {"$in": chunk}}, {"_id": 1, "value": 1}, batch_size=len(chunk))
        values = {d["_id"]: d.get("value") or {} for d in items}
        requests = [r for iid in chunk if iid in values for r in build(iid, values[iid], by_item[iid])]
        if not requests:
            continue
        outcome: WriteOutcome = yield Write(tuple(requests))
        if outcome.errors:
            logger.warning(
                "setup(): %d of %d %s updates failed: %s", len(outcome.errors), len(requests), what, outcome.errors[:3]
            )
        done += len(requests) - len(outcome.errors)
    return done


def backfill_texts(index: IndexSettings) -> Plan[int]:
    """Give vector documents without ``text`` the text their hash was made from, when a mode reads it
    (``stores_text``); returns how many were updated. Each update is conditional on the document still
    having no text and the same hash, so a put racing it wins."""
    if not index.stores_text:
        return 0
    fields = {"_id": 1, "item_id": 1, "field": 1, "text_hash": 1}
    missing = yield Find("vectors", {r.TEXT_PATH: {"$exists": False}}, fields, batch_size=LARGE_BATCH)

    def texts(iid: str, value: dict[str, Any], docs: list[dict[str, Any]]) -> list[q.WriteRequest]:
        requests = []
        for doc in docs:
            text = text_of(index, value, str(doc["field"]), str(doc["text_hash"]))
            if text is None:
                continue  # the item holds another text now: the vector is stale anyway
            update: dict[str, Any] = {"$set": {r.TEXT_PATH: text}}
            if index.auto_embed is not None:
                update["$unset"] = {"embedding": ""}  # Atlas embeds the text
            # item_id: the vectors' recommended shard key, which single-document writes carry
            flt = {"_id": doc["_id"], "item_id": iid, "text_hash": doc["text_hash"], r.TEXT_PATH: {"$exists": False}}
            requests.append(q.WriteRequest("vectors", "update_one", flt, update))
        return requests

    done: int = yield from _per_item(missing, texts, "vector text")
    if done:
        modes = (
            ("automated embedding", index.auto_embed),
            ("reranking", index.rerank),
            ("hybrid search", index.hybrid),
        )
        turned_on = " and ".join(name for name, on in modes if on is not None)
        logger.info("setup(): gave %d vector documents written before %s was turned on their text", done, turned_on)
    return done


def backfill_filter_fields(index: IndexSettings, added: Sequence[str]) -> Plan[int]:
    """Once filter fields were ``added``, rewrite every vector document's ``value`` (its copies of the
    declared filter fields) that differs from what a put would write now; returns how many were."""
    if not added:
        return 0
    vectors = yield Find("vectors", {}, {"_id": 1, "item_id": 1, "value": 1}, batch_size=LARGE_BATCH)

    def copies(iid: str, value: dict[str, Any], docs: list[dict[str, Any]]) -> list[q.WriteRequest]:
        wanted = q.filter_field_values(value, index.filter_fields)
        update = {"$set": {"value": wanted}} if wanted else {"$unset": {"value": ""}}
        return [
            q.WriteRequest("vectors", "update_one", {"_id": doc["_id"], "item_id": iid}, update)  # with the shard key
            for doc in docs
            if (doc.get("value") or {}) != wanted
        ]

    done: int = yield from _per_item(vectors, copies, "filter field")
    if done:
        logger.info(
            "setup(): copied the filter field(s) %s onto %d vector documents written before they were declared",
            ", ".join(added),
            done,
        )
    return done
