"""Alerting configuration (the settings file's ``alerting:`` section, docs/configuration.md).

Rules decide *whether* a trace alerts and on which route; routes decide *where* it goes.
A route with no usable credentials prints to the worker's log instead, so the embedded
setup shows its alerts without any Slack or PagerDuty account.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from detectors.base import VERDICT_DETECTORS
from detectors.registry import FACT_DETECTORS

# A rule's ``min_probability`` that means "the value calibrated for the rule's route".
ROUTE_PROBABILITY: Final = "route"
# The finding name of the application's own model judging an escalated call (pipeline/escalation): its
# answer counts as one more agreeing signal and enters p_hallucination through its weight.
JUDGE: Final = "judge"
# The judge's "hallucinated" as a flag: as severe as the detectors that guess (grounding's, unsupported
# spans'), never a fact's or a severe contradiction's.
JUDGE_SEVERITY: Final = 2
# The detectors whose evidence p_hallucination stands for: weighed by the verdict (or, the judge, added to
# it), and guesses.
_WEIGHED = (frozenset(VERDICT_DETECTORS) - FACT_DETECTORS) | {JUDGE}


class AlertRule(BaseModel):
    """When the flagged detectors of one trace make an alert, and on which route.

    ``all_of`` names detectors that must all have flagged; ``min_severity`` is then the
    highest severity those (or, without ``all_of``, any flagged detectors) must reach;
    ``min_detectors`` counts distinct flagged signals: detectors that read one signal (see
    ``AlertingSettings.same_signal``) count once.  ``min_probability`` also requires the
    call's ``p_hallucination`` to reach a value: a number, or ``route`` for the value
    ``halluwatch calibrate`` chose for the rule's route (the thresholds file's
    ``alert_probability``), the lowest that keeps the route's false alarms under its target.
    The probability makes agreement stricter; it never replaces it.  It speaks only for the
    detectors it weighs: where a detector that reports a fact (or a sampled one, which the
    verdict has not learned) is among those agreeing, agreement alone decides.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    route: str
    min_detectors: int = Field(default=2, ge=1)
    all_of: list[str] = Field(default_factory=list)
    min_severity: int = Field(default=0, ge=0, le=4)
    # The call's p_hallucination must reach this too: a number, or `route` for the minimum calibrated for
    # the rule's route. Unset: the detectors alone decide.
    min_probability: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["route"] | None = None

    def matches(
        self, flagged: Mapping[str, int], signal_of: Mapping[str, str] | None = None, probability: float | None = None
    ) -> bool:
        """Whether flagged detectors (name -> severity, grouped by ``signal_of``) and ``probability`` satisfy it.

        A ``route`` minimum must be resolved first (:meth:`resolved`).
        """
        signals = {(signal_of or {}).get(name, name) for name in flagged}
        if len(signals) < self.min_detectors or any(name not in flagged for name in self.all_of):
            return False
        minimum = self.min_probability
        if minimum == ROUTE_PROBABILITY:
            raise ValueError(f"rule {self.name}: its route's minimum probability was never resolved")
        weighed = flagged.keys() <= _WEIGHED  # else a fact or a sampled detector is among them
        if isinstance(minimum, float) and weighed and (probability is None or probability < minimum):
            return False
        considered = [flagged[name] for name in self.all_of] if self.all_of else list(flagged.values())
        return max(considered, default=0) >= self.min_severity

    def resolved(self, route_minimums: Mapping[str, float]) -> AlertRule:
        """The rule with a ``route`` minimum replaced by its route's calibrated value."""
        if self.min_probability != ROUTE_PROBABILITY:
            return self
        if self.route not in route_minimums:
            raise ValueError(
                f"rule {self.name} requires route {self.route}'s calibrated probability, which the thresholds "
                "file does not set (alert_probability); give the rule a number or run `halluwatch calibrate`"
            )
        return self.model_copy(update={"min_probability": route_minimums[self.route]})


def gated_routes(rules: Iterable[AlertRule]) -> list[str]:
    """Routes whose rules take their minimum from calibration, in rule (priority) order."""
    routes: list[str] = []
    for rule in rules:
        if rule.min_probability == ROUTE_PROBABILITY and rule.route not in routes:
            routes.append(rule.route)
    return routes


def default_rules() -> list[AlertRule]:
    """Page when two detectors agree on a fact or a severe contradiction, Slack for any other pair.

    Rules over guessing detectors also need the call's probability to reach its route's
    calibrated minimum; a rule resting on a fact (a tool result the answer misreports, a
    schema the call breaks) does not: a broken tool call is a fact, not a probability.
    """
    return [
        AlertRule(name="grounding-and-schema", route="page", all_of=["grounding", "schema_violation"]),
        AlertRule(
            name="severe-contradiction",
            route="page",
            all_of=["contradiction"],
            min_severity=4,
            min_probability=ROUTE_PROBABILITY,
        ),
        AlertRule(name="claimed-failed-tool", route="page", all_of=["tool_outcome"], min_severity=4),
        AlertRule(name="two-detectors", route="slack", min_probability=ROUTE_PROBABILITY),
    ]


