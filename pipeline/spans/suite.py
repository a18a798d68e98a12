"""The detector suite a process runs, from its settings: what :mod:`detectors` needs from ``pipeline``.

The baselines file is read here, the passage store opened, and the detectors' timings and
the store's reads and size go to the worker's metrics, so the detectors package itself reads
no settings and imports nothing from ``pipeline``.
"""

from __future__ import annotations

from detectors.baselines import load_baselines
from detectors.build import build_suite
from detectors.config import PassageStoreConfig
from detectors.models.passage_store import PassageStore
from detectors.suite import DetectorSuite
from detectors.thresholds import Thresholds
from pipeline import metrics
from pipeline.config.settings import Settings


def suite_from_settings(settings: Settings, thresholds: Thresholds, *, passage_store: bool = True) -> DetectorSuite:
    """The span-level detectors of :func:`detectors.registry.build_suite`, configured by ``settings``.

    ``passage_store=False``: without the store even where the settings enable it.
    """
    baselines = load_baselines(settings.baselines_file) if settings.baselines_file is not None else {}
    store = open_passage_store(settings.detectors.embeddings.passage_store) if passage_store else None
    return build_suite(settings.detectors, thresholds, baselines, on_timing=_observe, passage_store=store)


def open_passage_store(config: PassageStoreConfig) -> PassageStore | None:
    """The passage store the settings describe, its reads and size counted in the worker's metrics; None when off."""
    if not config.enabled or config.path is None:
        return None
    return PassageStore(
        config.path,
        max_megabytes=config.max_megabytes,
        ttl_hours=config.ttl_hours,
        on_read=_observe_store_read,
        on_size=_observe_store_size,
    )


def _observe(detector: str, seconds: float) -> None:
    metrics.DETECTOR_SECONDS.labels(detector).observe(seconds)


def _observe_store_read(hits: int, misses: int) -> None:
    metrics.PASSAGE_STORE_HITS.inc(hits)
    metrics.PASSAGE_STORE_MISSES.inc(misses)


def _observe_store_size(size_bytes: int, parts: int) -> None:
    metrics.PASSAGE_STORE_BYTES.set(size_bytes)
    metrics.PASSAGE_STORE_PARTS.set(parts)
