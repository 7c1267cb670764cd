# mongomock is untyped: its functions are called as Any.
# mypy: disable-error-code="no-untyped-call"
"""pymongo-shaped handles on a :class:`~mongostore.drivers.embedded.sqlite.LocalDB`: ``LocalCollection``,
``LocalDatabase``, ``LocalClient`` and the cursor of ``find``.

Reads: ``sqlquery.translate`` selects candidates with SQL on the indexed columns (the item by ``_id``,
a namespace prefix as the ``_id`` range, expiry, vectors by ``item_id``), mongomock's public
``filter_applies`` decides what SQL could not, and SQL sorts and pages when the sort's fields are
columns. ``aggregate`` runs its leading ``$match`` (and a ``$sort`` / ``$skip`` / ``$limit`` after it)
that way and the rest through mongomock's ``process_pipeline``. Writes: each request of a
``bulk_write`` reads the documents it matches, computes the new ones in Python (an update pipeline
through ``process_pipeline``, ``$set`` / ``$unset`` here, any other update operator on a scratch
mongomock collection) and writes back only those rows, in the thread's write transaction.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import bson
from bson.codec_options import CodecOptions
from bson.dbref import DBRef
from bson.objectid import ObjectId
from pymongo.errors import BulkWriteError, CollectionInvalid, DuplicateKeyError, OperationFailure, WriteError
from pymongo.results import BulkWriteResult, DeleteResult, InsertManyResult, InsertOneResult, UpdateResult

from mongostore.drivers.backend import Backend
from mongostore.drivers.embedded import sqlquery as sq
from mongostore.drivers.embedded.sqlite import LocalDB, Table, _Thread, count_nonplain, log_change

CODEC: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=timezone.utc)
#: The methods that return a cursor (the async face wraps them).
CURSORS = frozenset({"find", "aggregate", "list_indexes"})
MAX_BSON_SIZE = 16 * 1024 * 1024
ATLAS_STAGES = frozenset({"$vectorSearch", "$search", "$searchMeta", "$rankFusion", "$scoreFusion", "$rerank"})
DUPLICATE_KEY, IMMUTABLE_FIELD, TOO_LARGE, BAD_VALUE = 11000, 66, 10334, 2
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_T = TypeVar("_T")
_EMPTY_BSON = bson.encode({})
_BATCH = 1000  # rows decoded at once


# mongomock evaluates what SQL cannot (its public functions); imported on first use: it costs a quarter
# of a second, which a get, a put or a listing never pays.


_FALLBACK = object()


def _matches(filt: Any, doc: Any) -> bool:
    """Does ``doc`` match the residual filter? Two shapes are answered here, as MongoDB answers them:
    ``{f: {"$exists": b}}`` on a top-level field, and equalities with strings on fields reached through
    sub-documents (``{"value.kind": "k1"}``: the value, or an element of an array holding it, as the
    vectors' ``ns_prefixes``); anything else, or an array on the way, by mongomock."""
    if len(filt) == 1:
        ((name, spec),) = filt.items()
        if isinstance(spec, dict) and len(spec) == 1 and type(spec.get("$exists")) is bool and "." not in name:
            return (name in doc) is spec["$exists"]
    found = True
    for name, spec in filt.items():
        if type(spec) is not str or name.startswith("$"):
            found = False
            break
        got = _string_equal(doc, name, spec)
        if got is _FALLBACK:
            found = False
            break
        if not got:
            return False
    if found:
        return True
    from mongomock import filtering

    return bool(filtering.filter_applies(filt, doc))


def _string_equal(doc: Any, path: str, want: str) -> Any:
    """``{path: want}`` on ``doc`` (True / False), or ``_FALLBACK`` where an array lies on the way."""
    value = _through(doc, path.split("."))
    if value is _FALLBACK:
        return _FALLBACK
    if type(value) is list:
        return any(type(v) is str and v == want for v in value)
    return type(value) is str and value == want


def _through(doc: Any, parts: Sequence[str]) -> Any:
    """The value at a dotted path through sub-documents (None where it is missing), or ``_FALLBACK`` where
    an array lies on the way (MongoDB maps the rest of the path over its elements: mongomock decides)."""
    value = doc
    for part in parts:
        if type(value) is list:
            return _FALLBACK
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _sort_key(name: str, doc: Any) -> Any:
    from mongomock import filtering

    return filtering.resolve_sort_key(name, doc)


def _pipeline(docs: Any, database: Any, stages: Any, session: Any) -> Any:
    from mongomock.aggregate import process_pipeline

    return process_pipeline(docs, database, stages, session)


def decode(blob: bytes) -> dict[str, Any]:
    """A stored document as it was written: bson reads a sub-document holding ``$ref`` and ``$id`` as a
    ``DBRef``, which this turns back into the dict it was (MongoDB filters and updates see a document)."""
    doc = bson.decode(blob, codec_options=CODEC)
    return _undbref(doc) if b"$ref\x00" in blob else doc


def decode_many(blobs: Sequence[bytes | None]) -> list[dict[str, Any]]:
    """``decode`` of each (None: an empty document), in one call to bson's C decoder."""
    joined = b"".join(b or _EMPTY_BSON for b in blobs)
    docs = bson.decode_all(joined, CODEC)
    return [_undbref(d) for d in docs] if b"$ref\x00" in joined else docs


def _undbref(value: Any) -> Any:
    if isinstance(value, DBRef):
        return {k: _undbref(v) for k, v in value.as_doc().items()}
    if isinstance(value, dict):
        return {k: _undbref(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_undbref(v) for v in value]
    return value


def _concatenated(state: _Thread, rest: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``inc`` documents of ``SELECT ... {rest}``, in no particular order, SQLite joining them into one
    BLOB: one row to fetch, one call to bson's decoder (10,000 rows: 15 -> 9 ms). Past SQLite's length
    limit (a billion bytes by default), row by row."""
    sql = f"SELECT CAST(group_concat(COALESCE(inc, ?), X'') AS BLOB) FROM (SELECT inc {rest})"
    try:
        (joined,) = state.conn.execute(sql, [_EMPTY_BSON, *params]).fetchone()
    except sqlite3.DataError:  # SQLITE_TOOBIG
        return decode_many([blob for (blob,) in state.conn.execute(f"SELECT inc {rest}", params)])
    return decode_many([joined]) if joined else []


def _id_key(value: Any) -> Any:
    """The ``id`` column's value: the plain value, else a BLOB above every date that only it equals."""
    if isinstance(value, (str, datetime)):
        return sq.column_value(value)[0]
    return b"\x7f" + bson.encode({"": value})


def _from_id(key: Any) -> Any:
    """The ``_id`` an ``id`` column value stands for."""
    if isinstance(key, bytes) and key[:1] == b"\x7f":
        return bson.decode(key[1:], codec_options=CODEC)[""]
    return _from_column(key)


def _from_column(value: Any) -> Any:
    """A plain column value back to what the document holds."""
    if isinstance(value, bytes) and value[:1] == sq.DATE_TAG:
        ms = int.from_bytes(value[1:], "big") - (1 << 63)
        return _EPOCH + timedelta(milliseconds=ms)
    return value


class _Failure(Exception):
    """A request's own failure: reported for it alone (its ``code``, as MongoDB's)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- rows


def _included(table: Table, doc: Mapping[str, Any]) -> bytes | None:
    """The ``inc`` column: ``_id`` and the included top-level fields the document has, as BSON (a covered
    read decodes it into the document it returns, nothing more to build)."""
    if not table.include:
        return None
    return bson.encode({"_id": doc.get("_id"), **{f: doc[f] for f in table.include if f in doc}}, codec_options=CODEC)


def _row(table: Table, doc: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    """The row's values (id, doc, np, inc, then each column in ``table.columns`` order) and its not-plain fields."""
    blob = bson.encode(doc, codec_options=CODEC)
    if len(blob) > MAX_BSON_SIZE:
        raise _Failure(TOO_LARGE, f"document {doc.get('_id')!r} is {len(blob)} bytes, over 16 MiB (BSONObjectTooLarge)")
    nonplain = [] if isinstance(doc.get("_id"), (str, datetime)) else ["_id"]
    values: list[Any] = [_id_key(doc.get("_id")), blob, None, _included(table, doc)]
    for fld in table.columns:
        if fld == "_id":
            continue
        value, plain = sq.plain_at(doc, fld)
        values.append(value)
        if not plain:
            nonplain.append(fld)
    if nonplain:
        values[2] = json.dumps(nonplain)
    return values, nonplain


def _column_names(table: Table) -> list[str]:
    return ["id", "doc", "np", "inc", *(f'"{c}"' for f, c in table.columns.items() if f != "_id")]


# --------------------------------------------------------------------------- the recorder of bulk requests


class _Requests:
    """Receives pymongo's write models as pymongo's own bulk object does (``model._add_to_bulk(self)``:
    the one protocol both pymongo's ``Collection.bulk_write`` and mongomock read them through)."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, ...]] = []

    def add_insert(self, document: Any) -> None:
        if "_id" not in document:
            document["_id"] = ObjectId()
        self.ops.append(("insert", document))

    def add_update(self, selector: Any, update: Any, multi: bool, upsert: bool, **options: Any) -> None:
        self._check(options)
        self.ops.append(("update", selector, update, multi, upsert))

    def add_replace(self, selector: Any, replacement: Any, upsert: bool, **options: Any) -> None:
        self._check(options)
        self.ops.append(("replace", selector, replacement, upsert))

    def add_delete(self, selector: Any, limit: int, **options: Any) -> None:
        self._check(options)
        self.ops.append(("delete", selector, limit))

    @staticmethod
    def _check(options: Mapping[str, Any]) -> None:
        for name in ("collation", "array_filters", "hint", "sort"):
            if options.get(name) is not None:
                raise NotImplementedError(f"the local store's writes take no {name}=")


def requests_of(models: Iterable[Any]) -> list[tuple[Any, ...]]:
    rec = _Requests()
    for model in models:
        model._add_to_bulk(rec)
    return rec.ops


# --------------------------------------------------------------------------- the client, database, collections


class LocalClient:
    """What ``collection.database.client`` is for the local store: its databases, no server commands."""

    def __init__(self, engine: LocalDB) -> None:
        self.engine = engine

    def __getitem__(self, name: str) -> LocalDatabase:
        return self.get_database(name)

    def get_database(self, name: str | None = None, **_: Any) -> LocalDatabase:
        if name not in (None, self.engine.db_name):
            raise NotImplementedError(
                f"the local store file {self.engine.path} holds database {self.engine.db_name!r} only"
            )
        return LocalDatabase(self.engine)

    def close(self) -> None:
        """Nothing to close: connections belong to the engine (one per thread)."""

    def __repr__(self) -> str:
        return f"LocalClient({str(self.engine.path)!r})"


class LocalDatabase:
    """The ``database`` of a :class:`LocalCollection`."""

    def __init__(self, engine: LocalDB) -> None:
        self.engine = engine
        self.name = engine.db_name

    @property
    def client(self) -> LocalClient:
        return LocalClient(self.engine)

    def __getitem__(self, name: str) -> LocalCollection:
        return LocalCollection(self.engine, name)

    def get_collection(self, name: str, **_: Any) -> LocalCollection:
        return LocalCollection(self.engine, name)

    def list_collection_names(self, **_: Any) -> list[str]:
        with self.engine.reading() as state:
            return sorted(self.engine.tables(state))

    def create_collection(self, name: str, **_: Any) -> LocalCollection:
        with self.engine.writing() as state:
            if name in self.engine.tables(state):
                raise CollectionInvalid(f"collection {name} already exists")
            _create_table(state, self.engine, name)
        return LocalCollection(self.engine, name)

    def drop_collection(self, name: str) -> None:
        LocalCollection(self.engine, name).drop()

    def command(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the local store answers no server commands")

    def __repr__(self) -> str:
        return f"LocalDatabase({str(self.engine.path)!r})"


def _create_table(
    state: _Thread, engine: LocalDB, name: str, include: Sequence[str] = (), clustered: bool = True
) -> Table:
    conn = state.conn
    n = conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM _collections").fetchone()[0]
    tbl = f"c{n}"
    conn.execute(_table_sql(tbl, [], clustered))
    conn.execute(f'CREATE INDEX "{tbl}_np" ON "{tbl}" (np) WHERE np IS NOT NULL')
    conn.execute(
        "INSERT INTO _collections (name, tbl, include) VALUES (?, ?, ?)", (name, tbl, json.dumps(list(include)))
    )
    conn.execute("INSERT INTO _columns (collection, field, col) VALUES (?, '_id', 'id')", (name,))
    state.tables = None
    return engine.tables(state)[name]


def _table_sql(tbl: str, columns: Sequence[str], clustered: bool) -> str:
    """A collection's table, the document last, so that reading the other columns never reads through it.
    ``clustered``: the rows in ``_id`` order (``WITHOUT ROWID``), so that an ``_id`` range is contiguous;
    SQLite keeps at most about a quarter of a page of such a row in place and the rest on overflow pages,
    which suits documents well under that (items). Otherwise rows in a rowid table, ``_id`` in an index:
    a row up to a page stays in place (vectors, whose documents hold their embeddings: 2 KB at 384
    dimensions spilled onto a page of its own each, and the file was 2.7 times SqliteStore's)."""
    cols = "".join(f'"{c}", ' for c in columns)
    if clustered:
        return f'CREATE TABLE "{tbl}" (id PRIMARY KEY, np TEXT, inc BLOB, {cols}doc BLOB NOT NULL) WITHOUT ROWID'
    return f'CREATE TABLE "{tbl}" (id UNIQUE NOT NULL, np TEXT, inc BLOB, {cols}doc BLOB NOT NULL)'


def _sql_index(state: _Thread, table: Table, spec: Mapping[str, Any]) -> None:
    cols = ", ".join(f'"{table.columns[f]}"' + (" DESC" if d == -1 else "") for f, d in spec["key"])
    unique = "UNIQUE " if spec.get("unique") else ""
    state.conn.execute(f'CREATE {unique}INDEX "{spec["sql"]}" ON "{table.tbl}" ({cols})')


def _include(state: _Thread, engine: LocalDB, table: Table, include: Sequence[str]) -> Table:
    """Keep these top-level fields in ``inc`` too (for every document already there as well)."""
    wanted = tuple(dict.fromkeys([*table.include, *include]))
    conn = state.conn
    conn.execute("UPDATE _collections SET include = ? WHERE name = ?", (json.dumps(list(wanted)), table.name))
    widened = Table(table.name, table.tbl, wanted)
    rows = conn.execute(f'SELECT id, doc FROM "{table.tbl}"').fetchall()
    conn.executemany(
        f'UPDATE "{table.tbl}" SET inc = ? WHERE id = ?', [(_included(widened, decode(doc)), key) for key, doc in rows]
    )
    state.tables = None
    return engine.tables(state)[table.name]


def _index_name(keys: Sequence[tuple[str, Any]]) -> str:
    return "_".join(f"{k}_{d}" for k, d in keys)


def _keys(keys: Any, direction: Any = None) -> list[tuple[str, Any]]:
    if isinstance(keys, str):
        return [(keys, 1 if direction is None else direction)]
    if isinstance(keys, Mapping):
        return list(keys.items())
    return [(k, d) for k, d in keys]


class _Deferred:
    """A cursor over ``read()``'s documents, called on the first read (no I/O before)."""

    def __init__(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        self._read = read
        self._docs: Iterator[dict[str, Any]] | None = None

    def _iter(self) -> Iterator[dict[str, Any]]:
        if self._docs is None:
            self._docs = iter(self._read())
        return self._docs

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._iter()  # the documents' own iterator: ``list(cursor)`` runs at C speed

    def __next__(self) -> dict[str, Any]:
        return next(self._iter())

    def close(self) -> None:
        self._docs = iter(())

    def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        rest = list(self._iter())
        return rest if length is None else rest[:length]


class LocalCursor(_Deferred):
    """``find``'s cursor: ``sort``/``skip``/``limit`` are recorded until the first read runs the query."""

    def __init__(self, coll: LocalCollection, filter: Any, projection: Any, **options: Any) -> None:
        super().__init__(lambda: coll.select(filter or {}, self._sort, self._skip, self._limit, projection))
        self._sort: list[tuple[str, Any]] | None = None
        self._skip = 0
        self._limit = 0
        if options.get("sort"):
            self.sort(options["sort"])
        self.skip(options.get("skip") or 0)
        self.limit(options.get("limit") or 0)

    def sort(self, key_or_list: Any, direction: Any = None) -> LocalCursor:
        self._sort = _keys(key_or_list, direction)
        return self

    def skip(self, n: int) -> LocalCursor:
        self._skip = int(n)
        return self

    def limit(self, n: int) -> LocalCursor:
        self._limit = int(n)
        return self

    def batch_size(self, _: int) -> LocalCursor:
        return self


class LocalCollection:
    """A pymongo-``Collection``-shaped handle on one collection of a :class:`LocalDB`. ``include``: top-level
    fields to keep in each row's ``inc`` too, from this handle's first write on (``find`` with a projection of
    only these and ``_id`` then reads no document: the store's items list their vectors' hashes there).
    ``columns``: fields to keep in columns without an index (what an aggregation groups by or compares in
    SQL, as indexed fields are). ``clustered``: the table this handle creates keeps its rows in ``_id`` order
    (``_table_sql``)."""

    def __init__(
        self,
        engine: LocalDB,
        name: str,
        include: Sequence[str] = (),
        columns: Sequence[str] = (),
        clustered: bool = True,
    ) -> None:
        self.engine = engine
        self.name = name
        self.full_name = f"{engine.db_name}.{name}"
        self.include = tuple(include)
        self.columns = tuple(columns)
        self.clustered = clustered

    def _laid_out(self, table: Table) -> bool:
        """Does the table keep what this handle asks (its ``include`` fields and ``columns``)?"""
        return set(self.include) <= set(table.include) and set(self.columns) <= set(table.columns)

    @property
    def database(self) -> LocalDatabase:
        return LocalDatabase(self.engine)

    @property
    def backend(self) -> Backend:
        """What a store on this collection runs on: the engine's transaction around each operation."""
        engine = self.engine
        return Backend(emulated=True, local_file=True, threads=False, unit=engine.unit, aunit=engine.atransaction)

    def __repr__(self) -> str:
        return f"LocalCollection({str(self.engine.path)!r}, {self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalCollection) and (other.engine, other.name) == (self.engine, self.name)

    def __hash__(self) -> int:
        return hash((id(self.engine), self.name))

    def _table(self, state: _Thread, create: bool = False) -> Table | None:
        table = self.engine.tables(state).get(self.name)
        if table is None and create:
            table = _create_table(state, self.engine, self.name, self.include, self.clustered)
        if table is not None and create and not self._laid_out(table):
            if not set(self.include) <= set(table.include):
                table = _include(state, self.engine, table, self.include)
            table = self._add_columns(state, table, self.columns)
        return table

    # ------------------------------------------------------------------ reads

    def _scan(
        self,
        state: _Thread,
        table: Table,
        filt: Mapping[str, Any],
        sort: Sequence[tuple[str, Any]] | None = None,
        skip: int = 0,
        limit: int = 0,
        covered: Sequence[str] | None = None,
    ) -> Iterator[tuple[dict[str, Any], Any, str | None]]:
        """(document, id key, not-plain fields) of the matches, sorted and paged. ``covered``: only ``_id``
        and these fields are wanted (None: the whole document); see ``_scan_from``."""
        return self._scan_from(state, table, filt, sort, skip, limit, covered)[1]

    def _scan_from(
        self,
        state: _Thread,
        table: Table,
        filt: Mapping[str, Any],
        sort: Sequence[tuple[str, Any]] | None,
        skip: int,
        limit: int,
        covered: Sequence[str] | None,
    ) -> tuple[bool, Iterator[tuple[dict[str, Any], Any, str | None]]]:
        """``_scan``, and whether it reads the rows' ``inc``, not their documents: when the ``covered`` fields
        are included ones, and so are the fields of what SQL leaves to decide (its documents are then ``_id``
        and the included fields each has, and the id key may be None)."""
        t = sq.translate(filt, table.usable)
        order = sq.order_by(sort, table.usable)
        python_sort = bool(sort) and order is None
        include = set(table.include)
        from_inc = (
            covered is not None
            and set(covered) <= include
            and not python_sort
            and (t.residual is None or (sq.filter_fields(t.residual) or {"$"}) <= include | {"_id"})
        )
        return from_inc, self._rows(state, table, t, order, sort, skip, limit, from_inc)

    def _rows(
        self,
        state: _Thread,
        table: Table,
        t: sq.Translation,
        order: str | None,
        sort: Sequence[tuple[str, Any]] | None,
        skip: int,
        limit: int,
        from_inc: bool,
    ) -> Iterator[tuple[dict[str, Any], Any, str | None]]:
        """``_scan_from``'s rows."""
        rest = f'FROM "{table.tbl}" WHERE {t.where}' + (order or "")
        params = list(t.params)
        python_sort = bool(sort) and order is None
        residual = t.residual
        paged = f"{rest} LIMIT ? OFFSET ?" if limit or skip else rest  # when SQL decides the filter alone
        paged_params = [*params, limit or -1, skip] if limit or skip else params
        try:
            if from_inc:
                if residual is None:
                    rest, params = paged, paged_params
                docs: Iterable[tuple[dict[str, Any], Any, str | None]]
                if not table.include:  # no inc column values: the ``_id`` s alone
                    keys = state.conn.execute(f"SELECT id {rest}", params).fetchall()
                    docs = [({"_id": _from_id(key)}, key, None) for (key,) in keys]
                elif order:
                    rows = state.conn.execute(f"SELECT inc, id {rest}", params).fetchall()
                    docs = zip(decode_many([r[0] for r in rows]), [r[1] for r in rows], itertools.repeat(None))
                else:
                    docs = zip(_concatenated(state, rest, params), itertools.repeat(None), itertools.repeat(None))
                if residual is None:
                    yield from docs
                else:
                    yield from _page((m for m in docs if _matches(residual, m[0])), skip, limit)
                return
            if order:
                # Sorted by SQL: the keys first (SQLite's sorter then holds ids, not documents), then the
                # documents by id, in that order, in growing batches: as few as the page needs.
                keys_sql, keys_params = (paged, paged_params) if residual is None else (rest, params)
                keys = [key for (key,) in state.conn.execute(f"SELECT id {keys_sql}", keys_params)]
                found = self._by_keys(state, table, keys)
                matches = found if residual is None else (m for m in found if _matches(residual, m[0]))
                yield from matches if residual is None else _page(matches, skip, limit)
                return
            if residual is None and not python_sort:
                cursor = state.conn.execute(f"SELECT doc, id, np {paged}", paged_params)
                for rows in iter(lambda: cursor.fetchmany(_BATCH), []):
                    for doc, (_, key, np_fields) in zip(decode_many([r[0] for r in rows]), rows, strict=True):
                        yield doc, key, np_fields
                return
            cursor = state.conn.execute(f"SELECT doc, id, np {rest}", params)
        except sqlite3.Error as exc:
            raise self.engine.translate_error(exc) from None
        matches = (
            (doc, key, np_fields)
            for rows in iter(lambda: cursor.fetchmany(_BATCH), [])
            for doc, (_, key, np_fields) in zip(decode_many([r[0] for r in rows]), rows, strict=True)
            if residual is None or _matches(residual, doc)
        )
        if python_sort:
            ordered = list(matches)
            assert sort is not None
            for name, direction in reversed(list(sort)):
                ordered.sort(key=lambda m: _sort_key(name, m[0]), reverse=direction < 0)
            end = skip + limit if limit else None
            yield from ordered[skip:end]
            return
        yield from _page(matches, skip, limit)

    def _by_keys(
        self, state: _Thread, table: Table, keys: Sequence[Any]
    ) -> Iterator[tuple[dict[str, Any], Any, str | None]]:
        """The rows of these ids, in this order (a row deleted meanwhile is skipped), read in batches of
        16, 64, 256, then 900 (under SQLite's oldest limit of 999 parameters): a page filtered here reads
        about as many documents as it needs."""
        sizes = itertools.chain((16, 64, 256), itertools.repeat(900))
        at = 0
        while at < len(keys):
            chunk = keys[at : at + next(sizes)]
            at += len(chunk)
            marks = ", ".join("?" * len(chunk))
            sql = f'SELECT doc, id, np FROM "{table.tbl}" WHERE id IN ({marks})'
            rows = {key: (blob, np_fields) for blob, key, np_fields in state.conn.execute(sql, chunk)}
            present = [key for key in chunk if key in rows]
            docs = decode_many([rows[key][0] for key in present])
            for doc, key in zip(docs, present, strict=True):
                yield doc, key, rows[key][1]

    def select(
        self,
        filt: Mapping[str, Any],
        sort: Sequence[tuple[str, Any]] | None = None,
        skip: int = 0,
        limit: int = 0,
        projection: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The documents ``find`` returns."""
        if projection is not None and not isinstance(projection, Mapping):
            projection = dict.fromkeys(projection, 1)
        plan = sq.simple_projection(projection)
        with self.engine.reading() as state:
            table = self._table(state)
            if table is None:
                if filt:
                    _matches(filt, {})  # a bad filter fails on an empty collection too
                return []
            covered = None if plan is None else plan.covered
            from_inc, rows = self._scan_from(state, table, filt, sort, skip, limit, covered)
            docs = [doc for doc, _, _ in rows]
        if plan is None:
            return docs
        if from_inc and set(covered or ()) == set(table.include):  # already ``_id`` and those fields
            if not plan.keep_id:
                for doc in docs:
                    doc.pop("_id", None)
            return docs
        return [sq.project(d, plan) for d in docs]

    def find(self, filter: Any = None, projection: Any = None, *args: Any, **options: Any) -> LocalCursor:
        if args:
            raise TypeError("find() takes filter and projection positionally; give the rest by keyword")
        return LocalCursor(self, filter, projection, **options)

    def find_one(self, filter: Any = None, projection: Any = None, **options: Any) -> dict[str, Any] | None:
        if filter is not None and not isinstance(filter, Mapping):
            filter = {"_id": filter}
        docs = self.select(filter or {}, options.get("sort"), options.get("skip") or 0, 1, projection)
        return docs[0] if docs else None

    def count_documents(self, filter: Mapping[str, Any], **options: Any) -> int:
        skip, limit = int(options.get("skip") or 0), int(options.get("limit") or 0)
        with self.engine.reading() as state:
            table = self._table(state)
            if table is None:
                return 0
            t = sq.translate(filter, table.usable)
            if t.residual is None and not skip and not limit:
                return int(
                    state.conn.execute(f'SELECT count(*) FROM "{table.tbl}" WHERE {t.where}', t.params).fetchone()[0]
                )
            return sum(1 for _ in self._scan(state, table, filter, None, skip, limit, covered=()))

    def estimated_document_count(self, **_: Any) -> int:
        return self.count_documents({})

    def distinct(self, key: str, filter: Mapping[str, Any] | None = None, **_: Any) -> list[Any]:
        """The distinct values of ``key`` among the matches: an indexed column's are read by skipping
        through its index (one lookup per value), not by reading every document."""
        filt = dict(filter or {})
        with self.engine.reading() as state:
            table = self._table(state)
            if table is None:
                return []
            col = table.usable.get(key)
            t = sq.translate(filt, table.usable)
            rest = [] if t.residual is None else list(t.residual.get("$and", [t.residual]))
            on_key = [c for c in rest if set(c) == {key}]
            if col is None or len(on_key) != len(rest):
                return self._distinct_scan(state, table, key, filt)
            out: list[Any] = []
            sql = f'SELECT "{col}" FROM "{table.tbl}" WHERE ({t.where}) AND "{col}" > ? ORDER BY "{col}" LIMIT 1'
            last: Any = ""
            first = f'SELECT "{col}" FROM "{table.tbl}" WHERE ({t.where}) AND "{col}" >= ? ORDER BY "{col}" LIMIT 1'
            with self.engine.snapshot(state):  # one read of many statements: one state, one lock
                row = state.conn.execute(first, [*t.params, ""]).fetchone()
                while row is not None:
                    last = row[0]
                    value = _from_column(last)
                    if all(_matches(c, {key: value}) for c in on_key):
                        out.append(value)
                    row = state.conn.execute(sql, [*t.params, last]).fetchone()
                nulls = f'SELECT doc FROM "{table.tbl}" WHERE ({t.where}) AND "{col}" IS NULL'
                cursor = state.conn.execute(nulls, t.params)
                for (blob,) in cursor:
                    doc = decode(blob)
                    if sq.lookup(doc, key) is None:  # there, and null (not missing)
                        if all(_matches(c, {key: None}) for c in on_key):
                            out.insert(0, None)
                        break
                cursor.close()
            return out

    def _distinct_scan(self, state: _Thread, table: Table, key: str, filt: Mapping[str, Any]) -> list[Any]:
        out: list[Any] = []
        seen: set[bytes] = set()
        for doc, _, _ in self._scan(state, table, filt):
            value = sq.lookup(doc, key)
            if value is sq.MISSING:
                continue
            for v in value if isinstance(value, list) else [value]:
                marker = bson.encode({"": v})
                if marker not in seen:
                    seen.add(marker)
                    out.append(v)
        return out

    def aggregate(self, pipeline: Sequence[Mapping[str, Any]], **_: Any) -> Iterator[dict[str, Any]]:
        """A cursor that runs the pipeline on its first read (as ``find``'s does)."""
        return _Deferred(functools.partial(self.run_pipeline, pipeline))

    def run_pipeline(self, pipeline: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The leading ``$match`` stages (and a ``$sort``, ``$skip``, ``$limit`` after them) read through
        the indexes; the rest of the pipeline through mongomock's ``process_pipeline``."""
        stages = [dict(s) for s in pipeline]
        atlas = [name for stage in stages for name in stage if name in ATLAS_STAGES]
        if atlas:
            raise NotImplementedError(f"{atlas[0]} is an Atlas Search stage: the local store has no search index")
        matches: list[Any] = []
        while stages and list(stages[0]) == ["$match"]:
            matches.append(stages.pop(0)["$match"])
        filt: dict[str, Any] = matches[0] if len(matches) == 1 else ({"$and": matches} if matches else {})
        with self.engine.reading() as state:
            table = self._table(state)
            if table is None:
                return list(_pipeline([], self.database, stages, None)) if stages else []
            return self._stages(state, table, filt, stages)

    def _stages(
        self, state: _Thread, table: Table, filt: Mapping[str, Any], stages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The documents matching ``filt`` through ``stages``: a leading ``$sort`` (``$skip``, ``$limit``)
        on usable columns or a first ``$group`` ``group_sql`` answers run in SQL, a leading ``$facet`` runs
        each of its pipelines so, and mongomock runs what remains."""
        sort: list[tuple[str, Any]] | None = None
        skip = limit = 0
        docs: list[dict[str, Any]] | None = None
        if stages and list(stages[0]) == ["$sort"]:
            candidate = list(stages[0]["$sort"].items())
            if sq.order_by(candidate, table.usable) is not None:
                sort = candidate
                stages = stages[1:]
                if stages and list(stages[0]) == ["$skip"]:
                    skip, stages = int(stages[0]["$skip"]), stages[1:]
                if stages and list(stages[0]) == ["$limit"]:
                    limit, stages = int(stages[0]["$limit"]), stages[1:]
        elif stages and list(stages[0]) == ["$facet"] and isinstance(stages[0]["$facet"], Mapping):
            facets = stages[0]["$facet"]
            if all(isinstance(sub, list) and sub for sub in facets.values()):
                docs = [{name: self._stages(state, table, filt, list(map(dict, sub))) for name, sub in facets.items()}]
                stages = stages[1:]
        else:
            docs = self._grouped(state, table, filt, stages)
            if docs is not None:
                stages = stages[1:]
        if docs is None:
            docs = [d for d, _, _ in self._scan(state, table, filt, sort, skip, limit)]
        return list(_pipeline(docs, self.database, stages, None)) if stages else docs

    def _grouped(
        self, state: _Thread, table: Table, filt: Mapping[str, Any], stages: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """The output of a first ``$group`` SQL can answer (``sqlquery.group_sql``) over a filter SQL decides
        alone: counted in SQL, no document read; None otherwise."""
        if not stages or list(stages[0]) != ["$group"]:
            return None
        t = sq.translate(filt, table.usable)
        group = sq.group_sql(stages[0]["$group"], table.usable)
        if group is None:
            return self._counted(state, table, filt, stages[0]["$group"])
        if t.residual is not None:
            return None
        for col in group.bare:  # a missing field compares unlike null: SQL answers only where none is missing
            missing = f'SELECT 1 FROM "{table.tbl}" WHERE ({t.where}) AND "{col}" IS NULL LIMIT 1'
            if state.conn.execute(missing, t.params).fetchone():
                return None
        if group.by_day is not None:
            return self._grouped_by_day(state, table, t, group)
        key = [group.by] if group.by else []
        sql = f'SELECT {", ".join([*key, *group.select, "count(*)"])} FROM "{table.tbl}" WHERE {t.where}'
        if group.by:
            sql += " GROUP BY 1"
        out = []
        try:
            rows = state.conn.execute(sql, [*group.key_params, *group.params, *t.params]).fetchall()
        except sqlite3.OperationalError:  # mongo_date_string met what it does not answer: mongomock decides
            return None
        for row in rows:
            if not row[-1]:
                continue  # no document, no group (MongoDB answers nothing for _id: null over no documents)
            values = list(row[len(key) : -1])
            out.append(
                {"_id": _from_column(row[0]) if group.by else None, **dict(zip(group.fields, values, strict=True))}
            )
        return out

    def _grouped_by_day(
        self, state: _Thread, table: Table, t: sq.Translation, group: sq.GroupSQL
    ) -> list[dict[str, Any]] | None:
        """A group by a format of a date column's day, its sums added up from SQL's groups by the column's
        leading bytes (``sqlquery.DATE_BUCKET``: each spans under a day), so that the format runs once per
        bucket, not once per row: a bucket whose first and last dates format alike is one group (every day
        between them formats so); the buckets across two days that format apart are split at their
        midnights by one more scan (a store active every day has one such bucket a day)."""
        assert group.by_day is not None
        col, fmt = group.by_day
        sums = ", ".join([*group.select, "count(*)"])
        where = f'FROM "{table.tbl}" WHERE {t.where}'
        bucket = f'substr("{col}", 1, {sq.DATE_BUCKET})'
        sql = f'SELECT min("{col}"), max("{col}"), {sums} {where} GROUP BY {bucket}'
        out: dict[str | None, list[int]] = {}
        across: dict[bytes, tuple[bytes, str | None, str | None]] = {}  # bucket -> (midnight, early, late)

        def add(name: str | None, values: Sequence[int]) -> None:
            if values[-1]:  # no document, no group
                total = out.setdefault(name, [0] * len(values))
                for i, v in enumerate(values):
                    total[i] += v

        try:
            for first, last, *values in state.conn.execute(sql, [*group.params, *t.params]).fetchall():
                early, late = sq.date_string(first, fmt), sq.date_string(last, fmt)
                if early == late:
                    add(early, values)
                else:
                    across[last[: sq.DATE_BUCKET]] = (sq.day_start_key(last), early, late)
            buckets = list(across)
            for at in range(0, len(buckets), 200):  # 600 parameters: under SQLite's oldest limit of 999
                chunk = buckets[at : at + 200]
                case = " ".join("WHEN ? THEN ?" for _ in chunk)
                marks = ", ".join("?" * len(chunk))
                split = (
                    f'SELECT {bucket}, "{col}" >= CASE {bucket} {case} END, {sums} {where} '
                    f"AND {bucket} IN ({marks}) GROUP BY 1, 2"
                )
                args = [*(v for b in chunk for v in (b, across[b][0])), *group.params, *t.params, *chunk]
                for key, after, *part in state.conn.execute(split, args).fetchall():
                    _, early, late = across[key]
                    add(late if after else early, part)
        except (ValueError, sqlite3.OperationalError):  # not a date, or out of range: mongomock decides
            return None
        return [{"_id": name, **dict(zip(group.fields, values[:-1], strict=True))} for name, values in out.items()]

    def _counted(
        self, state: _Thread, table: Table, filt: Mapping[str, Any], spec: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """A ``$group`` counting documents by a field (``sqlquery.counted_path``) whose values are strings
        or null: counted over the decoded documents without mongomock's expression engine (a value of
        another type, whose grouping is MongoDB's numeric or structural equality: None, mongomock runs it)."""
        counted = sq.counted_path(spec)
        if counted is None:
            return None
        path, fields = counted
        parts = path.split(".")
        counts: dict[str | None, int] = {}
        for doc, _, _ in self._scan(state, table, filt):
            value = _through(doc, parts)
            if type(value) is not str and value is not None:  # an array on the way (_FALLBACK) too
                return None
            counts[value] = counts.get(value, 0) + 1
        return [{"_id": value, **dict.fromkeys(fields, n)} for value, n in counts.items()]

    def index_information(self) -> dict[str, dict[str, Any]]:
        info: dict[str, dict[str, Any]] = {"_id_": {"key": [("_id", 1)], "v": 2}}
        with self.engine.reading() as state:
            table = self._table(state)
            for name, spec in (table.indexes if table is not None else {}).items():
                info[name] = {"v": 2, **spec, "key": [tuple(k) for k in spec["key"]]}
        return info if table is not None else {}

    def list_indexes(self) -> Iterator[dict[str, Any]]:
        return iter(
            [{"name": name, **spec, "key": dict(spec["key"])} for name, spec in self.index_information().items()]
        )

    # ------------------------------------------------------------------ indexes

    def create_index(self, keys: Any, **kwargs: Any) -> str:
        key = _keys(keys)
        name = kwargs.pop("name", None) or _index_name(key)
        spec: dict[str, Any] = {"key": [list(k) for k in key]}
        for flag in ("unique", "sparse"):  # a sparse index selects no differently here: SQL narrows, filters decide
            if kwargs.pop(flag, False):
                spec[flag] = True
        if kwargs.get("expireAfterSeconds") is not None:
            spec["expireAfterSeconds"] = kwargs.pop("expireAfterSeconds")
        kwargs.pop("background", None)
        if kwargs:
            raise NotImplementedError(f"the local store's indexes take no {', '.join(sorted(kwargs))}")
        with self.engine.reading() as state:  # setup() on every start: an index already there takes no write lock
            table = self._table(state)
            existing = table.indexes.get(name) if table is not None else None
            if (
                table is not None
                and existing is not None
                and {k: v for k, v in existing.items() if k != "sql"} == spec
                and self._laid_out(table)
            ):
                return str(name)
        with self.engine.writing() as state:
            table = self._table(state, create=True)
            assert table is not None
            existing = table.indexes.get(name)
            if existing is not None:
                if {k: v for k, v in existing.items() if k != "sql"} != spec:
                    raise OperationFailure(
                        f"an index named {name!r} exists with different options: {existing}", code=86
                    )
                return str(name)
            if not all(d in (1, -1) for _, d in key):  # hashed, text, 2dsphere...: kept, never used by SQL
                state.conn.execute(
                    "INSERT INTO _indexes (collection, name, spec) VALUES (?, ?, ?)",
                    (self.name, name, json.dumps(spec)),
                )
                state.tables = None
                return str(name)
            table = self._add_columns(state, table, [f for f, _ in key])
            sql_name = f"{table.tbl}_" + str(name).replace('"', '""')
            try:
                _sql_index(state, table, {**spec, "sql": sql_name})
            except sqlite3.IntegrityError as exc:
                raise OperationFailure(
                    f"cannot create unique index {name!r}: duplicate key ({exc})", code=DUPLICATE_KEY
                ) from None
            spec_row = {**spec, "sql": sql_name}
            state.conn.execute(
                "INSERT INTO _indexes (collection, name, spec) VALUES (?, ?, ?)",
                (self.name, name, json.dumps(spec_row)),
            )
            state.tables = None
        return str(name)

    def _add_columns(self, state: _Thread, table: Table, fields: Sequence[str]) -> Table:
        new = [f for f in fields if f not in table.columns]
        if not new:
            return table
        conn = state.conn
        old = [c for f, c in table.columns.items() if f != "_id"]
        for fld in new:
            col = f"f{len(table.columns)}"
            conn.execute("INSERT INTO _columns (collection, field, col) VALUES (?, ?, ?)", (self.name, fld, col))
            table.columns[fld] = col
        # SQLite adds a column after the document: the table is made again with the document last.
        tmp = f"{table.tbl}_new"
        (made,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table.tbl,)).fetchone()
        conn.execute(_table_sql(tmp, [c for f, c in table.columns.items() if f != "_id"], "WITHOUT ROWID" in made))
        copied = ", ".join(["id", "np", "inc", *(f'"{c}"' for c in old), "doc"])
        conn.execute(f'INSERT INTO "{tmp}" ({copied}) SELECT {copied} FROM "{table.tbl}"')
        conn.execute(f'DROP TABLE "{table.tbl}"')
        conn.execute(f'ALTER TABLE "{tmp}" RENAME TO "{table.tbl}"')
        conn.execute(f'CREATE INDEX "{table.tbl}_np" ON "{table.tbl}" (np) WHERE np IS NOT NULL')
        for spec in table.indexes.values():
            if spec.get("sql"):
                _sql_index(state, table, spec)
        # Fill the new columns from the documents already there.
        counts = dict.fromkeys(new, 0)
        updates = []
        for blob, key, np_fields in conn.execute(f'SELECT doc, id, np FROM "{table.tbl}"').fetchall():
            doc = decode(blob)
            values = []
            nonplain = json.loads(np_fields) if np_fields else []
            for fld in new:
                value, plain = sq.plain_at(doc, fld)
                values.append(value)
                if not plain:
                    counts[fld] += 1
                    nonplain.append(fld)
            updates.append([*values, json.dumps(nonplain) if nonplain else None, key])
        sets = ", ".join(f'"{table.columns[f]}" = ?' for f in new)
        conn.executemany(f'UPDATE "{table.tbl}" SET {sets}, np = ? WHERE id = ?', updates)
        count_nonplain(state, table, counts)
        state.tables = None
        found = self._table(state)
        assert found is not None
        return found

    def drop_index(self, name: str) -> None:
        with self.engine.writing() as state:
            table = self._table(state)
            spec = table.indexes.get(name) if table is not None else None
            if table is None or spec is None:
                raise OperationFailure(f"index not found with name [{name}]", code=27)
            if spec.get("sql"):
                state.conn.execute(f'DROP INDEX "{spec["sql"]}"')
            state.conn.execute("DELETE FROM _indexes WHERE collection = ? AND name = ?", (self.name, name))
            state.tables = None

    def drop(self) -> None:
        with self.engine.writing() as state:
            table = self._table(state)
            if table is None:
                return
            state.conn.execute(f'DROP TABLE "{table.tbl}"')
            if table.changes:  # its watchers end, as a change stream is invalidated by a drop
                log_change(state, table, "drop", "")
            for meta in ("_collections", "_indexes", "_columns"):
                key = "name" if meta == "_collections" else "collection"
                state.conn.execute(f"DELETE FROM {meta} WHERE {key} = ?", (self.name,))
            state.tables = None

    # ------------------------------------------------------------------ change streams

    def watch(
        self,
        pipeline: Sequence[Mapping[str, Any]] | None = None,
        full_document: str | None = None,
        resume_after: Mapping[str, Any] | None = None,
        max_await_time_ms: int | None = None,
        batch_size: int | None = None,
        *,
        start_after: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Any:
        """A change stream on this collection, shaped as pymongo's (``changelog.LocalChangeStream``): the
        changes committed after it opens, or after ``start_after`` / ``resume_after``, by any process."""
        from mongostore.drivers.embedded.changelog import LocalChangeStream

        if any(v is not None for v in options.values()):
            raise NotImplementedError(f"the local store's change streams take no {', '.join(sorted(options))}")
        return LocalChangeStream(self, pipeline, full_document, start_after or resume_after, max_await_time_ms)

    # How its change streams read the log (``changelog.Watched``: that module imports nothing of this one).
    def decode_row(self, blob: bytes) -> dict[str, Any]:
        return decode(blob)

    def id_of(self, key: Any) -> Any:
        return _from_id(key)

    def matches(self, filt: Any, doc: Any) -> bool:
        return _matches(filt, doc)

    def log_changes(self) -> int:
        """Start logging this collection's writes (once; kept in the file); the latest sequence number."""
        with self.engine.reading() as state:
            table = self._table(state)
            if table is not None and table.changes:
                return _last_seq(state.conn)
        with self.engine.writing() as state:
            table = self._table(state, create=True)
            assert table is not None
            if not table.changes:
                state.conn.execute("UPDATE _collections SET changes = 1 WHERE name = ?", (self.name,))
                state.tables = None
            return _last_seq(state.conn)

    # ------------------------------------------------------------------ writes

    def bulk_write(self, requests: Sequence[Any], ordered: bool = True, **_: Any) -> BulkWriteResult:
        """Each request in turn (unordered: every one is tried), in the thread's write transaction; a
        request that fails leaves nothing of itself (a savepoint) and is reported in ``BulkWriteError``."""
        ops = requests_of(requests)
        if not ops:
            raise ValueError("bulk_write() needs at least one request")  # pymongo's InvalidOperation says so too
        result: dict[str, Any] = {
            "writeErrors": [],
            "writeConcernErrors": [],
            "nInserted": 0,
            "nUpserted": 0,
            "nMatched": 0,
            "nModified": 0,
            "nRemoved": 0,
            "upserted": [],
        }
        with self.engine.writing() as state:
            table = self._table(state, create=True)
            assert table is not None
            writer = _Writer(self, state, table)
            for i, op in enumerate(ops):
                state.conn.execute("SAVEPOINT request")
                try:
                    writer.apply(i, op, result)
                except _Failure as exc:
                    state.conn.execute("ROLLBACK TO request")
                    writer.deltas.clear()
                    result["writeErrors"].append({"index": i, "code": exc.code, "errmsg": str(exc), "op": op[1]})
                    if ordered:
                        state.conn.execute("RELEASE request")
                        break
                except BaseException as exc:  # nothing of a request that did not finish stays
                    state.conn.execute("ROLLBACK TO request")
                    state.conn.execute("RELEASE request")
                    if isinstance(exc, sqlite3.Error):
                        raise self.engine.translate_error(exc) from None
                    raise
                else:
                    count_nonplain(state, table, writer.deltas)
                    writer.deltas.clear()
                state.conn.execute("RELEASE request")
        if result["writeErrors"]:
            raise BulkWriteError(result)
        result.pop("writeErrors")
        result.pop("writeConcernErrors")
        return BulkWriteResult(result, acknowledged=True)

    def _one(self, model: Any) -> dict[str, Any]:
        try:
            return self.bulk_write([model]).bulk_api_result
        except BulkWriteError as exc:
            error = exc.details["writeErrors"][0]
            cls = DuplicateKeyError if error["code"] == DUPLICATE_KEY else WriteError
            raise cls(error["errmsg"], error["code"], error) from None

    def insert_one(self, document: Any, **_: Any) -> InsertOneResult:
        from pymongo import InsertOne

        self._one(InsertOne(document))
        return InsertOneResult(document["_id"], acknowledged=True)

    def insert_many(self, documents: Iterable[Any], ordered: bool = True, **_: Any) -> InsertManyResult:
        from pymongo import InsertOne

        docs = list(documents)
        self.bulk_write([InsertOne(d) for d in docs], ordered=ordered)
        return InsertManyResult([d["_id"] for d in docs], acknowledged=True)

    def _update(self, model: Any) -> UpdateResult:
        raw = self._one(model)
        upserted = raw["upserted"][0]["_id"] if raw["upserted"] else None
        return UpdateResult(
            {"n": raw["nMatched"] + raw["nUpserted"], "nModified": raw["nModified"], "upserted": upserted}, True
        )

    def update_one(self, filter: Any, update: Any, upsert: bool = False, **_: Any) -> UpdateResult:
        from pymongo import UpdateOne

        return self._update(UpdateOne(filter, update, upsert=upsert))

    def update_many(self, filter: Any, update: Any, upsert: bool = False, **_: Any) -> UpdateResult:
        from pymongo import UpdateMany

        return self._update(UpdateMany(filter, update, upsert=upsert))

    def replace_one(self, filter: Any, replacement: Any, upsert: bool = False, **_: Any) -> UpdateResult:
        from pymongo import ReplaceOne

        return self._update(ReplaceOne(filter, replacement, upsert=upsert))

    def delete_one(self, filter: Any, **_: Any) -> DeleteResult:
        from pymongo import DeleteOne

        return DeleteResult({"n": self._one(DeleteOne(filter))["nRemoved"]}, True)

    def delete_many(self, filter: Any, **_: Any) -> DeleteResult:
        from pymongo import DeleteMany

        return DeleteResult({"n": self._one(DeleteMany(filter))["nRemoved"]}, True)


def _last_seq(conn: sqlite3.Connection) -> int:
    """The change log's latest sequence number (0: none yet)."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM _changes").fetchone()[0])


def _page(matches: Iterable[_T], skip: int, limit: int) -> Iterator[_T]:
    """``skip`` then at most ``limit`` (0: all) of ``matches``, reading no further than needed."""
    return itertools.islice(matches, skip, skip + limit if limit else None)


class _Writer:
    """Applies one bulk write's requests to a table (inside its transaction)."""

    def __init__(self, coll: LocalCollection, state: _Thread, table: Table) -> None:
        self.coll = coll
        self.state = state
        self.table = table
        self.deltas: dict[str, int] = {}
        names = _column_names(table)
        self.insert_sql = f'INSERT INTO "{table.tbl}" ({", ".join(names)}) VALUES ({", ".join("?" * len(names))})'
        sets = ", ".join(f"{n} = ?" for n in names[1:])
        self.update_sql = f'UPDATE "{table.tbl}" SET {sets} WHERE id = ?'

    def _note(self, fields: Iterable[str], sign: int) -> None:
        for fld in fields:
            self.deltas[fld] = self.deltas.get(fld, 0) + sign

    def insert(self, doc: dict[str, Any]) -> None:
        if "_id" not in doc:
            doc = {"_id": ObjectId(), **doc}
        elif next(iter(doc)) != "_id":
            doc = {"_id": doc["_id"], **doc}
        values, nonplain = _row(self.table, doc)
        try:
            self.state.conn.execute(self.insert_sql, values)
        except sqlite3.IntegrityError as exc:
            raise _Failure(
                DUPLICATE_KEY,
                f"E11000 duplicate key error collection: {self.coll.full_name} ({exc}); _id: {doc['_id']!r}",
            ) from None
        self._note(nonplain, 1)
        if self.table.changes:
            log_change(self.state, self.table, "insert", values[0], values[1])

    def replace(self, key: Any, old_np: str | None, doc: dict[str, Any], old: dict[str, Any], op: str) -> None:
        """Write ``doc`` over the row ``key`` (``old``: the document there; ``op``: "update" or "replace")."""
        values, nonplain = _row(self.table, doc)
        try:
            self.state.conn.execute(self.update_sql, [*values[1:], key])
        except sqlite3.IntegrityError as exc:
            raise _Failure(
                DUPLICATE_KEY, f"E11000 duplicate key error collection: {self.coll.full_name} ({exc})"
            ) from None
        self._note(json.loads(old_np) if old_np else [], -1)
        self._note(nonplain, 1)
        if self.table.changes:
            changed = None if op == "replace" else json.dumps(_changed_fields(old, doc))
            log_change(self.state, self.table, op, key, values[1], changed)

    def apply(self, i: int, op: tuple[Any, ...], result: dict[str, Any]) -> None:
        kind = op[0]
        if kind == "insert":
            self.insert(op[1])
            result["nInserted"] += 1
            return
        if kind == "delete":
            _, filt, limit = op
            found = list(self.coll._scan(self.state, self.table, filt, limit=1 if limit == 1 else 0))
            for _, key, np_fields in found:
                self.state.conn.execute(f'DELETE FROM "{self.table.tbl}" WHERE id = ?', (key,))
                self._note(json.loads(np_fields) if np_fields else [], -1)
                if self.table.changes:
                    log_change(self.state, self.table, "delete", key)
            result["nRemoved"] += len(found)
            return
        if kind == "replace":
            _, filt, replacement, upsert = op
            multi, update = False, replacement
        else:
            _, filt, update, multi, upsert = op
        found = list(self.coll._scan(self.state, self.table, filt, limit=0 if multi else 1))
        if not found:
            if upsert:
                seed = {} if kind == "replace" else sq.equality_fields(filt)
                doc = self._updated(seed, filt, update, kind, inserting=True)
                if "_id" not in doc:
                    doc = {"_id": seed.get("_id", ObjectId()), **doc}
                self.insert(doc)
                result["nUpserted"] += 1
                result["upserted"].append({"index": i, "_id": doc["_id"]})
            return
        for old, key, np_fields in found:
            before = bson.encode(old, codec_options=CODEC)
            doc = self._updated(copy.deepcopy(old), filt, update, kind, inserting=False)
            if doc.get("_id", old["_id"]) != old["_id"]:
                raise _Failure(
                    IMMUTABLE_FIELD, "Performing an update on the path '_id' would modify the immutable field '_id'"
                )
            doc = {"_id": old["_id"], **{k: v for k, v in doc.items() if k != "_id"}}
            result["nMatched"] += 1
            if bson.encode(doc, codec_options=CODEC) != before:
                self.replace(key, np_fields, doc, old, "replace" if kind == "replace" else "update")
                result["nModified"] += 1

    def _updated(self, doc: dict[str, Any], filt: Any, update: Any, kind: str, inserting: bool) -> dict[str, Any]:
        """The document after the request: a replacement, an update pipeline or update operators."""
        if kind == "replace":
            if any(isinstance(k, str) and k.startswith("$") for k in update):
                raise _Failure(BAD_VALUE, "a replacement document cannot hold update operators")
            return {"_id": doc["_id"], **update} if "_id" in doc else dict(update)
        try:
            if isinstance(update, list):
                from mongostore.drivers.mongomock_compat.lookups import mongodb_expressions

                [new] = list(_pipeline([doc], self.coll.database, mongodb_expressions(update), None))
                return dict(new)
            if not update or not all(isinstance(k, str) and k.startswith("$") for k in update):
                raise _Failure(BAD_VALUE, "an update document must hold only update operators")
            if sq.apply_fields(doc, update, inserting):
                return doc
            return _scratch_update(doc, filt, update, inserting)
        except _Failure:
            raise
        except (OperationFailure, ValueError, TypeError, KeyError) as exc:
            raise _Failure(getattr(exc, "code", None) or BAD_VALUE, str(exc)) from None


_ABSENT = object()


def _changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The top-level fields an update set, changed or removed (the log's ``updateDescription``, by field)."""
    return [name for name in {**old, **new} if old.get(name, _ABSENT) != new.get(name, _ABSENT)]


_SCRATCH_LOCK = threading.Lock()


@functools.cache
def _scratch_db() -> Any:
    from mongostore.drivers.mongomock_compat import new_client

    return new_client(tz_aware=True)["scratch"]


def _scratch_update(doc: dict[str, Any], filt: Any, update: Any, inserting: bool) -> dict[str, Any]:
    """Update operators besides ``$set`` / ``$unset`` / ``$setOnInsert``, applied by mongomock on a
    scratch collection holding this one document (its public ``update_one``)."""
    with _SCRATCH_LOCK:
        coll = _scratch_db()["c"]
        coll.delete_many({})
        if inserting:
            coll.update_one({"_id": doc["_id"]} if "_id" in doc else filt, update, upsert=True)
        else:
            coll.insert_one(doc)
            coll.update_one({"_id": doc["_id"]}, update)
        found = coll.find_one({})
        coll.delete_many({})
    return dict(found) if found is not None else doc
