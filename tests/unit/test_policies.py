"""Policies by application: selection, inheritance, and what each stage does with them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from detectors.base import Detector, DetectorIdentity, DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall
from detectors.suite import TURNED_OFF, DetectorSuite
from detectors.thresholds import load_thresholds
from pipeline.agreement.rules import AgreementRule
from pipeline.alerting.routes import build_destinations
from pipeline.cli import main
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import ConfigError, Settings, load_settings
from pipeline.sinks.finding import Finding
from pipeline.spans.processor import SpanBatchProcessor
from tests.calls import make_llm_call

ROUTES = {
    "page": {"pagerduty": True, "slack_channel": "#alerts"},
    "slack": {"slack_channel": "#alerts"},
    "log": {},
    "medbot-page": {"pagerduty": True, "slack_channel": "#medbot", "pagerduty_routing_key": "medbot-service-key"},
}
POLICIES: dict[str, Any] = {
    "medbot": {
        "match": {"service": "medbot"},
        "thresholds": {"grounding": 0.2},
        "routes": {"page": "medbot-page", "slack": "medbot-page"},
        "content_mode": "redact",
    },
    "medbot-staging": {
        "match": {"service": "medbot", "attributes": {"deployment.environment": "staging"}},
        "rules": [],
    },
    "docs": {"match": {"service": "docs"}, "disabled_detectors": ["grounding"]},
}


def settings(policies: dict[str, Any] = POLICIES, **alerting: Any) -> Settings:
    keys = {"pagerduty_routing_key": "global", "slack_bot_token": "xoxb-test"}
    return load_settings(policies=policies, alerting={"routes": ROUTES, **keys, **alerting})


def book(config: Settings | None = None) -> PolicyBook:
    return PolicyBook(config or settings(), load_thresholds())


def call(service: str, **fields: Any) -> LLMCall:
    return make_llm_call("Write to ana@example.com for the results.", "When?", service=service, **fields)


# --- selection and validation ------------------------------------------------------------------------


def test_most_specific_policy_wins_and_unmatched_calls_get_the_default():
    policies = book()
    assert policies.for_call(call("medbot")).name == "medbot"
    assert policies.for_call(call("medbot", attributes={"deployment.environment": "staging"})).name == "medbot-staging"
    assert policies.for_call(call("medbot", attributes={"deployment.environment": "prod"})).name == "medbot"
    assert policies.for_call(call("shop")).name == "default"


def test_a_policy_inherits_what_it_does_not_set_and_says_where_each_value_came_from():
    medbot = book().named("medbot")
    assert medbot.thresholds["grounding"] == 0.2 and medbot.origin["thresholds.grounding"] == "policy medbot"
    assert medbot.thresholds["contradiction"] == load_thresholds().by_detector["contradiction"]
    assert medbot.origin["thresholds.contradiction"] == f"thresholds {load_thresholds().version}"
    assert medbot.content.llm_calls.mode == "redact" and medbot.content.alerts.mode == "redact"
    assert [rule.name for rule in medbot.rules] == [rule.name for rule in Settings().alerting.rules]
    assert medbot.origin["rules"] == "alerting.rules" and medbot.origin["content_mode"] == "policy medbot"
    assert book().named("no-longer-configured").name == "default"


def test_thresholds_fitted_for_a_policy_sit_between_the_policy_and_the_global_file(tmp_path: Path):
    path = tmp_path / "thresholds.yaml"
    fitted = {"version": "fit-1", "detectors": {"grounding": {"threshold": 0.4}, "contradiction": {"threshold": 0.3}}}
    fitted["policies"] = {
        "medbot": {"detectors": {"grounding": {"threshold": 0.5}, "contradiction": {"threshold": 0.6}}}
    }
    path.write_text(yaml.safe_dump(fitted))
    medbot = PolicyBook(settings(), load_thresholds(path)).named("medbot")
    assert medbot.thresholds["grounding"] == 0.2  # the policy's own setting wins
    assert medbot.thresholds["contradiction"] == 0.6
    assert medbot.origin["thresholds.contradiction"] == "thresholds fit-1, fitted for medbot"
    assert PolicyBook(settings(), load_thresholds(path)).default.thresholds["contradiction"] == 0.3


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ({"a": {"match": {"service": "x"}, "disabled_detectors": ["groundin"]}}, "unknown detectors: groundin"),
        ({"a": {"match": {"service": "x"}, "thresholds": {"nli": 0.5}}}, "unknown detectors: nli"),
        ({"a": {"match": {"service": "x"}, "disabled_detectors": ["sentinel"]}}, "disables the sentinel"),
        ({"a": {"match": {"service": "x"}, "routes": {"page": "nowhere"}}}, "not in alerting.routes: nowhere"),
        ({"a": {"match": {"service": "x"}, "rules": [{"name": "r", "route": "pager"}]}}, "routes not in alerting"),
        ({"default": {"match": {"service": "x"}}}, "reserved"),
        ({"a": {"match": {}}}, "at least one of"),
        (
            {"a": {"match": {"service": "x"}}, "b": {"match": {"attributes": {"app.domain": "medical"}}}},
            "policies 'a' (service=x) and 'b' (attributes.app.domain=medical) are equally specific",
        ),
        ({"a": {"match": {"service": "x"}}, "b": {"match": {"service": "x"}}}, "equally specific"),
    ],
)
def test_policies_that_would_misroute_stop_start_up_with_the_reason(policies: dict[str, Any], message: str):
    with pytest.raises(ConfigError, match="polic") as error:
        settings(policies)
    assert message in str(error.value)


def test_selectors_that_cannot_match_one_call_together_may_share_a_rank():
    distinct = {"a": {"match": {"service": "x", "model": "m"}}, "b": {"match": {"service": "y", "model": "m"}}}
    assert set(settings(distinct).policies) == {"a", "b"}


# --- the spans stage ----------------------------------------------------------------------------------


class ScoreDetector(Detector):
    """Scores every call 0.3 with severity 2 when flagged, like an unsupported-content detector."""

    def __init__(self, name: str, threshold: float = 0.5) -> None:
        self.name = name
        self.version = "1"
        self.threshold = threshold

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        return [self.scored_result(0.3, self.threshold, severity=2, summary="s", evidence={}) for _ in calls]


def test_each_call_is_judged_under_its_own_policy():
    suite = DetectorSuite([ScoreDetector("grounding"), ScoreDetector("contradiction")])
    processor = SpanBatchProcessor(suite, "v", policies=book())
    result = processor.detect_joined([call("medbot"), call("docs"), call("shop")])
    by = {(f.service, f.detector): f for f in result.findings}
    # medbot's grounding threshold 0.2 flags the 0.3 score the global 0.5 does not.
    assert by["medbot", "grounding"].flagged and by["medbot", "grounding"].severity == 2
    assert by["medbot", "grounding"].threshold == 0.2 and by["medbot", "grounding"].policy == "medbot"
    assert not by["shop", "grounding"].flagged and by["shop", "grounding"].policy == "default"
    # docs turned grounding off: recorded as skipped, never run.
    assert by["docs", "grounding"].status == str(DetectorStatus.SKIPPED)
    assert by["docs", "grounding"].summary == TURNED_OFF
    assert by["docs", "contradiction"].status == str(DetectorStatus.OK)


def test_a_policy_content_mode_shapes_its_findings():
    class Quoting(ScoreDetector):
        def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
            return [self.scored_result(0.9, 0.5, severity=2, summary=c.answer, evidence={}) for c in calls]

    processor = SpanBatchProcessor(DetectorSuite([Quoting("grounding")]), "v", policies=book())
    medbot, shop = processor.detect_joined([call("medbot"), call("shop")]).findings
    assert "ana@example.com" not in medbot.summary and "ana@example.com" in shop.summary


def test_a_result_judged_at_another_threshold_keeps_its_severity_only_when_flagged():
    scored = DetectorIdentity.scored_result(ScoreDetector("x"), 0.3, 0.5, severity=4, summary="", evidence={})
    assert (scored.flagged, scored.severity) == (False, 0)
    assert (scored.with_threshold(0.3).flagged, scored.with_threshold(0.3).severity) == (True, 4)
    unflaggable = DetectorIdentity.scored_result(
        ScoreDetector("x"), 0.9, 0.5, severity=2, summary="", evidence={}, flaggable=False
    )
    assert not unflaggable.with_threshold(0.1).flagged
    skipped = ScoreDetector("x").skipped_result("nothing to check")
    assert skipped.with_threshold(0.0) is skipped


# --- agreement and routes -----------------------------------------------------------------------------


def finding(detector: str, policy: str, severity: int = 2) -> Finding:
    return Finding.from_json({"trace_id": "7" * 32, "span_id": "s" * 16, "service": "svc", "detector": detector,
                              "status": "ok", "flagged": True, "severity": severity, "score": 0.9, "threshold": 0.5,
                              "policy": policy, "p_hallucination": 0.99})  # fmt: skip


def test_a_policy_re_points_routes_and_its_rules_replace_the_global_ones():
    config = settings()
    rule = AgreementRule.from_settings(config.alerting, book(config))
    pair = [finding("grounding", "medbot"), finding("contradiction", "medbot")]
    alert = rule.apply(None, pair, 1000.0).alert
    assert alert is not None and (alert.rule, alert.route, alert.policy) == ("two-detectors", "medbot-page", "medbot")
    staging = [finding("grounding", "medbot-staging"), finding("contradiction", "medbot-staging", 4)]
    assert rule.apply(None, staging, 1000.0).alert is None  # rules: [] never alerts
    default = rule.apply(None, [finding("grounding", "default"), finding("contradiction", "default")], 1000.0)
    assert default.alert is not None and default.alert.route == "slack"


def test_a_route_with_its_own_pagerduty_service_gets_its_own_destination():
    table = build_destinations(settings().alerting)
    assert [d.name for d in table["page"]] == ["slack:#alerts", "pagerduty"]
    assert [d.name for d in table["medbot-page"]] == ["slack:#medbot", "pagerduty:medbot-page"]


def test_policy_explain_prints_the_effective_policy_and_its_origins(tmp_path: Path):
    config = tmp_path / "halluwatch.yaml"
    config.write_text(yaml.safe_dump({"policies": POLICIES, "alerting": {"routes": ROUTES}}))
    args = [
        "policy",
        "explain",
        "--config",
        str(config),
        "--service",
        "medbot",
        "--attr",
        "deployment.environment=staging",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "policy: medbot-staging" in result.output
    assert "(none: never alerts)  [policy medbot-staging]" in result.output
    assert "threshold grounding" in result.output and "content_mode" in result.output
    assert re.search(r"flag_probability +0.5  \[detectors.flag_probability\]", result.output)
    default = CliRunner().invoke(main, ["policy", "explain", "--config", str(config), "--service", "other"])
    assert "severe-contradiction (route page), p_hallucination >= 0." in default.output  # the built-in minimum
    refused = CliRunner().invoke(main, ["policy", "explain", "--config", str(config), "--service", "a", "--attr", "x"])
    assert refused.exit_code != 0 and "KEY=VALUE" in refused.output
