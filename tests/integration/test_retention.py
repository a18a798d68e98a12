"""Retention TTLs and erasure on request, on a real embedded ClickHouse (chDB).

TTLs of seconds, with calls that started a minute ago, made effective at once by
``OPTIMIZE ... FINAL`` (ClickHouse applies TTLs when it merges).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Message, ToolSpan, Usage
from pipeline.config.content_policy import STORE_ALL
from pipeline.config.retention import RetentionSettings
from pipeline.ingest.trace_facts import ToolExecution
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.ddl import Layout
from pipeline.sinks.erasure import ERASED_TABLES, ErasureRefused, Selector, erase
from pipeline.sinks.labels import Label, insert_labels
from pipeline.sinks.rows import finding_record, finding_row, llm_call_row, tool_run_rows

ERASABLE = ["user.id", "session.id"]
LONG = RetentionSettings(content_days=1, days=2)
MINUTE_AGO = datetime.now(UTC) - timedelta(minutes=1)


def _call(trace_id: str, user: str, prompt: str, answer: str, started: datetime = MINUTE_AGO) -> LLMCall:
    nanos = int(started.timestamp() * 1e9)
    return LLMCall(
        trace_id=trace_id,
        span_id=trace_id[:16],
        parent_span_id=None,
        service="svc",
        span_name="chat",
        start_time_unix_nano=nanos,
        end_time_unix_nano=nanos + 250_000_000,
        convention="genai",
        model="m",
        operation="chat",
        usage=Usage(10, 5),
        input_messages=(Message("user", prompt),),
        output_messages=(Message("assistant", answer),),
        attributes={"user.id": user, "session.id": f"session-of-{user}", "deployment.environment": "prod"},
    )


def _store(client: Client, database: str, calls: list[LLMCall]) -> None:
    """Each call with a flagged finding quoting its answer, an alert quoting it again, a verdict and a review skip."""
    now = datetime.now(UTC)
    sink = ClickHouseSink(client, database)
    for call in calls:
        answer = call.answer
        result = DetectorResult("grounding", "1", 0.9, True, 0.5, DetectorStatus.OK, 3, f"unsupported: {answer}",
                                {"sentences": [{"text": answer}]})  # fmt: skip
        sink.add("llm_calls", [llm_call_row(call, STORE_ALL.llm_calls, now, erasable_keys=ERASABLE)])
        sink.add("findings", [finding_row(finding_record(call, result, "v1", STORE_ALL.findings), now)])
        # The agent's tool run in the same trace, its arguments quoting the prompt and its result the answer.
        tool = ToolSpan(f"{call.span_id[:15]}f", "lookup", "c1", end_time_unix_nano=call.end_time_unix_nano)
        run = ToolExecution(call.trace_id, tool, f'{{"q": "{call.prompt}"}}', call.answer)
        sink.add("tool_runs", tool_run_rows([run], STORE_ALL.llm_calls, now))
    sink.flush()
    client.insert(
        f"{database}.alerts",
        [[f"a-{c.trace_id}", c.trace_id, "two-detectors", "slack", "slack", c.answer, f'{{"quote": "{c.answer}"}}',
          "delivered", MINUTE_AGO, now] for c in calls],
        column_names=["alert_id", "trace_id", "rule", "route", "destination", "summary", "evidence", "status",
                      "created_at", "updated_at"],
    )  # fmt: skip
    labels = [Label(c.trace_id, c.span_id, True, "reviewer", now, "invented") for c in calls]
    insert_labels(client, database, labels, source="test")
    client.insert(f"{database}.review_skips", [[c.trace_id, c.span_id, "other", now] for c in calls],
                  column_names=["trace_id", "span_id", "reviewer", "skipped_at"])  # fmt: skip


def _merged(client: Client, database: str) -> None:
    for table in (*ERASED_TABLES, "erasures"):
        client.command(f"OPTIMIZE TABLE {database}.{table} FINAL")


def _count(client: Client, database: str, table: str, where: str = "1") -> int:
    return int(client.query(f"SELECT count() FROM {database}.{table} WHERE {where}").result_rows[0][0])


def _tables_holding(client: Client, database: str, text: str) -> dict[str, int]:
    """Rows of every table in ``database`` where any column, as text, contains ``text``."""
    found = {}
    for (table,) in client.query(f"SHOW TABLES FROM {database}").result_rows:
        columns = [row[0] for row in client.query(f"DESCRIBE TABLE {database}.{table}").result_rows]
        where = " OR ".join(f"position(toString(`{c}`), {{text:String}}) > 0" for c in columns)
        rows = client.query(f"SELECT count() FROM {database}.{table} WHERE {where}", parameters={"text": text})
        if rows.result_rows[0][0]:
            found[table] = int(rows.result_rows[0][0])
    return found


def test_short_ttls_empty_content_everywhere_then_drop_rows_keeping_verdicts(clickhouse: tuple[Client, str]) -> None:
    client, database = clickhouse
    short_content = RetentionSettings(content_days=5 / 86_400, days=1)  # 5 s of content, a day of rows
    applied = migrate(client, database, short_content)
    assert applied[-1] == "retention content 5 s, rows 1 day"
    assert migrate(client, database, short_content) == [], "the same settings change nothing"
    call = _call("ab" * 16, "alice", "what is the leave policy", "Employees get 150% of salary on leave")
    _store(client, database, [call])
    _merged(client, database)

    assert _tables_holding(client, database, "leave policy") == {}
    assert _tables_holding(client, database, "150%") == {}
    calls = client.query(f"SELECT trace_id, erasable, attributes, p_hallucination IS NULL FROM {database}.llm_calls")
    erasable = {"user.id": "alice", "session.id": "session-of-alice"}
    assert calls.result_rows == [(call.trace_id, erasable, {**erasable, "deployment.environment": "prod"}, True)]
    finding = client.query(f"SELECT detector, score, flagged, summary, evidence FROM {database}.findings").result_rows
    assert finding == [("grounding", pytest.approx(0.9), True, "", "")]
    alert = client.query(f"SELECT status, summary, evidence FROM {database}.alerts").result_rows
    assert alert == [("delivered", "", "")]
    assert _count(client, database, "labels") == 1

    changed = migrate(client, database, RetentionSettings(content_days=5 / 86_400, days=30 / 86_400))
    assert changed == ["retention content 5 s, rows 30 s (was content 5 s, rows 1 day)"]
    _merged(client, database)
    assert [_count(client, database, t) for t in ("llm_calls", "findings", "alerts", "tool_runs")] == [0, 0, 0, 0]
    assert _count(client, database, "labels") == 1, "verdicts are kept until deleted"
    assert _count(client, database, "review_skips") == 1


def test_erasing_one_user_leaves_no_byte_of_theirs_and_the_others_whole(clickhouse: tuple[Client, str]) -> None:
    client, database = clickhouse
    migrate(client, database, LONG)
    alice = [_call(f"{i:02d}" * 16, "alice", f"alice prompt {i} about her salary", f"alice answer {i}: 150%")
             for i in range(1, 4)]  # fmt: skip
    old = _call("0a" * 16, "alice", "alice prompt from last year", "alice old answer", MINUTE_AGO - timedelta(days=1))
    bob = [_call(f"b{i}" * 16, "bob", f"bob prompt {i}", f"bob answer {i}") for i in range(1, 3)]
    _store(client, database, [*alice, old, *bob])
    layout = Layout(database)

    with pytest.raises(ErasureRefused, match=r"deployment\.environment is not erasable"):
        erase(client, layout, Selector("deployment.environment", "prod"), ERASABLE, "dpo")
    before_old = Selector("user.id", "alice", MINUTE_AGO - timedelta(hours=1))
    assert erase(client, layout, before_old, ERASABLE, "dpo").traces == 1
    assert _tables_holding(client, database, "alice old answer") == {}
    assert _tables_holding(client, database, "alice answer 1") != {}, "--before kept the newer calls"

    first = erase(client, layout, Selector("user.id", "alice"), ERASABLE, "dpo")
    assert first.traces == 3
    assert first.removed == {"llm_calls": 3, "findings": 3, "alerts": 3, "tool_runs": 3, "labels": 3, "review_skips": 3}
    _merged(client, database)
    for text in ("alice prompt", "alice answer", "her salary"):
        assert _tables_holding(client, database, text) == {}, text
    assert _tables_holding(client, database, "alice") == {"erasures": 2}  # the audit rows' selectors, nothing else
    for table in ERASED_TABLES:
        assert _count(client, database, table) == 2, table
    assert _tables_holding(client, database, "bob answer 2") == {
        "llm_calls": 1,
        "findings": 1,
        "alerts": 1,
        "tool_runs": 1,
    }

    again = erase(client, layout, Selector("user.id", "alice"), ERASABLE, "dpo")
    assert (again.traces, set(again.removed.values())) == (0, {0})
    trace_erasure = erase(client, layout, Selector("trace_id", bob[0].trace_id), ERASABLE, "dpo")
    assert trace_erasure.removed["llm_calls"] == 1
    audit = client.query(
        f"SELECT erased_by, selector, traces, removed['findings'] FROM {database}.erasures ORDER BY erased_at"
    ).result_rows
    assert audit == [
        ("dpo", "user.id=alice", 1, 1),
        ("dpo", "user.id=alice", 3, 3),
        ("dpo", "user.id=alice", 0, 0),
        ("dpo", f"trace_id={bob[0].trace_id}", 1, 1),
    ]


def test_session_ids_are_erasable_too_and_erasure_survives_content_expiry(clickhouse: tuple[Client, str]) -> None:
    """The erasable values outlive the content: a session is still found once its calls' content expired."""
    client, database = clickhouse
    migrate(client, database, RetentionSettings(content_days=5 / 86_400, days=1))
    calls = [_call("c1" * 16, "carol", "carol prompt", "carol answer"), _call("d1" * 16, "dave", "p", "a")]
    _store(client, database, calls)
    _merged(client, database)
    erased = erase(client, Layout(database), Selector("session.id", "session-of-carol"), ERASABLE, "dpo")
    assert (erased.traces, erased.removed["llm_calls"]) == (1, 1)
    assert _count(client, database, "llm_calls") == 1
