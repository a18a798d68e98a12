"""One bad message never stops the pipeline: a poison on every topic a worker reads, then good traces.

A real `halluwatch worker` on a Tansu broker with embedded ClickHouse. Poisons go to the spans,
findings, alerts, alert-retry, logs and log-join topics: ids that name no trace, a message
over the size limit plus the produce headroom (its dead letter must still fit), numbers out of
range, NaN, nesting 200,000 deep, invalid UTF-8, unpaired surrogates, fields of the wrong type.
The example traces after them must all be stored and alert; every poison must be in the
dead-letter topic with its reason; no stage may crash; SIGTERM must stop the worker promptly.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLE_OUTPUT_SCHEMAS, example_traces
from tests.integration.support import WorkerProcess, consume_distinct, produce, with_trace_id

pytestmark = pytest.mark.usefixtures("exported_model")

MAX_MESSAGE_BYTES = 64 * 1024
TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
ALERT = {"trace_id": TRACE, "rule": "two-detectors", "route": "page", "severity": 4, "detectors": [],
         "created_at": "2026-11-28T00:00:00+00:00", "policy": "default"}  # fmt: skip
DEEP = b"[" * 200_000
DEEP_SPANS = b'{"resourceSpans":' + b"[" * 50_000  # as deep as a message under the size limit can be


def _poisons(worker: WorkerProcess, prefix: str) -> list[tuple[str, bytes | None, bytes, str]]:
    """(topic, key, value, the reason kind its dead letter must carry) for each poison."""
    zero_id = with_trace_id(example_traces()[0], b"\0" * 16)
    finding = {"trace_id": TRACE, "detector": "grounding", "flagged": True, "status": "ok"}
    return [
        (worker.input_topic, b"0" * 32, zero_id, "invalid_id"),
        (worker.input_topic, b"big", b"\n" + b"\x01" * (MAX_MESSAGE_BYTES + 128 * 1024), "too_large"),
        (worker.input_topic, None, DEEP_SPANS, "undecodable"),
        (
            worker.findings_topic,
            TRACE.encode(),
            json.dumps([finding])[:-2].encode() + b', "severity": 1e400}]',
            "malformed_finding",
        ),
        (
            worker.findings_topic,
            TRACE.encode(),
            json.dumps([{**finding, "score": float("nan")}]).encode(),
            "malformed_finding",
        ),
        (worker.findings_topic, TRACE.encode(), DEEP, "malformed_finding"),
        (
            worker.findings_topic,
            TRACE.encode(),
            b'[{"trace_id": "' + TRACE.encode() + b'", "summary": "\xff\xfe"}]',
            "malformed_finding",
        ),
        (worker.alerts_topic, TRACE.encode(), json.dumps({**ALERT, "severity": 10**30}).encode(), "malformed_alert"),
        (
            f"{prefix}-alerts-retry",
            TRACE.encode(),
            json.dumps({"alert": ALERT, "destination": "page", "attempt": 1, "not_before": 1e300}).encode(),
            "malformed_alert_retry",
        ),
        (worker.logs_topic, None, b'{"resourceLogs": [{"scopeLogs": "\\ud800"}]}', "undecodable"),
        (
            f"{prefix}-log-join",
            TRACE.encode(),
            json.dumps({"records": {SPAN: [{"event": 1, "time": 1, "body": None, "attrs": {}}]}}).encode(),
            "malformed_log_join",
        ),
    ]


def test_every_good_trace_after_a_poison_on_each_topic_is_stored_and_alerts(
    tansu: TansuBroker, topic_prefix: str, tmp_path
):
    config = tmp_path / "halluwatch.yaml"  # the order-intake example's output schema, as the demo has it
    config.write_text(yaml.safe_dump({"detectors": {"schema_violation": {"output_schemas": EXAMPLE_OUTPUT_SCHEMAS}}}))
    settings = {"max_message_bytes": str(MAX_MESSAGE_BYTES), "config": str(config)}
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **settings)
    worker.start()
    try:
        worker.wait_for("halluwatch_worker_ready", 1, timeout_seconds=120)
        poisons = _poisons(worker, topic_prefix)
        for topic, key, value, _ in poisons:
            produce(tansu.bootstrap, topic, [(key, value)], max_message_bytes=1_000_000)
        traces = example_traces()
        good = {t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex(): t for t in traces}
        produce(tansu.bootstrap, worker.input_topic, [(tid.encode(), t.SerializeToString()) for tid, t in good.items()])
        # Five of the examples agree (tests/integration/test_alerts_end_to_end.py): each must alert.
        worker.wait_for("halluwatch_alerts_total", 5, timeout_seconds=180)
        letters = consume_distinct(tansu.bootstrap, worker.dlq_topic, len(poisons), timeout_seconds=60)
    finally:
        stopping = time.monotonic()
        code = worker.stop(timeout_seconds=60)
    assert time.monotonic() - stopping < 30, "SIGTERM took longer than an orchestrator's grace"
    assert code == 0, worker.log()

    by_source = sorted((dict(m.headers())["halluwatch.source"].decode().rsplit("/", 2)[0],
                        dict(m.headers())["halluwatch.reason_kind"].decode()) for m in letters)  # fmt: skip
    assert by_source == sorted((topic, kind) for topic, _, _, kind in poisons)
    (big,) = [m for m in letters if dict(m.headers())["halluwatch.reason_kind"] == b"too_large"]
    headers = dict(big.headers())
    assert headers["halluwatch.truncated"] == b"head" and len(big.value()) <= MAX_MESSAGE_BYTES
    assert int(headers["halluwatch.original_size"]) == MAX_MESSAGE_BYTES + 128 * 1024 + 1

    stored = {row[0] for row in worker.query("SELECT DISTINCT trace_id FROM halluwatch.llm_calls")}
    assert set(good) <= stored and "0" * 32 not in stored
    log = worker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "crashed" not in log, log[-6000:]
