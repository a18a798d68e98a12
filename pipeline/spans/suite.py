"""The detector suite a process runs, from its settings: what :mod:`detectors` needs from ``pipeline``.

The baselines file is read here and the detectors' timings go to the worker's metrics,
so the detectors package itself reads no settings and imports nothing from ``pipeline``.
"""

from __future__ import annotations

from detectors.baselines import load_baselines
from detectors.build import build_suite
from detectors.suite import DetectorSuite
from detectors.thresholds import Thresholds
from pipeline import metrics
from pipeline.config.settings import Settings


def suite_from_settings(settings: Settings, thresholds: Thresholds) -> DetectorSuite:
    """The span-level detectors of :func:`detectors.registry.build_suite`, configured by ``settings``."""
    baselines = load_baselines(settings.baselines_file) if settings.baselines_file is not None else {}
    return build_suite(settings.detectors, thresholds, baselines, on_timing=_observe)


def _observe(detector: str, seconds: float) -> None:
    metrics.DETECTOR_SECONDS.labels(detector).observe(seconds)
