"""Model-based span detection (docs/detectors.md): a token classifier marks unsupported answer spans.

"Spans" here are stretches of the answer text, not OpenTelemetry spans.  The detector keeps
the name ``span_model`` in findings, thresholds and the ``detectors.span_model`` settings,
which stored data and deployed settings files already use.

LettuceDetect-style: the context and the question form the first segment of a pair
encoding, the answer the second; the model gives every answer token a hallucination
probability, tokens at or above ``token_threshold`` become character spans of the answer,
and the response score aggregates the spans.  An optional NLI model then explains each
span against its context (HaluGate): contradiction → severity 4, neutral → 2, entailment
→ the span is dropped as a false positive.  Both models are ONNX files the user provides;
without ``model_path`` the detector is not built at all (:func:`build_token_classifier_detector`).

Design choices, stated because each trades something:

* **Long contexts** are cut into overlapping token windows (``stride_tokens`` shared by
  neighbours); every window is paired with the *whole* answer, and an answer token's
  probability is its **minimum** over windows: a token is supported when *any* window
  supports it, and a window that lacks the relevant passage says nothing against it.
  Context and question form one windowed stream, so the question is seen by the last
  window only; the model judges support, for which the passages matter.
* The answer is truncated only when it alone leaves fewer than ``min_context_tokens`` for
  the context; the evidence says so.  At most ``max_chunks`` windows run per call (the
  first ones: RAG sources usually come ranked) so one huge prompt cannot stall a worker.
* Spans are merged from consecutive flagged tokens, grown to whole words (a flagged
  sub-word marks its word) and stripped of surrounding whitespace.  A span's probability
  is the mean over its flagged tokens, so it is never below ``token_threshold``.
* The score aggregates the spans only: ``max_span`` (the worst span) or ``noisy_or``
  (1 - prod(1 - p) over spans, treating them as independent).  Tokens below the threshold
  do not count, which keeps long answers from accumulating many weak tokens into a flag.
  No span (or none left after NLI) → score 0.
* All windows of all calls in a batch run through one session in padded batches of
  ``batch_size`` sequences; NLI pairs of all spans likewise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Encoding, Tokenizer

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.llm_call import LLMCall
from detectors.models.onnx_models import FloatArray, IntArray, OnnxClassifier, TokenSequence, load_tokenizer, softmax
from detectors.span_model import DETECTOR, SpanModelConfig
from detectors.spec import Ingredients
from detectors.text import evidence as shown

MAX_SPANS = 20  # per call in the evidence, so rows stay small
TOKENIZER_FILE = "tokenizer.json"
_SEVERITY = {"contradiction": 4, "neutral": 2}  # entailment drops the span instead
_DEFAULT_SEVERITY = 2  # unsupported, as HaluGate's neutral
# After . ! ? and whitespace, after the CJK full stop, exclamation and question marks, at line breaks.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])|\n+")


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One context window paired with the answer."""

    sequence: TokenSequence
    answer_start: int  # position of the first answer token in ``sequence``
    context: str  # the context text of this window: the NLI premise


@dataclass(frozen=True, slots=True)
class _Plan:
    """One call's answer tokens and the windows they are classified in."""

    answer: str
    offsets: list[tuple[int, int]]  # character offsets of the kept answer tokens
    chunks: list[_Chunk]
    answer_truncated: bool
    context_truncated: bool


@dataclass(frozen=True, slots=True)
class _Span:
    """A merged run of flagged answer tokens, as characters of the answer."""

    start: int
    end: int
    probability: float
    tokens: slice  # the answer tokens merged into it
    nli: str | None = None

    @property
    def severity(self) -> int:
        return _SEVERITY.get(self.nli or "", _DEFAULT_SEVERITY)


# A call's index in the batch, its plan, its [windows, tokens] probabilities and its spans.
_Found = tuple[int, _Plan, FloatArray, list[_Span]]


