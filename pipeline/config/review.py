"""The review queue and the rate estimate (the settings file's ``review:`` section)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator


def check_edges(edges: Sequence[float]) -> None:
    """Raise ValueError unless ``edges`` ascend strictly inside (0, 1): the audit strata's cut points."""
    if list(edges) != sorted(set(edges)) or not all(0 < edge < 1 for edge in edges):
        raise ValueError(f"strata edges must ascend strictly inside (0, 1), not {list(edges)}")


class ReviewSettings(BaseModel):
    """How the audit sample is drawn, and how precise the rate estimate is asked to be."""

    model_config = ConfigDict(extra="forbid")

    # p_hallucination edges of the audit strata (the alerted calls and those without a probability
    # are strata of their own); each stratum holding calls gets an equal share of the verdicts.
    strata: list[float] = Field(default_factory=lambda: [0.1, 0.5, 0.9])
    # The draw's seed: the same calls, verdicts and seed serve the same calls in the same order.
    seed: int = 0
    # The queue draws from each application's calls of the last this many days.
    window_days: int = Field(default=7, ge=1, le=366)
    # The interval half-width `halluwatch rate` counts the verdicts still needed for (0.02: ±2 points).
    target_half_width: float = Field(default=0.02, gt=0, lt=0.5)
    # The review page hides what the detectors found (marks, p_hallucination, their names, the stratum)
    # until the verdict is in, then shows it: a reviewer who sees the detectors' marks tends to confirm
    # them, and the sample would stop measuring the detectors. false: shown up front. Each verdict
    # records which way it was given.
    blind: bool = True
    # An application's map of p_hallucination from its verdicts (the review page's Propose, `halluwatch
    # calibrate --app`): with this many verdicts or more, a proposal is applied without a person, and a verdict
    # proposes and applies one by itself at this many, then at each quarter more than the applied map's.
    # Unset: a person proposes and applies.
    auto_apply_after: int | None = Field(default=None, ge=1)
    # Verdicts that weigh as much as the shipped calibration in an application's map: with fewer, the map
    # stays near the shipped one; with many more, it follows the application. Counted as the weighted audit
    # sample is worth (100 verdicts are worth about 60). Small, because a shipped p is often off by 0.1-0.4
    # on a new application and 100 verdicts should fix that (bench/QUALITY.md, "Recalibration").
    map_shrinkage: float = Field(default=5.0, ge=0)
    # How often the worker re-reads the applied maps: a map applied takes effect within this long.
    map_refresh_seconds: float = Field(default=30.0, gt=0)

    @field_validator("strata")
    @classmethod
    def _edges(cls, value: list[float]) -> list[float]:
        check_edges(value)
        return value
