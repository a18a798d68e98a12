"""Citation grounding detector (docs/detectors.md, seed 000): is each answer sentence backed by a source.

Every checkable answer sentence is compared, by embedding cosine, with the best-matching
window of the sources it should rest on: the sources it cites (``[1]``, ``[1, 2]``,
``【1】``), or all of the call's sources when it cites none (most RAG answers cite
nothing).  A call without structured sources is checked against its prompt context
(:attr:`LLMCall.grounding_text`).  A sentence citing a source id the call does not have
is ungrounded with similarity 0, the worst case of all.

Design choices, each a trade of recall, precision or cost:

* **Windows, never whole sources.**  Sources are split into sentences and compared as
  windows of 1 and 3 sentences (``window_sizes``) around each sentence: a 3-sentence window
  dilutes a one-sentence fact (cosine 0.46 vs 0.85 measured, bench/README.md), a 1-sentence window
  misses a claim spread over neighbours.  The best over all windows and sizes counts.
* **Lexical pre-selection.**  Embedding every window of every source on a cold cache is
  the detector's whole cost.  A BM25-style overlap score picks the ``candidates_per_sentence``
  most promising source sentences per answer sentence; only windows around those are
  embedded, and the long (multi-sentence) ones only around the best ``wide_window_candidates``
  and only for sentences the one-sentence windows leave ungrounded.
  A claim with no word in common with any source gets arbitrary candidates and a low
  similarity, which is the right verdict for it.
* **One model call per batch.**  All answer sentences of all calls go through one
  ``encode``, all candidate windows through another; windows are cached by content, since
  the same documents come back in trace after trace.
* **Score** = 1 - (mean sentence similarity), clipped to [0, 1] by default: less sensitive
  to answer length and better ranked on long RAG answers than the minimum (RAGTruth AUROC
  0.74 vs 0.65, FaithBench 0.57 vs 0.55, equal on one-sentence answers, SummEdits 0.46 vs
  0.50 — both chance; bench/grounding_results.md).  ``aggregate="min"`` scores the single
  worst sentence instead.
  A sentence citing several sources counts its best one (facts are often spread over
  citations); each citation's own similarity is in the evidence so the weak one is visible.
* **Not checked**: sentences under ``min_claim_words`` words and questions — no claim.
  Cosine similarity flags claims about something the sources do not talk about; it does
  not see contradictions (a wrong year in an otherwise matching sentence), which is the
  numeric/entity detector's job.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.config import ReadingConfig
from detectors.grounding import DETECTOR, GroundingConfig
from detectors.llm_call import LLMCall, Source
from detectors.models.embeddings import Embedder, Ranges
from detectors.spec import Ingredients, required
from detectors.text import evidence as shown
from detectors.text.passages import clip
from detectors.text.prose import Sentence, is_structured_answer, parse_citations, split_sentences, words
from detectors.text.reading import Reading, choose, unread_lines

logger = logging.getLogger(__name__)

CONTEXT_SOURCE_ID = "context"  # the pseudo-source of calls without structured sources
_BM25_K1 = 1.2
_BM25_B = 0.75
_SOURCE_CACHE_SIZE = 2048
_QUESTION_MARKS = ("?", "\uff1f")  # ASCII and fullwidth


@dataclass(frozen=True, slots=True)
class _SourceText:
    """A source split once into sentences and word sets (cached: sources recur)."""

    text: str
    sentences: tuple[Sentence, ...]
    tokens: tuple[frozenset[str], ...]


@dataclass(slots=True)
class _Row:
    """One (answer sentence, target) check: a citation, or all sources for uncited sentences."""

    sentence: Sentence
    claim: str
    cited: bool
    source_id: str | None  # the cited id; None when checked against every source
    missing: bool = False  # cited id not among the call's sources
    windows: list[tuple[str, int, int]] = field(default_factory=list)  # (source id, start, end) in its text
    anchors: list[tuple[str, int]] = field(default_factory=list)  # (source id, sentence index), best first
    sources: dict[str, _SourceText] = field(default_factory=dict)
    read: dict[str, Ranges] = field(default_factory=dict)  # what the model reads of each source
    similarity: float = 0.0
    best: int = -1


@dataclass(slots=True)
class _Plan:
    """The rows of one call, or the result it gets without any embedding."""

    rows: list[_Row] = field(default_factory=list)
    skipped: DetectorResult | None = None
    reading: Reading | None = None


class GroundingDetector(Detector):
    """Flags answers with sentences that no source window supports (see module docstring)."""

    name = "grounding"
    version = "1.1.0"

    def __init__(
        self, config: GroundingConfig, threshold: float, embedder: Embedder, reading: ReadingConfig | None = None
    ) -> None:
        self.config = config
        self._reading = reading or ReadingConfig()
        self._threshold = checked_threshold(threshold)
        self._embedder = embedder
        self._split = functools.lru_cache(maxsize=_SOURCE_CACHE_SIZE)(self._split_source)

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Plan every call, embed all sentences and windows in two model calls, then score."""
        plans: list[_Plan | DetectorResult] = []
        for call in calls:
            try:
                plans.append(self._plan(call))
            except Exception as exc:  # one odd call must not fail the batch
                logger.exception("grounding: cannot plan call %s/%s", call.trace_id, call.span_id)
                plans.append(self.error_result(f"{type(exc).__name__}: {exc}"))
        try:
            self._embed([row for plan in plans if isinstance(plan, _Plan) for row in plan.rows])
        except Exception as exc:
            logger.exception("grounding: embedding failed for a batch of %d calls", len(calls))
            return [self.error_result(f"{type(exc).__name__}: {exc}") for _ in calls]
        return [plan if isinstance(plan, DetectorResult) else self._result(plan) for plan in plans]

    def start(self) -> None:
        """Export (first time only) and open the embedding model."""
        self._embedder.load()

    def close(self) -> None:
        """Release the embedding model and the source cache."""
        self._split.cache_clear()
        self._embedder.close()

    # -- planning --------------------------------------------------------------------------

    def _plan(self, call: LLMCall) -> _Plan:
        answer = call.answer
        if not answer.strip():
            return _Plan(skipped=self.skipped_result("empty answer", self._threshold))
        if is_structured_answer(answer, call.finish_reason):
            # Structured output: its shape is schema_violation's, its values contradiction's.
            return _Plan(skipped=self.skipped_result("structured (JSON) answer has no sentences", self._threshold))
        sources = call.sources or _context_source(call)
        if not sources:
            return _Plan(skipped=self.skipped_result("no sources and no prompt context to ground on", self._threshold))
        texts = {source.id: self._split(source.text[: self.config.max_source_chars]) for source in sources}
        if not any(text.sentences for text in texts.values()):
            return _Plan(skipped=self.skipped_result("sources are empty", self._threshold))
        # The parts the model reads, chosen as unsupported_spans chooses them (the same non-blank texts).
        readable = [source_id for source_id, text in texts.items() if text.text.strip()]
        reading = choose(answer, call.prompt, [texts[i].text for i in readable], self._reading)
        read = dict(zip(readable, reading.ranges, strict=True))
        index = _LexicalIndex(list(texts.items()), None if reading.complete else read)
        plan = _Plan(reading=reading)
        for sentence in split_sentences(answer, self.config.language)[: self.config.max_answer_sentences]:
            citations = parse_citations(sentence.text)
            claim_words = words(citations.text)
            if len(claim_words) < self.config.min_claim_words or citations.text.endswith(_QUESTION_MARKS):
                continue
            targets: list[str | None] = list(citations.ids) if call.sources and citations.ids else [None]
            for cited in targets:
                row = _Row(sentence, citations.text, bool(citations.ids), cited)
                resolved = None if cited is None else _resolve(cited, call.sources)
                if cited is not None and resolved is None:
                    row.missing = True
                else:
                    row.anchors = index.top(claim_words, resolved, self.config.candidates_per_sentence)
                    row.sources, row.read = texts, read
                    row.windows = self._windows(texts, row.anchors, self.config.window_sizes[:1])
                plan.rows.append(row)
        if not plan.rows:
            return _Plan(skipped=self.skipped_result("no sentence long enough to be a claim", self._threshold))
        return plan

    def _split_source(self, text: str) -> _SourceText:
        sentences = split_sentences(text, self.config.language, self.config.max_sentence_chars)
        sentences = sentences[: self.config.max_source_sentences]
        return _SourceText(text, tuple(sentences), tuple(frozenset(words(s.text)) for s in sentences))

    @staticmethod
    def _windows(
        texts: dict[str, _SourceText], anchors: list[tuple[str, int]], sizes: tuple[int, ...]
    ) -> list[tuple[str, int, int]]:
        """Windows of ``sizes`` sentences centred on each anchor, without repeats."""
        windows: dict[tuple[str, int, int], None] = {}
        for source_id, position in anchors:
            source = texts[source_id]
            count = len(source.sentences)
            for size in sizes:
                first = min(max(position - (size - 1) // 2, 0), max(count - size, 0))
                last = min(first + size, count) - 1
                windows[(source_id, source.sentences[first].start, source.sentences[last].end)] = None
        return list(windows)

    # -- embedding and scoring ---------------------------------------------------------------

    def _embed(self, rows: list[_Row]) -> None:
        """Fill each row's best similarity: one encode for claims, then (cached) windows in two rounds.

        Round one uses the smallest windows; only sentences they leave ungrounded get the
        wider, costlier windows around their best anchors in round two — a sentence already
        supported by one source sentence needs no wider context.
        """
        if not rows:
            return
        claims = list(dict.fromkeys(row.claim for row in rows))
        # keep_tokens: the unsupported-spans detector reads the same sentences' token embeddings next.
        claim_vectors = dict(zip(claims, self._embedder.encode(claims, keep_tokens=True), strict=True))
        self._score(rows, claim_vectors)
        wide_sizes = self.config.window_sizes[1:]
        weak = [row for row in rows if row.windows and row.similarity < self.config.grounded_similarity]
        if wide_sizes and weak:
            for row in weak:
                anchors = row.anchors[: self.config.wide_window_candidates or len(row.anchors)]
                row.windows = list(dict.fromkeys([*row.windows, *self._windows(row.sources, anchors, wide_sizes)]))
            self._score(weak, claim_vectors)

    def _score(self, rows: list[_Row], claim_vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        windows = list(dict.fromkeys(_read_window(row, window) for row in rows for window in row.windows))
        window_index = {window: n for n, window in enumerate(windows)}
        window_vectors = self._embedder.span_vectors(windows)
        for row in rows:
            if not row.windows:
                continue
            candidates = window_vectors[[window_index[_read_window(row, window)] for window in row.windows]]
            similarities: npt.NDArray[np.float32] = candidates @ claim_vectors[row.claim]
            row.best = int(np.argmax(similarities))
            row.similarity = float(similarities[row.best])

    def _result(self, plan: _Plan) -> DetectorResult:
        if plan.skipped is not None:
            return plan.skipped
        by_sentence: dict[int, list[_Row]] = {}
        for row in plan.rows:
            by_sentence.setdefault(row.sentence.start, []).append(row)
        grounded_at = self.config.grounded_similarity
        sentence_scores = {
            start: 0.0 if any(r.missing for r in rows) else max(r.similarity for r in rows)
            for start, rows in by_sentence.items()
        }
        ungrounded = [by_sentence[start][0].sentence for start, sim in sentence_scores.items() if sim < grounded_at]
        min_similarity = min(sentence_scores.values())
        pooled = (
            min_similarity if self.config.aggregate == "min" else sum(sentence_scores.values()) / len(sentence_scores)
        )
        score = min(max(1.0 - pooled, 0.0), 1.0)
        missing = sorted({row.source_id for row in plan.rows if row.missing and row.source_id})
        limit = self.config.max_evidence_chars
        evidence_rows = sorted(plan.rows, key=lambda r: r.similarity)[: self.config.max_evidence_sentences]
        evidence: dict[str, Any] = {
            "sentences": [
                {
                    "start": row.sentence.start,
                    "end": row.sentence.end,
                    "text": clip(row.sentence.text, limit),
                    "similarity": round(row.similarity, 4),
                    "best_window": clip(_window_text(row, row.best), limit) if row.best >= 0 else None,
                    "source_id": row.source_id if row.best < 0 else row.windows[row.best][0],
                    "grounded": not row.missing and row.similarity >= grounded_at,
                    "cited": row.cited,
                }
                for row in sorted(evidence_rows, key=lambda r: r.sentence.start)
            ],
            "checked_sentences": len(by_sentence),
            "ungrounded_count": len(ungrounded),
            "min_similarity": round(min_similarity, 4),
            "missing_source_ids": missing,
            "spans": [{"start": s.start, "end": s.end, "text": clip(s.text, limit)} for s in ungrounded],
            **(plan.reading.evidence() if plan.reading else {}),
        }
        if missing:
            summary = missing_sources(missing)
        elif ungrounded:
            summary = (
                f"{len(ungrounded)} of {len(by_sentence)} sentences not supported by any source window "
                f"(lowest similarity {min_similarity:.2f})"
            )
        else:
            support = "weakly supported" if score >= self._threshold else "supported"
            summary = (
                f"every sentence {support} by a source window (similarity {pooled:.2f}, lowest {min_similarity:.2f})"
            )
        return self.scored_result(
            score, self._threshold, severity=4 if missing else 2, summary=summary, evidence=evidence
        )


def missing_sources(ids: Sequence[str]) -> str:
    """The headline for cited sources the call does not carry: "cites source 3, which the call does not include"."""
    if len(ids) == 1:
        return f"cites source {ids[0]}, which the call does not include"
    return f"cites sources {', '.join(ids[:-1])} and {ids[-1]}, which the call does not include"


def _read_window(row: _Row, window: tuple[str, int, int]) -> tuple[str, Ranges, int, int]:
    """A window as the embedder pools it: its source's text, the parts of it read, the window's span."""
    source_id, start, end = window
    return row.sources[source_id].text, row.read[source_id], start, end


def _window_text(row: _Row, window: int) -> str:
    source_id, start, end = row.windows[window]
    return row.sources[source_id].text[start:end]


def _context_source(call: LLMCall) -> tuple[Source, ...]:
    """The prompt context as one pseudo-source, for calls that carry no structured sources."""
    text = call.grounding_text
    return (Source(CONTEXT_SOURCE_ID, text),) if text.strip() else ()


def _resolve(cited: str, sources: Sequence[Source]) -> str | None:
    """The source id a citation marker points at: the same id, else the n-th source (1-based).

    Apps often number the documents they paste into the prompt while the span records
    them under their own ids; position is then the only link.  When the ids themselves are
    numbers, only an exact match counts.
    """
    ids = [source.id for source in sources]
    if cited in ids:
        return cited
    if any(source_id.isdigit() for source_id in ids):
        return None
    position = int(cited)
    return ids[position - 1] if 1 <= position <= len(ids) else None


class _LexicalIndex:
    """BM25-style overlap between an answer sentence and every source sentence of one call."""

    def __init__(self, sources: list[tuple[str, _SourceText]], read: Mapping[str, Ranges] | None = None) -> None:
        """An index of the sources' sentences; with ``read``, of only those inside the parts the model reads."""
        kept = [
            (n, source_id, i)
            for n, (source_id, text) in enumerate(sources)
            for i, sentence in enumerate(text.sentences)
            if read is None or _inside(sentence, read.get(source_id, ()))
        ]
        self._positions = [(source_id, i) for _, source_id, i in kept]
        self._owner = np.array([n for n, _, _ in kept], dtype=np.int64)
        self._source_ids = [source_id for source_id, _ in sources]
        token_sets = [sources[n][1].tokens[i] for n, _, i in kept]
        lengths = np.array([len(tokens) for tokens in token_sets], dtype=np.float32)
        average = float(lengths.mean()) if len(lengths) else 1.0
        self._length_norm = (_BM25_K1 + 1) / (1 + _BM25_K1 * (1 - _BM25_B + _BM25_B * lengths / max(average, 1.0)))
        postings: dict[str, list[int]] = {}
        for row, tokens in enumerate(token_sets):
            for token in tokens:
                postings.setdefault(token, []).append(row)
        count = len(token_sets)
        self._postings = {token: np.array(rows, dtype=np.int64) for token, rows in postings.items()}
        self._idf = {t: math.log(1 + (count - len(r) + 0.5) / (len(r) + 0.5)) for t, r in postings.items()}

    def top(self, claim_words: list[str], source_id: str | None, k: int) -> list[tuple[str, int]]:
        """The ``k`` best (source id, sentence index) for a claim, within one source or all; 0 = all."""
        scores = np.zeros(len(self._positions), dtype=np.float32)
        for token in set(claim_words):
            rows = self._postings.get(token)
            if rows is not None:
                scores[rows] += self._idf[token]
        scores *= self._length_norm
        if source_id is not None:
            scores[self._owner != self._source_ids.index(source_id)] = -1.0
        eligible = int((scores >= 0).sum())
        take = eligible if k == 0 else min(k, eligible)
        order = np.argsort(-scores, kind="stable")[:take]
        return [self._positions[i] for i in order]


def _inside(sentence: Sentence, ranges: Ranges) -> bool:
    """Whether the model reads any of ``sentence`` (the two splits may cut a long sentence differently)."""
    return any(start < sentence.end and sentence.start < end for start, end in ranges)


UNGROUNDED_SENTENCES = 2  # least-similar ungrounded sentences shown in alerts, each with its best window


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    lines: list[str] = []
    missing = [word for word in map(shown.word, evidence.get("missing_source_ids") or []) if word]
    if missing:
        lines.append(missing_sources(missing[: shown.EVIDENCE_ITEMS]))
    sentences = shown.records(evidence.get("sentences"))
    ungrounded = [s for s in sentences if s.get("grounded") is False and shown.quoted(s.get("text"))]
    ungrounded.sort(key=lambda s: shown.number(s.get("similarity")) or 0.0)  # least similar first
    for sentence in ungrounded[:UNGROUNDED_SENTENCES]:
        similarity = shown.number(sentence.get("similarity"))
        scored = f" (similarity {similarity:.2f})" if similarity is not None else ""
        lines.append(f"ungrounded sentence{scored}: {shown.quoted(sentence.get('text'))}")
        window = shown.quoted(sentence.get("best_window"))
        lines.append(f"best source window: {window}" if window else "no source window to compare with")
    count = shown.number(evidence.get("ungrounded_count"))
    total = max(int(count), len(ungrounded)) if count is not None else len(ungrounded)
    more = shown.more(total, min(len(ungrounded), UNGROUNDED_SENTENCES), "ungrounded sentence(s)")
    return lines + more + unread_lines(evidence)


def build(ing: Ingredients) -> GroundingDetector:
    """The detector, from its settings and threshold."""
    embedder = required(ing.embedder, "the embedder")
    return GroundingDetector(ing.config(DETECTOR), ing.threshold, embedder, ing.settings.reading)
