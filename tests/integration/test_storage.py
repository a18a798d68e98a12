"""Migrations and the ClickHouse sink on a real embedded ClickHouse engine (chDB)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import SecretStr

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Message, Usage
from pipeline.config.content_policy import STORE_ALL, ContentPolicy
from pipeline.config.retention import RetentionSettings
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.ddl import Layout
from pipeline.sinks.retention import retention_statements
from pipeline.sinks.rows import finding_record, finding_row, llm_call_row
from schemas import migrations

HASHED = ContentPolicy("hash", SecretStr("test-key"))

CALL = LLMCall(
    trace_id="ab" * 16,
    span_id="cd" * 8,
    parent_span_id=None,
    service="svc",
    span_name="chat",
    start_time_unix_nano=1_763_000_000_000_000_000,
    end_time_unix_nano=1_763_000_000_250_000_000,
    convention="genai",
    model="m",
    operation="chat",
    usage=Usage(10, 5),
    input_messages=(Message("user", "secret question"),),
    output_messages=(Message("assistant", "answer"),),
    attributes={"deployment.environment": "prod", "retries": 2},
)
RESULT = DetectorResult("schema_violation", "1", 1.0, True, 0.5, DetectorStatus.OK, 4, "bad", {"violations": [1]})


def test_migrate_is_idempotent(clickhouse):
    client, database = clickhouse
    shipped = [f"{m.version:03d}_{m.name}" for m in migrations()]
    assert shipped[:4] == ["001_llm_calls", "002_findings", "003_llm_calls_logprobs", "004_alerts"]
    assert migrate(client, database) == shipped
    assert migrate(client, database) == []
    tables = {row[0] for row in client.query(f"SHOW TABLES FROM {database}").result_rows}
    assert {"llm_calls", "findings", "alerts", "schema_migrations"} <= tables


def test_sink_writes_and_replayed_rows_collapse(clickhouse):
    client, database = clickhouse
    migrate(client, database)
    sink = ClickHouseSink(client, database)
    for _ in range(3):  # the same batch delivered three times (at-least-once)
        now = datetime.now(UTC)
        sink.add("llm_calls", [llm_call_row(CALL, HASHED, now)])
        sink.add("findings", [finding_row(finding_record(CALL, RESULT, "v1", STORE_ALL.findings), now)])
        sink.flush()
    rows = client.query(
        f"SELECT prompt, attributes, duration_ms, input_tokens FROM {database}.llm_calls FINAL"
    ).result_rows
    assert len(rows) == 1
    prompt, attributes, duration_ms, input_tokens = rows[0]
    assert prompt.startswith("hmac-sha256:") and "secret" not in prompt
    assert attributes == {"deployment.environment": "prod", "retries": "2"}
    assert (duration_ms, input_tokens) == (250.0, 10)
    findings = client.query(
        f"SELECT detector, flagged, severity, thresholds_version, evidence FROM {database}.findings FINAL"
    ).result_rows
    assert findings == [("schema_violation", True, 4, "v1", '{"violations": [1]}')]


def test_logprob_tokens_are_stored_in_store_mode_only(clickhouse):
    from dataclasses import replace

    from detectors.llm_call import TokenLogprob, TopLogprob

    client, database = clickhouse
    migrate(client, database)
    with_logprobs = replace(CALL, logprobs=(TokenLogprob("Paris", -0.1, (TopLogprob("Paris", -0.1),)),))
    other = replace(with_logprobs, span_id="ef" * 8)
    sink = ClickHouseSink(client, database)
    now = datetime.now(UTC)
    sink.add("llm_calls", [llm_call_row(with_logprobs, STORE_ALL.llm_calls, now), llm_call_row(other, HASHED, now)])
    sink.flush()
    rows = dict(client.query(f"SELECT span_id, logprobs_json FROM {database}.llm_calls FINAL").result_rows)
    assert json.loads(rows["cd" * 8]) == [
        {"token": "Paris", "logprob": -0.1, "top_logprobs": [{"token": "Paris", "logprob": -0.1}]}
    ]
    assert json.loads(rows["ef" * 8]) == [  # the numbers stay: baselines need nothing else
        {"token": "#0", "logprob": -0.1, "top_logprobs": [{"token": "#0", "logprob": -0.1}]}
    ]


def test_where_the_grounding_text_came_from_is_stored(clickhouse):
    from dataclasses import replace

    from detectors.llm_call import Source

    client, database = clickhouse
    migrate(client, database)
    from_trace = replace(CALL, sources=(Source("kb-1", "doc"),), retriever_span_ids=("ab" * 8,))
    own = replace(CALL, span_id="ef" * 8, sources=(Source("kb-1", "doc"),))
    sink = ClickHouseSink(client, database)
    now = datetime.now(UTC)
    sink.add("llm_calls", [llm_call_row(call, HASHED, now) for call in (from_trace, own)])
    sink.flush()
    rows = dict(client.query(f"SELECT span_id, sources_from FROM {database}.llm_calls FINAL").result_rows)
    assert rows == {"cd" * 8: "trace", "ef" * 8: "span"}


def test_cluster_ddl_is_valid_clickhouse_sql(clickhouse):
    """Every statement rendered for a cluster parses in ClickHouse, ON CLUSTER and replica path included.

    (No cluster runs here: chDB formats the statements, it does not execute them.)
    """
    client, _ = clickhouse
    layout = Layout("hw", "prod")
    rendered = [layout.render(m.sql_template) for m in migrations()]
    rendered += retention_statements(layout, RetentionSettings())
    rendered.append(layout.render("ALTER TABLE {database}.findings DELETE WHERE trace_id IN ['t']"))
    for sql in rendered:
        formatted = client.query("SELECT formatQuery({sql:String})", parameters={"sql": sql}).result_rows[0][0]
        assert "ON CLUSTER prod" in formatted, formatted
