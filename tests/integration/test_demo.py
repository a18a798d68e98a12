"""`halluwatch demo` runs the whole embedded stack and reports what the detector flagged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from pipeline.tools.demo_broker import free_port
from pipeline.tools.example_traces import EXAMPLES, LOG_EVENT_EXAMPLES

# Worker and demo processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")


def agreeing(alert_line: str) -> set[str]:
    """The detectors an alert line of the demo's summary lists (in arrival order, which varies)."""
    return set(alert_line.rsplit(": ", 1)[1].split(" + "))


def test_demo_prints_findings_and_stops_cleanly(tmp_path: Path):
    # A shell configured for a real deployment: the demo must send it nothing and store nothing there.
    deployment = {"HALLUWATCH_KAFKA_BOOTSTRAP": "127.0.0.1:1", "HALLUWATCH_DATA_DIR": str(tmp_path / "production")}
    completed = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "demo", "--data-dir", str(tmp_path / "demo"), "--no-local-judge"],
        capture_output=True, text=True, timeout=240, env={**os.environ, **deployment},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # Said last on stdout, after the alert log, where it is read.
    assert "ignoring HALLUWATCH_DATA_DIR, HALLUWATCH_KAFKA_BOOTSTRAP" in completed.stdout.strip().splitlines()[-1]
    assert not (tmp_path / "production").exists()
    out = completed.stdout
    expected_flags = sum(1 for example in EXAMPLES if example.schema_violation)
    flagged_lines = (
        out.split("or a detector reporting a fact), and why:\n", 1)[1].split("Application policies", 1)[0].splitlines()
    )
    assert sum("schema_violation:" in line for line in flagged_lines) == expected_flags
    assert any("contradiction: answer says 1950" in line for line in flagged_lines)
    # Each flagged call with its calibrated probability: the seed's example is almost surely hallucinated.
    (travel_p,) = {line.split("  p ", 1)[1][:4] for line in flagged_lines if "[travel-guide chat]" in line}
    assert float(travel_p) >= 0.9
    assert "did you mean 'search_docs'" in out
    assert "truncated" in out
    assert f"All {len(EXAMPLES) + len(LOG_EVENT_EXAMPLES) + 1} messages processed" in out
    # The call whose content came only in GenAI log records was joined and judged like the others.
    assert f"gen_ai           {len(LOG_EVENT_EXAMPLES)}  content: logs    grounding: prompt" in out
    # RAG calls without sources on their span take the documents of the retriever span before them.
    calls_by_origin = out.split("came from):\n", 1)[1].split("Findings by detector", 1)[0].splitlines()
    trace_grounded = [line for line in calls_by_origin if line.endswith("content: span    grounding: trace")]
    assert any("openinference" in line for line in trace_grounded)
    # Each finding counted once: flagged, ok (and not flagged), skipped or error add up to the calls.
    calls = sum(int(line.split()[1]) for line in calls_by_origin if line.strip())
    by_detector = out.split("(flagged / ok / skipped / error):\n", 1)[1].split("Flagged calls", 1)[0].splitlines()
    (schema,) = [line.split(None, 1)[1] for line in by_detector if line.split()[0] == "schema_violation"]
    assert sum(int(count) for count in schema.split(" / ")) == calls
    assert any("[hr-assistant chat]" in line and "contradiction: answer says 15" in line for line in flagged_lines)
    # It ends with the HTML report of what it stored (tests/integration/test_report.py opens one in Chromium).
    report = Path(out.rsplit("Report: ", 1)[1].splitlines()[0])
    assert report == (tmp_path / "demo" / "report.html").resolve()
    assert 'id="alerts_by_route_and_rule" data-chart="table" data-rows="5"' in report.read_text()
    # No Slack or pager configured: alerts print to the log, and the summary lists them as logged.
    alert_lines = out.split("Alerts (two or more detectors agreed on the trace", 1)[1].split("Flagged by one")[0]
    # Two applications routed their own way: HR pages its own on-call, order extraction only posts to Slack.
    assert "hr: service=hr-assistant; routes page -> hr-oncall, slack -> hr-oncall" in out
    hr_lines = [line for line in alert_lines.splitlines() if "[hr-assistant " in line]
    assert len(hr_lines) == 2 and all("-> hr-oncall (logged) policy hr:" in line for line in hr_lines)
    (order,) = [line for line in alert_lines.splitlines() if "[order-intake extract_order]" in line]
    assert "-> slack (logged) policy order-extraction:" in order
    assert agreeing(order) == {"schema_violation", "contradiction"}  # 30 boxes where the email says 3, no address
    # JSON cut off at the token limit is schema_violation's alone: recorded, never read as an ungrounded sentence.
    single = out.split("Flagged by one detector only", 1)[1]
    assert "schema_violation: answer: truncated JSON (finish_reason=length)" in single
    # The seed's own example (built in 1950, 500 metres tall) alerts through two independent detectors.
    (travel,) = [line for line in alert_lines.splitlines() if "[travel-guide chat]" in line]
    # Which second detector joins contradiction depends on arrival order (grounding or unsupported_spans).
    assert (
        "severe-contradiction -> page (logged) policy default" in travel
        and "contradiction" in agreeing(travel)
        and len(agreeing(travel)) >= 2
    )
    # The agent that says "booked" after its booking tool failed pages, with the grounding detector beside it.
    (agent,) = [line for line in alert_lines.splitlines() if "[concierge-agent chat]" in line]
    assert "claimed-failed-tool -> page" in agent and agreeing(agent) == {"tool_outcome", "grounding"}
    assert any("tool_outcome: answer claims book_table succeeded" in line for line in flagged_lines)
    # Tool calls checked against the shop's OpenAPI document and who may call what (tool facts registries).
    assert any(
        "no operation POST /customers/C-100/refund in the API (closest: POST /customers/{customer_id}/refunds)" in line
        for line in flagged_lines
    )
    assert any("user u-2230 (role viewer) may not call tool 'http_request'" in line for line in flagged_lines)
    single = out.split("Flagged by one detector only (recorded, not alerted):\n", 1)[1]
    assert "[product-qa]" in single and "[hr-assistant answer_question]" not in single
    assert "[travel-guide chat]" not in single
    assert "agree on hr-assistant answer_question" in completed.stderr  # the console route's log line

    # Then the printed command serves the triage pages on the demo's data, as a newcomer would run it.
    command = out.split("Triage pages: ", 1)[1].splitlines()[0]
    # The demo's store named on the command line: the exported deployment variables cannot divert it.
    assert command.endswith(f" --data-dir {tmp_path / 'demo'} ui")
    env = {**os.environ, "HALLUWATCH_DATA_DIR": str(tmp_path / "demo")}
    _check_triage_pages(env, alerted=len(set(re.findall(r"trace (\w+)…", alert_lines))))
    _check_demo_settings(env)
    _check_readme_sample(out)


