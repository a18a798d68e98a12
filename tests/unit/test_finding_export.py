"""Findings as OTLP ``gen_ai.evaluation.result`` events: the real SDK exporter against a local OTLP/HTTP server."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, SeverityNumber
from prometheus_client import REGISTRY

from pipeline.config.secrets import secret_values
from pipeline.config.settings import ConfigError, load_settings
from pipeline.ingest.otlp_logs import EVALUATION_RESULT_EVENT, decode_logs, genai_records
from pipeline.sinks.finding import Finding
from pipeline.sinks.findings_otlp import FindingExporter
from tests.servers import Reply, Request, ScriptedServer

LOGS_PATH = "/v1/logs"
TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"
TOKEN = "Basic cGstbGYtMTpzay1sZi0x"

Exporters = Callable[..., FindingExporter]


def finding(**overrides: Any) -> Finding:
    """A findings record as pipeline.sinks.rows.finding_record makes it."""
    record: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "service": "travel-guide",
        "model": "gpt-4o-mini",
        "operation": "chat",
        "detector": "contradiction",
        "detector_version": "1.2",
        "thresholds_version": "2024-06-01.1",
        "status": "ok",
        "score": 0.91,
        "threshold": 0.5,
        "flagged": True,
        "severity": 4,
        "summary": "answer says 1950, context says 1887",
        "evidence": {"answer_value": "1950"},
        "span_start_time_unix_nano": 1_700_000_000_000_000_000,
        "policy": "default",
        "p_hallucination": None,
        "verdict_version": "",
    }
    return Finding(**{**record, **overrides})


def otlp_ok(request: Request) -> Reply:
    return Reply(200, {"Content-Type": "application/x-protobuf"}, b"")


def log_records(requests: list[Request]) -> list[tuple[dict[str, Any], LogRecord]]:
    """(resource attributes, record) of every log record the server received, in order."""
    found = []
    for request in requests:
        body = ExportLogsServiceRequest.FromString(request.body)
        for resource_logs in body.resource_logs:
            resource = attributes_of(resource_logs.resource.attributes)
            found += [(resource, record) for scope in resource_logs.scope_logs for record in scope.log_records]
    return found


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair) for pair in pairs}


def value_of(pair: KeyValue) -> Any:
    kind = pair.value.WhichOneof("value")
    return getattr(pair.value, kind) if kind else None


def exported(outcome: str) -> float:
    return REGISTRY.get_sample_value("halluwatch_findings_exported_total", {"outcome": outcome}) or 0.0


@pytest.fixture
def collector() -> Iterator[ScriptedServer]:
    with ScriptedServer(otlp_ok) as server:
        yield server


@pytest.fixture
def exporters() -> Iterator[Exporters]:
    """Exporters with a short batch delay; each is shut down at teardown, if the test did not."""
    made: list[FindingExporter] = []

    def make(
        endpoint: str, headers: dict[str, str] | None = None, timeout_seconds: float = 2.0, **options: Any
    ) -> FindingExporter:
        exporter = FindingExporter(endpoint, headers or {}, timeout_seconds, schedule_delay_millis=20, **options)
        made.append(exporter)
        return exporter

    yield make
    for exporter in made:
        exporter.shutdown()


def test_flagged_finding_becomes_an_evaluation_event_of_its_span(collector: ScriptedServer, exporters: Exporters):
    exporter = exporters(collector.url + LOGS_PATH, headers={"Authorization": TOKEN})
    exporter.emit([finding(), finding(detector="grounding", flagged=False, score=0.1, severity=0)])
    exporter.shutdown()  # sends what is queued

    requests = collector.requests(LOGS_PATH)
    assert requests and all(r.headers["content-type"] == "application/x-protobuf" for r in requests)
    assert all(r.headers["authorization"] == TOKEN for r in requests)
    [(resource, record)] = log_records(requests)  # only the flagged one (the default)
    assert resource["service.name"] == "halluwatch"
    assert record.trace_id == bytes.fromhex(TRACE_ID) and record.span_id == bytes.fromhex(SPAN_ID)
    assert record.event_name == EVALUATION_RESULT_EVENT == "gen_ai.evaluation.result"
    assert record.severity_number == SeverityNumber.SEVERITY_NUMBER_WARN
    assert record.time_unix_nano > 0
    assert attributes_of(record.attributes) == {
        "gen_ai.evaluation.name": "contradiction",
        "gen_ai.evaluation.score.value": 0.91,
        "gen_ai.evaluation.score.label": "flagged",
        "gen_ai.evaluation.explanation": "answer says 1950, context says 1887",
        "halluwatch.status": "ok",
        "halluwatch.flagged": True,
        "halluwatch.severity": 4,
        "halluwatch.threshold": 0.5,
        "halluwatch.detector.version": "1.2",
        "halluwatch.thresholds.version": "2024-06-01.1",
        "halluwatch.call.service": "travel-guide",
        "halluwatch.call.model": "gpt-4o-mini",
        "halluwatch.call.operation": "chat",
    }


def test_every_finding_when_not_only_flagged(collector: ScriptedServer, exporters: Exporters):
    exporter = exporters(collector.url + LOGS_PATH, only_flagged=False)
    exporter.emit(
        [
            finding(detector="grounding", flagged=False, score=0.2, severity=0),
            finding(detector="confidence", status="skipped", flagged=False, score=0.0, summary="no logprobs"),
            finding(detector="claims", status="error", flagged=False, score=0.0, summary="judge output unusable"),
        ]
    )
    exporter.shutdown()

    records = {
        attributes["gen_ai.evaluation.name"]: (attributes, record.severity_number)
        for attributes, record in ((attributes_of(r.attributes), r) for _, r in log_records(collector.requests()))
    }
    assert set(records) == {"grounding", "confidence", "claims"}
    ok, ok_severity = records["grounding"]
    assert ok["gen_ai.evaluation.score.label"] == "ok" and ok["gen_ai.evaluation.score.value"] == 0.2
    assert ok_severity == SeverityNumber.SEVERITY_NUMBER_INFO
    skipped, _ = records["confidence"]
    assert skipped["gen_ai.evaluation.score.label"] == "skipped" and "gen_ai.evaluation.score.value" not in skipped
    failed, failed_severity = records["claims"]
    assert failed["gen_ai.evaluation.score.label"] == "error" and failed["error.type"] == "detector_error"
    assert "gen_ai.evaluation.score.value" not in failed and failed_severity == SeverityNumber.SEVERITY_NUMBER_ERROR


def test_events_sent_through_the_collector_do_not_come_back_as_content(collector: ScriptedServer, exporters: Exporters):
    exporter = exporters(collector.url + LOGS_PATH)
    exporter.emit([finding()])
    exporter.shutdown()
    [request] = collector.requests(LOGS_PATH)
    # The collector's kafka exporter writes the same bytes to the logs topic the log join reads.
    assert log_records([request]) and genai_records(decode_logs(request.body)) == {}


def test_emit_hands_findings_over_without_waiting_for_the_collector(collector: ScriptedServer, exporters: Exporters):
    collector.script(LOGS_PATH, Reply(200, delay=3.0))  # a slow collector holds the first export
    sent = exported("sent")
    exporter = exporters(collector.url + LOGS_PATH, timeout_seconds=30)
    for _ in range(20):
        exporter.emit([finding()] * 10)
    # Had emit sent on the caller's thread, the first one would have returned after its export.
    assert exported("sent") == sent
    exporter.shutdown()
    assert exported("sent") - sent == 200


def test_down_endpoint_neither_raises_nor_loses_count(exporters: Exporters):
    with socket.socket() as probe:  # a port nobody listens on: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    failed = exported("failed")
    exporter = exporters(f"http://127.0.0.1:{port}{LOGS_PATH}", timeout_seconds=0.5)
    for _ in range(20):
        exporter.emit([finding()] * 10)
    exporter.shutdown()  # returns: each export gives up within its timeout
    assert exported("failed") - failed == 200


def test_server_error_is_counted_and_later_findings_still_go(collector: ScriptedServer, exporters: Exporters):
    collector.script(LOGS_PATH, Reply(500, body="collector broke"))
    sent, failed = exported("sent"), exported("failed")
    exporter = exporters(collector.url + LOGS_PATH)

    exporter.emit([finding()])
    collector.wait_for(1, path_prefix=LOGS_PATH)
    exporter.emit([finding(span_id="00f067aa0ba902b7")])
    exporter.shutdown()

    assert exported("failed") - failed == 1 and exported("sent") - sent == 1
    [(_, record)] = log_records(collector.requests(LOGS_PATH)[1:])
    assert record.span_id == bytes.fromhex("00f067aa0ba902b7")


def test_full_queue_drops_instead_of_holding(exporters: Exporters):
    with ScriptedServer(lambda request: Reply(200, {"Content-Type": "application/x-protobuf"}, delay=0.5)) as slow:
        sent, dropped = exported("sent"), exported("dropped")
        exporter = exporters(slow.url + LOGS_PATH, max_queue_size=2)
        exporter.emit([finding()] * 5)  # two wait (then go, slowly); three find the queue full
        exporter.shutdown()
    assert exported("dropped") - dropped == 3 and exported("sent") - sent == 2


def test_malformed_record_is_counted_and_the_rest_go(collector: ScriptedServer, exporters: Exporters):
    invalid = exported("invalid")
    exporter = exporters(collector.url + LOGS_PATH)
    exporter.emit([finding(trace_id="not-hex"), finding(detector="grounding")])
    exporter.shutdown()
    assert exported("invalid") - invalid == 1
    [(_, record)] = log_records(collector.requests(LOGS_PATH))
    assert attributes_of(record.attributes)["gen_ai.evaluation.name"] == "grounding"


def test_settings_off_by_default_and_headers_are_secrets(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HALLUWATCH_CONFIG", raising=False)
    assert FindingExporter.from_settings(load_settings()) is None

    monkeypatch.setenv("HALLUWATCH_FINDINGS_OTLP_ENDPOINT", "http://otel-collector:4318/v1/logs")
    monkeypatch.setenv("HALLUWATCH_FINDINGS_OTLP_HEADERS", f'{{"authorization": "{TOKEN}"}}')
    monkeypatch.setenv("HALLUWATCH_FINDINGS_OTLP_ONLY_FLAGGED", "false")
    settings = load_settings()
    assert settings.findings_otlp_headers["authorization"].get_secret_value() == TOKEN
    assert TOKEN not in repr(settings) and TOKEN in secret_values(settings)  # masked in every log line
    assert settings.findings_otlp_only_flagged is False
    exporter = FindingExporter.from_settings(settings)
    assert exporter is not None
    exporter.shutdown()


def test_endpoint_must_be_an_http_url(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HALLUWATCH_FINDINGS_OTLP_ENDPOINT", "otel-collector:4318")
    with pytest.raises(ConfigError, match="findings_otlp_endpoint"):
        load_settings()
