"""``batch_plan`` driven by hand: which steps it asks for, with canned answers, no database."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
)

from mongostore import InvalidFilterError, InvalidValueError, WriteError
from mongostore.config import TTLSettings
from mongostore.core import queries as q
from mongostore.core.codec import ITEM_PROJECTION
from mongostore.core.plan import PlanContext, batch_plan
from mongostore.core.steps import Aggregate, Find, Parallel, Step, Write, WriteOutcome

NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
EARLIER = NOW - timedelta(hours=1)


def ctx(ttl: TTLSettings | None = None) -> PlanContext:
    return PlanContext("memories", None, ttl, NOW, clock=lambda: NOW)


def doc(namespace: tuple[str, ...], key: str, value: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "_id": "".join(label + "." for label in namespace) + "\x00" + key,
        "namespace": list(namespace),
        "key": key,
        "value": value,
        "created_at": EARLIER,
        "updated_at": EARLIER,
        **extra,
    }


def drive(
    ops: Sequence[Op], answer: Callable[[Step], Any], context: PlanContext | None = None
) -> tuple[list[Step], Any]:
    """Run the plan to completion; returns every step it yielded and its result."""
    plan = batch_plan(list(ops), context or ctx())
    steps: list[Step] = []
    try:
        step = next(plan)
        while True:
            steps.append(step)
            step = plan.send(answer(step))
    except StopIteration as stop:
        return steps, stop.value


def canned(
    reads: dict[Any, list[dict[str, Any]]] | None = None, outcome: WriteOutcome | None = None
) -> Callable[[Step], Any]:
    """Answers Find/Aggregate by their filter/pipeline repr, Write with ``outcome``, Parallel recursively."""
    reads = reads or {}

    def answer(step: Step) -> Any:
        if isinstance(step, Parallel):
            return [answer(s) for s in step.steps]
        if isinstance(step, Find):
            return reads.get(repr(step.filter), [])
        if isinstance(step, Aggregate):
            return reads.get(repr(step.pipeline), [])
        if isinstance(step, Write):
            return outcome or WriteOutcome()
        raise AssertionError(f"unexpected step {step!r}")

    return answer


# --------------------------------------------------------------------------- gets


def test_n_gets_are_one_find_with_in() -> None:
    ops = [GetOp(("a",), "k1"), GetOp(("a", "b"), "k2"), GetOp(("a",), "k1"), GetOp(("z",), "missing")]
    ids = ["a.\x00k1", "a.b.\x00k2", "z.\x00missing"]  # deduplicated, in first-seen order
    get_filter = {"_id": {"$in": ids}}
    docs = [doc(("a",), "k1", {"v": 1}), doc(("a", "b"), "k2", {"v": 2})]
    steps, results = drive(ops, canned({repr(get_filter): docs}))
    assert steps == [Parallel((Find("items", get_filter, {**ITEM_PROJECTION, "_id": 1}, batch_size=3),))]
    assert [r.value if r else None for r in results] == [{"v": 1}, {"v": 2}, {"v": 1}, None]
    assert isinstance(results[0], Item)
    assert results[0].namespace == ("a",) and results[0].created_at == EARLIER


def test_ops_with_non_str_keys_are_refused_not_aliased() -> None:
    """LangGraph types keys as str; BaseStore's public methods str() them, ops must hold str."""
    for op in (GetOp(("a",), 123), PutOp(("a",), 123, {"v": 1}), PutOp(("a",), 123, None)):
        with pytest.raises(InvalidValueError, match="the key must be a str"):
            drive([op], canned())  # type: ignore[list-item]


def test_put_ops_rooted_at_langgraph_or_empty_pass_batch() -> None:
    """Write-only namespace rules belong to put(), not to op validation (langgraph-checkpoint 4.3)."""
    steps, results = drive([PutOp(("langgraph", "x"), "k", {"v": 1}), PutOp((), "k", None)], canned())
    assert results == [None, None]
    assert [type(s) for s in steps] == [Write]


