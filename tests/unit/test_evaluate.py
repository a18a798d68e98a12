from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from detectors.base import Detector, DetectorResult
from detectors.suite import DetectorSuite
from pipeline.evaluate import EvalInputError, read_records, record_to_call, report, score_batch
from pipeline.model import LLMCall


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
    assert line["detectors"] == {"word": {"score": 1.0, "flagged": True, "status": "ok"}}
    assert line["spans"] == [{"start": 3, "end": 7, "text": "1950", "detector": "word"}]
    text = report(records, outputs)
    assert "combined" in text and "all-positive" in text
    assert "span overlap over 1 records with gold spans: P 1.000  R 1.000  F1 1.000" in text
