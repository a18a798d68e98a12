"""The set of detectors one process runs, and the fact-check gate in front of them.

The worker and ``halluwatch eval`` both run a :class:`DetectorSuite`, so offline scores
are the production scores.  The sentinel (docs/detectors.md) decides per call whether content
detectors run: a call with structured sources (retrieved documents, tool results) is
always checked against them; without sources, only a prompt the sentinel calls factual
is.  Skipping the rest saves their cost and their false positives (HaluGate: 72 %).
Detectors that compare the answer with context also need the prompt to carry some beyond
the question itself (the sentinel's ``has_context``); a factual question asked with none
is the sentinel's ``unverified_factual`` finding instead, and only context-free detectors
(confidence) judge it.  Structural detectors (schema & tool calls) run on every call.

How long each detector takes on a batch goes to an optional ``on_timing`` observer (the
worker's metrics), so this package needs nothing from ``pipeline``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from detectors.base import Detector, DetectorResult, DetectorStatus, run_detector
from detectors.llm_call import LLMCall
from detectors.sentinel.detector import needs_fact_check

TimingObserver = Callable[[str, float], None]  # detector name, seconds it spent on one batch
TURNED_OFF = "turned off by the application's policy"


@dataclass(frozen=True, slots=True)
class DetectorRun:
    """One detector's results over a batch, aligned with the batch's calls."""

    detector: str
    results: list[DetectorResult]


class DetectorSuite:
    """Structural detectors, an optional sentinel, and the content detectors it gates."""

    def __init__(
        self,
        structural: Sequence[Detector],
        content: Sequence[Detector] = (),
        sentinel: Detector | None = None,
        on_timing: TimingObserver | None = None,
    ) -> None:
        self.structural = list(structural)
        self.content = list(content)
        self.sentinel = sentinel
        self._on_timing = on_timing
        self._started = False

    @property
    def detectors(self) -> list[Detector]:
        """Every detector, in run order."""
        return [*self.structural, *([self.sentinel] if self.sentinel else []), *self.content]

    def run(self, calls: Sequence[LLMCall], turned_off: Sequence[Collection[str]] = ()) -> list[DetectorRun]:
        """Run every detector on ``calls``; content detectors see only the calls that pass the gate.

        ``turned_off``, aligned with ``calls`` when given, names detectors that must not run
        on a call (its application's policy); they record a skipped result for it instead.
        """
        if not calls:
            return []
        if not self._started:
            self.start()
        everyone = list(range(len(calls)))
        runs = [self._run_on(d, calls, everyone, turned_off) for d in self.structural]
        verdicts: list[DetectorResult] = []
        checked = everyone
        if self.sentinel is not None:
            verdicts = self._timed(self.sentinel, calls)
            runs.append(DetectorRun(self.sentinel.name, verdicts))
            checked = [i for i, call in enumerate(calls) if call.sources or needs_fact_check(verdicts[i])]
        with_context = [i for i in checked if calls[i].sources or not verdicts or _has_context(verdicts[i])]
        passed_gate = set(checked)

        def gated(detector: Detector) -> Callable[[int], DetectorResult]:
            return lambda i: _skipped(detector, i in passed_gate, verdicts[i] if verdicts else None)

        for detector in self.content:
            eligible = with_context if detector.needs_context else checked
            runs.append(self._run_on(detector, calls, eligible, turned_off, gated(detector)))
        return runs

    def _run_on(
        self,
        detector: Detector,
        calls: Sequence[LLMCall],
        eligible: list[int],
        turned_off: Sequence[Collection[str]],
        not_eligible: Callable[[int], DetectorResult] | None = None,
    ) -> DetectorRun:
        """``detector`` on the eligible calls it is not turned off for; the others get skipped results."""
        off = {i for i in eligible if turned_off and detector.name in turned_off[i]}
        chosen = [i for i in eligible if i not in off]
        by_index = dict(zip(chosen, self._timed(detector, [calls[i] for i in chosen]), strict=True)) if chosen else {}
        results = []
        for i in range(len(calls)):
            if i in by_index:
                results.append(by_index[i])
            elif i in off or not_eligible is None:
                results.append(detector.skipped_result(TURNED_OFF))
            else:
                results.append(not_eligible(i))
        return DetectorRun(detector.name, results)

    def start(self) -> None:
        """Load every detector's models; :meth:`run` does it first when nobody did."""
        for detector in self.detectors:
            detector.start()
        self._started = True

    def close(self) -> None:
        """Release every detector's resources."""
        for detector in self.detectors:
            detector.close()
        self._started = False

    def _timed(self, detector: Detector, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        started = time.perf_counter()
        results = run_detector(detector, calls)
        if self._on_timing is not None:
            self._on_timing(detector.name, time.perf_counter() - started)
        return results


def _has_context(verdict: DetectorResult) -> bool:
    return verdict.status is not DetectorStatus.OK or verdict.sentinel is None or verdict.sentinel.has_context


def _skipped(detector: Detector, passed_gate: bool, verdict: DetectorResult | None) -> DetectorResult:
    if passed_gate:
        return detector.skipped_result("no context beyond the question to check the answer against")
    label = verdict.sentinel.label if verdict and verdict.sentinel else "non-factual"
    return detector.skipped_result(f"skipped: {label} prompt without sources needs no fact check")
