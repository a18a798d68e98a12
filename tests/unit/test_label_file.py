"""Label files: what is accepted, and errors that name the file, the line and the field."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.offline.human_labels import MAX_ERRORS, LabelFileError, read_label_file
from pipeline.sinks.labels import Label

TRACE = "ab" * 16
SPAN = "cd" * 8


def write(tmp_path: Path, *lines: object) -> Path:
    """A label file with one line per item: dicts as JSON, strings as they are."""
    path = tmp_path / "labels.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def line(**fields: object) -> dict[str, object]:
    return {"trace_id": TRACE, "span_id": SPAN, "label": True, **fields}


def errors_of(path: Path) -> list[str]:
    with pytest.raises(LabelFileError) as raised:
        read_label_file(path, "alice")
    assert str(raised.value).startswith(f"{path}:")
    return raised.value.errors


def test_accepted_values_and_defaults(tmp_path):
    path = write(
        tmp_path,
        line(answer="exported fields are ignored", detectors={}),
        "",
        line(span_id="E" * 16, label="ok", labeller="bob", labelled_at="2025-03-01T10:00:00.123456Z", note="fine"),
        line(span_id="1" * 16, label="hallucinated", labelled_at="2025-03-01T12:00:00+02:00"),
        line(span_id="2" * 16, label=False, labelled_at="2025-03-01T10:00:00", labeller=None, note=None),
    )
    os.utime(path, (1_700_000_000.5, 1_700_000_000.5))
    result = read_label_file(path, "alice")
    assert result.unlabelled == 0
    assert result.labels == [
        Label(TRACE, SPAN, True, "alice", datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)),
        Label(TRACE, "e" * 16, False, "bob", datetime(2025, 3, 1, 10, 0, 0, 123000, tzinfo=UTC), "fine"),
        Label(TRACE, "1" * 16, True, "alice", datetime(2025, 3, 1, 10, 0, tzinfo=UTC)),
        Label(TRACE, "2" * 16, False, "alice", datetime(2025, 3, 1, 10, 0, tzinfo=UTC)),
    ]


def test_lines_not_labelled_yet_are_counted_not_errors(tmp_path):
    path = write(tmp_path, line(label=None), line(span_id="1" * 16, label=None, trace_id="not checked"), line())
    result = read_label_file(path, "alice")
    assert result.unlabelled == 2
    assert [label.span_id for label in result.labels] == [SPAN]


def test_bad_json_names_the_line(tmp_path):
    path = write(tmp_path, line(), '{"trace_id": "ab",')
    assert errors_of(path) == [f"{path}:2: invalid JSON: Expecting property name enclosed in double quotes (column 19)"]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"trace_id": None}, "trace_id: missing"),
        ({"trace_id": "xyz"}, 'trace_id: must be 32 hex characters, got "xyz"'),
        ({"span_id": "g" * 16}, f'span_id: must be 16 hex characters, got "{"g" * 16}"'),
        ({"span_id": 12}, "span_id: must be 16 hex characters, got 12"),
        ({"label": "yes"}, 'label: must be true, false, "hallucinated" or "ok", got "yes"'),
        ({"label": 1}, 'label: must be true, false, "hallucinated" or "ok", got 1'),
        ({"labeller": " "}, "labeller: must not be empty"),
        ({"labelled_at": "last tuesday"}, 'labelled_at: must be an ISO 8601 time, got "last tuesday"'),
        ({"note": ["x"]}, 'note: must be a string, got ["x"]'),
    ],
)
def test_field_errors(tmp_path, fields, error):
    path = write(tmp_path, line(**fields))
    assert errors_of(path) == [f"{path}:1: {error}"]


def test_missing_label_and_non_objects(tmp_path):
    path = write(tmp_path, {"trace_id": TRACE, "span_id": SPAN}, "[1, 2]")
    assert errors_of(path) == [
        f"{path}:1: label: missing (null marks a line not labelled yet)",
        f"{path}:2: not a JSON object",
    ]


def test_every_error_is_reported_at_once(tmp_path):
    path = write(tmp_path, line(trace_id="x", span_id="y"), line(), "nope", line(label="maybe"), line())
    assert errors_of(path) == [
        f'{path}:1: trace_id: must be 32 hex characters, got "x"',
        f'{path}:1: span_id: must be 16 hex characters, got "y"',
        f"{path}:3: invalid JSON: Expecting value (column 1)",
        f'{path}:4: label: must be true, false, "hallucinated" or "ok", got "maybe"',
        f"{path}:5: span_id: labelled twice (line 2 has the same span and labeller)",
    ]


def test_the_same_span_by_two_labellers_is_fine(tmp_path):
    path = write(tmp_path, line(), line(labeller="bob"))
    assert [label.labeller for label in read_label_file(path, "alice").labels] == ["alice", "bob"]


def test_errors_stop_after_a_limit(tmp_path):
    path = write(tmp_path, *["{"] * (MAX_ERRORS + 5))
    with pytest.raises(LabelFileError) as raised:
        read_label_file(path, "alice")
    assert len(raised.value.errors) == MAX_ERRORS
    assert str(raised.value).endswith(f"(stopped after {MAX_ERRORS} errors)")


def test_not_utf8(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b'{"note": "\xff"}\n')
    assert errors_of(path) == [f"{path}:1: not UTF-8 (byte 11)"]


def test_a_byte_order_mark_is_fine(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(line()).encode() + b"\n")
    assert len(read_label_file(path, "alice").labels) == 1


def test_default_labeller_required(tmp_path):
    with pytest.raises(ValueError, match="default_labeller"):
        read_label_file(write(tmp_path, line()), " ")
