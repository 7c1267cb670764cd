"""The phases of ``batch_outcome_plan``, each driven on its own with canned answers.

``test_plan.py`` drives whole batches; here each phase gets a ``BatchState`` as the
phase before it would leave it, and the test checks the steps it yields, what it
leaves in the state and what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchItem, SearchOp
from pymongo.errors import OperationFailure

from mongostore import InvalidValueError
from mongostore.config import IndexSettings, TTLSettings, index_settings
from mongostore.core import queries as q
from mongostore.core.codec import item_id, text_hash
from mongostore.core.plan import (
    BatchState,
    PlanContext,
    batch_reads,
    embed_phase,
    probe_phase,
    rank_phase,
    read_phase,
    search_read_phase,
    validate_phase,
    write_phase,
)
from mongostore.core.plan.paths import ATLAS as ATLAS_PATH
from mongostore.core.plan.paths import LOCAL
from mongostore.core.steps import (
    Capabilities,
    DisableVectorSearch,
    Embed,
    Find,
    Parallel,
    Probe,
    Step,
    Write,
    WriteOutcome,
)
from mongostore.tools.embeddings import HashingEmbeddings

NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
EARLIER = NOW - timedelta(hours=1)
ATLAS = Capabilities("8.0", emulated=False, vector_search=True, client_bulk_write=True)


def index() -> IndexSettings:
    settings = index_settings({"dims": 4, "embed": HashingEmbeddings(4), "fields": ["text"]})
    assert settings is not None
    return settings


def context(with_index: bool = True, ttl: TTLSettings | None = None) -> PlanContext:
    return PlanContext("memories", index() if with_index else None, ttl, NOW, clock=lambda: NOW)


def doc(namespace: tuple[str, ...], key: str, value: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "_id": item_id(namespace, key),
        "namespace": list(namespace),
        "key": key,
        "value": value,
        "created_at": EARLIER,
        "updated_at": EARLIER,
        **extra,
    }


def run(plan: Generator[Step, Any, Any], answer: Callable[[Step], Any]) -> tuple[list[Step], Any]:
    """Drive a phase to its end; an answer that is an exception is thrown into it."""
    steps: list[Step] = []
    reply: Any = None
    throw = False
    try:
        while True:
            step = plan.throw(reply) if throw else plan.send(reply)
            steps.append(step)
            reply = answer(step)
            throw = isinstance(reply, BaseException)
    except StopIteration as stop:
        return steps, stop.value


def no_steps(step: Step) -> Any:
    raise AssertionError(f"unexpected step {step!r}")


# --------------------------------------------------------------------------- validate


def test_validate_phase_groups_ops_and_keeps_the_last_put_in_its_place() -> None:
    ops = [
        PutOp(("u",), "a", {"text": "one"}),
        GetOp(["u"], "a"),  # type: ignore[arg-type]
        SearchOp(("u",), query="pizza"),
        SearchOp(("u",)),
        ListNamespacesOp(),
        PutOp(("u",), "b", {"text": "two"}),
        PutOp(("u",), "a", None),
    ]
    state = validate_phase(ops, context())
    assert state.results == [None] * 7
    assert state.gets == [(1, GetOp(("u",), "a"))]  # namespaces as tuples
    assert [(s.pos, s.semantic) for s in state.searches] == [(2, True), (3, False)]
    assert [pos for pos, _ in state.listings] == [4]
    assert [(p.key, p.value) for p in state.puts.values()] == [("b", {"text": "two"}), ("a", None)]
    assert [s.pos for s in state.semantic] == [2]


def test_validate_phase_refuses_a_bad_op_before_any_step() -> None:
    with pytest.raises(InvalidValueError, match="ttl must be"):
        validate_phase([GetOp(("u",), "a"), PutOp(("u",), "k", {"v": 1}, ttl=-1)], context())


def test_without_an_index_no_search_is_semantic() -> None:
    state = validate_phase([SearchOp(("u",), query="pizza")], context(with_index=False))
    assert state.semantic == []


# --------------------------------------------------------------------------- probe


def test_probe_phase_probes_once_and_embeds_nothing() -> None:
    state = validate_phase([SearchOp(("u",), query="pizza"), SearchOp(("v",), query="pasta")], context())
    steps, _ = run(probe_phase(state), lambda step: ATLAS)
    assert steps == [Probe(state.ctx.index.index_name)]  # type: ignore[union-attr]
    assert state.use_atlas and state.caps == ATLAS


def test_probe_phase_asks_nothing_without_semantic_searches() -> None:
    state = validate_phase([SearchOp(("u",)), GetOp(("u",), "a")], context())
    assert run(probe_phase(state), no_steps) == ([], None)
    assert state.caps is None and not state.use_atlas


# --------------------------------------------------------------------------- read


def test_read_phase_is_one_parallel_step_each_answer_to_its_reader() -> None:
    state = validate_phase([GetOp(("u",), "a"), SearchOp(("u",)), PutOp(("u",), "b", {"text": "x"})], context())
    reads = batch_reads(state)
    assert [(type(r.step).__name__, r.step.role) for r in reads] == [  # type: ignore[attr-defined]
        ("Find", "items"),
        ("Find", "items"),
        ("Find", "vectors"),
    ]
    a = doc(("u",), "a", {"v": 1})
    vec = {"_id": "v1", "item_id": item_id(("u",), "b"), "text_hash": "h1", "embedding": b"e"}
    steps, _ = run(read_phase(state), lambda step: [[a], [a], [vec]])
    assert steps == [Parallel(tuple(r.step for r in reads))]
    assert state.results[0].value == {"v": 1}  # type: ignore[union-attr]
    assert [r.key for r in state.results[1]] == ["a"]  # type: ignore[union-attr]
    assert state.stored == {item_id(("u",), "b"): {"h1": vec}}


def test_read_phase_asks_nothing_for_an_empty_batch() -> None:
    state = validate_phase([SearchOp(("u",), limit=0), ListNamespacesOp(limit=0)], context())
    assert run(read_phase(state), no_steps) == ([], None)
    assert state.results == [[], []]  # answered without a read


def test_an_atlas_search_waits_for_its_vector_and_ranks_locally_when_the_server_has_no_search() -> None:
    state = validate_phase([GetOp(("u",), "a"), SearchOp(("u",), query="pizza")], context())
    state.caps, state.use_atlas = ATLAS, True
    steps, _ = run(read_phase(state), lambda step: [[]])
    assert [[r.role for r in s.steps] for s in steps] == [["items"]]  # type: ignore[attr-defined]
    assert state.searches[0].path is None  # the $vectorSearch page waits for the query vector
    state.searches[0].query_vector = [1.0, 0.0, 0.0, 0.0]
    refusal = OperationFailure("$vectorSearch stage is only allowed on MongoDB Atlas", code=31082)
    answers: list[Any] = [refusal, None, [["items"], ["vectors"]]]
    steps, _ = run(search_read_phase(state), lambda step: answers.pop(0))
    assert [type(s).__name__ for s in steps] == ["Parallel", "DisableVectorSearch", "Parallel"]
    first, disable, second = steps
    assert isinstance(first, Parallel) and isinstance(second, Parallel)
    assert "$vectorSearch" in first.steps[0].pipeline[0]  # type: ignore[union-attr]
    assert disable == DisableVectorSearch(str(refusal))
    assert [s.role for s in second.steps] == ["items", "vectors"]  # type: ignore[union-attr]
    assert not state.use_atlas and state.searches[0].path is LOCAL
    assert state.searches[0].first == [["items"], ["vectors"]]


def test_read_phase_lets_other_errors_through() -> None:
    state = validate_phase([GetOp(("u",), "a")], context())
    with pytest.raises(OperationFailure, match="boom"):
        run(read_phase(state), lambda step: OperationFailure("boom", code=2))


def test_the_reads_answer_results_refreshes_and_stored_hashes() -> None:
    ttl = TTLSettings(refresh_on_read=True, omit_expired=True)
    ops = [GetOp(("u",), "a"), SearchOp(("u",)), ListNamespacesOp(), PutOp(("u",), "b", {"text": "x"})]
    state = validate_phase(ops, context(ttl=ttl))
    a = doc(("u",), "a", {"v": 1}, ttl_minutes=5.0)
    vec = {"_id": "v1", "item_id": item_id(("u",), "b"), "text_hash": "h1", "embedding": b"e"}
    answers = [[a], [a], [{"_id": ["u"]}], [vec]]
    for read, answer in zip(batch_reads(state), answers, strict=True):
        read.take(answer)
    assert state.results[0].value == {"v": 1}  # type: ignore[union-attr]
    assert [r.key for r in state.results[1]] == ["a"]  # type: ignore[union-attr]
    assert state.results[2] == [("u",)]
    assert state.refresh == {a["_id"]: 5.0} and state.refreshers == {a["_id"]: [0, 1]}
    stored = {"_id": "v1", "item_id": item_id(("u",), "b"), "text_hash": "h1", "embedding": b"e"}
    assert state.stored == {item_id(("u",), "b"): {"h1": stored}}


# --------------------------------------------------------------------------- embed


def test_embed_phase_embeds_only_texts_whose_hash_changed() -> None:
    ops = [PutOp(("u",), "a", {"text": "same"}), PutOp(("u",), "b", {"text": "new"}), PutOp(("u",), "c", None)]
    state = validate_phase(ops, context())
    same = text_hash("text", "same")
    state.stored = {item_id(("u",), "a"): {same: {"_id": "v", "text_hash": same, "embedding": b"stored"}}}
    emb = HashingEmbeddings(4)
    steps, _ = run(embed_phase(state), lambda step: emb.embed_documents(list(step.texts)))  # type: ignore[attr-defined]
    assert steps == [Embed(("new",))]
    assert set(state.packed) == {"new"}
    assert {p.id: p.texts for p in state.puts.values() if p.texts} == {
        item_id(("u",), "a"): {"text": ("same", text_hash("text", "same"))},
        item_id(("u",), "b"): {"text": ("new", text_hash("text", "new"))},
    }


def test_validate_phase_checks_the_vector_sizes_before_any_io() -> None:
    namespace = tuple(f"label{i:04d}" + "x" * 1000 for i in range(200))
    with pytest.raises(InvalidValueError) as caught:
        validate_phase([PutOp(namespace, "k", {"text": "hello"})], context())
    assert "vector documents would be" in str(caught.value)[-400:]


def test_embed_phase_embeds_the_queries_and_the_changed_texts_in_one_call() -> None:
    ops = [
        SearchOp(("u",), query="pizza"),
        SearchOp(("v",), query="pizza"),
        SearchOp(("u",), query="pasta"),
        PutOp(("u",), "a", {"text": "pasta"}),
        PutOp(("u",), "b", {"text": "new"}),
    ]
    state = validate_phase(ops, context())
    emb = HashingEmbeddings(4)
    steps, _ = run(embed_phase(state), lambda step: emb.embed_documents(list(step.texts)))  # type: ignore[attr-defined]
    assert steps == [Embed(("pizza", "pasta", "new"))]  # a text both queried and put: once
    assert [s.query_vector for s in state.searches] == emb.embed_documents(["pizza", "pizza", "pasta"])
    assert all(type(x) is float for s in state.searches for x in s.query_vector or [])
    assert set(state.packed) == {"pasta", "new"}


def test_embed_phase_refuses_an_embedder_answer_of_the_wrong_size() -> None:
    state = validate_phase([SearchOp(("u",), query="pizza")], context())
    with pytest.raises(ValueError, match="returned 3 dimensions"):
        run(embed_phase(state), lambda step: [[0.0, 1.0, 2.0]])


def test_embed_phase_asks_nothing_without_an_index() -> None:
    state = validate_phase([PutOp(("u",), "a", {"text": "x"})], context(with_index=False))
    assert run(embed_phase(state), no_steps) == ([], None)
    assert [p.texts for p in state.puts.values()] == [{}]


# --------------------------------------------------------------------------- rank


def test_rank_phase_reads_the_atlas_page_items_from_its_rows() -> None:
    state = validate_phase([SearchOp(("u",), query="pizza", limit=1)], context())
    state.caps, state.use_atlas = ATLAS, True
    state.searches[0].query_vector = [1.0, 0.0, 0.0, 0.0]
    a = doc(("u",), "a", {"text": "pizza"})
    row = {"hits": [{"n": 3}], "scored": [{"n": 2}], "page": {"_id": a["_id"], "score": 0.5}, "item": [a]}
    state.searches[0].path, state.searches[0].first = ATLAS_PATH, [[row]]
    steps, _ = run(rank_phase(state), no_steps)
    assert steps == []  # the page's items came with it: no second round trip
    [hit] = state.results[0]  # type: ignore[misc]
    assert isinstance(hit, SearchItem) and hit.key == "a" and hit.score == 0.5


def test_rank_phase_ranks_locally_from_the_read_candidates() -> None:
    emb = HashingEmbeddings(4)
    state = validate_phase([SearchOp(("u",), query="pizza", limit=2)], context())
    state.caps = Capabilities("8.0", emulated=False, vector_search=False, client_bulk_write=True)
    state.searches[0].query_vector = emb.embed_query("pizza")
    a, b = doc(("u",), "a", {"text": "pizza"}), doc(("u",), "b", {"text": "sushi"})
    ha = text_hash("text", "pizza")
    items = [{"_id": a["_id"], "vectors": [ha]}, {"_id": b["_id"]}]
    vectors = [
        {"item_id": a["_id"], "field": "text", "text_hash": ha, "embedding": q.float32_vector(emb.embed_query("pizza"))}
    ]
    state.searches[0].path, state.searches[0].first = LOCAL, [items, vectors]

    def answer(step: Step) -> Any:
        assert isinstance(step, Parallel)
        return [[a], [{"item_id": a["_id"], "text_hash": ha}], [b]]

    steps, _ = run(rank_phase(state), answer)
    # One trip: the scored page's items, the check of their vectors, and the unscored ones, newest first.
    assert len(steps) == 1 and [s.role for s in steps[0].steps] == ["items", "vectors", "items"]  # type: ignore[union-attr]
    unscored_read = steps[0].steps[2]  # type: ignore[union-attr]
    assert isinstance(unscored_read, Find) and unscored_read.sort == q.ITEM_SORT and unscored_read.limit == 1
    scored, unscored = state.results[0]  # type: ignore[misc]
    assert (scored.key, unscored.key, unscored.score) == ("a", "b", None)
    assert scored.score == pytest.approx(1.0)


# --------------------------------------------------------------------------- write


def test_write_phase_is_one_write_refreshes_then_vectors_then_items() -> None:
    state = validate_phase([PutOp(("u",), "a", {"text": "x"}), PutOp(("u",), "gone", None)], context())
    state.puts[("u",), "a"].texts = {"text": ("x", "hx")}
    state.packed = {"x": q.float32_vector([1.0, 0.0, 0.0, 0.0])}
    state.refresh = {"other": 5.0, item_id(("u",), "a"): 5.0}  # a put is not refreshed: it is rewritten
    state.refreshers = {"other": [3], item_id(("u",), "a"): [4]}
    steps, outcome = run(write_phase(state), lambda step: WriteOutcome())
    [write] = steps
    assert isinstance(write, Write)
    assert [(r.role, r.kind) for r in write.requests] == [
        ("items", "update_many"),  # TTL refresh
        ("vectors", "update_many"),
        ("vectors", "update_one"),  # a's vector
        ("vectors", "delete_many"),  # gone's vectors
        ("items", "update_one"),  # a
        ("items", "delete_one"),  # gone
    ]
    assert write.requests[2].item == (("u",), "a")
    assert outcome.results is state.results and outcome.refreshing == {3}
    assert outcome.failures == {} and outcome.write_error is None


def test_write_phase_reports_per_item_failures_and_whole_write_errors() -> None:
    state = validate_phase([PutOp(("u",), "a", {"v": 1})], context(with_index=False))
    steps, outcome = run(write_phase(state), lambda step: WriteOutcome(errors=[(0, "E11000 duplicate key")]))
    assert [type(s) for s in steps] == [Write]
    assert outcome.failures == {(("u",), "a"): "E11000 duplicate key"} and outcome.stored == set()

    state = validate_phase([PutOp(("u",), "a", {"v": 1})], context(with_index=False))
    down = ConnectionError("network down")
    _, outcome = run(write_phase(state), lambda step: down)
    assert outcome.write_error is down
    assert outcome.error_for(0, PutOp(("u",), "a", {"v": 1})) is down


def test_write_phase_asks_nothing_when_there_is_nothing_to_write() -> None:
    state = validate_phase([GetOp(("u",), "a")], context())
    steps, outcome = run(write_phase(state), no_steps)
    assert steps == [] and outcome.results == [None]


def test_batch_state_starts_empty() -> None:
    state = BatchState(context(), [])
    assert (state.semantic, state.puts, state.refresh) == ([], {}, {})