class RouteConfig(BaseModel):
    """Where one route's alerts go; with no destination usable, they go to the log."""

    model_config = ConfigDict(extra="forbid")

    slack_channel: str = ""  # posted with the bot token (chat.postMessage)
    slack_webhook_url: SecretStr | None = None  # an incoming webhook instead of the bot token
    pagerduty: bool = False  # trigger a PagerDuty incident (needs pagerduty_routing_key)
    # This route's own PagerDuty service (its integration key); unset: alerting.pagerduty_routing_key.
    pagerduty_routing_key: SecretStr | None = None
    # More alerts than this in a minute are sent as one digest message, never dropped.
    max_per_minute: int = Field(default=20, ge=1)
    # The share of faithful calls that may alert on this route or on a gated route whose rules come
    # before it (so `slack: 3 %` bounds every alert, pages included): `halluwatch train` and
    # `calibrate` choose the lowest p_hallucination minimum of its rules that stays under it.
    false_alarm_target: float = Field(default=0.03, gt=0.0, lt=1.0)


def default_routes() -> dict[str, RouteConfig]:
    """``page`` to PagerDuty, ``slack`` to a channel, ``log`` to the worker's log only."""
    return {
        "page": RouteConfig(pagerduty=True, slack_channel="#halluwatch-alerts", false_alarm_target=0.01),
        "slack": RouteConfig(slack_channel="#halluwatch-alerts"),
        "log": RouteConfig(),
    }


class AlertingSettings(BaseModel):
    """Agreement window, rules, routes, and the Slack / PagerDuty endpoints."""

    model_config = ConfigDict(extra="forbid")

    # How long one trace's findings wait for each other (sampled detectors report late).
    window_seconds: float = Field(default=600.0, gt=0)
    # Rules in priority order: the first that matches fires; a later match of an earlier
    # rule escalates, a later rule never adds a second alert below one already sent.
    rules: list[AlertRule] = Field(default_factory=default_rules)
    # Detectors that read one signal count once toward min_detectors: agreement is worth
    # something only between independent detectors, and these two compare the answer with the
    # sources through the same embedding model.
    same_signal: list[list[str]] = Field(default_factory=lambda: [["grounding", "unsupported_spans"]])
    routes: dict[str, RouteConfig] = Field(default_factory=default_routes)

    # Credentials (secrets: HALLUWATCH_ALERTING__SLACK_BOT_TOKEN, ..._PAGERDUTY_ROUTING_KEY) and
    # API endpoints (a proxy, or a local test server).
    slack_bot_token: SecretStr | None = None
    slack_base_url: str = "https://slack.com/api/"
    pagerduty_routing_key: SecretStr | None = None
    pagerduty_url: str = "https://events.pagerduty.com/v2/enqueue"
    # PagerDuty severity by alert severity: the entry with the largest key <= severity.
    pagerduty_severity: dict[int, str] = Field(default_factory=lambda: {0: "warning", 2: "error", 4: "critical"})

    # Links in the message: "{trace_id}" is replaced (Jaeger, Tempo, Langfuse, Phoenix...).
    trace_url_template: str = ""
    dashboard_url: str = ""
    # Where halluwatch's own triage pages are reached (http://halluwatch.internal:9464): alerts link
    # to the trace's page and Slack messages carry "confirmed" / "false alarm" buttons. Empty: neither.
    ui_base_url: str = Field(default="", pattern=r"^(https?://\S+)?$")

    request_timeout_seconds: float = Field(default=10.0, gt=0)  # per HTTP request to Slack or PagerDuty
    # Quick retries inside one delivery attempt (429 Retry-After, 5xx with backoff).
    request_retries: int = Field(default=2, ge=0)
    # Attempts through the retry topic before an alert is dead-lettered.
    delivery_attempts: int = Field(default=8, ge=1)
    retry_initial_seconds: float = Field(default=5.0, gt=0)  # backoff between attempts, doubling up to the max
    retry_max_seconds: float = Field(default=300.0, gt=0)
    # Alerts already delivered are remembered this long, so replays never re-send them.
    dedup_retention_hours: float = Field(default=168.0, gt=0)
    # How often the router re-reads the silences table: a new silence applies within this.
    silence_refresh_seconds: float = Field(default=5.0, gt=0)

    @model_validator(mode="after")
    def _rules_name_known_routes(self) -> AlertingSettings:
        unknown = sorted({rule.route for rule in self.rules} - set(self.routes))
        if unknown:
            raise ValueError(f"rules use routes that are not configured: {', '.join(unknown)}")
        names = [rule.name for rule in self.rules]
        if len(names) != len(set(names)):
            raise ValueError("rule names must be unique")
        return self

    def signal_of(self) -> dict[str, str]:
        """Each grouped detector's signal: the first name of its ``same_signal`` group."""
        return {name: group[0] for group in self.same_signal for name in group}

    def routing_key_of(self, route: str) -> SecretStr | None:
        """The PagerDuty integration key ``route`` triggers with: its own, else the global one."""
        return self.routes[route].pagerduty_routing_key or self.pagerduty_routing_key

    def pagerduty_severity_for(self, severity: int) -> str:
        """The PagerDuty severity for an alert severity."""
        eligible = [key for key in self.pagerduty_severity if key <= severity]
        return self.pagerduty_severity[max(eligible)] if eligible else "info"

    def trace_url(self, trace_id: str) -> str:
        """The trace UI link for a trace, or "" when no template is configured."""
        return self.trace_url_template.replace("{trace_id}", trace_id) if self.trace_url_template else ""

    def triage_url(self, trace_id: str) -> str:
        """The triage page of a trace, or "" when ``ui_base_url`` is not set."""
        return f"{self.ui_base_url.rstrip('/')}/trace/{trace_id}" if self.ui_base_url else ""
