"""Escalation end to end: `halluwatch worker` on Tansu sends an uncertain call to the team's model (the real openai
library against a local OpenAI-compatible server), holds its alert, and decides once with the judgment or at the
deadline without it.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import WorkerProcess, consume_all, produce
from tests.integration.test_consistency_sampling import clinic_trace
from tests.openai_server import CHAT_PATH, OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("exported_model"), pytest.mark.timeout(180)]

CLAIMS = json.dumps({"claims": ["Ibuprofen works best when taken with plenty of water."]})
UNSUPPORTED = json.dumps(
    {"verdicts": [{"claim": "x", "verdict": "unsupported", "reason": "the leaflet says nothing about water"}]}
)


# The clinic call's p is 0.74 (grounding and unsupported_spans, one signal): under this minimum alone, over it
# once the shipped prior's "hallucinated" (0.84) is in, so the judgment decides the route.
RULES = json.dumps([{"name": "two-detectors", "route": "slack", "min_probability": 0.8}])


def judge_at(server: OpenAIServer) -> dict[str, str]:
    return {"consistency__llm__base_url": server.base_url, "consistency__llm__api_key": "sk-integration"}


def escalation_settings(server: OpenAIServer, **more: str) -> dict[str, str]:
    """Escalation on, the judge at ``server``; the sampled detectors stay off."""
    return {"alerting__rules": RULES, "escalation__enabled": "true", **judge_at(server), **more}


def findings_of(worker: WorkerProcess, detector: str) -> list[tuple[object, ...]]:
    return worker.query(
        f"SELECT trace_id, status, summary, evidence FROM halluwatch.findings FINAL WHERE detector = '{detector}'"
    )


def test_the_judges_hallucinated_joins_a_lone_signal_and_the_alert_carries_it(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    trace_id, spans = clinic_trace("gaming")  # grounding flags it; unsupported_spans reads the same signal
    with OpenAIServer() as server:
        server.answer(CLAIMS, UNSUPPORTED)
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **escalation_settings(server))
        produce(tansu.bootstrap, worker.input_topic, [(trace_id.encode(), spans)])
        worker.start()
        try:
            worker.wait_for("halluwatch_judge_answers_total", 1)
            worker.wait_for("halluwatch_alerts_total", 1)
            time.sleep(2)  # time for any second (wrong) alert
            alerts = worker.metric("halluwatch_alerts_total")
            tokens = worker.metric("halluwatch_judge_tokens_total")
        finally:
            worker.stop()
        assert len(server.requests(CHAT_PATH)) == 2  # claims, then their verdicts

    assert alerts == 1 and tokens > 0
    (message,) = consume_all(tansu.bootstrap, worker.alerts_topic, 1)
    alert = json.loads(message.value())
    assert alert["trace_id"] == trace_id
    assert "judge" in {d["detector"] for d in alert["detectors"]}
    ((_, status, summary, evidence),) = findings_of(worker, "escalation")
    assert status == "ok" and "sent to the judge (could alert)" in str(summary)
    ((_, status, _, evidence),) = findings_of(worker, "judge")
    assert status == "ok" and json.loads(str(evidence))["judgment"] == "hallucinated"
    # The query docs/verdict.md gives for what was spent, on which calls, and what it changed.
    documented = (ROOT / "docs" / "verdict.md").read_text().split("```sql\n")[1].split("```")[0]
    assert [row[:4] for row in worker.query(documented)] == [(trace_id, "ok", "could alert", "hallucinated")]


def test_a_judge_too_slow_for_the_deadline_leaves_the_call_to_the_detectors(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    trace_id, spans = clinic_trace("gaming")
    with OpenAIServer(delay=6.0) as server:
        worker = WorkerProcess(
            tansu.bootstrap, topic_prefix, tmp_path / "worker",
            **escalation_settings(server, escalation__deadline_seconds="3", escalation__release_check_seconds="0.5"),
        )  # fmt: skip
        produce(tansu.bootstrap, worker.input_topic, [(trace_id.encode(), spans)])
        worker.start()
        try:
            worker.wait_for("halluwatch_judge_answers_total", 1)
            time.sleep(2)
            alerts = worker.metric("halluwatch_alerts_total")
            held = worker.metric("halluwatch_decisions_held")
        finally:
            worker.stop()

    assert alerts == 0 and held == 0  # decided without the judgment: one signal alone does not alert
    ((_, status, _, _),) = findings_of(worker, "escalation")
    assert status == "ok"
    ((_, status, summary, evidence),) = findings_of(worker, "judge")
    assert status == "error" and "deadline" in str(summary)
    assert json.loads(str(evidence))["judgment"] == "unknown"


def test_a_held_decision_survives_a_kill_and_is_made_once_after_the_restart(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    trace_id, spans = clinic_trace("gaming")
    held = {"alerting__rules": RULES, "escalation__enabled": "true", "escalation__deadline_seconds": "120",
            "escalation__release_check_seconds": "0.5"}  # fmt: skip
    with OpenAIServer(delay=60.0) as slow:  # no answer before the kill
        first = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **{**held, **judge_at(slow)})
        produce(tansu.bootstrap, first.input_topic, [(trace_id.encode(), spans)])
        first.start()
        first.wait_for("halluwatch_decisions_held", 1)
        time.sleep(3)  # the hold reaches the agreement table's changelog
        first.stop(signal.SIGKILL)

    with OpenAIServer() as server:
        server.answer(CLAIMS, UNSUPPORTED)
        second = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **{**held, **judge_at(server)})
        second.start()
        try:
            second.wait_for("halluwatch_judge_answers_total", 1)
            second.wait_for("halluwatch_alerts_total", 1)
            time.sleep(3)  # time for any second (wrong) alert
            alerts = second.metric("halluwatch_alerts_total")
        finally:
            second.stop()

    assert alerts == 1
    rows = second.query("SELECT trace_id, rule FROM halluwatch.alerts FINAL")
    assert rows == [(trace_id, "two-detectors")]
