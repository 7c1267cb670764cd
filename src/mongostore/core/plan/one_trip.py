"""One round trip for a batch whose puts need no stored-hash read (``TextHashes``).

A put embeds only the texts whose stored hash differs; for a key the store knows
nothing about, that takes a read before the embedding, and the write after it: two
round trips. When the store's ``TextHashes`` know every put's stored hashes (it wrote
those items itself), the batch embeds its changed texts and its queries first, in one
call, and sends its reads and its writes together (``batch.one_trip_plan``), which
is allowed when the batch has no reads, or when its ops come from concurrent calls
that have no order among them (the async store's coalesced calls).

What the hashes cannot promise the writes check: a vector believed unchanged is
retagged on the condition that it still holds its hash (a ``Write`` of its own,
whose matched count tells); when one fails, ``repair_plan`` reads the stored hashes
of those puts and writes the vectors they lack, before the callers are answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from mongostore.core import queries as q
from mongostore.core import retrieval_plan as modes
from mongostore.core.codec import item_id
from mongostore.core.plan.batch_writes import learn_hashes
from mongostore.core.plan.context import LARGE_BATCH, Plan, embed_texts
from mongostore.core.plan.state import BatchOutcome, BatchState, PendingPut
from mongostore.core.steps import Find, Write, WriteOutcome


def eligible(state: BatchState) -> bool:
    """Whether ``state``'s batch may send its reads and writes at once (see the module docstring);
    when it may, ``state.stored`` holds the puts' known hashes (``hashes_known``).

    Not when: it would take one round trip anyway (no puts; or no reads and no put
    with a value and an index); it has reads and its ops are ordered (a ``batch()``:
    reads see the state before its writes); a get asks for a key the batch puts (it
    answers the stored value, as in an ordered batch); a retrieval mode is configured;
    or a put's stored hashes are not known.
    """
    ctx, index = state.ctx, state.index
    if ctx.sharded:  # its conditional retags are keyed by the vector's _id alone: no shard key for mongos
        return False
    has_reads = bool(state.gets or state.searches or state.listings)
    if has_reads and not ctx.unordered:
        return False
    hashed = index is not None and any(p.value is not None for p in state.put_list)
    if not state.puts or not (has_reads or hashed):
        return False  # one trip already
    if state.gets:
        put_ids = {p.id for p in state.put_list}
        if any(item_id(op.namespace, op.key) in put_ids for _, op in state.gets):
            return False
    if index is None:
        return True
    hashes = ctx.text_hashes
    if hashes is None or modes.uses_modes(index) or index.auto_embed is not None:
        return False
    known: dict[str, dict[str, str]] = {}
    for p in state.put_list:
        if p.value is None:
            continue
        stored = hashes.get(p.id)
        if stored is None:
            return False
        known[p.id] = stored
    state.stored, state.hashes_known = known, True
    return True


def checked_puts(state: BatchState, checks: list[q.WriteRequest]) -> list[PendingPut]:
    """The puts with a conditional retag among ``checks``."""
    targets = {r.item for r in checks}
    return [p for t, p in state.puts.items() if t in targets]


def repair_plan(state: BatchState, outcome: BatchOutcome, suspects: list[PendingPut], write_now: datetime) -> Plan:
    """A conditional retag matched nothing: another writer changed or removed a vector the
    store's hashes believed unchanged. Read the stored hashes of ``suspects`` and write
    the vectors they lack (embedding only those texts); the store's hashes learn the result."""
    index = state.index
    assert index is not None
    landed = [p for p in suspects if (p.namespace, p.key) not in outcome.failures]
    if not landed or outcome.write_error is not None:
        return None
    docs = yield Find(
        "vectors",
        {"item_id": {"$in": [p.id for p in landed]}},
        {"_id": 0, "item_id": 1, "field": 1, "text_hash": 1},
        batch_size=LARGE_BATCH,
    )
    stored: dict[str, dict[str, str]] = {}
    for doc in docs:
        stored.setdefault(doc["item_id"], {})[doc["field"]] = doc["text_hash"]
    missing = [
        (p, fname, text, h)
        for p in landed
        for fname, (text, h) in state.put_texts.get(p.id, {}).items()
        if stored.get(p.id, {}).get(fname) != h
    ]
    if not missing:
        return None
    new_texts = tuple(dict.fromkeys(text for _, _, text, _ in missing if text not in state.packed))
    if new_texts:
        embedded = yield from embed_texts(new_texts, index)
        state.packed.update({t: q.float32_vector(v) for t, v in embedded.items()})
    requests = []
    for p, fname, text, h in missing:
        assert p.value is not None
        values = q.filter_field_values(p.value, index.filter_fields)
        requests.append(
            q.put_vector_request(p.namespace, p.key, fname, h, state.packed[text], values, write_now, p.ttl, p.id)
        )
    try:
        written: WriteOutcome = yield Write(tuple(requests))
    except Exception as exc:
        vectors_failed(state, outcome, {(p.namespace, p.key): str(exc) for p, *_ in missing})
        return None
    failed = {requests[i].item: msg for i, msg in written.errors}
    vectors_failed(state, outcome, failed)
    cache = state.ctx.vector_cache
    if cache is not None and cache.in_use:
        cache.add_many([(p.id, f, h, state.packed[t]) for p, f, t, h in missing if (p.namespace, p.key) not in failed])
    return None


def vectors_failed(
    state: BatchState, outcome: BatchOutcome, messages: Mapping[tuple[tuple[str, ...], str] | None, str]
) -> None:
    """These items' values landed, their vectors did not (item -> the error's message):
    reported as in ``batch_writes.record``, and the store's hashes forget them."""
    for item, msg in messages.items():
        if item is None:
            continue
        outcome.failures.setdefault(item, msg)
        outcome.stored.add(item)
    learn_hashes(state, outcome)
