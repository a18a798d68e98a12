"""Confidence anomaly detector: token entropy far from the model's own baseline.

Its settings and descriptor; the runtime is :mod:`detectors.confidence.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.config import DEFAULT_MIN_TOKENS, DEFAULT_TOP_K, ModelBaseline
from detectors.spec import Description, DetectorSpec, Runtime


class ConfidenceConfig(BaseModel):
    """Baselines per model name (exactly as spans record it) and how responses are measured.

    ``default_baseline`` applies to models without their own entry; without one such
    calls are skipped, since another model's entropy scale says nothing about them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    baselines: dict[str, ModelBaseline] = Field(default_factory=dict)
    default_baseline: ModelBaseline | None = None
    min_tokens: int = Field(default=DEFAULT_MIN_TOKENS, ge=1, description="usable positions needed to score")
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=20, description="alternatives per position (OpenAI max 20)")
    z_at_half_score: float = Field(default=2.5, gt=0.0, allow_inf_nan=False)
    low_token_prob: float = Field(default=0.5, gt=0.0, lt=1.0, description="tokens below it form low-confidence spans")


def _runtime() -> Runtime:
    from detectors.confidence import detector

    return detector


DETECTOR = DetectorSpec(
    name="confidence",
    kind="content",
    config=ConfidenceConfig,
    # 1 - 2^(-|z|/2.5): 0.5 is |z| = 2.5 against the model's entropy baseline.
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks="how unsure the model was (token entropy against its own baseline)",
        blind_to="whether the answer is true: a confident model can still be wrong",
    ),
    structural_keys=frozenset({"baseline_model", "baseline_version"}),
)
