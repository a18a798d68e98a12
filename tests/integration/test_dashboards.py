"""Every dashboard query runs on the real schema and returns what the data says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from detectors.base import DetectorResult
from pipeline.alerting.alert import Alert, DeliveryStatus, DetectorEvidence
from pipeline.model import LLMCall, Message, ToolCall
from pipeline.rows import alert_row, finding_record, finding_row, llm_call_row
from pipeline.storage import ClickHouseSink, migrate

QUERIES = (Path(__file__).parents[2] / "dashboards" / "queries.sql").read_text()


def test_dashboard_queries_run(clickhouse):
    client, database = clickhouse
    migrate(client, database)
    now = datetime.now(UTC)
    call = LLMCall(
        trace_id="ab" * 16, span_id="cd" * 8, parent_span_id=None, service="svc", span_name="chat",
        start_time_unix_nano=int(now.timestamp() * 1e9), end_time_unix_nano=int(now.timestamp() * 1e9) + 1,
        convention="gen_ai", model="m", operation="chat",
        output_messages=(Message("assistant", "", (ToolCall("search_documents", "{}"),)),),
    )  # fmt: skip
    evidence = {"violations": [{"kind": "unknown_tool", "tool": "search_documents", "message": "not defined"}]}
    result = DetectorResult("schema_violation", "1", 1.0, True, 0.5, severity=4, summary="bad", evidence=evidence)
    sink = ClickHouseSink(client, database)
    sink.add("llm_calls", [llm_call_row(call, "full", now)])
    sink.add("findings", [finding_row(finding_record(call, result, "v1"), now)])
    alert = Alert(
        trace_id=call.trace_id, rule="two-detectors", route="slack", severity=4, service="svc", model="m",
        operation="chat", detectors=(DetectorEvidence("schema_violation", 1.0, 0.5, 4, "bad"),), created_at=now,
    )  # fmt: skip
    sink.add("alerts", [alert_row(alert, "slack:#c", DeliveryStatus.RETRYING, 1, "503", now)])
    sink.add("alerts", [alert_row(alert, "slack:#c", DeliveryStatus.DELIVERED, 2, "", now)])
    sink.add("alerts", [alert_row(alert, "slack:#c", DeliveryStatus.RETRYING, 1, "503", now)])  # a late repeat
    sink.flush()
    outputs = {}
    for query in QUERIES.split("\n;\n"):
        name = query.split("-- name: ", 1)[1].split(" ", 1)[0]
        outputs[name] = client.query(query.replace("halluwatch.", f"{database}.")).result_rows
    assert outputs["flag_rate_by_service_model_operation"][0][1:] == ("svc", "m", "chat", 1, 1, 1.0)
    assert outputs["schema_violations_by_tool"] == [("search_documents", "unknown_tool", 1, "not defined")]
    assert outputs["latest_flagged"][0][5] == "bad"
    assert outputs["llm_traffic_by_convention"][0][:4] == ("gen_ai", "", "m", 1)
    # The final status outranks retries, whatever order the rows were written in.
    assert outputs["alerts_by_route_and_rule"] == [("slack", "two-detectors", "slack:#c", 1, 1, 0, 0, 2)]
    assert outputs["detector_health"][0][:7] == ("schema_violation", "1", "v1", 1, 0, 0, 1)
