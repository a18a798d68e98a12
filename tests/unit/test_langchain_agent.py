"""An agent turn recorded by a real instrumentation library (OpenInference's LangChain) reaches the detectors.

LangChain's own tool loop against a local fake OpenAI server: the booking tool returns an
error, the model claims the table is booked.  The spans go through the worker's processor
(decode, normalize, trace facts), so the tool span of the same trace is attached too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from detectors.suite import DetectorSuite
from detectors.tool_outcome import ToolOutcomeConfig
from detectors.tool_outcome.detector import ToolOutcomeDetector
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from tests.instrumented import fake_openai
from tests.instrumented.run_langchain import BOOKING_ERROR

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_langchain_agent_claiming_its_failed_booking_succeeded_is_flagged(tmp_path: Path) -> None:
    output = tmp_path / "spans.bin"
    run = subprocess.run(
        [sys.executable, "-m", "tests.instrumented.run_langchain", str(output)],
        cwd=REPO_ROOT, capture_output=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    result = SpanBatchProcessor(DetectorSuite([]), "v-test").normalize([InboundMessage(None, output.read_bytes())])
    asked, answered = sorted(result.llm_calls, key=lambda call: call.start_time_unix_nano)
    assert asked.output_tool_calls[0].name == "book_table" and asked.answer == ""
    assert answered.answer == fake_openai.CLAIMED_SUCCESS
    assert [message.role for message in answered.input_messages] == ["user", "assistant", "tool"]
    assert [source.text for source in answered.sources] == [BOOKING_ERROR]  # the tool result is its context
    (tool_span,) = answered.tool_spans  # OpenInference's TOOL span, from the same trace
    assert tool_span.name == "book_table" and not tool_span.failed  # the tool returned; its result says it failed

    (finding,) = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch([answered])
    assert finding.flagged and finding.severity == 4
    assert finding.summary == "answer claims book_table succeeded; the tool returned error: No table free at 19:30"
    (run_evidence,) = finding.evidence["runs"]
    assert run_evidence["span_id"] == tool_span.span_id