def test_list_namespaces_become_tuples_before_anything_is_cached() -> None:
    steps, _ = drive([SearchOp(["a", "b"]), GetOp(["a"], "k"), PutOp(["a"], "k", {"v": 1})], canned())  # type: ignore[arg-type]
    (_find_get, find_search) = steps[0].steps  # type: ignore[union-attr]
    assert find_search.filter == {"path": {"$regex": "^a\\.b\\."}}
    assert steps[1].requests[0].item == (("a",), "k")  # type: ignore[union-attr]


def test_gets_hide_expired_with_omit_expired() -> None:
    steps, _ = drive([GetOp(("a",), "k")], canned(), ctx(TTLSettings(omit_expired=True)))
    (find,) = steps[0].steps  # type: ignore[union-attr]
    assert isinstance(find, Find)
    assert find.filter == {"$and": [{"_id": {"$in": ["a.\x00k"]}}, {"expires_at": {"$not": {"$lte": NOW}}}]}


# --------------------------------------------------------------------------- puts


def test_n_puts_are_one_write() -> None:
    ops = [PutOp(("a",), f"k{i}", {"v": i}) for i in range(5)]
    steps, results = drive(ops, canned())
    assert results == [None] * 5
    # One millisecond apart, the last op "now": newest first lists them in op order.
    assert steps == [
        Write(
            tuple(
                q.put_item_request(("a",), f"k{i}", {"v": i}, NOW - timedelta(milliseconds=4 - i), None, None)
                for i in range(5)
            )
        )
    ]


def test_put_ttl() -> None:
    steps, _ = drive([PutOp(("a",), "7", {"v": 1}, ttl=1.5)], canned())
    assert steps == [Write((q.put_item_request(("a",), "7", {"v": 1}, NOW, 1.5, None),))]


def test_duplicate_puts_collapse_to_the_last() -> None:
    ops = [PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "k", {"v": 2}), PutOp(("a",), "other", {"v": 3})]
    steps, _ = drive(ops, canned())
    assert steps == [
        Write(
            (
                q.put_item_request(("a",), "k", {"v": 2}, NOW - timedelta(milliseconds=1), None, None),
                q.put_item_request(("a",), "other", {"v": 3}, NOW, None, None),
            )
        )
    ]


def test_put_then_delete_is_a_delete_and_delete_then_put_is_a_put() -> None:
    steps, _ = drive([PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "k", None)], canned())
    assert steps == [Write(tuple(q.delete_item_requests(("a",), "k", with_vectors=False)))]
    steps, _ = drive([PutOp(("a",), "k", None), PutOp(("a",), "k", {"v": 1})], canned())
    assert steps == [Write((q.put_item_request(("a",), "k", {"v": 1}, NOW, None, None),))]


def test_reads_come_before_the_write() -> None:
    ops = [PutOp(("a",), "k", {"v": 1}), GetOp(("a",), "k"), PutOp(("a",), "k", {"v": 2})]
    old = doc(("a",), "k", {"v": 0})
    steps, results = drive(ops, canned({repr({"_id": {"$in": ["a.\x00k"]}}): [old]}))
    assert [type(s) for s in steps] == [Parallel, Write]
    assert results[1].value == {"v": 0}  # the state before the batch
    assert steps[1] == Write((q.put_item_request(("a",), "k", {"v": 2}, NOW, None, None),))


