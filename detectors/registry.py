"""Which detectors a worker runs, built from settings and the thresholds file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from detectors.schema_violation import SchemaViolationDetector
from detectors.suite import DetectorSuite
from detectors.thresholds import Thresholds

if TYPE_CHECKING:
    from pipeline.settings import DetectorSettings


def build_suite(config: DetectorSettings, thresholds: Thresholds) -> DetectorSuite:
    """The span-level detectors, cheapest first."""
    return DetectorSuite(
        structural=[
            SchemaViolationDetector(config.schema_violation, thresholds.for_detector(SchemaViolationDetector.name))
        ]
    )
