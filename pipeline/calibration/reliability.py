"""Whether probabilities mean what they say: the reliability table and the expected calibration error.

Predictions are put in ten equal-width bins of predicted probability; in each, the mean
prediction is set beside the observed share of positives.  The expected calibration error
(ECE) is the mean gap between the two, each bin weighed by its share of the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BINS = 10


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    """One bin of predicted probability: how many records, what was predicted, what was observed."""

    low: float
    high: float
    records: int
    predicted: float
    observed: float

    def to_dict(self) -> dict[str, float | int]:
        """The model file's and QUALITY.md's form."""
        return {"low": self.low, "high": self.high, "records": self.records,
                "predicted": round(self.predicted, 4), "observed": round(self.observed, 4)}  # fmt: skip


def reliability_table(
    probabilities: Sequence[float], labels: Sequence[bool], bins: int = BINS, weights: Sequence[float] | None = None
) -> list[ReliabilityBin]:
    """The non-empty bins of ``probabilities`` against ``labels``.

    ``weights``: what each record stands for (an audit sample's inverse inclusion probabilities);
    the bins' means are then weighted, their ``records`` still counted.
    """
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    w = np.ones(len(p)) if weights is None else np.asarray(weights, dtype=float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    table = []
    for b in range(bins):
        inside = index == b
        if inside.any():
            table.append(ReliabilityBin(b / bins, (b + 1) / bins, int(inside.sum()),
                                        float(np.average(p[inside], weights=w[inside])),
                                        float(np.average(y[inside], weights=w[inside]))))  # fmt: skip
    return table


def expected_calibration_error(
    probabilities: Sequence[float], labels: Sequence[bool], bins: int = BINS, weights: Sequence[float] | None = None
) -> float:
    """The mean gap between predicted and observed over the reliability bins, each weighed by its records' weight."""
    w = np.ones(len(probabilities)) if weights is None else np.asarray(weights, dtype=float)
    index = np.minimum((np.asarray(probabilities, dtype=float) * bins).astype(int), bins - 1)
    table = reliability_table(probabilities, labels, bins, weights)
    mass = [float(w[index == round(b.low * bins)].sum()) for b in table]
    total = sum(mass)
    return sum(m * abs(b.predicted - b.observed) for m, b in zip(mass, table, strict=True)) / total if total else 0.0
