"""What one detector is, in one place: the descriptor each detector module declares as ``DETECTOR``.

:data:`detectors.registry.DETECTORS` lists them in order; the suite, the sampled detectors,
the alert renderings of evidence and the content policy's structural keys are derived from
that list, and ``tests/unit/test_detector_specs.py`` runs every one through its lifecycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:  # for annotations only: this module stays free of the runtimes (numpy, onnxruntime)
    from detectors.base import Detector, SampledDetector
    from detectors.config import ClaimsConfig, DetectorSettings, ModelBaseline, SelfConsistencyConfig
    from detectors.models.chat import ChatModel
    from detectors.models.embeddings import Embedder, Vectors

# structural: reads the call's own structure (tools, schemas), runs on every call; gate: decides
# whether content detectors run (the sentinel); content: compares the answer with its context;
# sampled: asks an LLM endpoint, on sampled calls only, in the sampled stage.
DetectorKind = Literal["structural", "gate", "content", "sampled"]
EvidenceLines = Callable[[Mapping[str, Any]], list[str]]
T = TypeVar("T")


class SampledConfigs(Protocol):
    """The sampled detectors' settings (the settings file's ``consistency:`` section)."""

    @property
    def self_consistency(self) -> SelfConsistencyConfig: ...  # noqa: D102 - the section's own fields

    @property
    def claims(self) -> ClaimsConfig: ...  # noqa: D102


@dataclass(frozen=True, slots=True)
class Ingredients:
    """What a detector is built from: its threshold, every detector's settings, and what detectors share."""

    threshold: float
    settings: DetectorSettings
    embedder: Embedder | None = None  # one model and source cache for every embedding detector of a process
    baselines: Mapping[str, ModelBaseline] = field(default_factory=dict)  # from a baselines file
    sampled: SampledConfigs | None = None
    chat: ChatModel | None = None  # the sampled detectors' endpoint
    embed: Callable[[Sequence[str]], Awaitable[Vectors]] | None = None  # embedding off the event loop


def no_evidence_lines(evidence: Mapping[str, Any]) -> list[str]:
    """For a detector whose summary says all a person needs in an alert."""
    return []


@dataclass(frozen=True, slots=True)
class DetectorSpec:
    """One detector: its name, kind, how it is built, how its evidence reads, which evidence keys are safe.

    ``build`` returns None when the settings turn the detector off. ``structural_keys`` are
    the evidence keys holding no content (ids, kinds, verdicts): they are kept whatever the
    content mode; every other text in the evidence follows it.
    """

    name: str
    kind: DetectorKind
    build: Callable[[Ingredients], Detector | SampledDetector | None]
    render: EvidenceLines
    structural_keys: frozenset[str] = frozenset()


def required(value: T | None, what: str) -> T:
    """``value``, which the detector being built cannot do without; a ValueError naming it otherwise."""
    if value is None:
        raise ValueError(f"this detector needs {what}")
    return value
