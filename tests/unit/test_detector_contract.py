"""The detector contract: a failing call gets an error result alone; results are built one way."""

from __future__ import annotations

from collections.abc import Sequence

from detectors.base import Detector, DetectorResult, DetectorStatus, run_detector
from detectors.llm_call import LLMCall
from tests.calls import make_llm_call


class FailsOnPoison(Detector):
    """Scores every call 0.9, and raises for the whole batch when one answer says 'poison'."""

    name = "fragile"
    version = "1"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        self.batches.append(len(calls))
        if any(call.answer == "poison" for call in calls):
            raise ValueError("cannot read poison")
        return [self.scored_result(0.9, 0.5, severity=2, summary=call.answer, evidence={}) for call in calls]


def test_one_failing_call_gets_an_error_result_and_the_others_their_real_results() -> None:
    detector = FailsOnPoison()
    calls = [make_llm_call("fine"), make_llm_call("poison"), make_llm_call("also fine")]
    results = run_detector(detector, calls)
    assert [r.status for r in results] == [DetectorStatus.OK, DetectorStatus.ERROR, DetectorStatus.OK]
    assert [r.summary for r in results] == ["fine", "ValueError: cannot read poison", "also fine"]
    assert results[0].flagged and results[2].score == 0.9
    assert detector.batches == [3, 1, 1, 1]  # the batch, then each call alone


def test_a_batch_without_failures_runs_once() -> None:
    detector = FailsOnPoison()
    assert len(run_detector(detector, [make_llm_call("a"), make_llm_call("b")])) == 2
    assert detector.batches == [2]


def test_a_wrong_number_of_results_is_an_error_per_call() -> None:
    class Short(FailsOnPoison):
        def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
            return super().detect_batch(calls)[1:]

    results = run_detector(Short(), [make_llm_call("a"), make_llm_call("b")])
    assert [r.status for r in results] == [DetectorStatus.ERROR] * 2
    assert "returned 0 results for 1 calls" in results[0].summary


def test_scored_result_flags_at_the_threshold_with_severity_only_then() -> None:
    detector = FailsOnPoison()
    below = detector.scored_result(0.49, 0.5, severity=4, summary="s", evidence={"k": 1})
    at = detector.scored_result(0.5, 0.5, severity=4, summary="s", evidence={"k": 1})
    held_back = detector.scored_result(0.9, 0.5, severity=4, summary="s", evidence={}, flaggable=False)
    assert (below.flagged, below.severity) == (False, 0)
    assert (at.flagged, at.severity, at.threshold, at.evidence) == (True, 4, 0.5, {"k": 1})
    assert (at.detector, at.detector_version, at.status) == ("fragile", "1", DetectorStatus.OK)
    assert (held_back.flagged, held_back.severity, held_back.score) == (False, 0, 0.9)
