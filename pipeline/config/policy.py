"""Policies by application (the settings file's ``policies:`` section).

One halluwatch serves many LLM apps; a policy lets each team own what differs for its app:
which detectors run, their thresholds, the alert rules, where alerts go (route names
re-pointed to routes of ``alerting.routes``), the content mode and the sampling rate of
the sampled detectors.  A policy applies to a call its ``match`` selects; when several
select one call the most specific (most conditions) wins, and what it does not set comes
from the global settings.  Two selectors of equal rank that one call could satisfy both
are refused at start-up: which team's policy applied would otherwise depend on YAML order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pipeline.config.alerting import AlertRule
from pipeline.config.content_policy import LEGACY_MODES, ContentMode

DEFAULT_POLICY = "default"  # the name findings and alerts carry when no policy matched
POLICY_NAME = r"^[A-Za-z0-9_.-]+$"

Mode = Annotated[ContentMode, BeforeValidator(lambda value: LEGACY_MODES.get(value, value))]


class Selector(BaseModel):
    """Which calls a policy applies to: every condition given must hold (exact, case-sensitive).

    ``attributes`` are looked up in the call's routing attributes: its scalar span
    attributes and the resource's ``service.*`` and ``deployment.environment`` keys.
    """

    model_config = ConfigDict(extra="forbid")

    service: str | None = None
    operation: str | None = None
    model: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _selects_something(self) -> Selector:
        if not self.conditions():
            raise ValueError("match needs at least one of service, operation, model, attributes")
        return self

    def conditions(self) -> dict[str, str]:
        """Every condition as ``key: value``; attribute keys are prefixed ``attributes.``."""
        fields = {"service": self.service, "operation": self.operation, "model": self.model}
        own = {key: value for key, value in fields.items() if value is not None}
        return own | {f"attributes.{key}": value for key, value in self.attributes.items()}

    @property
    def rank(self) -> int:
        """How specific the selector is: its number of conditions."""
        return len(self.conditions())

    def matches(self, identity: Mapping[str, str]) -> bool:
        """Whether a call with ``identity`` (see :func:`call_identity`) satisfies every condition."""
        return all(identity.get(key) == value for key, value in self.conditions().items())

    def overlaps(self, other: Selector) -> bool:
        """Whether some call could satisfy both: no condition of one contradicts the other's."""
        mine, theirs = self.conditions(), other.conditions()
        return all(theirs[key] == value for key, value in mine.items() if key in theirs)

    def describe(self) -> str:
        """``service=a, attributes.app.domain=b``: for messages and ``policy explain``."""
        return ", ".join(f"{key}={value}" for key, value in self.conditions().items())


class AppPolicy(BaseModel):
    """What differs for the calls of one application; ``None`` and empty fields inherit."""

    model_config = ConfigDict(extra="forbid")

    match: Selector
    # Detectors that do not run on this app's calls (the sentinel gates the others and stays on).
    disabled_detectors: list[str] = Field(default_factory=list)
    # Decision thresholds in [0, 1]; they win over the thresholds file, global or per policy.
    thresholds: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=dict)
    # Replaces the global rules for this app's traces; None keeps them.
    rules: list[AlertRule] | None = None
    # Re-points the route names its rules use: {page: medbot-page} sends "page" alerts to the
    # route medbot-page of alerting.routes (its own Slack channel, PagerDuty service).
    routes: dict[str, str] = Field(default_factory=dict)
    content_mode: Mode | None = None  # every table and message of this app's calls
    sample_rate: float | None = Field(default=None, ge=0.0, le=1.0)  # of the sampled detectors
    # The p_hallucination from which this app's calls count as flagged; None: detectors.flag_probability.
    flag_probability: float | None = Field(default=None, ge=0.0, le=1.0)
    # The precision `halluwatch calibrate` fits this app's own thresholds at; None: its --target-precision.
    target_precision: float | None = Field(default=None, gt=0.0, le=1.0)


Policies = dict[Annotated[str, Field(pattern=POLICY_NAME)], AppPolicy]


def check_policies(
    policies: Mapping[str, AppPolicy], detectors: set[str], routes: set[str], global_rules: list[AlertRule]
) -> None:
    """Refuse policies that would misroute silently; ``ValueError`` names the policy and the fault."""
    if DEFAULT_POLICY in policies:
        raise ValueError(f"policy name {DEFAULT_POLICY!r} is reserved for calls no policy matches")
    for name, policy in policies.items():
        unknown = sorted((set(policy.disabled_detectors) | set(policy.thresholds)) - detectors)
        if unknown:
            raise ValueError(f"policy {name!r} names unknown detectors: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(detectors))})")  # fmt: skip
        if "sentinel" in policy.disabled_detectors:
            raise ValueError(f"policy {name!r} disables the sentinel, which decides whether the others run")
        missing = sorted(set(policy.routes.values()) - routes)
        if missing:
            raise ValueError(f"policy {name!r} points routes at ones not in alerting.routes: {', '.join(missing)}")
        rules = policy.rules if policy.rules is not None else global_rules
        unrouted = sorted({rule.route for rule in rules if policy.routes.get(rule.route, rule.route) not in routes})
        if unrouted:
            raise ValueError(f"policy {name!r} has rules on routes not in alerting.routes: {', '.join(unrouted)}")
        names = [rule.name for rule in policy.rules or []]
        if len(names) != len(set(names)):
            raise ValueError(f"policy {name!r}: rule names must be unique")
    for (a, first), (b, second) in itertools.combinations(policies.items(), 2):
        if first.match.rank == second.match.rank and first.match.overlaps(second.match):
            raise ValueError(
                f"policies {a!r} ({first.match.describe()}) and {b!r} ({second.match.describe()}) are equally "
                "specific and can both match one call: add a condition to the one that should win"
            )


def call_identity(service: str, operation: str, model: str, attributes: Mapping[str, Any]) -> dict[str, str]:
    """What selectors look at in a call, keyed as :meth:`Selector.conditions` keys it."""
    identity = {"service": service, "operation": operation, "model": model}
    return identity | {f"attributes.{key}": _text(value) for key, value in attributes.items()}


def _text(value: Any) -> str:
    """An attribute as YAML would spell it in a selector: booleans lower-case."""
    return str(value).lower() if isinstance(value, bool) else str(value)
