"""Fact-check sentinel (docs/detectors.md, after seed 001's HaluGate Sentinel): which prompts need checking.

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
  (:func:`pipeline.offline.sentinel_training.train_sentinel`).
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
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from itertools import chain, pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from detectors.base import Detector, DetectorResult, DetectorStatus, SentinelVerdict, checked_threshold
from detectors.llm_call import LLMCall
from detectors.sentinel import DETECTOR, SentinelConfig
from detectors.spec import Ingredients, no_evidence_lines

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
_WEIGHT_DECIMALS = 5

FloatArray = npt.NDArray[np.float64]


class SentinelModelError(ValueError):
    """A sentinel model or prompt file that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class Features:
    """One prompt's sparse feature vector: bucket indices and their L2-normalized values."""

    indices: npt.NDArray[np.int64]
    values: FloatArray


class Featurizer:
    """Hashed feature vectors of prompts (see the module docstring for what they hold).

    Remembers the buckets of the words it has seen, since vocabularies repeat.
    """

    def __init__(self) -> None:
        self._token_buckets = functools.lru_cache(maxsize=_WORD_CACHE_SIZE)(_token_buckets)

    def __call__(self, text: str) -> Features:
        """The feature vector of one prompt."""
        if len(text) > _HEAD_CHARS + _TAIL_CHARS:
            text = text[:_HEAD_CHARS] + "\n" + text[-_TAIL_CHARS:]
        tokens = _TOKEN.findall(text.lower())
        buckets = list(chain.from_iterable(map(self._token_buckets, tokens)))
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
        return Features(indices, values / np.linalg.norm(values))


def _token_buckets(token: str) -> tuple[int, ...]:
    """Buckets of a token and its char n-grams."""
    padded = f" {token} "
    grams = [padded[i : i + n] for n in _CHAR_NGRAMS for i in range(len(padded) - n + 1)]
    return (_bucket("w:" + token), *(_bucket("c:" + gram) for gram in grams))


def _bucket(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) % N_FEATURES


@dataclass(frozen=True)
class SentinelModel:
    """Multinomial logistic regression over hashed features; ``weights`` is dense (N_FEATURES, labels)."""

    labels: tuple[str, ...]
    weights: FloatArray
    bias: FloatArray
    training: Mapping[str, Any]
    featurize: Featurizer = field(default_factory=Featurizer, repr=False, compare=False)

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
        logits = self.bias + self._linear([self.featurize(prompt) for prompt in prompts])
        with_system = [i for i, system in enumerate(systems) if system]
        if with_system:
            logits[with_system] += _SYSTEM_WEIGHT * self._linear([self.featurize(systems[i]) for i in with_system])
        return softmax(logits)

    def _linear(self, rows: Sequence[Features]) -> FloatArray:
        """``X @ weights`` for sparse rows, in one gather and one segmented sum."""
        if not rows:
            return np.zeros((0, len(self.labels)))
        indices = np.concatenate([row.indices for row in rows])
        values = np.concatenate([row.values for row in rows])
        offsets = np.cumsum([0] + [len(row.indices) for row in rows[:-1]])
        result: FloatArray = np.add.reduceat(self.weights[indices] * values[:, None], offsets, axis=0)
        return result


def softmax(logits: FloatArray) -> FloatArray:
    """Row-wise softmax of a logits matrix."""
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
    return result.status is not DetectorStatus.OK or result.sentinel is None or result.sentinel.needs_fact_check


class SentinelDetector(Detector):
    """Labels each prompt and records factual answers given without grounding context."""

    name = "sentinel"
    version = "1.0.0"

    def __init__(self, config: SentinelConfig, threshold: float) -> None:
        self._config = config
        self._threshold = checked_threshold(threshold)
        self._model: SentinelModel | None = None

    def start(self) -> None:
        """Load the weights (a :class:`SentinelModelError` naming the file when they are unusable)."""
        self._loaded()

    def close(self) -> None:
        """Drop the weights and the word cache."""
        self._model = None

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Classify every call with a prompt in one matrix operation."""
        model = self._loaded()
        with_prompt = [call for call in calls if call.prompt.strip()]
        rows = iter(
            model.probabilities(
                [call.prompt for call in with_prompt], [call.system_instructions for call in with_prompt]
            )
        )
        return [
            self._verdict(call, model, next(rows))
            if call.prompt.strip()
            else self.skipped_result("no prompt text to classify (content not captured?)", self._threshold)
            for call in calls
        ]

    def _loaded(self) -> SentinelModel:
        if self._model is None:
            self._model = SentinelModel.load(self._config.model_path)
        return self._model

    def _verdict(self, call: LLMCall, model: SentinelModel, probabilities: FloatArray) -> DetectorResult:
        best = int(np.argmax(probabilities))
        label, probability = model.labels[best], float(probabilities[best])
        score = float(probabilities[model.labels.index(FACTUAL)])
        factual = score >= self._threshold
        context = has_context(call, self._config.min_context_words)
        answered = bool(call.answer.strip())
        if factual and not context and answered:
            summary = "unverified_factual"
        elif factual:
            summary = "factual prompt, answer grounded in context" if context else "factual prompt, no text answer"
        else:
            summary = f"{label} prompt ({probability:.2f})"
        verdict = SentinelVerdict(
            label=label,
            confidence=probability,
            needs_fact_check=factual or probability < self._config.min_confidence,
            has_context=context,
        )
        result = self.scored_result(
            score,
            self._threshold,
            severity=_SEVERITY,
            summary=summary,
            evidence={
                "label": label,
                "probability": round(probability, 4),
                "needs_fact_check": verdict.needs_fact_check,
                "has_context": context,
            },
            flaggable=not context and answered,  # a factual answer is unverified only without context
        )
        return replace(result, sentinel=verdict)


def build(ing: Ingredients) -> SentinelDetector:
    """The detector, from its settings and threshold."""
    return SentinelDetector(ing.config(DETECTOR), ing.threshold)


render_evidence = no_evidence_lines  # its flag means "unverified": it never reaches an alert
