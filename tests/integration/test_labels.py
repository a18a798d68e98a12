"""The labelling loop on embedded ClickHouse: export a stratified sample, label, import, calibrate from it."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from detectors.base import DetectorResult, DetectorStatus
from pipeline.config.content_policy import STORE_ALL, ContentPolicy
from pipeline.offline.human_labels import export_for_labelling, labelled_scores_from_clickhouse, read_label_file
from pipeline.offline.scored_calls import DetectorScore, LabelledScores
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.labels import Label, insert_labels
from pipeline.sinks.rows import finding_record, finding_row, llm_call_row
from tests.calls import make_llm_call

NOW = datetime.now(UTC).replace(microsecond=0)
TRACE = "ab" * 16


def span(n: int) -> str:
    return f"{n:016x}"


def store(client, database, n, findings, *, started=NOW - timedelta(hours=1), content=STORE_ALL.llm_calls):
    """Write LLM call ``n`` and its findings: (detector, score[, status]) with threshold 0.5.

    With threshold 0.5 a score is its own threshold-relative score, so score 0.3 is in bin 1 of 5.
    """
    nanos = int(started.timestamp() * 1e9)
    call = make_llm_call(
        answer=f"answer {n}", prompt=f"question {n}", trace_id=TRACE, span_id=span(n), model="m",
        operation="chat", start_time_unix_nano=nanos, end_time_unix_nano=nanos + 1,
    )  # fmt: skip
    sink = ClickHouseSink(client, database)
    sink.add("llm_calls", [llm_call_row(call, content, NOW)])
    for detector, score, *status in findings:
        result = DetectorResult(
            detector,
            "1",
            score,
            score >= 0.5,
            0.5,
            status=DetectorStatus(*status or ["ok"]),
            summary=f"{detector} said",
        )
        sink.add("findings", [finding_row(finding_record(call, result, "v1", STORE_ALL.findings), NOW)])
    sink.flush()


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def score_bin(line):
    hallucination = [d["score"] for name, d in line["detectors"].items() if name != "sentinel" and d["status"] == "ok"]
    return min(int(max(hallucination) * 5), 4)


def label_count(client, database):
    return client.query(f"SELECT count() FROM {database}.labels FINAL").result_rows[0][0]


def test_export_is_a_stratified_sample_of_unlabelled_recent_calls(clickhouse, tmp_path):
    client, database = clickhouse
    migrate(client, database)
    for n in range(6):  # bin 0
        store(client, database, n, [("grounding", 0.05 + n / 100)])
    store(client, database, 10, [("grounding", 0.3), ("sentinel", 0.95)])  # bin 1: the sentinel does not count
    hashed = ContentPolicy("hash", SecretStr("k"))
    store(client, database, 20, [("grounding", 0.5), ("schema_violation", 0.0, "skipped")], content=hashed)
    for n in range(40, 43):  # bin 4
        store(client, database, n, [("grounding", 0.7), ("contradiction", 0.9)])
    store(client, database, 90, [("grounding", 0.0, "skipped")])  # nothing to calibrate on
    store(client, database, 91, [("grounding", 0.9)], started=NOW - timedelta(days=3))  # too old
    store(client, database, 92, [("grounding", 0.9)])  # already labelled
    insert_labels(client, database, [Label(TRACE, span(92), True, "alice", NOW)], "test")

    output = tmp_path / "sample.jsonl"
    assert export_for_labelling(client, database, output, limit=6, since=NOW - timedelta(days=1), seed=7) == 6
    lines = read_lines(output)

    # Available per bin [6, 1, 1, 0, 3]: one each, and the spare ones to the highest bin.
    assert sorted(score_bin(line) for line in lines) == [0, 1, 2, 4, 4, 4]
    assert {line["span_id"] for line in lines} >= {span(10), span(20), span(40), span(41), span(42)}
    by_span = {line["span_id"]: line for line in lines}
    assert by_span[span(40)] == {
        "trace_id": TRACE, "span_id": span(40), "start_time": (NOW - timedelta(hours=1)).isoformat(),
        "service": "svc", "model": "m", "operation": "chat", "content_mode": "store",
        "prompt": "question 40", "grounding": "question 40", "answer": "answer 40",
        "detectors": {
            "contradiction": {"status": "ok", "score": 0.9, "threshold": 0.5, "flagged": True,
                              "summary": "contradiction said"},
            "grounding": {"status": "ok", "score": 0.7, "threshold": 0.5, "flagged": True, "summary": "grounding said"},
        },
        "label": None, "labeller": None, "note": "",
    }  # fmt: skip
    assert by_span[span(20)]["answer"].startswith("hmac-sha256:")
    assert by_span[span(20)]["detectors"]["schema_violation"]["status"] == "skipped"

    again = tmp_path / "again.jsonl"
    export_for_labelling(client, database, again, limit=6, since=NOW - timedelta(days=1), seed=7)
    assert again.read_bytes() == output.read_bytes()
    assert export_for_labelling(client, database, again, limit=100) == 12  # no since: the old call as well


def test_exported_file_labelled_and_imported_feeds_calibration(clickhouse, tmp_path):
    client, database = clickhouse
    migrate(client, database)
    store(client, database, 1, [("grounding", 0.9), ("sentinel", 1.0)])
    store(client, database, 2, [("grounding", 0.2), ("confidence", 0.0, "skipped")])
    store(client, database, 3, [("grounding", 0.4)])
    path = tmp_path / "sample.jsonl"
    export_for_labelling(client, database, path)

    lines = read_lines(path)
    for line in lines:
        line["label"] = {span(1): "hallucinated", span(2): "ok"}.get(line["span_id"])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    label_file = read_label_file(path, "alice")
    assert label_file.unlabelled == 1

    assert insert_labels(client, database, label_file.labels, f"import:{path.name}") == 2
    assert insert_labels(client, database, label_file.labels, f"import:{path.name}") == 2
    assert label_count(client, database) == 2  # re-import changes nothing
    assert labelled_scores_from_clickhouse(client, database) == [
        LabelledScores(
            f"{TRACE}:{span(1)}", True, {"grounding": DetectorScore(0.9, "ok", 0, "1"),
                                         "sentinel": DetectorScore(1.0, "ok", 0, "1")},
        ),
        LabelledScores(
            f"{TRACE}:{span(2)}", False, {"confidence": DetectorScore(0.0, "skipped", 0, "1"),
                                          "grounding": DetectorScore(0.2, "ok", 0, "1")},
        ),
    ]  # fmt: skip
    # Labelled calls are not offered again.
    assert export_for_labelling(client, database, path) == 1
    assert [line["span_id"] for line in read_lines(path)] == [span(3)]
    # A verdict withdrawn (the triage page's undo) leaves its call unlabelled: offered again, not fitted on.
    (first,) = [label for label in label_file.labels if label.span_id == span(1)]
    later = first.labelled_at + timedelta(seconds=1)
    insert_labels(client, database, [replace(first, labelled_at=later, withdrawn=True)], "ui")
    assert [s.id for s in labelled_scores_from_clickhouse(client, database)] == [f"{TRACE}:{span(2)}"]
    assert export_for_labelling(client, database, path) == 2
    assert sorted(line["span_id"] for line in read_lines(path)) == [span(1), span(3)]


def test_newest_label_per_labeller_then_majority(clickhouse, caplog):
    client, database = clickhouse
    migrate(client, database)
    for n in (1, 2, 3):
        store(client, database, n, [("grounding", 0.6)])
    t = [NOW - timedelta(hours=h) for h in (5, 4, 3)]

    def labels(n, *verdicts):
        return [Label(TRACE, span(n), verdict, labeller, at) for labeller, verdict, at in verdicts]

    older = labels(1, ("alice", True, t[0]))
    insert_labels(client, database, labels(1, ("alice", False, t[1])), "corrected")
    insert_labels(client, database, older, "first pass")  # imported late, but older: loses
    insert_labels(
        client, database,
        labels(2, ("alice", True, t[0]), ("bob", True, t[0]), ("carol", False, t[2]))  # majority over newest
        + labels(3, ("alice", True, t[0]), ("bob", False, t[1]))  # a tie: the newest decides
        + labels(4, ("alice", True, t[0])),  # no findings
        "file",
    )  # fmt: skip
    assert label_count(client, database) == 7
    rows = client.query(f"SELECT label, source FROM {database}.labels FINAL WHERE span_id = '{span(1)}'").result_rows
    assert rows == [(False, "corrected")]

    with caplog.at_level(logging.WARNING, logger="pipeline.offline.human_labels"):
        scores = labelled_scores_from_clickhouse(client, database)
    assert [(s.id.split(":")[1], s.hallucinated) for s in scores] == [
        (span(1), False),
        (span(2), True),
        (span(3), False),
    ]
    assert "1 labelled spans have no findings" in caplog.text
    # Only labels given since then: span 2's carol, span 3's bob, span 1's correction.
    recent = labelled_scores_from_clickhouse(client, database, since=t[1])
    assert [(s.id.split(":")[1], s.hallucinated) for s in recent] == [
        (span(1), False),
        (span(2), False),
        (span(3), False),
    ]


def test_a_verdict_given_outside_the_review_queue_stands_beside_the_review_verdict(clickhouse):
    """Neither replaces the other: the audit sample keeps its verdict, and each kind is withdrawn alone."""
    client, database = clickhouse
    migrate(client, database)
    drawn = Label(
        TRACE, span(1), True, "alice", NOW - timedelta(minutes=5), inclusion_probability=0.25, stratum="alerted"
    )
    insert_labels(client, database, [drawn], "review")
    trace_page = replace(drawn, hallucinated=False, labelled_at=NOW, inclusion_probability=0.0, stratum="")
    insert_labels(client, database, [trace_page, Label(TRACE, span(1), True, "bob", NOW)], "ui")

    def rows():
        return client.query(
            f"SELECT labeller, label, source, inclusion_probability, stratum, elsewhere, withdrawn "
            f"FROM {database}.labels FINAL ORDER BY labeller, elsewhere"
        ).result_rows

    assert rows() == [
        ("alice", True, "review", 0.25, "alerted", False, False),
        ("alice", False, "ui", 0.0, "", True, False),
        ("bob", True, "ui", 0.0, "", True, False),
    ]
    insert_labels(client, database, [replace(trace_page, labelled_at=NOW + timedelta(seconds=1), withdrawn=True)], "ui")
    assert [row[-1] for row in rows()] == [False, True, False]
    # Calibration counts alice once: her newest standing verdict (the review's, the other withdrawn).
    store(client, database, 1, [("grounding", 0.6)])
    assert [s.hallucinated for s in labelled_scores_from_clickhouse(client, database)] == [True]
    # Her second look stands again: alice (faithful, newest) and bob tie, and the newest decides; counted
    # twice, her review verdict and bob's would outvote it.
    insert_labels(client, database, [replace(trace_page, labelled_at=NOW + timedelta(seconds=2))], "ui")
    assert [s.hallucinated for s in labelled_scores_from_clickhouse(client, database)] == [False]