def test_all_reads_are_one_parallel_step() -> None:
    ops = [
        GetOp(("a",), "k1"),
        SearchOp(("a",), filter={"c": "red"}, limit=3, offset=2),
        GetOp(("a",), "k2"),
        SearchOp(("b",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a",)),), max_depth=2),
    ]
    steps, _ = drive(ops, canned())
    assert steps == [
        Parallel(
            (
                Find("items", {"_id": {"$in": ["a.\x00k1", "a.\x00k2"]}}, {**ITEM_PROJECTION, "_id": 1}, batch_size=2),
                Find("items", q.search_filter(("a",), {"c": "red"}, None), ITEM_PROJECTION, q.ITEM_SORT, 2, 3),
                Find("items", q.search_filter(("b",), None, None), ITEM_PROJECTION, q.ITEM_SORT, 0, 10),
                Aggregate("items", q.list_namespaces_pipeline((MatchCondition("prefix", ("a",)),), 2, None, 0, 100)),
            )
        )
    ]


def test_empty_batch_asks_for_nothing() -> None:
    assert drive([], canned()) == ([], [])


# --------------------------------------------------------------------------- search and list_namespaces


def test_search_results_are_search_items_in_server_order() -> None:
    op = SearchOp(("a",))
    docs = [doc(("a",), "new", {"v": 2}), doc(("a", "b"), "old", {"v": 1})]
    _, results = drive([op], canned({repr(q.search_filter(("a",), None, None)): docs}))
    assert [type(i) for i in results[0]] == [SearchItem, SearchItem]
    assert [(i.namespace, i.key, i.score) for i in results[0]] == [(("a",), "new", None), (("a", "b"), "old", None)]


def test_search_with_limit_zero_asks_for_nothing() -> None:
    assert drive([SearchOp(("a",), limit=0)], canned()) == ([], [[]])


def test_query_without_index_is_a_plain_search() -> None:
    steps, _ = drive([SearchOp(("a",), query="hello")], canned())
    assert steps == [
        Parallel((Find("items", q.search_filter(("a",), None, None), ITEM_PROJECTION, q.ITEM_SORT, 0, 10),))
    ]


def test_list_namespaces_is_sorted_and_paged_on_the_server() -> None:
    op = ListNamespacesOp(limit=2, offset=1)
    pipeline = q.list_namespaces_pipeline(None, None, None, 1, 2)
    page = [{"_id": ["a", "x"]}, {"_id": ["b"]}]
    steps, results = drive([op], canned({repr(pipeline): page}))
    assert steps == [Parallel((Aggregate("items", pipeline),))]  # one trip, only the page
    assert results == [[("a", "x"), ("b",)]]


def test_list_namespaces_with_limit_zero_asks_for_nothing() -> None:
    assert drive([ListNamespacesOp(limit=0)], canned()) == ([], [[]])


# --------------------------------------------------------------------------- TTL refresh


def test_get_refreshes_items_with_their_own_ttl() -> None:
    ops = [GetOp(("a",), "k1"), GetOp(("a",), "k2"), GetOp(("a",), "plain")]
    docs = [
        doc(("a",), "k1", {}, ttl_minutes=2.0),
        doc(("a",), "k2", {}, ttl_minutes=0.5),
        doc(("a",), "plain", {}),
    ]
    steps, _ = drive(ops, canned({repr({"_id": {"$in": ["a.\x00k1", "a.\x00k2", "a.\x00plain"]}}): docs}))
    assert steps[1] == Write(tuple(q.refresh_ttl_requests("items", {0.5: ["a.\x00k2"], 2.0: ["a.\x00k1"]}, NOW)))


def test_no_refresh_when_refresh_ttl_is_false_or_item_has_no_ttl() -> None:
    docs = [doc(("a",), "k", {}, ttl_minutes=2.0)]
    steps, _ = drive([GetOp(("a",), "k", refresh_ttl=False)], canned({repr({"_id": {"$in": ["a.\x00k"]}}): docs}))
    assert [type(s) for s in steps] == [Parallel]
    steps, _ = drive([GetOp(("a",), "k")], canned({repr({"_id": {"$in": ["a.\x00k"]}}): [doc(("a",), "k", {})]}))
    assert [type(s) for s in steps] == [Parallel]


def test_search_refreshes_what_it_returns() -> None:
    docs = [doc(("a",), "k", {}, ttl_minutes=1.0)]
    steps, _ = drive([SearchOp(("a",))], canned({repr(q.search_filter(("a",), None, None)): docs}))
    assert steps[1] == Write(tuple(q.refresh_ttl_requests("items", {1.0: ["a.\x00k"]}, NOW)))


def test_refresh_of_an_item_put_in_the_same_batch_is_dropped() -> None:
    docs = [doc(("a",), "k", {}, ttl_minutes=1.0)]
    ops = [GetOp(("a",), "k"), PutOp(("a",), "k", {"v": 1})]
    steps, _ = drive(ops, canned({repr({"_id": {"$in": ["a.\x00k"]}}): docs}))
    assert steps[1] == Write((q.put_item_request(("a",), "k", {"v": 1}, NOW, None, None),))


# --------------------------------------------------------------------------- write failures


def test_rejected_item_write_raises_write_error_naming_the_item() -> None:
    ops = [PutOp(("a",), "ok", {"v": 1}), PutOp(("a",), "bad", {"v": 2})]
    with pytest.raises(WriteError) as info:
        drive(ops, canned(outcome=WriteOutcome(errors=[(1, "E11000 boom")])))
    assert info.value.failures == [(("a",), "bad", "E11000 boom")]
    assert "'bad'" in str(info.value)


def test_failed_ttl_refresh_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    docs = [doc(("a",), "k", {}, ttl_minutes=1.0)]
    with caplog.at_level(logging.WARNING, logger="mongostore"):
        _, results = drive(
            [GetOp(("a",), "k")],
            canned({repr({"_id": {"$in": ["a.\x00k"]}}): docs}, WriteOutcome(errors=[(0, "refresh failed")])),
        )
    assert results[0].key == "k"
    assert "refresh failed" in caplog.text


# --------------------------------------------------------------------------- validation before any step


@pytest.mark.parametrize(
    ("bad_op", "error"),
    [
        (PutOp(("a",), 5, {"v": 1}), InvalidValueError),  # type: ignore[arg-type]
        (GetOp(("a",), 5), InvalidValueError),  # type: ignore[arg-type]
        (PutOp(("a", "\ud800"), "k", {"v": 1}), InvalidNamespaceError),
        (PutOp(("a",), "\ud800", {"v": 1}), InvalidValueError),
        (PutOp(("a",), "k", {"v": "\udfff"}), InvalidValueError),
        (PutOp(("a",), "k", {"v": 1}, ttl=float("inf")), ValueError),
        (PutOp(("a",), "k", {"v": 1}, ttl=float("nan")), ValueError),
        (PutOp(("a",), "k", {"v": 1}, ttl=1e10), ValueError),
        (SearchOp(("a",), filter={"n": {"$in": [re.compile("^a")]}}), InvalidFilterError),
        (SearchOp(("a",), filter={"d": date(2026, 1, 1)}), InvalidFilterError),
        (SearchOp(("a",), filter={"d": {"$gt": Decimal("1.5")}}), InvalidFilterError),
        (PutOp(("a.b",), "k", {"v": 1}), InvalidNamespaceError),
        (PutOp(("a", ""), "k", {"v": 1}), InvalidNamespaceError),
        (PutOp(("a", 1), "k", {"v": 1}), InvalidNamespaceError),  # type: ignore[arg-type]
        (GetOp(("a.b",), "k"), InvalidNamespaceError),
        (GetOp(("a\x00",), "k"), InvalidNamespaceError),
        (SearchOp(("",)), InvalidNamespaceError),
        (ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),)), InvalidNamespaceError),
        (ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("x", "")),)), InvalidNamespaceError),
        (PutOp(("a",), "k", ["not", "a", "dict"]), InvalidValueError),  # type: ignore[arg-type]
        (PutOp(("a",), "k", {"$set": {"a\x00": 1}}), InvalidValueError),
        (PutOp(("a",), "k", {"s": {1, 2}}), InvalidValueError),
        (SearchOp(("a",), filter={"$where": "1"}), InvalidFilterError),
        (SearchOp(("a",), filter={"meta.a": 1}), InvalidFilterError),
        (SearchOp(("a",), limit=-1), ValueError),
        (SearchOp(("a",), offset=-1), ValueError),
        (ListNamespacesOp(limit=-1), ValueError),
        (ListNamespacesOp(max_depth=-1), ValueError),
        (ListNamespacesOp(match_conditions=(MatchCondition("infix", ("a",)),)), InvalidFilterError),  # type: ignore[arg-type]
        (PutOp(("a",), "k", {"v": 1}, ttl=-1), ValueError),
        (PutOp(("a",), "k", {"v": 1}, index="v"), ValueError),  # type: ignore[arg-type]
        ("not an op", ValueError),
    ],
)
def test_validation_errors_come_before_any_step(bad_op: Any, error: type[Exception]) -> None:
    ops = [PutOp(("a",), "good", {"v": 1}), GetOp(("a",), "good"), bad_op, PutOp(("a",), "after", {"v": 2})]
    plan = batch_plan(ops, ctx())
    with pytest.raises(error):
        next(plan)  # raised before the first step: nothing was read or written


