"""Which detectors a worker runs, built from settings and the thresholds file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from detectors.base import Detector
from detectors.schema_violation import SchemaViolationDetector
from detectors.thresholds import Thresholds

if TYPE_CHECKING:
    from pipeline.settings import DetectorSettings


def build_detectors(config: DetectorSettings, thresholds: Thresholds) -> list[Detector]:
    """The span-level detectors, cheapest first."""
    return [
        SchemaViolationDetector(config.schema_violation, thresholds.for_detector(SchemaViolationDetector.name)),
    ]
