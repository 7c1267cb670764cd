"""A batch in one round trip when the store knows its puts' stored hashes (``plan.one_trip``).

Driven with canned answers, as ``test_batch_phases.py`` drives the phases: which batches
qualify, the one ``Parallel`` they send, what a failed read or a failed condition does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp
from test_batch_phases import context, doc

from mongostore.core.codec import item_id, text_hash, vector_id
from mongostore.core.hashes import TextHashes
from mongostore.core.plan import BatchOutcome, PlanContext, batch_outcome_plan, validate_phase
from mongostore.core.plan.one_trip import eligible
from mongostore.core.steps import (
    Attempt,
    Attempted,
    Capabilities,
    Embed,
    Find,
    Parallel,
    Probe,
    Step,
    Write,
    WriteOutcome,
)

NS = ("users", "alice")
LOCAL = Capabilities("7.0", fake=True, vector_search=False, client_bulk_write=False)


def known(ctx: PlanContext, *keys: str, text: str = "old") -> TextHashes:
    hashes = TextHashes()
    hashes.learn((item_id(NS, k), {"text": text_hash("text", text)}) for k in keys)
    return hashes


def ctx_with(hashes: TextHashes | None, unordered: bool, with_index: bool = True) -> PlanContext:
    return dataclasses.replace(context(with_index), text_hashes=hashes, unordered=unordered)


def drive(plan: Generator[Step, Any, Any], answer: Callable[[Step], Any]) -> tuple[list[Step], BatchOutcome]:
    """Run a plan to its end; an answer that is an exception is thrown into it."""
    steps: list[Step] = []
    try:
        step = next(plan)
        while True:
            steps.append(step)
            reply = answer(step)
            step = plan.throw(reply) if isinstance(reply, Exception) else plan.send(reply)
    except StopIteration as stop:
        return steps, stop.value


def embed_answer(step: Embed) -> list[list[float]]:
    return [[1.0, 0.0, 0.0, 0.0] for _ in step.texts]


def trip(*attempts: Attempted) -> Callable[[Step], Any]:
    """Answers for a batch that embeds, then sends its one ``Parallel``: ``attempts``."""

    def answer(step: Step) -> Any:
        if isinstance(step, Embed):
            return embed_answer(step)
        if isinstance(step, Parallel):
            return list(attempts)
        return None

    return answer


# --------------------------------------------------------------------------- which batches


@pytest.mark.parametrize(
    ("ops", "unordered", "keys_known", "expected"),
    [
        pytest.param([PutOp(NS, "a", {"text": "new"})], False, True, True, id="known-put-alone"),
        pytest.param([PutOp(NS, "a", {"text": "new"})], False, False, False, id="unknown-put"),
        pytest.param([SearchOp(NS), PutOp(NS, "a", {"text": "new"})], False, True, False, id="ordered-with-reads"),
        pytest.param([SearchOp(NS), PutOp(NS, "a", {"text": "new"})], True, True, True, id="coalesced-with-reads"),
        pytest.param([GetOp(NS, "a"), PutOp(NS, "a", {"text": "new"})], True, True, False, id="get-of-a-put-key"),
        pytest.param([GetOp(NS, "b"), PutOp(NS, "a", {"text": "new"})], True, True, True, id="get-of-another-key"),
        pytest.param(
            [GetOp(NS, "b", refresh_ttl=True), PutOp(NS, "a", {"text": "new"})], True, True, True, id="refresh"
        ),
        pytest.param([PutOp(NS, "a", None)], False, False, False, id="delete-alone"),
        pytest.param([SearchOp(NS)], True, True, False, id="no-puts"),
    ],
)
def test_which_batches_go_in_one_trip(ops: list[Any], unordered: bool, keys_known: bool, expected: bool) -> None:
    ctx = ctx_with(known(context(), "a") if keys_known else TextHashes(), unordered)
    assert eligible(validate_phase(ops, ctx)) is expected


def test_without_an_index_only_reads_and_writes_together_gain() -> None:
    put = PutOp(NS, "a", {"text": "new"})
    assert not eligible(validate_phase([put], ctx_with(None, True, with_index=False)))
    assert eligible(validate_phase([GetOp(NS, "b"), put], ctx_with(None, True, with_index=False)))


# --------------------------------------------------------------------------- the one trip


def one_parallel(steps: list[Step]) -> Parallel:
    [parallel] = [s for s in steps if isinstance(s, Parallel)]
    return parallel


def test_reads_writes_and_checks_go_in_one_parallel_after_one_embedding() -> None:
    """Changed text: embedded with the query in one call, its vector upserted; unchanged text:
    a conditional retag of its own ``Write``; the reads beside them; no stored-hash read."""
    ctx = ctx_with(known(context(), "changed", "same"), unordered=True)
    ops = [
        SearchOp(NS, query="pizza"),
        PutOp(NS, "changed", {"text": "new"}),
        PutOp(NS, "same", {"text": "old"}),
        GetOp(NS, "other"),
    ]

    def answer(step: Step) -> Any:
        if isinstance(step, Probe):
            return LOCAL
        if isinstance(step, Embed):
            return embed_answer(step)
        if isinstance(step, Parallel):
            reads = step.steps[-1]
            assert isinstance(reads, Attempt) and isinstance(reads.step, Parallel)
            return [
                Attempted(WriteOutcome(round_trips=2)),
                Attempted(WriteOutcome(round_trips=1, matched=1)),
                Attempted([[] for _ in reads.step.steps]),
            ]
        return None

    steps, outcome = drive(batch_outcome_plan(ops, ctx), answer)
    embeds = [s for s in steps if isinstance(s, Embed)]
    assert [e.texts for e in embeds] == [("pizza", "new")]
    parallel = one_parallel(steps)
    main, checks, reads = parallel.steps
    assert isinstance(main, Attempt) and isinstance(main.step, Write)
    assert isinstance(checks, Attempt) and isinstance(checks.step, Write)
    [check] = checks.step.requests
    assert check.filter == {"_id": vector_id(item_id(NS, "same"), "text"), "text_hash": text_hash("text", "old")}
    assert check.kind == "update_one" and not check.upsert
    vector_writes = [r for r in main.step.requests if r.role == "vectors"]
    assert [r.filter["_id"] for r in vector_writes] == [vector_id(item_id(NS, "changed"), "text")]
    assert isinstance(reads, Attempt)
    put_ids = [item_id(NS, "changed"), item_id(NS, "same")]
    assert not any(isinstance(r, Find) and r.filter == {"item_id": {"$in": put_ids}} for r in reads.step.steps)
    assert outcome.results == [[], None, None, None] and outcome.read_error is None
    # The store's hashes learned what landed.
    assert ctx.text_hashes is not None
    assert ctx.text_hashes.get(item_id(NS, "changed")) == {"text": text_hash("text", "new")}


def test_a_failed_read_fails_the_reads_and_not_the_writes_beside_it() -> None:
    ctx = ctx_with(known(context(), "a"), unordered=True)
    ops = [GetOp(NS, "b"), PutOp(NS, "a", {"text": "new"})]
    boom = ConnectionError("read failed")
    _, outcome = drive(batch_outcome_plan(ops, ctx), trip(Attempted(WriteOutcome()), Attempted(error=boom)))
    assert outcome.error_for(0, ops[0]) is boom
    assert outcome.error_for(1, ops[1]) is None


def test_a_failed_write_fails_its_puts_and_forgets_their_hashes() -> None:
    hashes = known(context(), "a")
    ctx = ctx_with(hashes, unordered=True)
    ops = [GetOp(NS, "b"), PutOp(NS, "a", {"text": "new"})]
    boom = ConnectionError("write failed")
    answers = trip(Attempted(error=boom), Attempted([[doc(NS, "b", {"text": "b"})]]))
    _, outcome = drive(batch_outcome_plan(ops, ctx), answers)
    assert outcome.error_for(1, ops[1]) is boom
    assert outcome.error_for(0, ops[0]) is None and outcome.results[0] is not None
    assert hashes.get(item_id(NS, "a")) is None


def test_a_condition_that_fails_reads_the_stored_hashes_and_writes_the_missing_vector() -> None:
    """Another writer changed the vector the hashes believed unchanged: matched 0."""
    hashes = known(context(), "a")
    ctx = ctx_with(hashes, unordered=False)
    ops = [PutOp(NS, "a", {"text": "old"})]
    iid = item_id(NS, "a")

    def answer(step: Step) -> Any:
        if isinstance(step, Parallel):
            return [Attempted(WriteOutcome()), Attempted(WriteOutcome(matched=0))]
        if isinstance(step, Find):
            return [{"item_id": iid, "field": "text", "text_hash": text_hash("text", "other")}]
        if isinstance(step, Embed):
            return embed_answer(step)
        if isinstance(step, Write):
            return WriteOutcome()
        return None

    steps, outcome = drive(batch_outcome_plan(ops, ctx), answer)
    after = steps[steps.index(one_parallel(steps)) + 1 :]
    assert [type(s).__name__ for s in after] == ["Find", "Embed", "Write"]
    find, embed, write = after
    assert isinstance(find, Find) and find.filter == {"item_id": {"$in": [iid]}}
    assert isinstance(embed, Embed) and embed.texts == ("old",)
    assert isinstance(write, Write)
    [req] = write.requests
    assert req.filter == {"_id": vector_id(iid, "text")} and req.upsert
    assert req.update is not None and req.update["$set"]["text_hash"] == text_hash("text", "old")  # type: ignore[call-overload]
    assert not outcome.failures
    assert hashes.get(iid) == {"text": text_hash("text", "old")}


def test_a_condition_that_holds_needs_no_repair() -> None:
    ctx = ctx_with(known(context(), "a"), unordered=False)

    def answer(step: Step) -> Any:
        if isinstance(step, Parallel):
            return [Attempted(WriteOutcome()), Attempted(WriteOutcome(matched=1))]
        raise AssertionError(f"unexpected {step!r}")

    steps, outcome = drive(batch_outcome_plan([PutOp(NS, "a", {"text": "old"})], ctx), answer)
    assert len(steps) == 1 and not outcome.failures  # no embedding: the text is unchanged


def test_ttl_refreshes_of_what_the_reads_returned_are_written_after_the_trip() -> None:
    """Which items to refresh is known from the reads' answers only: one more write, then."""
    ctx = ctx_with(known(context(), "a"), unordered=True)
    ops = [GetOp(NS, "b", refresh_ttl=True), PutOp(NS, "a", {"text": "new"})]
    with_ttl = doc(NS, "b", {"text": "b"}, ttl_minutes=5.0)

    def answer(step: Step) -> Any:
        if isinstance(step, Embed):
            return embed_answer(step)
        if isinstance(step, Parallel):
            return [Attempted(WriteOutcome()), Attempted([[with_ttl]])]
        if isinstance(step, Write):
            return ConnectionError("refresh failed")
        raise AssertionError(f"unexpected {step!r}")

    steps, outcome = drive(batch_outcome_plan(ops, ctx), answer)
    refresh = steps[-1]
    assert isinstance(refresh, Write)
    assert [r.filter for r in refresh.requests if r.role == "items"] == [{"_id": {"$in": [item_id(NS, "b")]}}]
    assert isinstance(outcome.error_for(0, ops[0]), ConnectionError)
    assert outcome.error_for(1, ops[1]) is None


def test_text_hashes_keep_the_most_recently_used_items_and_copy_what_they_give() -> None:
    hashes = TextHashes(max_items=2)
    hashes.learn([("a", {"f": "1"}), ("b", {"f": "2"})])
    got = hashes.get("a")  # a is now the most recently used
    assert got == {"f": "1"}
    got["f"] = "changed"  # a copy: the entry is unchanged
    hashes.learn([("c", {})])
    assert hashes.get("b") is None and hashes.get("a") == {"f": "1"} and hashes.get("c") == {}
    hashes.forget(["a"])
    assert hashes.snapshot() == {"c": {}}
    hashes.restore({"x": {"f": "9"}})
    assert hashes.snapshot() == {"x": {"f": "9"}} and len(hashes) == 1