# --------------------------------------------------------------------------- semantic batches


def drive_semantic(ops: list[Any], vector_search: bool) -> tuple[list[Step], list[Any]]:
    """A batch on an index of 8 dims, a server with or without ``$vectorSearch``, the hashing embedder."""
    from mongostore.config import index_settings
    from mongostore.core.steps import Capabilities, Embed, Probe
    from mongostore.tools.embeddings import HashingEmbeddings

    index = index_settings({"dims": 8, "embed": HashingEmbeddings(8), "fields": ["text"]})
    context = PlanContext("memories", index, None, NOW, clock=lambda: NOW)
    caps = Capabilities("8.0", emulated=False, vector_search=vector_search, client_bulk_write=vector_search)
    base = canned()

    def answer(step: Step) -> Any:
        if isinstance(step, Probe):
            return caps
        if isinstance(step, Embed):
            return HashingEmbeddings(8).embed_documents(list(step.texts))
        return base(step)

    return drive(ops, answer, context)


def test_an_agent_step_makes_one_embedding_call_between_its_two_reads() -> None:
    """1 search + 3 puts + 2 gets on Atlas (issue 35): the reads that need no vector (the gets, the
    stored hashes), one embedding call for the query and the new texts together, the $vectorSearch
    page, one write: as many round trips as before, one embedding call fewer."""
    from mongostore.core.steps import Embed

    ops = [
        SearchOp(("u",), query="pizza"),
        PutOp(("u",), "a", {"text": "I like pizza"}),
        PutOp(("u",), "b", {"text": "I like pasta"}),
        PutOp(("u",), "c", {"text": "I like sushi"}),
        GetOp(("u",), "a"),
        GetOp(("u",), "z"),
    ]
    steps, results = drive_semantic(ops, vector_search=True)
    kinds = [type(s).__name__ for s in steps]
    assert kinds == ["Probe", "Parallel", "Embed", "Parallel", "Aggregate", "Write"]
    first, embed, second = steps[1:4]
    assert isinstance(first, Parallel) and isinstance(second, Parallel)
    assert [(type(s).__name__, s.role) for s in first.steps] == [("Find", "items"), ("Find", "vectors")]
    assert embed == Embed(("pizza", "I like pizza", "I like pasta", "I like sushi"))  # one call
    assert [type(s).__name__ for s in second.steps] == ["Aggregate"]
    assert "$vectorSearch" in second.steps[0].pipeline[0]  # type: ignore[union-attr]
    # the Aggregate after it fills a page the (empty) vector search left short with items
    # that have no valid vector (none listed, or listed hashes without a vector document)
    assert results[0] == [] and results[4] is None


