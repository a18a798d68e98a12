"""Fact-check sentinel (SPEC §4.7, after seed 001's HaluGate Sentinel): which prompts need checking.

Token-level and claim-level detection is wasted on a poem or a code review, and produces
false positives there ("your poem contains unsupported claims!").  The sentinel classifies
the prompt as ``factual`` (a question about the world, a RAG question, summarizing or
describing given data, a knowledge-grounded dialogue turn: all need checking) or as
``creative`` / ``code`` / ``opinion`` / ``chitchat`` (nothing to verify), so the worker can
skip content detectors for the latter (:func:`needs_fact_check`).

Design choices, stated because each trades accuracy for speed and footprint:

* **A linear model on hashed n-grams**, not a transformer: word 1-2-grams, char 3-grams
  inside words, the first two words (imperatives such as "write", "summarize" carry most
  of the intent) and coarse length/line-count buckets, hashed (CRC-32, stable across
  processes) into 2**18 buckets, sublinear tf, L2-normalized.  Multinomial logistic
  regression trained with numpy; weights ship as JSON (only buckets seen in training).
  It needs no heavy dependency and scores well over 5,000 prompts/s on one core; it
  does not generalize like HaluGate's ModernBERT (96.4 %), so its held-out accuracy is
  recorded with the weights and retraining on your own prompts is one function call
  (:func:`train_sentinel`).
* **Long prompts are clipped** to their head and tail (600 + 300 characters): the
  instruction and the question sit there, the pasted documents in between add cost, not
  intent.
* **System instructions are a weak signal**: their features count with weight 0.3, so a
  "You are a coding assistant" system prompt tilts an ambiguous user turn without
  overruling a clear one.
* **Score** is the probability that the prompt is factual; ``needs_fact_check`` is
  ``score >= threshold`` or an uncertain prediction (top probability below
  ``min_confidence``): when unsure, checking is the safe side.
* **Flag** ``unverified_factual`` (severity 1, a finding, not an alert) when the prompt is
  factual (``score >= threshold``), the model answered in text, and there is no grounding
  context: no structured sources, no quoted or fenced material of 8 words or more in the
  prompt, and the prompt context beyond the question (its last sentence) is shorter than
  ``min_context_words`` — RAG apps that paste documents into the prompt have context even
  without sources.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from itertools import chain, pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from detectors.base import Detector, DetectorResult, DetectorStatus, checked_threshold
from detectors.llm_call import LLMCall

LABELS = ("factual", "creative", "code", "opinion", "chitchat")
FACTUAL = "factual"
BUILTIN_MODEL = "sentinel_model.json"
MODEL_FORMAT = 1
N_FEATURES = 2**18

_HEAD_CHARS = 600
_TAIL_CHARS = 300
_SYSTEM_WEIGHT = 0.3
_CHAR_NGRAMS = (3,)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Material quoted or fenced in the prompt ("extract the order from this email: '...'"); a
# quote opens after whitespace or a colon, so apostrophes ("what's") never open one.
_OPEN_QUOTES, _CLOSE_QUOTES = "\"'\u201c\u2018\u00ab", "\"'\u201d\u2019\u00bb"
_QUOTED = re.compile(
    rf"```(.+?)```|(?:^|(?<=[\s:]))[{_OPEN_QUOTES}]([^{_CLOSE_QUOTES}]+)[{_CLOSE_QUOTES}](?!\w)", re.DOTALL
)
_MIN_QUOTED_WORDS = 8  # shorter quotes are titles and names ("who wrote 'Dune'?"), not documents
_WORD_CACHE_SIZE = 100_000
_SEVERITY = 1  # a finding to count, never an alert on its own
# Training: full-batch gradient descent with Nesterov momentum on the mean cross-entropy.
_L2 = 1e-4
_LEARNING_RATE = 2.0
_MOMENTUM = 0.9
_EPOCHS = 200
_WEIGHT_DECIMALS = 5

FloatArray = npt.NDArray[np.float64]


class SentinelModelError(ValueError):
    """A sentinel model or prompt file that cannot be used; the message names the file."""


class SentinelConfig(BaseModel):
    """Which weights to load and when a prediction is too unsure to skip checking."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(default=None, description="weights JSON; None: the built-in model")
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    min_context_words: int = Field(default=30, ge=1)


@dataclass(frozen=True, slots=True)
class _Features:
    """One prompt's sparse feature vector: bucket indices and their L2-normalized values."""

    indices: npt.NDArray[np.int64]
    values: FloatArray


