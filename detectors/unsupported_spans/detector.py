"""Unsupported-spans detector (docs/detectors.md): which words of the answer no source supports, and where.

Each answer word gets support features from one forward pass of the embedding model over
the answer's sentences (the pass grounding makes, kept by the embedder) and one over each
source (plus the question), cached by content hash like grounding's windows
(:mod:`detectors.support_features`).  Two small learned models, read
from a JSON file that ``halluwatch train`` writes (:mod:`detectors.models.learned`), turn them
into decisions:

* the **word model** gives each word the probability that it is hallucinated (one model per
  kind of support: prose, or JSON records such as tool results); runs of content words at or
  above the file's span threshold for that kind (stop words between them join a
  run) become spans with character offsets into the answer, each with the source text its
  weakest word matched best;
* the **call model** turns the word probabilities and support statistics (share of content
  words absent from the sources, weakly supported words, unsupported numbers, lengths) into
  the call's score, a probability that the answer is hallucinated.

Trained on RAGTruth's span labels (word model) and several sets' response labels (call
model), split by source document; the file records the data, seeds and held-out metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from detectors import grounding
from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.config import DEFAULT_PROFILE, Profile, ReadingConfig
from detectors.contradiction.detector import index_values, stated_values
from detectors.llm_call import LLMCall
from detectors.models.embeddings import Embedder, TokenVectors
from detectors.models.learned import BinnedLogistic, Matrix, ScaledLogistic, read_model_file
from detectors.profiles import ProfileMismatch, built_in_path
from detectors.spec import Ingredients, required
from detectors.support_features import (
    CALL_FEATURES,
    SUPPORT_KINDS,
    WORD_FEATURES,
    SupportKind,
    WordSupport,
    call_features,
    flagged_runs,
    split_words,
    text_vocabulary,
    word_support,
)
from detectors.text import evidence as shown
from detectors.text.passages import passage
from detectors.text.prose import Sentence, citation_spans, is_json_document, is_structured_answer, split_sentences
from detectors.text.quantities import Mention, extract_claims
from detectors.text.reading import Reading, choose, unread_lines
from detectors.unsupported_spans import DETECTOR, UnsupportedSpansConfig
from detectors.unsupported_spans.quote import quote

_BUILT_IN = "unsupported_spans.json"
_VOCABULARY_CACHE_SIZE = 1024  # source texts whose word sets are kept


class SupportModelError(ValueError):
    """The model file is missing, unreadable or made for other features; the message names it."""


@dataclass(frozen=True, slots=True)
class SupportModel:
    """The learned half of the detector: word and call models and the span threshold."""

    version: str
    word_models: Mapping[SupportKind, BinnedLogistic]
    call_model: ScaledLogistic
    span_thresholds: Mapping[SupportKind, float]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SupportModel:
        """Read the JSON form; the feature lists must be the ones this code computes."""
        model = cls(
            version=str(data["version"]),
            word_models={kind: BinnedLogistic.from_dict(data["word_models"][kind]) for kind in SUPPORT_KINDS},
            call_model=ScaledLogistic.from_dict(data["call_model"]),
            span_thresholds={kind: float(data["span_thresholds"][kind]) for kind in SUPPORT_KINDS},
        )
        word_features = {m.features for m in model.word_models.values()}
        if word_features != {WORD_FEATURES} or model.call_model.features != CALL_FEATURES:
            raise ValueError("the file's features are not this version's; retrain with `halluwatch train`")
        return model

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without the training record, which ``halluwatch train`` adds)."""
        return {"version": self.version, "span_thresholds": dict(self.span_thresholds),
                "word_models": {kind: m.to_dict() for kind, m in self.word_models.items()},
                "call_model": self.call_model.to_dict()}  # fmt: skip

    def word_probabilities(self, words: WordSupport) -> Matrix:
        """Each word's probability of being hallucinated, by the model for its kind of support."""
        return self.word_models[words.kind].predict(words.features)

    def call_probability(self, words: WordSupport, probabilities: Matrix) -> float:
        """The probability that the answer is hallucinated."""
        row = call_features(words.features, words.support_tokens, probabilities)
        return float(self.call_model.predict(row[None, :])[0])

    def flagged(self, words: WordSupport, probabilities: Matrix) -> npt.NDArray[np.bool_]:
        """Words at or above the span threshold of their kind of support."""
        return probabilities >= self.span_thresholds[words.kind]


