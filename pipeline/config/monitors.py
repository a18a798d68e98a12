"""Rate monitors (the settings file's ``monitors:`` section, docs/operations.md).

A monitor watches the share of LLM calls that detectors flag, per group of calls (a
service, a model, an operation, a policy), over a short window against the same group's
own recent baseline, and keeps one incident per group open while that rate stays high.
No monitors are configured by default: per-trace alerts work without any.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The findings columns a monitor may group calls by; ``policy`` is the application's policy name.
GroupField = Literal["service", "operation", "model", "policy"]


def _by_application() -> list[GroupField]:
    """Each application policy, and within calls no policy selects (``default``), each service."""
    return ["policy", "service"]


class MonitorConfig(BaseModel):
    """One monitor: what it groups by, when a group's flag rate opens and resolves an incident.

    A group's window rate opens an incident when it is at least ``min_ratio`` times its
    baseline and at least ``min_increase`` above it (so 0.1% -> 0.2% does not page), with
    ``min_calls`` calls in the window and in the baseline.  It resolves when the rise over
    the baseline falls below the share ``(recover_ratio - 1) / (min_ratio - 1)`` of the rise
    that opened it: with the ratio deciding, that is "below ``recover_ratio`` x baseline".
    """

    model_config = ConfigDict(extra="forbid")

    route: str  # an alerting route: where the incident's open, updates and resolve go
    # flag_rate: the share of calls flagged against the group's baseline (the fields below). false_alarms:
    # each application's alert routes against their false_alarm_target, from its review verdicts
    # (pipeline/rate/false_alarms.py): opens when a route's 95 % interval lies above its target, resolves
    # when the estimate is back under it; group_by, the baseline and the thresholds do not apply.
    kind: Literal["flag_rate", "false_alarms"] = "flag_rate"
    group_by: list[GroupField] = Field(default_factory=_by_application, min_length=1)
    window_minutes: int = Field(default=15, ge=1, le=24 * 60)
    # The baseline: the same hour of day on each of these days, or the whole period when that is too thin.
    baseline_days: int = Field(default=7, ge=1, le=90)
    min_calls: int = Field(default=50, ge=1)
    min_ratio: float = Field(default=2.0, gt=1.0)
    min_increase: float = Field(default=0.02, ge=0.0, le=1.0)  # a rate difference: 0.02 = 2 points
    recover_ratio: float = Field(default=1.5, ge=1.0)
    cooldown_minutes: int = Field(default=30, ge=0)  # after a resolve, the group's incident may not reopen
    interval_seconds: float = Field(default=60.0, ge=1.0)  # how often the monitor is evaluated
    severity: int = Field(default=4, ge=0, le=4)  # as an alert's: mapped through alerting.pagerduty_severity

    @field_validator("group_by")
    @classmethod
    def _distinct(cls, value: list[GroupField]) -> list[GroupField]:
        if len(set(value)) != len(value):
            raise ValueError("group_by names a field twice")
        return value

    @model_validator(mode="after")
    def _hysteresis(self) -> MonitorConfig:
        if self.recover_ratio >= self.min_ratio:
            raise ValueError(
                f"recover_ratio ({self.recover_ratio:g}) must be below min_ratio ({self.min_ratio:g}), "
                "or an incident could resolve at the rate that opens it"
            )
        return self

    @property
    def recover_share(self) -> float:
        """How much of the opening rise over the baseline must remain for the incident to stay open."""
        return (self.recover_ratio - 1.0) / (self.min_ratio - 1.0)


def check_monitor_names(monitors: dict[str, MonitorConfig]) -> dict[str, MonitorConfig]:
    """Monitor names go into incident ids and logs: letters, digits, ``_.-`` only."""
    bad = sorted(name for name in monitors if not name or not all(c.isalnum() or c in "_.-" for c in name))
    if bad:
        raise ValueError(f"monitor names may hold letters, digits and _.- only: {', '.join(map(repr, bad))}")
    return monitors
