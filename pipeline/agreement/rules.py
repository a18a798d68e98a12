"""The two-detector agreement rule (docs/detectors.md), as pure functions over per-trace state.

Findings of one trace arrive one by one, from different detectors and at different
times (sampled detectors report seconds later), and at least once.  Each trace keeps a
small JSON state: when its first flag arrived, the strongest flagged finding per
detector, and the rules that already fired.  Applying the same finding twice changes
nothing, and a rule fires at most once per trace, so redelivered findings never make a
second alert.  The worker keeps these states in a changelog-backed faust table.

Each trace is judged by the rules of its application's policy, named on its findings by
the spans stage; the policy also re-points the routes those rules name.  Where the
application has an applied map of ``p_hallucination`` (fitted from its review verdicts), its
probability is on that map's scale, so the rules gated on a route's minimum take the map's
minimums instead of the thresholds file's.

Only findings that say "hallucinated" count: status ``ok``, flagged, and not from a
detector whose flag means something else (the sentinel's and the coverage detector's "unverified").  Findings of the
spans stage also carry their call's ``p_hallucination``; a trace keeps the highest, which
rules with a ``min_probability`` require besides their detectors.

A call escalated to the judge (:mod:`pipeline.escalation`) holds its trace's decision: the
``escalation`` finding says until when.  The judge's finding, or the deadline passing
(:meth:`AgreementRule.release`), ends the hold, and the rules then run once on the flags and the
probability with the judgment weighed in: its "hallucinated" is one more flag, and either answer
moves p by the judge's weight from the application's map (none while the judge has none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from detectors.verdict import NOT_HALLUCINATION_EVIDENCE, threshold_relative
from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.config.alerting import JUDGE, ROUTE_PROBABILITY, AlertingSettings, AlertRule
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.config.policy_book import PolicyBook
from pipeline.judge.records import ESCALATION, deadline_of, judgment_in
from pipeline.judge.weight import SHIPPED_PRIOR, JudgeWeight, Judgment
from pipeline.rate.maps import AppMap, AppMaps
from pipeline.sinks.finding import Finding, as_probability


def counts_toward_agreement(finding: Finding) -> bool:
    """Whether a findings record is a hallucination flag the rule may combine (the judge's is weighed apart)."""
    return (
        finding.status == "ok"
        and finding.flagged
        and finding.detector not in NOT_HALLUCINATION_EVIDENCE
        and finding.detector != JUDGE
    )


def bears_on_decision(finding: Finding) -> bool:
    """Whether the agreement stage must fold a findings record: a flag, an escalation sent, or a judgment."""
    return counts_toward_agreement(finding) or deadline_of(finding) is not None or finding.detector == JUDGE


@dataclass(slots=True)
class TraceState:
    """What the agreement stage remembers about one trace inside the window."""

    trace_id: str
    first_seen: float  # unix seconds when the trace's first flag arrived
    service: str = ""
    model: str = ""
    operation: str = ""
    policy: str = DEFAULT_POLICY
    flags: dict[str, DetectorEvidence] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)
    probability: float | None = None  # the highest p_hallucination of the trace's calls seen so far
    awaiting_until: float | None = None  # unix seconds: the decision waits for the judge until then
    judgment: str = ""  # the judge's answer once in ("unknown" also when the deadline passed); "": none

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the table's changelog."""
        return {
            "trace_id": self.trace_id,
            "first_seen": self.first_seen,
            "service": self.service,
            "model": self.model,
            "operation": self.operation,
            "policy": self.policy,
            "flags": [flag.to_dict() for flag in self.flags.values()],
            "fired": list(self.fired),
            "probability": self.probability,
            "awaiting_until": self.awaiting_until,
            "judgment": self.judgment,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TraceState:
        """Parse the JSON form."""
        flags = (DetectorEvidence.from_dict(flag) for flag in raw.get("flags", ()))
        return cls(
            trace_id=str(raw["trace_id"]),
            first_seen=float(raw["first_seen"]),
            service=str(raw.get("service", "")),
            model=str(raw.get("model", "")),
            operation=str(raw.get("operation", "")),
            policy=str(raw.get("policy", DEFAULT_POLICY)),
            flags={flag.detector: flag for flag in flags},
            fired=[str(name) for name in raw.get("fired", ())],
            probability=as_probability(raw.get("probability")),
            awaiting_until=_seconds(raw.get("awaiting_until")),
            judgment=str(raw.get("judgment") or "") if raw.get("judgment") in set(Judgment) else "",
        )

    def holding(self, now: float) -> bool:
        """Whether the decision still waits for the judge."""
        return self.awaiting_until is not None and now < self.awaiting_until

    def await_judgment(self, deadline: float) -> bool:
        """Hold the decision until ``deadline`` unless the judge already answered; whether that changed anything."""
        if self.judgment or (self.awaiting_until is not None and self.awaiting_until >= deadline):
            return False
        self.awaiting_until = deadline
        return True

    def take_judgment(self, judgment: Judgment, flag: DetectorEvidence) -> bool:
        """The judge's answer ends the hold (only the first counts: the decision is made once)."""
        if self.judgment:
            return False
        self.judgment, self.awaiting_until = str(judgment), None
        if judgment is Judgment.HALLUCINATED:
            self.flags[JUDGE] = flag
        return True

    def raise_probability(self, probability: float | None) -> bool:
        """Keep ``probability`` if it is the highest yet; whether it was."""
        if probability is None or (self.probability is not None and probability <= self.probability):
            return False
        self.probability = probability
        return True


@dataclass(frozen=True, slots=True)
class PolicyRules:
    """One application's rules, and where the routes they name point (absent: the same route)."""

    rules: tuple[AlertRule, ...]
    routes: Mapping[str, str] = field(default_factory=dict)
    # The rules as configured (`min_probability: route` unresolved; empty: none is gated) and the
    # thresholds file's route minimums that resolved them.
    configured: tuple[AlertRule, ...] = ()
    route_minimums: Mapping[str, float] = field(default_factory=dict)

    def route_of(self, rule: AlertRule) -> str:
        """The configured route ``rule``'s alerts take."""
        return self.routes.get(rule.route, rule.route)

    def under(self, applied: AppMap) -> PolicyRules:
        """The rules with the gated ones' minimums from an application's applied map.

        A route the map has no minimum for keeps the thresholds file's, carried through the map
        (the same calls pass it).
        """
        if not self.configured:
            return self
        minimums = {route: applied.calibration.apply_one(value) for route, value in self.route_minimums.items()}
        minimums.update(applied.minimums)
        rules = tuple(rule.resolved(minimums) for rule in self.configured)
        return PolicyRules(rules, self.routes, self.configured, self.route_minimums)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of applying one finding: the state to store (None: unchanged) and any alert."""

    state: TraceState | None
    alert: Alert | None = None


class AgreementRule:
    """Applies findings to trace states and decides when an alert fires."""

    def __init__(
        self,
        rules: Iterable[AlertRule],
        window_seconds: float,
        signal_of: Mapping[str, str] | None = None,
        policies: Mapping[str, PolicyRules] | None = None,
        app_maps: AppMaps | None = None,
    ) -> None:
        self.rules = list(rules)
        unresolved = [r.name for p in [PolicyRules(tuple(self.rules)), *(policies or {}).values()] for r in p.rules
                      if r.min_probability == ROUTE_PROBABILITY]  # fmt: skip
        if unresolved:
            raise ValueError(f"rules {', '.join(unresolved)}: resolve their route's probability first")
        self.window_seconds = window_seconds
        self.signal_of = dict(signal_of or {})
        self._global = PolicyRules(tuple(self.rules))
        self._policies = dict(policies or {})
        self._app_maps = app_maps
        self._mapped: dict[str, tuple[str, PolicyRules]] = {}  # policy -> (its applied map's version, its rules)

    @classmethod
    def from_settings(
        cls, config: AlertingSettings, policies: PolicyBook, app_maps: AppMaps | None = None
    ) -> AgreementRule:
        """The rules, window and same-signal groups of the ``alerting:`` section, and each policy's own.

        Rules come as the policy book resolved them (probability minimums from its thresholds file),
        unless ``app_maps`` holds an applied map for the policy's application: then from that map.
        """
        own = {p.name: PolicyRules(p.rules, p.routes, p.configured_rules, p.route_minimums) for p in policies.every()}
        return cls(policies.default.rules, config.window_seconds, config.signal_of(), own, app_maps)

    def rules_of(self, policy: str) -> PolicyRules:
        """The rules a trace of ``policy`` is judged by (the global ones for a policy not configured)."""
        rules = self._policies.get(policy, self._global)
        applied = self._app_maps.of(policy) if self._app_maps is not None else None
        if applied is None:
            return rules
        version, mapped = self._mapped.get(policy, ("", rules))
        if version != applied.version:  # resolved once per map version, not per finding
            mapped = rules.under(applied)
            self._mapped[policy] = (applied.version, mapped)
        return mapped

    def expired(self, first_seen: float, now: float) -> bool:
        """Whether a window that opened at ``first_seen`` has closed."""
        return now - first_seen > self.window_seconds

    def apply(self, state: TraceState | None, findings: Iterable[Finding], now: float) -> Decision:
        """Fold a trace's findings (those of one batch) into its state, then decide once.

        Deciding after the whole batch means findings that arrive together (all detectors
        of one span) fire the highest-priority rule they make, not a lower one first.
        Never raises on odd records.
        """
        changed = False
        for finding in findings:
            if not bears_on_decision(finding):
                continue
            if state is None or self.expired(state.first_seen, now):
                state = TraceState(
                    trace_id=finding.trace_id,
                    first_seen=now,
                    service=finding.service,
                    model=finding.model,
                    operation=finding.operation,
                    policy=finding.policy,
                )
            changed |= state.raise_probability(finding.p_hallucination)
            if finding.detector == ESCALATION:
                changed |= state.await_judgment(deadline_of(finding) or now)
                continue
            flag = _evidence(finding)
            if finding.detector == JUDGE:
                changed |= state.take_judgment(judgment_in(finding), flag)
                continue
            held = state.flags.get(flag.detector)
            if held is None or _strength(flag) > _strength(held):  # else a repeat, or a weaker flag
                state.flags[flag.detector] = flag
                changed = True
        if state is None or not changed:
            return Decision(None)
        return self._decide(state, now)

    def release(self, state: TraceState, now: float) -> Decision:
        """Decide a held trace without its judgment once its deadline passed (unchanged before then)."""
        if state.awaiting_until is None or state.holding(now):
            return Decision(None)
        state.judgment, state.awaiting_until = str(Judgment.UNKNOWN), None
        return self._decide(state, now)

    def _decide(self, state: TraceState, now: float) -> Decision:
        if state.holding(now):
            return Decision(state)
        rule = self.rule_to_fire(state)
        if rule is None:
            return Decision(state)
        state.fired.append(rule.name)
        return Decision(state, self._alert(state, rule, now))

    def weight_of(self, policy: str) -> JudgeWeight:
        """The judge's weight for ``policy``'s calls: its applied map's, else the shipped prior."""
        applied = self._app_maps.of(policy) if self._app_maps is not None else None
        return applied.judge if applied is not None else SHIPPED_PRIOR

    def signals(self, state: TraceState) -> tuple[dict[str, DetectorEvidence], float | None]:
        """The flags and the probability the rules read: the judgment weighed in (a weightless judge is no flag)."""
        weight = self.weight_of(state.policy)
        flags = state.flags if weight.weighs else {k: v for k, v in state.flags.items() if k != JUDGE}
        return flags, weight.apply(state.probability, Judgment(state.judgment or Judgment.UNKNOWN))

    def rule_to_fire(self, state: TraceState) -> AlertRule | None:
        """The first matching rule of the trace's policy, unless it or a higher-priority rule already fired."""
        rules = self.rules_of(state.policy).rules
        flags, probability = self.signals(state)
        rule = self.first_match({name: flag.severity for name, flag in flags.items()}, probability, state.policy)
        if rule is None:
            return None
        already = {r.name for r in rules[: rules.index(rule) + 1]}
        return None if already & set(state.fired) else rule

    def first_match(
        self, flagged: Mapping[str, int], probability: float | None = None, policy: str = DEFAULT_POLICY
    ) -> AlertRule | None:
        """The rule of ``policy`` that detectors that flagged (name -> severity) and the call's probability fire."""
        return next((r for r in self.rules_of(policy).rules if r.matches(flagged, self.signal_of, probability)), None)

    def route_of(self, rule: AlertRule, policy: str = DEFAULT_POLICY) -> str:
        """The configured route ``rule``'s alerts take under ``policy``."""
        return self.rules_of(policy).route_of(rule)

    def _alert(self, state: TraceState, rule: AlertRule, now: float) -> Alert:
        flags, probability = self.signals(state)
        ordered = sorted(
            flags.values(), key=lambda f: (-f.severity, -threshold_relative(f.score, f.threshold), f.detector)
        )
        return Alert(
            trace_id=state.trace_id,
            rule=rule.name,
            route=self.rules_of(state.policy).route_of(rule),
            severity=max(flag.severity for flag in ordered),
            service=state.service,
            model=state.model,
            operation=state.operation,
            detectors=tuple(ordered),
            created_at=datetime.fromtimestamp(now, tz=UTC),
            policy=state.policy,
            p_hallucination=probability,
        )


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _evidence(finding: Finding) -> DetectorEvidence:
    return DetectorEvidence(
        detector=finding.detector,
        score=finding.score,
        threshold=finding.threshold,
        severity=finding.severity,
        summary=finding.summary,
        span_id=finding.span_id,
        evidence=finding.evidence,
    )


def _strength(flag: DetectorEvidence) -> tuple[int, float]:
    """Severity first, then how far past its own threshold the score is."""
    return flag.severity, threshold_relative(flag.score, flag.threshold)
