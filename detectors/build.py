"""The detectors one process runs, built from :data:`detectors.registry.DETECTORS` and the settings.

The worker and ``halluwatch eval`` both build their suite here (through
:mod:`pipeline.spans.suite`), so offline scores are the scores production would give.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from pydantic import BaseModel

from detectors.base import Detector, SampledDetector
from detectors.config import ModelBaseline
from detectors.models.chat import ChatModel
from detectors.models.embeddings import Embedder, Vectors
from detectors.models.passage_store import PassageStore
from detectors.registry import DETECTORS
from detectors.settings import DetectorSettings
from detectors.spec import DetectorSpec, Ingredients
from detectors.suite import DetectorSuite, TimingObserver
from detectors.thresholds import Thresholds


def build_suite(
    config: DetectorSettings,
    thresholds: Thresholds,
    baselines: Mapping[str, ModelBaseline],
    on_timing: TimingObserver | None = None,
    passage_store: PassageStore | None = None,
) -> DetectorSuite:
    """The span-level detectors the settings turn on.

    ``baselines`` are the confidence detector's from a baselines file; those written in
    ``config`` win.  ``passage_store``: where the embedder keeps source parts across restarts.
    """
    # One model and one source cache for both embedding detectors.
    embedder = Embedder(config.embeddings, passage_store)
    built: dict[str, list[Detector]] = {"structural": [], "gate": [], "content": []}
    for spec in DETECTORS:
        if spec.kind in built:
            ingredients = Ingredients(thresholds.for_detector(spec.name), config, embedder, baselines)
            detector = spec.build(ingredients)
            if detector is not None and not isinstance(detector, Detector):
                raise TypeError(_wrong_type(spec, detector))
            built[spec.kind] += [detector] if detector is not None else []
    [gate] = built["gate"]
    return DetectorSuite(structural=built["structural"], content=built["content"], sentinel=gate, on_timing=on_timing)


def build_sampled(
    config: DetectorSettings,
    sampled: BaseModel,
    thresholds: Thresholds,
    chat: ChatModel,
    embed: Callable[[Sequence[str]], Awaitable[Vectors]],
) -> list[SampledDetector]:
    """The sampled detectors the settings turn on, asking ``chat`` and embedding through ``embed``."""
    detectors: list[SampledDetector] = []
    for spec in DETECTORS:
        if spec.kind == "sampled":
            ingredients = Ingredients(
                thresholds.for_detector(spec.name), config, sampled=sampled, chat=chat, embed=embed
            )
            detector = spec.build(ingredients)
            if detector is not None and not isinstance(detector, SampledDetector):
                raise TypeError(_wrong_type(spec, detector))
            detectors += [detector] if detector is not None else []
    return detectors


def _wrong_type(spec: DetectorSpec[BaseModel], detector: object) -> str:
    return f"detector {spec.name!r} of kind {spec.kind} built a {type(detector).__name__}"
