from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from detectors.base import Detector, DetectorResult
from detectors.llm_call import LLMCall
from detectors.suite import DetectorSuite
from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import AlertRule
from pipeline.offline.evaluate import (
    EvalAlert,
    EvalInputError,
    EvalOutput,
    agreement_report,
    read_records,
    record_to_call,
    report,
    score_batch,
    span_scores,
)


class AnswerHas(Detector):
    """Flags answers containing a word, pointing at it."""

    name = "word"
    version = "1"

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        results = []
        for call in calls:
            at = call.answer.find("1950")
            spans = [{"start": at, "end": at + 4, "text": "1950"}] if at >= 0 else []
            results.append(
                DetectorResult(self.name, "1", 1.0 if spans else 0.0, bool(spans), 0.5, evidence={"spans": spans})
            )
        return results


RECORDS = [
    {"id": "a", "task": "qa", "question": "When?", "context": ["Built 1887-1889.", "330 m"], "answer": "In 1950.",
     "hallucinated": True, "spans": [{"start": 3, "end": 7, "text": "1950"}]},
    {"id": "b", "task": "summary", "question": "", "context": "Built 1887-1889.", "answer": "In 1887.",
     "hallucinated": False, "spans": []},
]  # fmt: skip


def _write(tmp_path: Path, records) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    return path


def test_records_become_rag_calls(tmp_path: Path):
    records = list(read_records(_write(tmp_path, RECORDS)))
    call = record_to_call(records[0])
    assert [s.text for s in call.sources] == ["Built 1887-1889.", "330 m"]
    assert (call.prompt, call.answer, call.operation) == ("When?", "In 1950.", "qa")
    assert record_to_call(records[0]).trace_id == call.trace_id and len(call.trace_id) == 32
    assert record_to_call(records[1]).input_messages == ()


def test_bad_line_names_file_and_line(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n{not json\n")
    with pytest.raises(EvalInputError, match=r"bad.jsonl:2"):
        list(read_records(path))


def test_score_batch_and_report(tmp_path: Path):
    records = list(read_records(_write(tmp_path, RECORDS)))
    outputs = score_batch(DetectorSuite([AnswerHas()]), records)
    assert [o.hallucinated for o in outputs] == [True, False]
    line = json.loads(outputs[0].to_json())
    assert line["detectors"] == {"word": {"score": 1.0, "flagged": True, "status": "ok", "severity": 0, "version": "1"}}
    assert line["spans"] == [{"start": 3, "end": 7, "text": "1950", "detector": "word"}]
    text = report(records, outputs)
    assert "combined" in text and "all-positive" in text
    assert "span overlap (characters, over all 2 labelled records): P 1.000  R 1.000  F1 1.000" in text
    # As LettuceDetect counts them: characters marked in a clean answer are false positives too.
    marked_clean = replace(outputs[1], spans=[{"start": 3, "end": 7, "text": "1887", "detector": "word"}])
    spans = span_scores(records, [outputs[0], marked_clean])
    assert spans is not None and (spans.precision, spans.recall) == (0.5, 1.0)
    assert span_scores(records[1:], outputs[1:]) is None  # no span labels at all: nothing to say


def _output(flagged: set[str], names: tuple[str, ...] = ("a", "b", "c", "sentinel")) -> EvalOutput:
    detectors = {n: {"score": 1.0 if n in flagged else 0.0, "flagged": n in flagged, "status": "ok", "severity": 2}
                 for n in names}  # fmt: skip
    return EvalOutput(id="x", score=0.0, hallucinated=bool(flagged), detectors=detectors)


def test_agreement_report_against_any_detector_and_by_route():
    outputs = [_output({"a", "b"}), _output({"a"}), _output({"a", "sentinel"}), _output({"b", "c"})]
    outputs[0] = replace(outputs[0], alert=EvalAlert("r1", "page"))
    outputs[3] = replace(outputs[3], alert=EvalAlert("r2", "slack"))
    actual = [True, True, False, False]
    text = "\n".join(agreement_report(outputs, actual))
    assert "any detector     alerts      4  P 0.500  R 1.000  F1 0.667  false alarms 2 (100.0% of faithful)" in text
    assert "alert rules      alerts      2  P 0.500  R 0.500  F1 0.500  false alarms 1 (50.0% of faithful)" in text
    assert "  route page     alerts      1  P 1.000  R 0.500  F1 0.667  false alarms 0 (0.0% of faithful)" in text
    assert "  route slack    alerts      1  P 0.000  R 0.000  F1 0.000  false alarms 1 (50.0% of faithful)" in text
    # f = 0.5 each for a, b, c on the two faithful records; the sentinel never counts.
    assert "a 50.0%, b 50.0%, c 50.0%" in text and "sentinel" not in text
    assert "1-\u03a0(1-f_i) = 87.5%" in text and "\u03a3 f_i f_j = 75.0%" in text


def test_each_output_says_what_the_worker_would_do(tmp_path: Path):
    records = list(read_records(_write(tmp_path, RECORDS)))
    rule = AgreementRule([AlertRule(name="any-word", route="log", min_detectors=1)], window_seconds=60)
    outputs = score_batch(DetectorSuite([AnswerHas()]), records, agreement=rule)
    lines = [json.loads(o.to_json()) for o in outputs]
    assert [(line["alert"], line["p_hallucination"]) for line in lines] == [
        ({"rule": "any-word", "route": "log"}, None),  # no verdict model: no probability
        (None, None),
    ]


class Skips(Detector):
    """Skips every call, as the content detectors do on a set without context."""

    name = "needs_context"
    version = "1"

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        return [self.skipped_result("no context") for _ in calls]


def test_a_detector_that_skipped_every_record_reads_n_a_and_a_set_without_context_says_so(tmp_path: Path):
    contextless = [{**record, "context": []} for record in RECORDS]
    records = list(read_records(_write(tmp_path, contextless)))
    text = report(records, score_batch(DetectorSuite([Skips()]), records))
    assert "needs_context           2    n/a    n/a    n/a    n/a  (0 / 2 / 0)" in text
    assert "every content detector skipped every record: no record has context (sources)" in text

    with_context = list(read_records(_write(tmp_path, RECORDS)))
    mixed = report(with_context, score_batch(DetectorSuite([Skips(), AnswerHas()]), with_context))
    assert "needs_context           2    n/a" in mixed and "every content detector" not in mixed
    assert "word                    2  1.000  1.000  1.000  1.000  (2 / 0 / 0)" in mixed