def test_a_local_search_beside_puts_reads_once_and_embeds_once() -> None:
    """Off Atlas the search's candidates need no vector: one read, one embedding call, one write."""
    from mongostore.core.steps import Embed

    ops = [SearchOp(("u",), query="pizza"), PutOp(("u",), "a", {"text": "I like pizza"})]
    steps, _ = drive_semantic(ops, vector_search=False)
    assert [type(s).__name__ for s in steps] == ["Probe", "Parallel", "Embed", "Write"]
    assert steps[2] == Embed(("pizza", "I like pizza"))


# --------------------------------------------------------------------------- capabilities


def run_probe(answers: dict[str, Any], **kw: Any) -> tuple[list[Step], Any]:
    """Drive the server then the search probe: answers by step type name; an exception instance is thrown in."""
    from mongostore.core.plan import search_probe_plan, server_probe_plan

    def probe_plan(*, emulated: bool, has_client_bulk: bool, index_name: str = "", **search: Any) -> Any:
        server = yield from server_probe_plan(emulated=emulated, has_client_bulk=has_client_bulk)
        return (yield from search_probe_plan(server, index_name=index_name, **search))

    plan = probe_plan(**kw)
    steps: list[Step] = []
    try:
        step = next(plan)
        while True:
            steps.append(step)
            key = getattr(step, "name", None) if type(step).__name__ == "ServerCommand" else type(step).__name__
            answer = answers[str(key)]
            step = plan.throw(answer) if isinstance(answer, Exception) else plan.send(answer)
    except StopIteration as stop:
        return steps, stop.value


