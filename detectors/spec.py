"""What one detector is, in one place: the descriptor each detector package declares as ``DETECTOR``.

A detector is a package: its ``__init__`` holds its settings model and its descriptor, and is
light (pydantic only), because the settings file's sections and the built-in thresholds are
derived from :data:`detectors.registry.DETECTORS` and every command reads its settings; its
``detector`` module is the runtime (numpy, model sessions, RE2...), imported only when the
detector is built or renders evidence. ``tests/unit/test_detector_specs.py`` runs every
descriptor through its lifecycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:  # for annotations only: this module stays free of the runtimes (numpy, onnxruntime)
    from detectors.base import Detector, SampledDetector
    from detectors.config import ModelBaseline, SharedDetectorSettings
    from detectors.models.chat import ChatModel
    from detectors.models.embeddings import Embedder, Vectors

# structural: reads the call's own structure (tools, schemas), runs on every call; gate: decides
# whether content detectors run (the sentinel); content: compares the answer with its context;
# sampled: asks an LLM endpoint, on sampled calls only, in the sampled stage.
DetectorKind = Literal["structural", "gate", "content", "sampled"]
EvidenceLines = Callable[[Mapping[str, Any]], list[str]]
T = TypeVar("T")
C = TypeVar("C", bound=BaseModel)


class Runtime(Protocol):
    """A detector's ``detector`` module: how it is built and how its evidence reads for people."""

    def build(self, ing: Ingredients, /) -> Detector | SampledDetector | None:
        """The detector, or None when its settings turn it off."""

    def render_evidence(self, evidence: Mapping[str, Any], /) -> list[str]:
        """Its evidence as lines for people, in alerts (none when its summary says it all)."""


class SampledConfig(Protocol):
    """What every sampled detector's settings say: whether it runs, and what one call costs."""

    @property
    def enabled(self) -> bool: ...  # noqa: D102 - the settings' own field

    @property
    def requests(self) -> int:
        """Requests to the LLM endpoint this detector makes for one sampled call."""


@dataclass(frozen=True, slots=True)
class Ingredients:
    """What a detector is built from: its threshold, the settings sections, and what detectors share."""

    threshold: float
    settings: SharedDetectorSettings  # the settings file's ``detectors:`` section (a DetectorSettings)
    embedder: Embedder | None = None  # one model and source cache for every embedding detector of a process
    baselines: Mapping[str, ModelBaseline] = field(default_factory=dict)  # from a baselines file
    sampled: BaseModel | None = None  # the ``consistency:`` section, holding the sampled detectors' settings
    chat: ChatModel | None = None  # the sampled detectors' endpoint
    embed: Callable[[Sequence[str]], Awaitable[Vectors]] | None = None  # embedding off the event loop

    def config(self, spec: DetectorSpec[C]) -> C:
        """The settings of the detector ``spec`` describes, from the section holding them."""
        section = required(self.sampled, "the sampled detectors' settings") if spec.kind == "sampled" else self.settings
        return spec.config_in(section)


def no_evidence_lines(evidence: Mapping[str, Any]) -> list[str]:
    """For a detector whose summary says all a person needs in an alert."""
    return []


@dataclass(frozen=True, slots=True)
class Description:
    """What a detector checks and what it cannot judge, as the triage pages say it beside its finding.

    ``ok``: what its clean result means, said instead of its summary, where "did not flag the call"
    and the summary would mislead or repeat themselves (a gate's); None: those.
    """

    checks: str
    blind_to: str
    ok: str | None = None


@dataclass(frozen=True, slots=True)
class DetectorSpec(Generic[C]):
    """One detector: its name, kind, settings, built-in threshold, runtime, and which evidence keys are safe.

    ``config`` is its settings model, the section named like the detector (under
    ``detectors:``, or ``consistency:`` for sampled detectors). ``threshold`` applies unless a
    thresholds file names the detector. ``runtime`` imports the ``detector`` module.
    ``structural_keys`` are the evidence keys holding no content (ids, kinds, verdicts): they
    are kept whatever the content mode; every other text in the evidence follows it.
    ``description`` is what the triage pages say it checks and cannot judge.
    """

    name: str
    kind: DetectorKind
    config: type[C]
    threshold: float
    runtime: Callable[[], Runtime]
    description: Description
    structural_keys: frozenset[str] = frozenset()

    def config_in(self, section: BaseModel) -> C:
        """The detector's settings in ``section``, a settings model derived with its field."""
        value = getattr(section, self.name, None)
        if not isinstance(value, self.config):
            raise TypeError(f"{type(section).__name__} has no {self.config.__name__} named {self.name!r}")
        return value

    def build(self, ing: Ingredients) -> Detector | SampledDetector | None:
        """The detector, or None when the settings turn it off."""
        return self.runtime().build(ing)

    def render(self, evidence: Mapping[str, Any]) -> list[str]:
        """Its evidence as lines for people, in alerts."""
        return self.runtime().render_evidence(evidence)


def required(value: T | None, what: str) -> T:
    """``value``, which the detector being built cannot do without; a ValueError naming it otherwise."""
    if value is None:
        raise ValueError(f"this detector needs {what}")
    return value
