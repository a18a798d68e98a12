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


def reliability_table(probabilities: Sequence[float], labels: Sequence[bool], bins: int = BINS) -> list[ReliabilityBin]:
    """The non-empty bins of ``probabilities`` against ``labels``."""
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    table = []
    for b in range(bins):
        inside = index == b
        if inside.any():
            table.append(ReliabilityBin(b / bins, (b + 1) / bins, int(inside.sum()),
                                        float(p[inside].mean()), float(y[inside].mean())))  # fmt: skip
    return table


def expected_calibration_error(probabilities: Sequence[float], labels: Sequence[bool], bins: int = BINS) -> float:
    """The records-weighted mean gap between predicted and observed, over the reliability bins."""
    table = reliability_table(probabilities, labels, bins)
    total = sum(b.records for b in table)
    return sum(b.records * abs(b.predicted - b.observed) for b in table) / total if total else 0.0