READY_INDEX = {"name": "mongostore_vectors", "status": "READY", "queryable": True}


def test_probe_an_atlas_8_server() -> None:
    answers = {"buildInfo": {"version": "8.0.4"}, "hello": {"maxWireVersion": 25}, "ListSearchIndexes": [READY_INDEX]}
    steps, caps = run_probe(
        answers, emulated=False, has_vectors=True, mode="auto", has_client_bulk=True, index_name="mongostore_vectors"
    )
    assert [type(s).__name__ for s in steps] == ["ServerCommand", "ServerCommand", "ListSearchIndexes"]
    assert (caps.server_version, caps.vector_search, caps.client_bulk_write) == ("8.0.4", True, True)
    assert (caps.search_commands, caps.index_status, caps.recheck) == (True, "READY", False)


@pytest.mark.parametrize("code", [31082, 6047401, 115, 59, 40324])
def test_probe_a_server_without_search(code: int) -> None:
    from pymongo.errors import OperationFailure

    answers = {
        "buildInfo": {"version": "7.0.12"},
        "hello": {"maxWireVersion": 21},
        "ListSearchIndexes": OperationFailure("no search", code=code),
    }
    _, caps = run_probe(answers, emulated=False, has_vectors=True, mode="auto", has_client_bulk=True)
    assert (caps.vector_search, caps.client_bulk_write) == (False, False)  # wire 21 < 25: no client bulk_write
    assert str(code) in caps.detail


def test_probe_takes_an_uncoded_refusal_as_no_search(caplog: pytest.LogCaptureFixture) -> None:
    """A server that only speaks the wire protocol (mongoeco) refuses the stage with no code."""
    from pymongo.errors import OperationFailure

    refusal = OperationFailure(
        "Unsupported aggregation stage: $listSearchIndexes",
        details={"ok": 0.0, "errmsg": "Unsupported aggregation stage: $listSearchIndexes"},
    )
    assert refusal.code is None
    answers = {"buildInfo": {"version": "7.0.0"}, "hello": {"maxWireVersion": 20}, "ListSearchIndexes": refusal}
    with caplog.at_level("WARNING", logger="mongostore"):
        _, caps = run_probe(answers, emulated=False, has_vectors=True, mode="auto", has_client_bulk=True)
    assert (caps.vector_search, caps.client_bulk_write) == (False, False)
    assert "Unsupported aggregation stage: $listSearchIndexes" in caps.detail
    assert any("Unsupported aggregation stage" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_probe_lets_other_errors_through() -> None:
    from pymongo.errors import OperationFailure

    answers = {"buildInfo": {}, "hello": {}, "ListSearchIndexes": OperationFailure("unauthorized", code=13)}
    with pytest.raises(OperationFailure, match="unauthorized"):
        run_probe(answers, emulated=False, has_vectors=True, mode="auto", has_client_bulk=True)


def test_probe_of_a_fake_or_a_forced_mode_asks_less() -> None:
    steps, caps = run_probe(
        {"ListSearchIndexes": TypeError("not callable")},
        emulated=True,
        has_vectors=True,
        mode="auto",
        has_client_bulk=True,
    )
    assert [type(s).__name__ for s in steps] == ["ListSearchIndexes"]  # mongomock answers no server commands
    assert not caps.vector_search and not caps.client_bulk_write
    # forced atlas: the index list is read (to refuse a missing index), but its failure is not fatal
    steps, caps = run_probe(
        {"ListSearchIndexes": TypeError("x")}, emulated=True, has_vectors=True, mode="atlas", has_client_bulk=False
    )
    assert [type(s).__name__ for s in steps] == ["ListSearchIndexes"]
    assert caps.vector_search and "set in index config" in caps.detail
    steps, caps = run_probe({}, emulated=True, has_vectors=True, mode="local", has_client_bulk=False)
    assert steps == [] and not caps.vector_search