def normalized(line: str) -> str:
    """A summary line without what differs between runs: trace ids, and the order agreeing detectors arrived in."""
    line = re.sub(r"trace [0-9a-f]{12}…", "trace …", line.rstrip())
    return re.sub(r"(policy [\w-]+): .*$", r"\1: …", line)


def _check_readme_sample(out: str) -> None:
    """Every line of the README's sample summary is a line of this run's (ids and arrival order aside)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    sample = readme.split("is also printed to the log in full", 1)[1].split("```", 2)[1]
    ran = {normalized(line) for line in out.splitlines()}
    shown = [line for line in sample.splitlines()[1:] if line.strip() and line.strip() != "..."]
    assert len(shown) > 20
    assert [line for line in shown if normalized(line) not in ran] == []


def _check_demo_settings(env: dict[str, str]) -> None:
    """With only HALLUWATCH_DATA_DIR set, the demo's policies are there, and doctor says where its broker went."""
    explain = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "policy", "explain", "--service", "hr-assistant"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert explain.returncode == 0 and explain.stdout.startswith("policy: hr  (match: service=hr-assistant)")
    doctor = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "doctor", "--timeout", "5"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "warn  kafka: the demo's broker (Tansu) runs only while `halluwatch demo` does" in doctor.stdout
    assert doctor.stdout.startswith("ok    config:") and "rdkafka" not in doctor.stdout + doctor.stderr


def _check_triage_pages(env: dict[str, str], alerted: int) -> None:
    """``halluwatch ui`` on the stopped demo's data: its printed link signs in and lists the alerted traces."""
    port = free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "ui", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert ui.stdout is not None
        first_line = ui.stdout.readline()
        link = re.search(r"http://\S+", first_line)
        assert link, first_line + ui.stdout.read()
        session = requests.Session()
        deadline = time.monotonic() + 90  # a loaded machine starts Python and chDB slowly
        while True:
            try:
                page = session.get(link[0].replace("/?", "/?alerted=1&"), timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and ui.poll() is None, "halluwatch ui did not start"
                time.sleep(0.2)
        assert page.status_code == 200 and "token=" not in page.url
        assert len(set(re.findall(r'href="/trace/([0-9a-f]{32})#', page.text))) == alerted > 0
        # The demo's last line: `rate` while `ui` holds the embedded store reads through the pages.
        rate = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "rate", "--app", "default"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert rate.returncode == 0, rate.stdout + rate.stderr
        assert "verdict-corrected rate: needs 2 more verdicts among alerted calls" in rate.stdout
        assert "false alarms by route" in rate.stdout and "\n  page: false alarms unknown" in rate.stdout
    finally:
        ui.terminate()
        ui.wait(timeout=30)
