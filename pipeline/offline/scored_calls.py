"""Labelled calls with their detectors' scores: what calibration works on (docs/operations.md).

They come from two places: ``halluwatch eval``'s run of the detectors over labelled JSONL
records, or the ClickHouse ``labels`` table joined to the ``findings`` workers already
wrote (so no detector is re-run when the scores exist).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config.policy import DEFAULT_POLICY


@dataclass(frozen=True, slots=True)
class DetectorScore:
    """One detector's result on one labelled call."""

    score: float
    status: str = "ok"  # ok / skipped / error: only "ok" scores take part in a sweep
    severity: int = 0
    detector_version: str = ""


@dataclass(frozen=True, slots=True)
class LabelledScores:
    """One labelled call (or record) and what each detector said about it."""

    id: str
    hallucinated: bool
    detectors: dict[str, DetectorScore] = field(default_factory=dict)
    policy: str = DEFAULT_POLICY  # the application policy the call falls under (calibrated per policy)
    p_hallucination: float | None = None  # the verdict's probability, where the call has one
