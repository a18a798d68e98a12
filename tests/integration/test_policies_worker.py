"""Three applications with different policies in one `halluwatch worker`.

Real parts: the example traces from the OTel SDK on a Tansu broker, a worker process with
embedded chDB, slack-sdk and aiohttp posting to local fake Slack and PagerDuty servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from detectors.suite import TURNED_OFF
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import example_traces
from tests.integration.support import WorkerProcess, alerting_worker_config, produce
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer

pytestmark = pytest.mark.usefixtures("exported_model")

POLICIES = {
    # HR pages its own on-call for what everyone else only posts to Slack.
    "hr": {"match": {"service": "hr-assistant"}, "routes": {"slack": "hr-oncall", "page": "hr-oncall"}},
    # The travel guide's team reads Slack; it is never paged.
    "travel": {"match": {"service": "travel-guide"}, "routes": {"page": "slack"}},
    # Product Q&A turned the contradiction detector off.
    "product": {"match": {"service": "product-qa"}, "disabled_detectors": ["contradiction"]},
}


def _config(path: Path, server: AlertingServer) -> Path:
    routes = {
        "page": {"pagerduty": True, "slack_channel": "#halluwatch-alerts"},
        "slack": {"slack_channel": "#halluwatch-alerts"},
        "log": {},
        "hr-oncall": {"pagerduty": True, "pagerduty_routing_key": "hr-service-key", "slack_channel": "#hr-oncall"},
    }
    path.write_text(yaml.safe_dump(alerting_worker_config(server, alerting={"routes": routes}, policies=POLICIES)))
    return path


def _ids(trace) -> tuple[str, str]:
    resource = {a.key: a.value.string_value for a in trace.resource_spans[0].resource.attributes}
    return resource["service.name"], trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()


def test_each_application_is_judged_and_routed_by_its_own_policy(tansu: TansuBroker, topic_prefix, tmp_path):
    traces = example_traces()
    service_of = {trace_id: service for service, trace_id in map(_ids, traces)}
    with AlertingServer() as server:
        config = _config(tmp_path / "halluwatch.yaml", server)
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", config=str(config))
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, [(t.encode(), tr.SerializeToString()) for tr, (_, t) in
                                                          zip(traces, map(_ids, traces), strict=True)])  # fmt: skip
            # Without policies: 5 alerts (tests/integration/test_alerts_end_to_end.py). product-qa's rests on
            # contradiction, which its policy turned off: 4 remain.
            worker.wait_for("halluwatch_alerts_total", 4, timeout_seconds=120)
            worker.wait_for("halluwatch_alert_deliveries_total", 6)
            time.sleep(3)  # and no more than that
        finally:
            worker.stop()

    def service(request) -> str:
        return next(s for t, s in service_of.items() if t in json.dumps(request.body))

    pages = {service(r): r.body["routing_key"] for r in server.requests(PAGERDUTY_PATH)}
    assert pages == {
        "hr-assistant": "hr-service-key",  # its pair pages its own service
        "concierge-agent": "pd-routing-key",
    }
    posts = sorted((service(r), r.body["channel"]) for r in server.requests(SLACK_POST_PATH))
    assert posts == [
        ("concierge-agent", "#halluwatch-alerts"),
        ("hr-assistant", "#hr-oncall"),
        ("order-intake", "#halluwatch-alerts"),
        ("travel-guide", "#halluwatch-alerts"),  # its severe contradiction, posted and not paged
    ]
    alerts = worker.query("SELECT service, policy, route FROM halluwatch.alerts FINAL GROUP BY service, policy, route")
    assert sorted(alerts) == [
        ("concierge-agent", "default", "page"),
        ("hr-assistant", "hr", "hr-oncall"),
        ("order-intake", "default", "slack"),  # schema + contradiction: the two-detectors rule
        ("travel-guide", "travel", "slack"),
    ]
    contradiction = worker.query(
        "SELECT service, policy, status, summary FROM halluwatch.findings FINAL "
        "WHERE detector = 'contradiction' AND service IN ('product-qa', 'travel-guide') "
        "GROUP BY service, policy, status, summary"
    )
    product = [row for row in contradiction if row[0] == "product-qa"]
    assert {row[1:3] for row in product} == {("product", "skipped")}
    assert TURNED_OFF in {row[3] for row in product}
    assert {row[1] for row in contradiction if row[0] == "travel-guide"} == {"travel"}


def test_a_worker_with_overlapping_policies_stops_at_start_up_with_one_line(tmp_path: Path):
    config = tmp_path / "halluwatch.yaml"
    overlapping = {"a": {"match": {"service": "shop"}}, "b": {"match": {"model": "gpt-4o"}}}
    config.write_text(yaml.safe_dump({"policies": overlapping}))
    env = {**os.environ, "HALLUWATCH_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "worker", "--config", str(config)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert "policies 'a' (service=shop) and 'b' (model=gpt-4o) are equally specific" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "data" / "clickhouse").exists()
