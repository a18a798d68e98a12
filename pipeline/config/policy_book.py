"""The effective policy of a call: its application's policy over the global settings.

Every stage asks the same :class:`PolicyBook`: the spans stage which detectors run, at
which thresholds, under which content mode; the sampled stage at which rate; the
agreement stage which rules fire and where their alerts go.  The spans stage resolves a
call's policy once and stamps its name on the findings, so later stages look it up by
name and need none of the call's attributes.  ``halluwatch policy explain`` prints the
same resolution with where each value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from detectors.llm_call import LLMCall
from detectors.thresholds import Thresholds
from detectors.verdict import PlattScaling
from pipeline.config.alerting import AlertRule
from pipeline.config.content_policy import ContentPolicies
from pipeline.config.policy import DEFAULT_POLICY, AppPolicy, call_identity
from pipeline.config.settings import Settings


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """What applies to one application's calls; ``origin`` says where each value came from."""

    name: str
    disabled_detectors: frozenset[str]
    thresholds: Mapping[str, float]  # every detector's decision threshold
    rules: tuple[AlertRule, ...]  # `min_probability: route` resolved to the thresholds file's route minimums
    routes: Mapping[str, str]  # rule route -> configured route; absent: the same name
    # The rules as configured (`min_probability: route` unresolved) and the thresholds file's route minimums
    # that resolved them: an application's applied map of p brings minimums of its own (the agreement stage).
    configured_rules: tuple[AlertRule, ...]
    route_minimums: Mapping[str, float]
    content_mode: str
    content: ContentPolicies = field(repr=False)
    sample_rate: float
    flag_probability: float  # a call whose p_hallucination reaches this is flagged
    # Maps the verdict's p_hallucination onto what this app's human verdicts observed (identity: none fitted).
    recalibration: PlattScaling
    origin: Mapping[str, str]  # "thresholds.grounding" -> "policy medbot", "thresholds file v3"...


class PolicyBook:
    """Resolves calls to their :class:`EffectivePolicy`, built once per policy at start-up."""

    def __init__(self, settings: Settings, thresholds: Thresholds) -> None:
        self._selectors = sorted(settings.policies.items(), key=lambda item: -item[1].match.rank)
        self._by_name = {DEFAULT_POLICY: _effective(DEFAULT_POLICY, None, settings, thresholds)}
        for name, policy in settings.policies.items():
            self._by_name[name] = _effective(name, policy, settings, thresholds)

    @property
    def default(self) -> EffectivePolicy:
        """What applies to calls no policy matches."""
        return self._by_name[DEFAULT_POLICY]

    def every(self) -> list[EffectivePolicy]:
        """Every policy, ``default`` first."""
        return list(self._by_name.values())

    def for_call(self, call: LLMCall) -> EffectivePolicy:
        """The policy of ``call``: the most specific whose selector it satisfies, else the default."""
        return self.for_identity(call_identity(call.service, call.operation, call.model, call.attributes))

    def for_identity(self, identity: Mapping[str, str]) -> EffectivePolicy:
        """The policy of a call known by its identity (:func:`~pipeline.config.policy.call_identity`)."""
        # Sorted most specific first, and equal ranks never overlap (checked at start-up): the first match wins.
        name = next((name for name, policy in self._selectors if policy.match.matches(identity)), DEFAULT_POLICY)
        return self._by_name[name]

    def named(self, name: str) -> EffectivePolicy:
        """A policy by name; a name this configuration does not know (a finding from before a change) is the default."""
        return self._by_name.get(name, self.default)


def _effective(name: str, policy: AppPolicy | None, settings: Settings, thresholds: Thresholds) -> EffectivePolicy:
    own = f"policy {name}"
    origin: dict[str, str] = {}

    def pick(key: str, mine: Any, inherited: Any, inherited_from: str) -> Any:
        origin[key] = own if mine is not None else inherited_from
        return mine if mine is not None else inherited

    levels = {}
    fitted = thresholds.by_policy.get(name, {})
    file = f"thresholds {thresholds.version}"
    for detector, value in thresholds.by_detector.items():
        if policy is not None and detector in policy.thresholds:
            levels[detector], origin[f"thresholds.{detector}"] = policy.thresholds[detector], own
        elif detector in fitted:
            levels[detector], origin[f"thresholds.{detector}"] = fitted[detector], f"{file}, fitted for {name}"
        else:
            where = "built-in thresholds" if detector in thresholds.inherited else file
            levels[detector], origin[f"thresholds.{detector}"] = value, where
    mode = pick("content_mode", policy and policy.content_mode, settings.content_mode, "content_mode")
    content = (
        ContentPolicies.of(mode, {}, settings.content_hmac_key, settings.content_phone_region)
        if policy is not None and policy.content_mode is not None
        else settings.content_policies()
    )
    configured = tuple(pick("rules", policy and policy.rules, settings.alerting.rules, "alerting.rules"))
    return EffectivePolicy(
        name=name,
        disabled_detectors=frozenset(
            pick("disabled_detectors", (policy and policy.disabled_detectors) or None, [], "defaults")
        ),
        thresholds=levels,
        rules=tuple(rule.resolved(thresholds.alert_probability) for rule in configured),
        configured_rules=configured,
        route_minimums=dict(thresholds.alert_probability),
        routes=dict(pick("routes", policy.routes if policy and policy.routes else None, {}, "alerting.routes")),
        content_mode=mode,
        content=content,
        sample_rate=pick(
            "sample_rate", policy and policy.sample_rate, settings.consistency.sample_rate, "consistency.sample_rate"
        ),
        recalibration=PlattScaling(*thresholds.recalibration.get(name, (1.0, 0.0))),
        flag_probability=pick(
            "flag_probability",
            policy and policy.flag_probability,
            settings.detectors.flag_probability,
            "detectors.flag_probability",
        ),
        origin=origin,
    )