@functools.lru_cache(maxsize=_WORD_CACHE_SIZE)
def _token_buckets(token: str) -> tuple[int, ...]:
    """Buckets of a token and its char n-grams; cached, since vocabularies repeat."""
    padded = f" {token} "
    grams = [padded[i : i + n] for n in _CHAR_NGRAMS for i in range(len(padded) - n + 1)]
    return (_bucket("w:" + token), *(_bucket("c:" + gram) for gram in grams))


def _bucket(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) % N_FEATURES


def featurize(text: str) -> _Features:
    """The hashed feature vector of a prompt (see the module docstring for what it holds)."""
    if len(text) > _HEAD_CHARS + _TAIL_CHARS:
        text = text[:_HEAD_CHARS] + "\n" + text[-_TAIL_CHARS:]
    tokens = _TOKEN.findall(text.lower())
    buckets = list(chain.from_iterable(map(_token_buckets, tokens)))
    buckets += [_bucket(f"b:{left} {right}") for left, right in pairwise(tokens)]
    buckets += [
        _bucket("first:" + " ".join(tokens[:1])),
        _bucket("first2:" + " ".join(tokens[:2])),
        _bucket(f"len:{int(math.log2(1 + len(tokens)))}"),
        _bucket(f"lines:{min(text.count(chr(10)), 5)}"),
    ]
    counts = Counter(buckets)
    indices = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    values = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
    return _Features(indices, values / np.linalg.norm(values))


@dataclass(frozen=True)
class SentinelModel:
    """Multinomial logistic regression over hashed features; ``weights`` is dense (N_FEATURES, labels)."""

    labels: tuple[str, ...]
    weights: FloatArray
    bias: FloatArray
    training: Mapping[str, Any]

    @classmethod
    def load(cls, path: Path | None = None) -> SentinelModel:
        """Read a weights file, or the built-in one when ``path`` is None."""
        origin = str(path) if path else f"built-in {BUILTIN_MODEL}"
        try:
            if path is None:
                text = resources.files("detectors.data").joinpath(BUILTIN_MODEL).read_text("utf-8")
            else:
                text = path.read_text("utf-8")
            document = json.loads(text)
            if document.get("format") != MODEL_FORMAT or document.get("n_features") != N_FEATURES:
                raise ValueError(f"expected format {MODEL_FORMAT} with n_features {N_FEATURES}")
            labels = tuple(document["labels"])
            weights = np.zeros((N_FEATURES, len(labels)))
            weights[np.asarray(document["buckets"], dtype=np.int64)] = np.asarray(document["weights"])
            bias = np.asarray(document["bias"], dtype=np.float64)
            if FACTUAL not in labels or bias.shape != (len(labels),):
                raise ValueError(f"labels must include {FACTUAL!r} and match the bias")
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise SentinelModelError(f"{origin}: not a usable sentinel model: {exc}") from exc
        return cls(labels, weights, bias, document.get("training", {}))

    def to_json(self) -> dict[str, Any]:
        """The weights file's content: only buckets with a non-zero (rounded) weight."""
        rounded = np.round(self.weights, _WEIGHT_DECIMALS)
        buckets = np.flatnonzero(np.any(rounded != 0.0, axis=1))
        return {
            "format": MODEL_FORMAT,
            "n_features": N_FEATURES,
            "labels": list(self.labels),
            "bias": np.round(self.bias, _WEIGHT_DECIMALS).tolist(),
            "training": dict(self.training),
            "buckets": buckets.tolist(),
            "weights": rounded[buckets].tolist(),
        }

    def probabilities(self, prompts: Sequence[str], systems: Sequence[str] = ()) -> FloatArray:
        """Class probabilities, one row per prompt, columns in ``labels`` order.

        ``systems`` (aligned with ``prompts``, empty strings allowed) adds the system
        instructions' features at weight 0.3.
        """
        logits = self.bias + self._linear([featurize(prompt) for prompt in prompts])
        with_system = [i for i, system in enumerate(systems) if system]
        if with_system:
            logits[with_system] += _SYSTEM_WEIGHT * self._linear([featurize(systems[i]) for i in with_system])
        return _softmax(logits)

    def _linear(self, rows: Sequence[_Features]) -> FloatArray:
        """``X @ weights`` for sparse rows, in one gather and one segmented sum."""
        if not rows:
            return np.zeros((0, len(self.labels)))
        indices = np.concatenate([row.indices for row in rows])
        values = np.concatenate([row.values for row in rows])
        offsets = np.cumsum([0] + [len(row.indices) for row in rows[:-1]])
        result: FloatArray = np.add.reduceat(self.weights[indices] * values[:, None], offsets, axis=0)
        return result


