"""Which detectors a process runs, built from its detector settings and the thresholds file.

The worker and ``halluwatch eval`` both build their suite here (through
:mod:`pipeline.spans.suite`), so offline scores are the scores production would give.
"""

from __future__ import annotations

from collections.abc import Mapping

from detectors.base import Detector
from detectors.confidence import ConfidenceDetector
from detectors.config import DetectorSettings, ModelBaseline
from detectors.contradiction import ContradictionDetector
from detectors.embeddings import Embedder
from detectors.grounding import GroundingDetector
from detectors.schema_violation import SchemaViolationDetector
from detectors.sentinel import SentinelDetector
from detectors.suite import DetectorSuite, TimingObserver
from detectors.thresholds import Thresholds
from detectors.token_classifier import build_token_classifier_detector
from detectors.tool_facts import ToolFactsDetector
from detectors.tool_outcome import ToolOutcomeDetector
from detectors.unsupported_spans import UnsupportedSpansDetector


def build_suite(
    config: DetectorSettings,
    thresholds: Thresholds,
    baselines: Mapping[str, ModelBaseline],
    on_timing: TimingObserver | None = None,
) -> DetectorSuite:
    """The span-level detectors: structural ones, the sentinel, then content ones cheapest first.

    ``baselines`` are the confidence detector's from a baselines file; those written in
    ``config`` win.
    """
    confidence = config.confidence.model_copy(update={"baselines": {**baselines, **config.confidence.baselines}})
    embedder = Embedder(config.embeddings)  # one model and one source cache for both embedding detectors
    content: list[Detector] = [
        ContradictionDetector(config.contradiction, thresholds.for_detector(ContradictionDetector.name)),
        ConfidenceDetector(confidence, thresholds.for_detector(ConfidenceDetector.name)),
        GroundingDetector(config.grounding, thresholds.for_detector(GroundingDetector.name), embedder),
        UnsupportedSpansDetector(
            config.unsupported_spans,
            thresholds.for_detector(UnsupportedSpansDetector.name),
            embedder,
            language=config.grounding.language,
        ),
    ]
    if config.span_model.model_path is not None:
        span_model = build_token_classifier_detector(config.span_model, thresholds.for_detector("span_model"))
        content += [span_model] if span_model else []
    return DetectorSuite(
        structural=[
            SchemaViolationDetector(config.schema_violation, thresholds.for_detector(SchemaViolationDetector.name)),
            ToolFactsDetector(config.tool_facts, thresholds.for_detector(ToolFactsDetector.name)),
            ToolOutcomeDetector(
                config.tool_outcome,
                thresholds.for_detector(ToolOutcomeDetector.name),
                language=config.grounding.language,
            ),
        ],
        content=content,
        sentinel=SentinelDetector(config.sentinel, thresholds.for_detector(SentinelDetector.name)),
        on_timing=on_timing,
    )
