"""Retention TTLs and erasure on request, on a real embedded ClickHouse (chDB).

TTLs of seconds, with calls that started a minute ago, made effective at once by
``OPTIMIZE ... FINAL`` (ClickHouse applies TTLs when it merges).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from clickhouse_connect.driver.client import Client

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Message, ToolSpan, Usage
from pipeline.cli import main
from pipeline.config.content_policy import STORE_ALL
from pipeline.config.retention import RetentionSettings
from pipeline.ingest.trace_facts import ToolExecution
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.ddl import Layout
from pipeline.sinks.erasure import ERASED_TABLES, Erasure, ErasureRefused, Selector, erase, matched_traces
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


def _erase(client: Client, database: str, selector: Selector) -> Erasure:
    """``halluwatch erase``'s two steps: the traces the selector matches, then their rows."""
    return erase(client, Layout(database), selector, matched_traces(client, database, selector, ERASABLE), "dpo")


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

    with pytest.raises(ErasureRefused, match=r"deployment\.environment is not erasable"):
        matched_traces(client, database, Selector("deployment.environment", "prod"), ERASABLE)
    before_old = Selector("user.id", "alice", MINUTE_AGO - timedelta(hours=1))
    assert _erase(client, database, before_old).traces == 1
    assert _tables_holding(client, database, "alice old answer") == {}
    assert _tables_holding(client, database, "alice answer 1") != {}, "--before kept the newer calls"

    first = _erase(client, database, Selector("user.id", "alice"))
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

    again = _erase(client, database, Selector("user.id", "alice"))
    assert (again.traces, set(again.removed.values())) == (0, {0})
    trace_erasure = _erase(client, database, Selector("trace_id", bob[0].trace_id))
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
    erased = _erase(client, database, Selector("session.id", "session-of-carol"))
    assert (erased.traces, erased.removed["llm_calls"]) == (1, 1)
    assert _count(client, database, "llm_calls") == 1


def test_a_trace_is_matched_whole_or_by_a_prefix_naming_one_and_the_counts_are_what_went(
    clickhouse: tuple[Client, str],
) -> None:
    """A prefix naming several traces or none removes nothing; a trace only the labels still hold is found."""
    client, database = clickhouse
    migrate(client, database, LONG)
    twins = [_call("525bad21" + f"{i:x}" * 24, f"user-{i}", f"prompt {i}", f"answer {i}") for i in (1, 2)]
    lone = _call("77aa" * 8, "carol", "carol prompt", "carol answer")
    _store(client, database, [*twins, lone])
    _store(client, database, [lone])  # stored twice, not merged yet: the counts are of rows as FINAL reads them

    with pytest.raises(ErasureRefused, match=f"trace prefix 525bad21 names 2 stored traces: {twins[0].trace_id}, "):
        matched_traces(client, database, Selector("trace_id", "525bad21"), ERASABLE)
    assert matched_traces(client, database, Selector("trace_id", "NOT-A-TRACE"), ERASABLE) == []
    with pytest.raises(ErasureRefused, match="as a prefix its 4 characters are too few: give 8 or more"):
        matched_traces(client, database, Selector("trace_id", "77aa"), ERASABLE)  # said, not "matched 0"
    assert matched_traces(client, database, Selector("trace_id", "525bad21" + "2" * 10), ERASABLE) == [
        twins[1].trace_id
    ]

    by_prefix = _erase(client, database, Selector("trace_id", "77aa77aa"))
    assert (by_prefix.traces, dict(by_prefix.removed), dict(by_prefix.left)) == (
        1, {table: 1 for table in ERASED_TABLES}, {}
    )  # fmt: skip
    assert _tables_holding(client, database, "carol") == {}
    for table in ERASED_TABLES:
        assert _count(client, database, table, f"trace_id = '{lone.trace_id}'") == 0, table
        assert _count(client, database, table) == 2, table

    # Rows outlive their call (a verdict kept after the call's rows expired): the trace is still found.
    client.command(f"ALTER TABLE {database}.llm_calls DELETE WHERE trace_id = '{twins[0].trace_id}'",
                   settings={"mutations_sync": 1})  # fmt: skip
    only_rows = _erase(client, database, Selector("trace_id", twins[0].trace_id))
    assert only_rows.traces == 1 and only_rows.removed["llm_calls"] == 0 and only_rows.removed["labels"] == 1
    assert _erase(client, database, Selector("trace_id", twins[0].trace_id)).traces == 0


def test_erase_command_shows_the_trace_before_removing_and_fails_on_no_match_or_several(
    clickhouse: tuple[Client, str], chdb_path: Path, tmp_path: Path
) -> None:
    client, database = clickhouse
    migrate(client, database, LONG)
    twins = [_call("525bad21" + f"{i:x}" * 24, f"user-{i}", f"prompt {i}", f"answer {i}") for i in (1, 2)]
    lone = _call("77aa" * 8, "carol", "carol prompt", "carol answer")
    _store(client, database, [*twins, lone])
    report = tmp_path / "data" / "report.html"
    report.parent.mkdir()
    report.write_text(f"<p>{lone.trace_id}: carol answer</p>", encoding="utf-8")  # as `halluwatch report` left it
    env = {"HALLUWATCH_CLICKHOUSE_DSN": f"chdb://{chdb_path}", "HALLUWATCH_CLICKHOUSE_DATABASE": database,
           "HALLUWATCH_DATA_DIR": str(report.parent)}  # fmt: skip

    def halluwatch_erase(*args: str) -> Result:
        return CliRunner(env=env).invoke(main, ["erase", *args, "--by", "dpo"])

    several = halluwatch_erase("--trace", "525bad21")
    assert several.exit_code == 1
    assert f"names 2 stored traces: {twins[0].trace_id}, {twins[1].trace_id}; give the whole id" in several.output
    assert "nothing was removed" in several.output and "removed:" not in several.output
    for option, value, selector in (("--trace", "NOT-A-TRACE", "trace_id=NOT-A-TRACE"),
                                    ("--key", "user.id=nobody", "user.id=nobody")):  # fmt: skip
        none = halluwatch_erase(option, value)
        assert none.exit_code == 1, selector
        assert f"Error: {selector} matched 0 stored traces: nothing removed" in none.output
    assert all(_count(client, database, table) == 3 for table in ERASED_TABLES), "nothing went"

    erased = halluwatch_erase("--trace", "77aa77aa")
    assert erased.exit_code == 0, erased.output
    lines = erased.output.splitlines()
    assert lines[0] == f"trace_id=77aa77aa matched 1 trace: {lone.trace_id}"
    assert lines[1].startswith("erasure ") and lines[1].endswith(" removed:")
    assert lines[2:8] == [f"  {table:<13} 1 row" for table in ERASED_TABLES]
    assert f"  {report.resolve()}: an HTML report written " in erased.output
    assert "it may quote the erased calls: delete it, or write it again with `halluwatch report`" in erased.output
    assert _tables_holding(client, database, "carol") == {}
    assert all(_count(client, database, table) == 2 for table in ERASED_TABLES)

    by_user = halluwatch_erase("--key", "user.id=user-1")
    assert by_user.exit_code == 0, by_user.output
    assert by_user.output.startswith(f"user.id=user-1 matched 1 trace: {twins[0].trace_id}\n")