class _NliExplainer:
    """Labels (premise, hypothesis) pairs with an ONNX NLI model, in batches."""

    def __init__(self, config: SpanModelConfig, model_path: Path) -> None:
        self._tokenizer = load_tokenizer(config.nli_tokenizer_path or model_path.parent / TOKENIZER_FILE, "NLI")
        # longest_first never fails: a long sentence is cut too rather than erroring the batch.
        self._tokenizer.enable_truncation(config.nli_max_length_tokens, strategy="longest_first")
        labels = config.nli_labels
        self._indices = [labels.contradiction, labels.neutral, labels.entailment]
        self._names = ["contradiction", "neutral", "entailment"]
        self._batch_size = config.batch_size
        self._model = OnnxClassifier(
            model_path, "NLI", output_rank=2, min_labels=max(self._indices) + 1, threads=config.threads
        )

    def labels(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The NLI label of each (premise, hypothesis) pair."""
        if not pairs:
            return []
        sequences = [_sequence(encoding.ids, encoding.type_ids) for encoding in self._tokenizer.encode_batch(pairs)]
        logits = self._model.run(sequences, self._batch_size)
        return [self._names[int(np.argmax(row[self._indices]))] for row in logits]


@dataclass(frozen=True, slots=True)
class _Models:
    """What :meth:`TokenClassifierDetector.start` loads."""

    tokenizer: Tokenizer
    span: OnnxClassifier
    nli: _NliExplainer | None

    @classmethod
    def load(cls, config: SpanModelConfig, model_path: Path) -> _Models:
        tokenizer = load_tokenizer(config.tokenizer_path or model_path.parent / TOKENIZER_FILE, "span")
        specials = tokenizer.num_special_tokens_to_add(is_pair=True)
        if config.max_length_tokens - specials - config.min_context_tokens < 1:
            raise ValueError(
                f"max_length_tokens={config.max_length_tokens} leaves no answer token after {specials} special "
                f"tokens and min_context_tokens={config.min_context_tokens}"
            )
        span = OnnxClassifier(
            model_path,
            "span",
            output_rank=3,
            min_labels=config.hallucination_label_index + 1,
            threads=config.threads,
        )
        nli = _NliExplainer(config, config.nli_model_path) if config.nli_model_path else None
        return cls(tokenizer, span, nli)


class TokenClassifierDetector(Detector):
    """Flags answers whose tokens a token-classification model finds unsupported by the context."""

    name = "span_model"
    version = "1.0.0"

    def __init__(self, config: SpanModelConfig, threshold: float) -> None:
        if config.model_path is None:
            raise ValueError("span_model: model_path is not set; build_token_classifier_detector skips the detector")
        self._config = config
        self._model_path = config.model_path
        self._threshold = checked_threshold(threshold)
        self._models: _Models | None = None

    def start(self) -> None:
        """Load the tokenizer and the models (a :class:`ModelLoadError` naming a file that is unusable)."""
        self._loaded()

    def close(self) -> None:
        """Drop the tokenizer and the ONNX sessions."""
        self._models = None

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Classify every window of every call in shared padded batches, then explain the spans."""
        models = self._loaded()
        results: list[DetectorResult | None] = [None] * len(calls)
        jobs: list[tuple[int, str, str]] = []
        for index, call in enumerate(calls):
            if not call.answer.strip():
                results[index] = self._skipped("empty answer")
            elif not call.grounding_text.strip():
                results[index] = self._skipped("no grounding context to check the answer against")
            else:
                jobs.append((index, _first_segment(call), call.answer))
        encodings = models.tokenizer.encode_batch([(first, answer) for _, first, answer in jobs]) if jobs else []
        planned: list[tuple[int, _Plan]] = []
        for (index, first, answer), encoding in zip(jobs, encodings, strict=True):
            plan = self._plan(encoding, first, answer)
            if plan is None:
                results[index] = self._skipped("the tokenizer found no tokens in the answer or the context")
            else:
                planned.append((index, plan))
        window_probabilities = self._classify(models.span, [plan for _, plan in planned])
        found = [
            (index, plan, windows, _find_spans(plan, windows.min(axis=0), self._config.token_threshold))
            for (index, plan), windows in zip(planned, window_probabilities, strict=True)
        ]
        if models.nli is not None:
            found = _explain(models.nli, found)
        for index, plan, _, spans in found:
            results[index] = self._result(plan, spans)
        return [result for result in results if result is not None]

    def _loaded(self) -> _Models:
        if self._models is None:
            self._models = _Models.load(self._config, self._model_path)
        return self._models

    def _plan(self, encoding: Encoding, first: str, answer: str) -> _Plan | None:
        """Cut the first segment into windows that each fit ``max_length_tokens`` with the answer."""
        config = self._config
        sequence_ids = encoding.sequence_ids
        first_positions = [i for i, segment in enumerate(sequence_ids) if segment == 0]
        answer_positions = [i for i, segment in enumerate(sequence_ids) if segment == 1]
        if not first_positions or not answer_positions:
            return None
        ids = np.asarray(encoding.ids, dtype=np.int64)
        type_ids = np.asarray(encoding.type_ids, dtype=np.int64)
        offsets = encoding.offsets
        first_start, first_end = first_positions[0], first_positions[-1] + 1
        answer_start, answer_end = answer_positions[0], answer_positions[-1] + 1
        specials = len(ids) - len(first_positions) - len(answer_positions)
        kept = min(len(answer_positions), config.max_length_tokens - specials - config.min_context_tokens)
        width = config.max_length_tokens - specials - kept
        starts = _window_starts(len(first_positions), width, config.stride_tokens)
        prefix, middle = slice(0, first_start), slice(first_end, answer_start)
        answer_kept, suffix = slice(answer_start, answer_start + kept), slice(answer_end, len(ids))
        chunks = []
        for start in starts[: config.max_chunks]:
            window = slice(first_start + start, min(first_start + start + width, first_end))
            parts = (prefix, window, middle, answer_kept, suffix)
            chunks.append(
                _Chunk(
                    sequence=TokenSequence(
                        np.concatenate([ids[part] for part in parts]),
                        np.concatenate([type_ids[part] for part in parts]),
                    ),
                    answer_start=first_start + (window.stop - window.start) + (answer_start - first_end),
                    context=first[offsets[window.start][0] : offsets[window.stop - 1][1]],
                )
            )
        return _Plan(
            answer=answer,
            offsets=offsets[answer_kept],
            chunks=chunks,
            answer_truncated=kept < len(answer_positions),
            context_truncated=len(starts) > config.max_chunks,
        )

    def _classify(self, model: OnnxClassifier, plans: Sequence[_Plan]) -> list[FloatArray]:
        """Per plan, a [windows, answer tokens] matrix of hallucination probabilities."""
        chunks = [chunk for plan in plans for chunk in plan.chunks]
        logits = iter(model.run([chunk.sequence for chunk in chunks], self._config.batch_size))
        label = self._config.hallucination_label_index
        matrices = []
        for plan in plans:
            rows = [
                softmax(next(logits)[chunk.answer_start : chunk.answer_start + len(plan.offsets)])[:, label]
                for chunk in plan.chunks
            ]
            matrices.append(np.stack(rows))
        return matrices

    def _result(self, plan: _Plan, spans: list[_Span]) -> DetectorResult:
        score = _aggregate([span.probability for span in spans], self._config.aggregation)
        evidence: dict[str, Any] = {
            "spans": [_span_evidence(plan.answer, span) for span in spans[:MAX_SPANS]],
            "span_count": len(spans),
            "aggregation": self._config.aggregation,
            "chunks": len(plan.chunks),
            "answer_truncated": plan.answer_truncated,
            "context_truncated": plan.context_truncated,
        }
        if spans:
            worst = max(spans, key=lambda span: span.probability)
            text = plan.answer[worst.start : worst.end]
            summary = f"{len(spans)} unsupported span(s); strongest {text!r} p={worst.probability:.2f}"
        else:
            summary = "no unsupported spans"
        severity = max((span.severity for span in spans), default=_DEFAULT_SEVERITY)
        return self.scored_result(score, self._threshold, severity=severity, summary=summary, evidence=evidence)

    def _skipped(self, reason: str) -> DetectorResult:
        return self.skipped_result(reason, self._threshold)


def build_token_classifier_detector(config: SpanModelConfig, threshold: float) -> TokenClassifierDetector | None:
    """The detector, or ``None`` when no model is configured (the detector is off)."""
    return None if config.model_path is None else TokenClassifierDetector(config, threshold)


def _first_segment(call: LLMCall) -> str:
    """Context then question; the question is left out when the context already holds it.

    Without structured sources the grounding text *is* the prompt, question included.
    """
    context, question = call.grounding_text, call.prompt
    return f"{context}\n\n{question}" if question and question not in context else context


def _sequence(ids: Sequence[int], type_ids: Sequence[int]) -> TokenSequence:
    as_array: IntArray = np.asarray(ids, dtype=np.int64)
    return TokenSequence(as_array, np.asarray(type_ids, dtype=np.int64))


def _window_starts(length: int, width: int, stride: int) -> list[int]:
    """Start offsets of ``width``-token windows overlapping by ``stride``; the last one ends at ``length``."""
    if length <= width:
        return [0]
    return [*range(0, length - width, width - stride), length - width]


def _find_spans(plan: _Plan, probabilities: FloatArray, threshold: float) -> list[_Span]:
    """Merge flagged tokens into word-aligned character spans of the answer."""
    groups: list[list[int]] = []
    bounds: list[tuple[int, int]] = []
    for token in np.flatnonzero(probabilities >= threshold).tolist():
        start, end = _word_bounds(plan.answer, *plan.offsets[token])
        if start == end:  # a whitespace-only token marks nothing
            continue
        if groups and (token == groups[-1][-1] + 1 or start <= bounds[-1][1]):
            groups[-1].append(token)
            bounds[-1] = (bounds[-1][0], max(end, bounds[-1][1]))
        else:
            groups.append([token])
            bounds.append((start, end))
    return [
        _Span(start, end, float(probabilities[group].mean()), slice(group[0], group[-1] + 1))
        for group, (start, end) in zip(groups, bounds, strict=True)
    ]


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Strip whitespace from a token's range, then grow it to the word it is part of."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start == end:
        return start, end
    while start > 0 and _is_word(text[start - 1]) and _is_word(text[start]):
        start -= 1
    while end < len(text) and _is_word(text[end]) and _is_word(text[end - 1]):
        end += 1
    return start, end


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _explain(nli: _NliExplainer, found: list[_Found]) -> list[_Found]:
    """Label every span with NLI against its best-supporting window; drop entailed ones."""
    pairs = [
        (_premise(plan, windows, span), _sentence_around(plan.answer, span.start, span.end))
        for _, plan, windows, spans in found
        for span in spans
    ]
    labels = iter(nli.labels(pairs))
    explained = []
    for index, plan, windows, spans in found:
        labelled = [replace(span, nli=next(labels)) for span in spans]
        explained.append((index, plan, windows, [span for span in labelled if span.nli != "entailment"]))
    return explained


def _premise(plan: _Plan, windows: FloatArray, span: _Span) -> str:
    """The context window that supported the span best: the one the minimum came from."""
    return plan.chunks[int(np.argmin(windows[:, span.tokens].mean(axis=1)))].context


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence(s) of ``text`` holding ``[start, end)``: the NLI hypothesis."""
    breaks = list(_SENTENCE_BREAK.finditer(text))
    begin = max((match.end() for match in breaks if match.end() <= start), default=0)
    finish = min((match.start() for match in breaks if match.start() >= end), default=len(text))
    return text[begin:finish]


def _aggregate(probabilities: Sequence[float], aggregation: str) -> float:
    if not probabilities:
        return 0.0
    if aggregation == "max_span":
        return max(probabilities)
    return 1.0 - math.prod(1.0 - probability for probability in probabilities)


def _span_evidence(answer: str, span: _Span) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "start": span.start,
        "end": span.end,
        "text": answer[span.start : span.end],
        "probability": round(span.probability, 4),
        "severity": span.severity,
    }
    if span.nli is not None:
        evidence["nli"] = span.nli
    return evidence


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    lines: list[str] = []
    for span in shown.records(evidence.get("spans")):
        text = shown.quoted(span.get("text"))
        if text:
            prob = shown.number(span.get("probability"))
            lines.append(f"unsupported span{f' (p={prob:.2f})' if prob is not None else ''}: {text}")
    return lines[: shown.EVIDENCE_ITEMS] + shown.more(len(lines), shown.EVIDENCE_ITEMS, "span(s)")


def build(ing: Ingredients) -> TokenClassifierDetector | None:
    """The detector, from its settings and threshold."""
    return build_token_classifier_detector(ing.config(DETECTOR), ing.threshold)