def _softmax(logits: FloatArray) -> FloatArray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    result: FloatArray = shifted / shifted.sum(axis=1, keepdims=True)
    return result


def has_context(call: LLMCall, min_context_words: int) -> bool:
    """Whether the call carries grounding beyond the question itself (see the module docstring)."""
    if call.sources or any(_quoted_words(match) >= _MIN_QUOTED_WORDS for match in _QUOTED.finditer(call.prompt)):
        return True
    pieces = [piece for piece in _SENTENCE_END.split(call.prompt.strip()) if piece.strip()]
    question_words = len(pieces[-1].split()) if pieces else 0
    return len(call.grounding_text.split()) - question_words >= min_context_words


def _quoted_words(match: re.Match[str]) -> int:
    return len((match.group(1) or match.group(2)).split())


def needs_fact_check(result: DetectorResult) -> bool:
    """Whether content detectors should run on a call, given the sentinel's result on it.

    Anything but a clean verdict (error, skipped for lack of prompt text) means "check":
    the gate only ever saves work it is sure is not needed.
    """
    return result.status is not DetectorStatus.OK or bool(result.evidence.get("needs_fact_check", True))


class SentinelDetector(Detector):
    """Labels each prompt and records factual answers given without grounding context."""

    name = "sentinel"
    version = "1.0.0"

    def __init__(self, config: SentinelConfig, threshold: float) -> None:
        self._config = config
        self._threshold = checked_threshold(threshold)
        self._model = SentinelModel.load(config.model_path)
        self._factual = self._model.labels.index(FACTUAL)

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Classify every call with a prompt in one matrix operation."""
        with_prompt = [call for call in calls if call.prompt.strip()]
        rows = iter(
            self._model.probabilities(
                [call.prompt for call in with_prompt], [call.system_instructions for call in with_prompt]
            )
        )
        return [
            self._verdict(call, next(rows))
            if call.prompt.strip()
            else self.skipped_result("no prompt text to classify (content not captured?)", self._threshold)
            for call in calls
        ]

    def _verdict(self, call: LLMCall, probabilities: FloatArray) -> DetectorResult:
        best = int(np.argmax(probabilities))
        label, probability = self._model.labels[best], float(probabilities[best])
        score = float(probabilities[self._factual])
        factual = score >= self._threshold
        context = has_context(call, self._config.min_context_words)
        flagged = factual and not context and bool(call.answer.strip())
        if flagged:
            summary = "unverified_factual"
        elif factual:
            summary = "factual prompt, answer grounded in context" if context else "factual prompt, no text answer"
        else:
            summary = f"{label} prompt ({probability:.2f})"
        return DetectorResult(
            detector=self.name,
            detector_version=self.version,
            score=score,
            flagged=flagged,
            threshold=self._threshold,
            severity=_SEVERITY if flagged else 0,
            summary=summary,
            evidence={
                "label": label,
                "probability": round(probability, 4),
                "needs_fact_check": factual or probability < self._config.min_confidence,
                "has_context": context,
            },
        )


# --- training ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrainingReport:
    """How a trained model did on prompts it was not trained on."""

    dataset_sha256: str
    seed: int
    holdout_fraction: float
    n_train: int
    n_holdout: int
    accuracy: float
    factual_accuracy: float  # the decision that matters: factual vs anything else
    recall: dict[str, float]

    def __str__(self) -> str:
        recall = ", ".join(f"{label} {value:.3f}" for label, value in self.recall.items())
        return (
            f"trained on {self.n_train} prompts, held out {self.n_holdout}: accuracy {self.accuracy:.3f}, "
            f"factual-vs-rest accuracy {self.factual_accuracy:.3f}; recall: {recall}"
        )


def read_prompts(path: Path) -> list[tuple[str, str]]:
    """``(text, label)`` pairs of a JSONL prompt file; a bad line raises naming file and line."""
    examples = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                text, label = record["text"], record["label"]
                if not isinstance(text, str) or not text.strip() or label not in LABELS:
                    raise ValueError(f"need a non-empty 'text' and a 'label' in {LABELS}")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise SentinelModelError(f"{path}:{number}: not a labelled prompt: {exc}") from exc
            examples.append((text, label))
    return examples


def train_sentinel(prompts_path: Path, out_path: Path, holdout_fraction: float = 0.2, seed: int = 0) -> TrainingReport:
    """Train on a stratified split of ``prompts_path``, evaluate on the rest, write the weights.

    Deterministic for a given file and seed.  The written model is the one evaluated
    (trained without the held-out prompts), so the recorded accuracy describes it.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction!r}")
    examples = read_prompts(prompts_path)
    targets = np.array([LABELS.index(label) for _, label in examples])
    train, holdout = _stratified_split(targets, holdout_fraction, seed)
    weights, bias = _fit([featurize(examples[i][0]) for i in train], targets[train])
    untrained = SentinelModel(LABELS, weights, bias, {})
    predicted = np.argmax(untrained.probabilities([examples[i][0] for i in holdout]), axis=1)
    actual = targets[holdout]
    factual = LABELS.index(FACTUAL)
    report = TrainingReport(
        dataset_sha256=hashlib.sha256(prompts_path.read_bytes()).hexdigest(),
        seed=seed,
        holdout_fraction=holdout_fraction,
        n_train=len(train),
        n_holdout=len(holdout),
        accuracy=round(float(np.mean(predicted == actual)), 4),
        factual_accuracy=round(float(np.mean((predicted == factual) == (actual == factual))), 4),
        recall={
            label: round(float(np.mean(predicted[actual == k] == k)), 4)
            for k, label in enumerate(LABELS)
            if np.any(actual == k)
        },
    )
    model = SentinelModel(LABELS, weights, bias, asdict(report))
    out_path.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n", encoding="utf-8")
    return report


