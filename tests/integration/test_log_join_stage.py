"""The log-join stage on a real broker: logs topic -> re-key -> join table -> released calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData

from detectors.llm_call import ContentSource, LLMCall, Message
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.replay import write_json_lines
from tests.genai_logs import ANSWER, QUESTION, Telemetry, deprecated_events, details_event

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_logs_join_their_spans_through_kafka(tansu: TansuBroker, topic_prefix: str, tmp_path: Path) -> None:
    telemetry = Telemetry()
    with telemetry.chat_span(**{"gen_ai.response.id": "events"}):
        deprecated_events(telemetry)
    with telemetry.chat_span(**{"gen_ai.response.id": "details"}):
        details_event(telemetry)
    with telemetry.chat_span(**{"gen_ai.response.id": "none"}):
        pass  # content capture off: no records ever come
    with telemetry.chat_span(**{"gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}])}):
        pass  # content on the span: detected at once, never held
    spans, logs = telemetry.payloads()
    (tmp_path / "spans.bin").write_bytes(spans)
    write_json_lines(tmp_path / "logs.jsonl", [LogsData.FromString(logs)])
    output = tmp_path / "outcome.json"

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.log_join_app",
            tansu.bootstrap,
            topic_prefix,
            str(tmp_path),
            str(output),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=180,
    )
    assert run.returncode == 0 and output.exists(), run.stderr.decode()[-4000:]
    outcome = json.loads(output.read_text())

    assert len(outcome["ready"]) == 1 and outcome["held"] == 3
    released = {call.attributes["gen_ai.response.id"]: call for call in map(LLMCall.from_dict, outcome["released"])}
    assert sorted(released) == ["details", "events", "none"]
    for key in ("details", "events"):
        call = released[key]
        assert (call.content_source, call.prompt, call.answer) == (ContentSource.LOGS, QUESTION, ANSWER)
    assert released["events"].input_messages[0].role == "system"
    assert released["none"].content_source is ContentSource.ABSENT
    assert released["none"].input_messages == () and released["none"].output_messages == ()
    assert Message("user", QUESTION) in released["details"].input_messages
    assert outcome["dead_letters"] == ["undecodable"]
    assert outcome["logs_messages_done"] == 2