def load_support_model(path: Path | None, profile: Profile = DEFAULT_PROFILE) -> SupportModel:
    """The model at ``path``, or ``profile``'s built-in one; a SupportModelError names the file and the fault."""
    where = str(path) if path else f"detectors/data/{built_in_path(profile, _BUILT_IN)}"
    try:
        return SupportModel.from_dict(read_model_file(path, _BUILT_IN, profile))
    except ProfileMismatch:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SupportModelError(f"unsupported_spans model {where}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Answers:
    """A batch's answers split into sentences (keyed by answer), and each sentence's token embeddings."""

    sentences: Mapping[str, list[Sentence]]
    tokens: Mapping[str, TokenVectors]


@dataclass(frozen=True, slots=True)
class SupportTexts:
    """What an answer may be supported by: the sources (or the prompt) and the question."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    sources: int  # how many of ``texts`` are sources (or the context); the question follows them

    @property
    def source_texts(self) -> tuple[str, ...]:
        """The texts the model reads in parts: all but the question."""
        return self.texts[: self.sources]


def support_texts(call: LLMCall, max_chars: int) -> SupportTexts:
    """The call's sources, or its prompt context without any, plus the question; each cut at ``max_chars``."""
    pairs = [(s.id, s.text) for s in call.sources if s.text.strip()]
    context = not pairs and bool(call.grounding_text.strip())
    if context:
        pairs = [("context", call.grounding_text)]
    sources = len(pairs)
    if not context and call.prompt.strip():
        pairs.append(("question", call.prompt))
    return SupportTexts(tuple(i for i, _ in pairs), tuple(t[:max_chars] for _, t in pairs), sources)


class UnsupportedSpansDetector(Detector):
    """Flags answers whose words the sources do not support, pointing at the spans (see module docstring)."""

    name = "unsupported_spans"
    version = "1.3.0"

    def __init__(
        self,
        config: UnsupportedSpansConfig,
        threshold: float,
        embedder: Embedder,
        language: str = "en",
        reading: ReadingConfig | None = None,
    ) -> None:
        self.config = config
        self._reading = reading or ReadingConfig()
        self._language = language  # of the answer's sentences: grounding's, so the two share a forward pass
        self._threshold = checked_threshold(threshold)
        self._embedder = embedder
        self._model: SupportModel | None = None
        # Sources recur across calls as their token matrices do; so do their words.
        self._vocabulary = functools.lru_cache(maxsize=_VOCABULARY_CACHE_SIZE)(text_vocabulary)
        self._is_json = functools.lru_cache(maxsize=_VOCABULARY_CACHE_SIZE)(is_json_document)
        self._values = functools.lru_cache(maxsize=_VOCABULARY_CACHE_SIZE)(index_values)

    def start(self) -> None:
        """Open the embedding model and read the learned model file."""
        self._embedder.load()
        if self._model is None:
            self._model = load_support_model(self.config.model_path, self._embedder.config.profile)

    def close(self) -> None:
        """Release the embedding model and the learned model."""
        self._model = None
        self._vocabulary.cache_clear()
        self._is_json.cache_clear()
        self._values.cache_clear()
        self._embedder.close()

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Score each call; the embedder caches the sources' token matrices across calls."""
        self.start()
        checked = [not is_structured_answer(call.answer, call.finish_reason) for call in calls]
        answers = self._answers([call for call, check in zip(calls, checked, strict=True) if check])
        return [
            self._detect(call, answers) if check else self._structured()
            for call, check in zip(calls, checked, strict=True)
        ]

    def support(self, call: LLMCall) -> WordSupport | None:
        """The answer's word support features, or None when there is nothing to compare."""
        return self._support(call, support_texts(call, self.config.max_support_chars), self._answers([call]))

    def _answers(self, calls: Sequence[LLMCall]) -> _Answers:
        """Each answer's sentences and their token embeddings, in one model call for all of them.

        Sentence by sentence, as grounding embeds them: its pass is reused, not repeated.  The
        sentences it did not embed (too short to be claims, questions) go through the model
        together, batched across the calls, rather than a few per call.
        """
        sentences = {call.answer: split_sentences(call.answer[: self.config.max_answer_chars], self._language)
                     for call in calls}  # fmt: skip
        texts = list(dict.fromkeys(s.text for found in sentences.values() for s in found))
        return _Answers(sentences, dict(zip(texts, self._embedder.encode_tokens(texts), strict=True)))

    def _support(self, call: LLMCall, support: SupportTexts, answers: _Answers) -> WordSupport | None:
        answer = call.answer[: self.config.max_answer_chars]
        sentences = answers.sentences[call.answer]
        if not sentences or not support.texts:
            return None
        encoded = [answers.tokens[s.text] for s in sentences]
        answer_tokens = TokenVectors(
            np.vstack([tokens.vectors for tokens in encoded]),
            tuple(
                (a + s.start, b + s.start)
                for s, tokens in zip(sentences, encoded, strict=True)
                for a, b in tokens.offsets
            ),
        )
        # Neither list markers (outside the sentences) nor citation markers are words of a claim.
        markers = citation_spans(answer)
        words = [
            word
            for s in sentences
            for word in split_words(s.text, s.start)
            if not any(start <= word.start < end for start, end in markers)
        ]
        support_tokens, token_count = self._support_tokens(call, support)
        vocabulary = frozenset().union(*(self._vocabulary(text) for text in support.texts))
        kind: SupportKind = "json" if any(self._is_json(text) for text in support.texts) else "prose"
        values = stated_values(answer, [self._values(text) for text in support.texts])
        return word_support(answer, words, answer_tokens, support_tokens, vocabulary, kind, values, token_count)

    def _support_tokens(self, call: LLMCall, support: SupportTexts) -> tuple[list[TokenVectors], int]:
        """The support texts' token embeddings (of the sources, the parts grounding reads too), and their token count.

        The count feeds the call model, which learned it on whole sources: where parts were
        left unread, a source's tokens are counted at the rate of its parts read.
        """
        reading = self._read(call, support)
        whole = [((0, len(text)),) for text in support.texts[support.sources :]]  # the question
        tokens = self._embedder.read(list(zip(support.texts, [*reading.ranges, *whole], strict=True)))
        if reading.complete:
            return tokens, sum(len(t.offsets) for t in tokens)
        count = sum(len(t.offsets) for t in tokens[support.sources :])
        for text, ranges, read in zip(support.source_texts, reading.ranges, tokens, strict=False):
            read_chars = sum(end - start for start, end in ranges)
            count += round(len(read.offsets) * len(text) / read_chars) if read_chars else 0
        return tokens, count

    def _read(self, call: LLMCall, support: SupportTexts) -> Reading:
        """The parts of the sources the model reads: grounding's choice for the same call."""
        return choose(call.answer, call.prompt, support.source_texts, self._reading)

    def _structured(self) -> DetectorResult:
        # Structured output: its shape is schema_violation's, its values contradiction's.
        return self.skipped_result("structured (JSON) answer has no prose to check", self._threshold)

    def _detect(self, call: LLMCall, answers: _Answers) -> DetectorResult:
        assert self._model is not None  # noqa: S101 - narrowing: detect_batch started the detector
        support = support_texts(call, self.config.max_support_chars)
        words = self._support(call, support, answers)
        if words is None or not len(words.words):
            return self.skipped_result("no answer words or no sources to check them against", self._threshold)
        probabilities = self._model.word_probabilities(words)
        score = self._model.call_probability(words, probabilities)
        spans = self._spans(call.answer[: self.config.max_answer_chars], support, words, probabilities)
        if spans:
            quoted = ", ".join(f'"{s["text"]}"' for s in spans[:3])
            summary = f"{len(spans)} unsupported span(s): {quoted}" + (" ..." if len(spans) > 3 else "")
        else:
            summary = "every content word supported by the sources"
        evidence = {"spans": spans[: self.config.max_evidence_spans], "words": len(words.words),
                    "support": words.kind, "model_version": self._model.version,
                    **self._read(call, support).evidence()}  # fmt: skip
        return self.scored_result(score, self._threshold, severity=2, summary=summary, evidence=evidence)

    def _spans(
        self, answer: str, support: SupportTexts, words: WordSupport, probabilities: Matrix
    ) -> list[dict[str, Any]]:
        assert self._model is not None  # noqa: S101 - narrowing: called from _detect
        runs = flagged_runs(self._model.flagged(words, probabilities), words.content)
        values = extract_claims(answer) if runs else ()
        spans = [self._span(answer, support, words, probabilities, run, values) for run in runs]
        return sorted(spans, key=lambda s: -float(s["probability"]))

    def _span(
        self,
        answer: str,
        support: SupportTexts,
        words: WordSupport,
        probabilities: Matrix,
        run: list[int],
        values: Sequence[Mention],
    ) -> dict[str, Any]:
        first, last = words.words[run[0]], words.words[run[-1]]
        weakest = run[int(np.argmax(probabilities[run]))]
        span: dict[str, Any] = {"start": first.start, "end": last.end, "text": answer[first.start : last.end],
                                "probability": round(float(probabilities[weakest]), 4)}  # fmt: skip
        inside = [value for value in values if first.start <= value.start and value.end <= last.end]
        where = quote(answer, inside, [self._values(text) for text in support.texts], words.match(weakest))
        if where is not None:
            text = support.texts[where.support]
            span |= {
                "source_id": support.ids[where.support],
                "source_text": passage(text, where.start, where.end, language=self._language),
            }
        return span


def build(ing: Ingredients) -> UnsupportedSpansDetector:
    """The detector, on the process's embedder."""
    embedder = required(ing.embedder, "the embedder")
    language = ing.config(grounding.DETECTOR).language
    return UnsupportedSpansDetector(ing.config(DETECTOR), ing.threshold, embedder, language, ing.settings.reading)


QUOTED_SPANS = 2  # most probable spans shown in alerts beside their source passage (the summary lists them)


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts: each top span beside the source passage it was held against."""
    lines = []
    for span in shown.records(evidence.get("spans"))[:QUOTED_SPANS]:
        said, source = shown.quoted(span.get("text")), shown.quoted(span.get("source_text"))
        if said and source:
            where = shown.word(span.get("source_id"))
            lines.append(f"unsupported {said}; closest source passage{f' ({where})' if where else ''}: {source}")
    return lines + unread_lines(evidence)
