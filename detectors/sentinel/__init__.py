"""Fact-check sentinel: which prompts need their answer checked by the content detectors.

Its settings and descriptor; the runtime is :mod:`detectors.sentinel.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class SentinelConfig(BaseModel):
    """Which weights to load and when a prediction is too unsure to skip checking."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(default=None, description="weights JSON; None: the built-in model")
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    min_context_words: int = Field(default=30, ge=1)


def _runtime() -> Runtime:
    from detectors.sentinel import detector

    return detector


DETECTOR = DetectorSpec(
    name="sentinel",
    kind="gate",
    config=SentinelConfig,
    # Probability that the prompt is factual; at 0.3 ~95% of factual prompts are checked
    # and ~90% of non-factual ones skipped (held-out split of detectors/data/sentinel_prompts.jsonl).
    threshold=0.3,
    runtime=_runtime,
    description=Description(
        checks=(
            "whether the prompt asks for facts (its score: how likely), which decides whether the content "
            "detectors apply"
        ),
        blind_to="whether the answer is right: it judges the prompt, and its flag means unverified, not hallucinated",
        ok="let the content detectors run",
    ),
    structural_keys=frozenset({"label"}),
)
