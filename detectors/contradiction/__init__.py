"""Numeric & entity contradiction detector: values and names of the answer its context contradicts or lacks.

Its settings and descriptor; the runtime is :mod:`detectors.contradiction.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class ContradictionConfig(BaseModel):
    """Tolerances and weights of the contradiction detector (see :mod:`detectors.contradiction`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    relative_tolerance: float = Field(default=0.02, ge=0.0, le=0.5)
    check_names: bool = True
    min_name_words: int = Field(default=1, ge=1, le=10)
    context_window_words: int = Field(default=8, ge=1, le=50)
    conflict_min_shared_words: int = Field(default=1, ge=1, le=20)
    conflict_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    unsupported_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    name_weight: float = Field(default=0.25, ge=0.0, le=1.0)
    count_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    max_count: int = Field(default=12, ge=0, description="unitless whole numbers up to this are counts")
    max_answer_chars: int = Field(default=20_000, ge=1)
    max_context_chars: int = Field(default=500_000, ge=1)


def _runtime() -> Runtime:
    from detectors.contradiction import detector

    return detector


DETECTOR = DetectorSpec(
    name="contradiction",
    kind="content",
    config=ContradictionConfig,
    # 1 - 0.2^conflicts * 0.6^unsupported values * 0.75^unsupported names: 0.25 flags any
    # unsupported number; best F1 on both RAGTruth and SummEdits among 0.25 / 0.4 / 0.5.
    threshold=0.25,
    runtime=_runtime,
    description=Description(
        checks="the numbers, dates, quantities and names of the answer against the context",
        blind_to="claims without a value or a name",
    ),
    structural_keys=frozenset({"kind", "verdict", "family"}),
)
