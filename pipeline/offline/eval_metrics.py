"""Classification and span metrics for ``halluwatch eval`` (no scikit-learn needed)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BinaryMetrics:
    """Precision, recall and F1 of a set of verdicts against labels, plus support."""

    precision: float
    recall: float
    f1: float
    positives: int
    total: int


def binary_metrics(predicted: Sequence[bool], actual: Sequence[bool]) -> BinaryMetrics:
    """Example-level precision/recall/F1 (0 where undefined)."""
    true_positive = sum(p and a for p, a in zip(predicted, actual, strict=True))
    predicted_positive, actual_positive = sum(predicted), sum(actual)
    precision = true_positive / predicted_positive if predicted_positive else 0.0
    recall = true_positive / actual_positive if actual_positive else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BinaryMetrics(precision, recall, f1, actual_positive, len(actual))


def all_positive_f1(actual: Sequence[bool]) -> float:
    """F1 of the trivial detector that calls everything hallucinated: 2p / (1 + p)."""
    rate = sum(actual) / len(actual) if actual else 0.0
    return 2 * rate / (1 + rate) if rate else 0.0


def auroc(scores: Sequence[float], actual: Sequence[bool]) -> float | None:
    """Area under the ROC curve (Mann-Whitney U, ties count half); None with one class only."""
    positives = sum(actual)
    negatives = len(actual) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    start = 0
    while start < len(order):  # average ranks over runs of tied scores
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        average_rank = (start + end) / 2 + 1
        rank_sum += average_rank * sum(actual[order[k]] for k in range(start, end + 1))
        start = end + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def best_f1_threshold(scores: Sequence[float], actual: Sequence[bool]) -> tuple[float, float]:
    """The threshold (among observed scores) that maximizes F1, and that F1."""
    best = (1.0, 0.0)
    for threshold in sorted(set(scores)):
        f1 = binary_metrics([s >= threshold for s in scores], actual).f1
        if f1 > best[1]:
            best = (threshold, f1)
    return best


Span = tuple[int, int]


def span_overlap(predicted: Iterable[Iterable[Span]], gold: Iterable[Iterable[Span]]) -> BinaryMetrics:
    """Character-level overlap of predicted and gold spans, summed over records."""
    overlap = predicted_chars = gold_chars = 0
    records = 0
    for record_predicted, record_gold in zip(predicted, gold, strict=True):
        predicted_set = _characters(record_predicted)
        gold_set = _characters(record_gold)
        overlap += len(predicted_set & gold_set)
        predicted_chars += len(predicted_set)
        gold_chars += len(gold_set)
        records += 1
    precision = overlap / predicted_chars if predicted_chars else 0.0
    recall = overlap / gold_chars if gold_chars else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BinaryMetrics(precision, recall, f1, gold_chars, records)


def _characters(spans: Iterable[Span]) -> set[int]:
    return {position for start, end in spans for position in range(max(start, 0), max(end, start))}