def _stratified_split(
    targets: npt.NDArray[np.int64], holdout_fraction: float, seed: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Train and holdout indices with every class held out in proportion (at least one each)."""
    rng = np.random.default_rng(seed)
    train: list[int] = []
    holdout: list[int] = []
    for label in range(len(LABELS)):
        members = rng.permutation(np.flatnonzero(targets == label))
        cut = max(1, round(len(members) * holdout_fraction)) if len(members) > 1 else 0
        holdout += members[:cut].tolist()
        train += members[cut:].tolist()
    return np.array(sorted(train), dtype=np.int64), np.array(sorted(holdout), dtype=np.int64)


def _fit(rows: Sequence[_Features], targets: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
    """Class-balanced, L2-regularized softmax regression; returns dense weights and the bias.

    Products with the design matrix are done sparsely (a gather and a bincount per label),
    over the buckets the training set uses only: a few hundred thousand non-zeros instead
    of a dense prompts x 2**18 matrix.
    """
    used, columns = np.unique(np.concatenate([row.indices for row in rows]), return_inverse=True)
    values = np.concatenate([row.values for row in rows])
    row_of = np.repeat(np.arange(len(rows)), [len(row.indices) for row in rows])
    n_labels = len(LABELS)
    onehot = np.eye(n_labels)[targets]
    counts = np.bincount(targets, minlength=n_labels).astype(np.float64)
    sample_weight = (len(targets) / (n_labels * np.maximum(counts, 1.0)))[targets] / len(targets)
    weights, bias = np.zeros((len(used), n_labels)), np.zeros(n_labels)
    weights_velocity, bias_velocity = np.zeros_like(weights), np.zeros_like(bias)
    for _ in range(_EPOCHS):
        weights_ahead = weights + _MOMENTUM * weights_velocity
        bias_ahead = bias + _MOMENTUM * bias_velocity
        products = values[:, None] * weights_ahead[columns]
        logits = np.stack([np.bincount(row_of, products[:, j], len(rows)) for j in range(n_labels)], axis=1)
        error = (_softmax(logits + bias_ahead) - onehot) * sample_weight[:, None]
        contributions = values[:, None] * error[row_of]
        gradient = np.stack([np.bincount(columns, contributions[:, j], len(used)) for j in range(n_labels)], axis=1)
        weights_velocity = _MOMENTUM * weights_velocity - _LEARNING_RATE * (gradient + _L2 * weights_ahead)
        bias_velocity = _MOMENTUM * bias_velocity - _LEARNING_RATE * error.sum(axis=0)
        weights += weights_velocity
        bias += bias_velocity
    dense = np.zeros((N_FEATURES, n_labels))
    dense[used] = weights
    return dense, bias
