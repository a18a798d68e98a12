"""The nine recorded setups through a `halluwatch worker` on Tansu and embedded ClickHouse: what alerts.

Each recording (``tests/instrumented/recordings``) holds five traces; they go to the input
topic as the collector writes them (one unkeyed message per recording, re-keyed by the worker),
Google GenAI's log records to the logs topic.  For every setup the wrong-number RAG answer and
the failed booking claimed done are alerted, the faithful answer is not; `halluwatch conventions`
then counts the calls per instrumentation scope.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pipeline.tools.demo_broker import TansuBroker
from tests.instrumented.recorded import EXPECTED_CALLS, RECORDINGS
from tests.integration.support import WorkerProcess, produce

pytestmark = pytest.mark.usefixtures("exported_model")

ALERTED = {"contradicted": "severe-contradiction", "failed_tool": "claimed-failed-tool"}


def _scenarios(payload: bytes) -> dict[str, str]:
    """Trace id -> scenario, from the application spans ``chat <scenario>``."""
    request = ExportTraceServiceRequest.FromString(payload)
    return {
        span.trace_id.hex(): span.name.removeprefix("chat ")
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if not span.parent_span_id
    }


def test_every_setup_alerts_on_the_wrong_numbers_and_the_failed_tool_claimed_done(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    scenarios: dict[str, tuple[str, str]] = {}
    spans, logs = [], []
    for setup in EXPECTED_CALLS:
        payload = (RECORDINGS / setup / "spans.bin").read_bytes()
        scenarios |= {trace: (setup, name) for trace, name in _scenarios(payload).items()}
        spans.append((None, payload))
        if (RECORDINGS / setup / "logs.bin").exists():
            logs.append((None, (RECORDINGS / setup / "logs.bin").read_bytes()))
    expected_alerts = len(EXPECTED_CALLS) * len(ALERTED)
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker").start()
    try:
        produce(tansu.bootstrap, worker.logs_topic, logs)
        produce(tansu.bootstrap, worker.input_topic, spans)
        worker.wait_for("halluwatch_alerts_total", expected_alerts, timeout_seconds=240)
        worker.wait_for("halluwatch_alert_deliveries_total", expected_alerts)  # to the log: no destination is set
        worker.wait_for("halluwatch_messages_done_total", len(spans) + len(scenarios))  # and the re-keyed traces
    finally:
        assert worker.stop() == 0, worker.log()

    alerts = worker.query("SELECT DISTINCT trace_id, rule FROM halluwatch.alerts FINAL")
    alerted = [(*scenarios[trace], rule) for trace, rule in alerts]
    assert sorted(alert for alert in alerted if alert[1] in ALERTED) == sorted(
        (setup, name, rule) for setup in EXPECTED_CALLS for name, rule in ALERTED.items()
    )
    # The faithful answer never alerts; the undefined tool and the wrong argument type only as the
    # facts they are (a schema violation) with grounding beside them, where the library let them through.
    assert {rule for _, name, rule in alerted if name not in ALERTED} <= {"grounding-and-schema"}
    assert not [alert for alert in alerted if alert[1] == "faithful"]
    calls = dict(worker.query("SELECT service, count() FROM halluwatch.llm_calls FINAL GROUP BY service"))
    assert calls == {
        f"app-{setup.replace('_', '-')}": 2 + sum(per_scenario.values())
        for setup, per_scenario in EXPECTED_CALLS.items()
    }
    empty = worker.query("SELECT service, span_name FROM halluwatch.llm_calls FINAL WHERE prompt = '' OR model = ''")
    assert empty == []

    # What a team runs to see gaps: every scope's calls arrived with content and model; Google's automatic
    # function calling is the one whose calls hide the tool calls (and its undefined tool's call has no output).
    report = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "conventions", "--since", "3650d"],
        capture_output=True, text=True, timeout=120, env=worker.env,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    rows = {line.split(" (")[0]: line.split()[-4:] for line in report.stdout.splitlines()[1:-1]}
    assert rows["pydantic-ai"] == ["8", "0", "0", "0"]
    assert rows["openinference.instrumentation.openai_agents"] == ["7", "0", "0", "0"]
    assert rows["opentelemetry.instrumentation.google_genai"] == ["13", "0", "0", "0"]
    assert rows["app"] == ["8", "0", "0", "0"]  # the Vercel AI SDK's spans carry the app's tracer
    assert "all with content and model" in report.stdout.splitlines()[-1]
