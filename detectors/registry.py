"""Which detectors a process runs, built from settings and the thresholds file.

The worker and ``halluwatch eval`` both call :func:`build_suite`, so offline scores are
the scores production would give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from detectors.base import Detector
from detectors.confidence import ConfidenceDetector
from detectors.contradiction import ContradictionDetector
from detectors.embeddings import Embedder
from detectors.grounding import GroundingDetector
from detectors.schema_violation import SchemaViolationDetector
from detectors.sentinel import SentinelDetector
from detectors.span_model import build_span_model_detector
from detectors.suite import DetectorSuite
from detectors.thresholds import Thresholds
from pipeline.offline.baseline import load_baselines

if TYPE_CHECKING:
    from pipeline.config.settings import Settings


def build_suite(settings: Settings, thresholds: Thresholds) -> DetectorSuite:
    """The span-level detectors: structural ones, the sentinel, then content ones cheapest first."""
    config = settings.detectors
    confidence = config.confidence
    if settings.baselines_file is not None:
        # Baselines written inline in the YAML file win over the computed file's.
        confidence = confidence.model_copy(
            update={"baselines": {**load_baselines(settings.baselines_file), **confidence.baselines}}
        )
    content: list[Detector] = [
        ContradictionDetector(config.contradiction, thresholds.for_detector(ContradictionDetector.name)),
        ConfidenceDetector(confidence, thresholds.for_detector(ConfidenceDetector.name)),
        GroundingDetector(
            config.grounding, thresholds.for_detector(GroundingDetector.name), Embedder(config.embeddings)
        ),
    ]
    if config.span_model.model_path is not None:
        span_model = build_span_model_detector(config.span_model, thresholds.for_detector("span_model"))
        content += [span_model] if span_model else []
    return DetectorSuite(
        structural=[
            SchemaViolationDetector(config.schema_violation, thresholds.for_detector(SchemaViolationDetector.name))
        ],
        content=content,
        sentinel=SentinelDetector(config.sentinel, thresholds.for_detector(SentinelDetector.name)),
    )
