"""Coverage runtime: the reasons a call the content detectors ran on is still unverified.

* The answer is in a language the embedding model does not cover (identified by py3langid, a
  maintained fork of langid.py, BSD-3-Clause): its sentences are compared with the sources in a
  vector space that was never trained on them.
* A source is longer than grounding's ``max_source_chars``: the rest of it was never read, so a
  claim it supports there reads as unsupported, and one it contradicts there is never seen.

A call's text cut at ``max_call_chars`` before any detector saw it, a factual prompt without
sources (the sentinel's ``unverified_factual``) and a detector error are recorded elsewhere
(every finding's ``truncated`` evidence, the sentinel, the error status); the rate estimate
reads all of them (pipeline/rate/store.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import py3langid

from detectors import grounding
from detectors.base import Detector, DetectorResult
from detectors.coverage import DETECTOR, CoverageConfig
from detectors.llm_call import LLMCall
from detectors.spec import Ingredients

SEVERITY = 1  # a finding, never an alert: it says the call was not checked, not that it is wrong


class CoverageDetector(Detector):
    """Flags the calls whose content check could not see all of the answer or its sources."""

    name = DETECTOR.name
    version = "1"

    def __init__(self, config: CoverageConfig, threshold: float, max_source_chars: int) -> None:
        self.config = config
        self.threshold = threshold
        self.max_source_chars = max_source_chars
        self._languages = frozenset(config.languages)

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """One result per call: flagged, with the reasons, when it is unverified."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        reasons: list[str] = []
        evidence: dict[str, Any] = {}
        answer = call.answer.strip()
        if self._languages and len(answer) >= self.config.min_language_chars and not _structured(answer):
            language, _ = py3langid.classify(answer)
            evidence["language"] = language
            if language not in self._languages:
                reasons.append(f"answer in language {language}, which the embedding model does not cover")
        if any(len(source.text) > self.max_source_chars for source in call.sources):
            reasons.append(f"a source cut at max_source_chars ({self.max_source_chars})")
        evidence["reasons"] = reasons
        summary = "unverified: " + "; ".join(reasons) if reasons else "the detectors could read the whole call"
        return self.scored_result(float(bool(reasons)), self.threshold, severity=SEVERITY, summary=summary,
                                  evidence=evidence)  # fmt: skip


def _structured(answer: str) -> bool:
    """A JSON answer (an extraction, a tool's arguments; cut short too): its keys and codes are in no language."""
    return answer[0] in "{["


def build(ing: Ingredients) -> CoverageDetector:
    """The detector, from its settings, threshold and grounding's per-source limit."""
    return CoverageDetector(ing.config(DETECTOR), ing.threshold, ing.config(grounding.DETECTOR).max_source_chars)


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its reasons, one a line (its flag never reaches an alert, but the lines read the same everywhere)."""
    reasons = evidence.get("reasons")
    return [str(reason) for reason in reasons] if isinstance(reasons, list) else []
