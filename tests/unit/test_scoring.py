from __future__ import annotations

import pytest

from detectors.base import DetectorResult, DetectorStatus
from detectors.verdict import answer_spans, combined_verdict, threshold_relative
from pipeline.offline.eval_metrics import all_positive_f1, auroc, best_f1_threshold, binary_metrics, span_overlap


def test_binary_metrics():
    m = binary_metrics([True, True, False, False], [True, False, True, False])
    assert (m.precision, m.recall, m.f1, m.positives, m.total) == (0.5, 0.5, 0.5, 2, 4)
    assert binary_metrics([False, False], [True, False]).f1 == 0.0


def test_auroc_perfect_random_ties_and_one_class():
    assert auroc([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == 1.0
    assert auroc([0.9, 0.8, 0.2, 0.1], [False, False, True, True]) == 0.0
    assert auroc([0.5, 0.5, 0.5, 0.5], [False, True, False, True]) == 0.5
    # one positive ranked above one of two negatives: 1/2
    assert auroc([0.3, 0.1, 0.5], [True, False, False]) == pytest.approx(0.5)
    assert auroc([0.1, 0.2], [True, True]) is None


def test_all_positive_baseline_and_best_threshold():
    assert all_positive_f1([True, False, False, False]) == pytest.approx(0.4)
    threshold, f1 = best_f1_threshold([0.1, 0.4, 0.6, 0.9], [False, False, True, True])
    assert (threshold, f1) == (0.6, 1.0)


def test_span_overlap_counts_characters():
    m = span_overlap([[(0, 10)], []], [[(5, 15)], [(0, 4)]])
    assert m.precision == 0.5 and m.recall == pytest.approx(5 / 14)


def _result(name: str, score: float, threshold: float, status=DetectorStatus.OK, spans=()) -> DetectorResult:
    return DetectorResult(name, "1", score, score >= threshold, threshold, status, evidence={"spans": list(spans)})


def test_threshold_relative_keeps_order_and_puts_threshold_at_half():
    assert threshold_relative(0.2, 0.2) == 0.5
    assert threshold_relative(0.1, 0.2) == 0.25
    assert threshold_relative(0.6, 0.2) == 0.75
    assert threshold_relative(1.0, 0.2) == 1.0


def test_combined_verdict_agrees_with_any_flag_and_ignores_sentinel_and_skips():
    results = [
        _result("grounding", 0.3, 0.6, spans=[{"start": 0, "end": 4, "text": "Paris"}]),
        _result("contradiction", 0.9, 0.5, spans=[{"start": 10, "end": 14, "text": "1950"}]),
        _result("sentinel", 1.0, 0.5),
        _result("confidence", 1.0, 0.5, status=DetectorStatus.SKIPPED),
    ]
    score, hallucinated = combined_verdict(results)
    assert hallucinated and score == pytest.approx(0.9)
    assert answer_spans(results, hallucinated) == [
        {"start": 10, "end": 14, "text": "1950", "detector": "contradiction"}
    ]
    assert combined_verdict(results[:1]) == (pytest.approx(0.25), False)
    assert combined_verdict([]) == (0.0, False)


def test_spans_are_the_flagged_words_and_values_of_answers_called_hallucinated():
    sentence = {"start": 0, "end": 40, "text": "The tower was built in 1950 in Paris."}
    grounding = _result("grounding", 0.8, 0.5, spans=[sentence])
    contradiction = _result("contradiction", 0.9, 0.5, spans=[{"start": 23, "end": 27, "text": "1950"}])
    assert [s["detector"] for s in answer_spans([grounding, contradiction], True)] == ["contradiction"]
    assert answer_spans([grounding], True) == []  # whole sentences are not spans
    assert answer_spans([grounding, contradiction], False) == []  # a clean verdict marks nothing
