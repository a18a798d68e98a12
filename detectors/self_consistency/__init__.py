"""Self-consistency: ask again, and see whether the answers agree (sampled calls only).

Its settings and descriptor; the runtime is :mod:`detectors.self_consistency.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class SelfConsistencyConfig(BaseModel):
    """How often and how the call is asked again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    samples: int = Field(default=4, ge=2, description="answers asked for per sampled call")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=400, ge=1, description="per answer")

    @property
    def requests(self) -> int:
        """Requests per sampled call: one per answer asked for."""
        return self.samples


def _runtime() -> Runtime:
    from detectors.self_consistency import detector

    return detector


DETECTOR = DetectorSpec(
    name="self_consistency",
    kind="sampled",
    config=SelfConsistencyConfig,
    # 1 - mean pairwise cosine of the re-asked answers (sampled calls only): 0.35 is seed 000's
    # "divergent below 0.65". Not yet calibrated on labelled data.
    threshold=0.35,
    runtime=_runtime,
    description=Description(
        checks="whether the model gives the same answer when asked again",
        blind_to="errors the model repeats every time",
    ),
)
