"""The detector contract (docs/detectors.md).

A detector is a small, pure unit: a batch of :class:`~detectors.llm_call.LLMCall` in, one
:class:`DetectorResult` per call out.  It must never raise into the stream and must
never do I/O on the event loop: the worker calls :func:`run_detector` from its
detector pool, which turns any exception into ``status=error`` results for the calls
that raise it.  Models are loaded in :meth:`Detector.start` and released in
:meth:`Detector.close`.
"""

from __future__ import annotations

import dataclasses
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from detectors.llm_call import LLMCall

# The detectors the verdict model weighs into p_hallucination (the sampled ones judge too few calls
# to learn from), in the order of its features.
VERDICT_DETECTORS = ("contradiction", "grounding", "unsupported_spans", "confidence", "schema_violation")

logger = logging.getLogger(__name__)


class DetectorStatus(StrEnum):
    """Outcome of one detector run on one call."""

    OK = "ok"
    SKIPPED = "skipped"  # nothing to check (no tools, no schema, no logprobs, ...)
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class SentinelVerdict:
    """The fact-check sentinel's reading of a prompt, which gates the content detectors."""

    label: str  # factual, creative, code, opinion or chitchat
    confidence: float  # the probability of ``label``
    needs_fact_check: bool
    has_context: bool  # grounding beyond the question itself


@dataclass(frozen=True, slots=True)
class DetectorResult:
    """One detector's verdict on one call.

    ``score`` is in [0, 1], higher meaning more likely hallucinated; ``flagged`` is
    ``score >= threshold``.  ``severity`` follows HaluGate's NLI labels: 4 for a
    contradiction/violation, 2 for unsupported, 0 when not flagged.  ``evidence`` is what
    is stored and shown; ``sentinel`` is the sentinel's verdict for the code it gates.
    """

    detector: str
    detector_version: str
    score: float
    flagged: bool
    threshold: float
    status: DetectorStatus = DetectorStatus.OK
    severity: int = 0
    summary: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    sentinel: SentinelVerdict | None = None
    # What another threshold needs (an application's policy sets its own): whether the call
    # could be flagged at all, and the severity a flag would carry.
    flaggable: bool = False
    flag_severity: int = 0

    def with_threshold(self, threshold: float) -> DetectorResult:
        """The same verdict judged at ``threshold``; results that were not scored stay as they are."""
        if self.status is not DetectorStatus.OK or threshold == self.threshold:
            return self
        flagged = self.flaggable and self.score >= threshold
        severity = self.flag_severity if flagged else 0
        return dataclasses.replace(self, threshold=threshold, flagged=flagged, severity=severity)


class DetectorIdentity:
    """A detector's name and version, and the results it records without scoring a call.

    Shared by the span-level :class:`Detector` s and the sampled detectors, which call an
    LLM endpoint asynchronously and so cannot be batch-synchronous.
    """

    name: ClassVar[str]
    version: ClassVar[str]

    def scored_result(
        self,
        score: float,
        threshold: float,
        *,
        severity: int,
        summary: str,
        evidence: Mapping[str, Any],
        flaggable: bool = True,
    ) -> DetectorResult:
        """A scored call: flagged when ``score >= threshold`` (and ``flaggable``), ``severity`` only then."""
        flagged = flaggable and score >= threshold
        return DetectorResult(
            detector=self.name,
            detector_version=self.version,
            score=score,
            flagged=flagged,
            threshold=threshold,
            severity=severity if flagged else 0,
            summary=summary,
            evidence=evidence,
            flaggable=flaggable,
            flag_severity=severity,
        )

    def skipped_result(self, summary: str, threshold: float = 0.0) -> DetectorResult:
        """A result recording that there was nothing for this detector to check on a call."""
        return DetectorResult(
            detector=self.name,
            detector_version=self.version,
            score=0.0,
            flagged=False,
            threshold=threshold,
            status=DetectorStatus.SKIPPED,
            summary=summary,
        )

    def error_result(self, message: str, evidence: Mapping[str, Any] | None = None) -> DetectorResult:
        """A result recording that this detector failed on a call; ``evidence``: what it had got so far."""
        return DetectorResult(
            detector=self.name,
            detector_version=self.version,
            score=0.0,
            flagged=False,
            threshold=0.0,
            status=DetectorStatus.ERROR,
            summary=message[:500],
            evidence=evidence or {},
        )


class SampledDetector(DetectorIdentity, ABC):
    """A detector that asks an LLM endpoint, run only on sampled calls (docs/detectors.md).

    Its work is network I/O, so it is a coroutine on the event loop, one call at a time;
    an unusable answer from the endpoint is an error result, not an exception.
    """

    @abstractmethod
    def estimated_tokens(self, call: LLMCall) -> int:
        """An upper estimate of the tokens judging ``call`` costs, reserved before the requests."""

    @abstractmethod
    async def evaluate(self, call: LLMCall) -> DetectorResult:
        """Judge one call."""


class Detector(DetectorIdentity, ABC):
    """Base class of every span-level detector.

    Subclasses set ``name`` and ``version`` and implement :meth:`detect_batch`.
    Implementations must batch for real where a model is involved, must not block on
    network I/O, and should not raise (the worker guards them anyway).
    """

    # Whether the detector checks the answer against grounding context; such detectors
    # are not run on calls whose only "context" is the question itself.
    needs_context: ClassVar[bool] = True

    @abstractmethod
    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Return one result per call, in the same order."""

    def start(self) -> None:
        """Load models and make caches; idempotent.

        :class:`~detectors.suite.DetectorSuite` calls it before the first batch, so a model
        that cannot load fails the run, not every call; a detector used alone starts itself
        on its first batch.
        """

    def close(self) -> None:
        """Release the models and caches :meth:`start` made; the next start or batch makes them again."""


def checked_threshold(threshold: float) -> float:
    """``threshold`` when it is a valid decision threshold; a ValueError naming it otherwise."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    return threshold


def run_detector(detector: Detector, calls: Sequence[LLMCall]) -> list[DetectorResult]:
    """Run ``detector`` on a batch; exceptions become error results, never escape.

    A batch that fails is run again call by call, so only the calls that fail get
    ``status=error`` results and the others their real ones.
    """
    try:
        results = detector.detect_batch(calls)
        if len(results) != len(calls):
            raise RuntimeError(f"returned {len(results)} results for {len(calls)} calls")
        return results
    except Exception as exc:  # the stream must live on whatever a detector does
        if len(calls) == 1:
            trace_id = calls[0].trace_id
            logger.exception("detector %s failed on trace %s", detector.name, trace_id, extra={"trace_id": trace_id})
            return [detector.error_result(f"{type(exc).__name__}: {exc}")]
        logger.warning(
            "detector %s failed on a batch of %d calls (%r); running each alone", detector.name, len(calls), exc
        )
    return [result for call in calls for result in run_detector(detector, [call])]
