"""Tool outcome detector: answers that claim what the tools did not do.

Its settings and descriptor; the runtime is :mod:`detectors.tool_outcome.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class ToolOutcomeConfig(BaseModel):
    """What else counts as a failed tool result (see :mod:`detectors.tool_outcome`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Beside error, failed, declined, denied, rejected, timeout...: your APIs' own words.
    extra_failure_statuses: list[str] = Field(default_factory=list, description="status values meaning failure")


def _runtime() -> Runtime:
    from detectors.tool_outcome import detector

    return detector


DETECTOR = DetectorSpec(
    name="tool_outcome",
    kind="structural",
    config=ToolOutcomeConfig,
    # 1.0 claims a failed tool succeeded, 0.8 claims one that never ran, 0.6 leaves a failure
    # unsaid: 0.5 flags all three. Not calibrated on labelled data (no shared set has tool turns).
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks="whether the answer claims a tool did what its result says failed",
        blind_to="claims without an action word, and tool results that do not say they failed",
    ),
    structural_keys=frozenset({"tool", "status", "outcome", "call_id"}),
)
