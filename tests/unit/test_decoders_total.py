"""Every topic decoder is total: whatever the bytes, a usable value or the one MalformedRecord its stage dead-letters.

Each decoder the worker's stages call on a topic's records (findings, alerts, alert retries,
sampled calls, log-join records, OTLP spans and logs) gets arbitrary bytes, arbitrary JSON,
and its own valid records with one value anywhere in them replaced by a hostile one: numbers
out of range, NaN and Infinity, unpaired surrogates, deep nesting, values of the wrong type.
Any other exception would crash the stage's agent and hold back every record behind it.
A value that does come back must be writable: strict JSON, UTF-8, within the tables' ranges.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.llm_call import Source, ToolSpan
from pipeline.alerting.alert import Alert, AlertRetry, DetectorEvidence
from pipeline.ingest.otlp_logs import GenAIRecord, decode_logs, encode_logs_json, genai_records
from pipeline.ingest.otlp_traces import decode_traces, encode_traces_json
from pipeline.ingest.trace_facts import Retrieval, ToolExecution, fact_dict
from pipeline.log_join.offers import join_offer
from pipeline.sampled.sampled_call import SampledCall
from pipeline.sinks.finding import Finding, findings_in_message, findings_messages
from pipeline.tools.example_traces import example_traces
from pipeline.untrusted import MAX_NESTING, MalformedRecord, json_document
from tests.calls import make_llm_call
from tests.fuzzing import fuzz
from tests.genai_logs import Telemetry, details_event

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
NOW = 1_800_000_000.0
CALL = make_llm_call("The tower was completed in 1889.", "When?", (Source("d1", "Completed in 1889."),))
FINDING = Finding(TRACE, SPAN, "svc", "m", "chat", "default", "contradiction", "1", "t", "ok", 0.9, 0.5, True, 3,
                  "answer says 1950", {"claims": [{"answer": "1950", "context": ["1889"]}]}, 1, 0.8, "v")  # fmt: skip
ALERT = Alert(TRACE, "two-detectors", "page", 4, "svc", "m", "chat",
              (DetectorEvidence("contradiction", 0.9, 0.5, 3, "answer says 1950", SPAN, {"k": [1, 2.5]}),),
              datetime(2026, 11, 28, tzinfo=UTC), p_hallucination=0.9)  # fmt: skip


FACTS = (
    Retrieval(TRACE, SPAN, None, 2, (Source("d", "text"),)),
    ToolExecution(TRACE, ToolSpan(SPAN, "book", "c1", True, "no seats", 2)),
)


def _telemetry_logs() -> bytes:
    telemetry = Telemetry()
    with telemetry.chat_span():
        details_event(telemetry)
    return encode_logs_json(decode_logs(telemetry.payloads()[1]))


# Each decoder a stage calls on its topic, with valid records it reads.
DECODERS: dict[str, tuple[Callable[[bytes], Any], list[bytes]]] = {
    "findings": (findings_in_message, [value for _, value in findings_messages([FINDING, FINDING])]),
    "alerts": (Alert.from_json, [ALERT.to_json()]),
    "alert retries": (lambda value: AlertRetry.from_json(value, NOW), [AlertRetry(ALERT, "slack", 2, NOW).to_json()]),
    "sampled calls": (SampledCall.from_json, [SampledCall(CALL, "high-risk").to_json()]),
    "log join": (
        lambda value: join_offer(TRACE.encode(), value),
        [
            json.dumps({"span": CALL.to_dict(), "awaits_facts": True}).encode(),
            json.dumps({"records": {SPAN: [GenAIRecord("gen_ai.choice", 1, {"a": "b"}, {}).to_dict()]}}).encode(),
            json.dumps({"trace_facts": [fact_dict(fact) for fact in FACTS]}).encode(),
        ],
    ),
    "spans": (decode_traces, [encode_traces_json(example_traces()[0])]),
    "logs": (lambda value: genai_records(decode_logs(value)), [_telemetry_logs()]),
}

HOSTILE = st.one_of(
    st.just(float("nan")),
    st.just(float("inf")),
    st.integers(min_value=2**64, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-(2**63) - 1),
    st.just("\ud800"),
    st.just([[[[[[[[]]]]]]]]),
    st.just({"a": {"b": {"c": {"d": []}}}}),
    st.none(),
    st.booleans(),
    st.integers(-5, 300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "0" * 32, "zz", TRACE.upper(), "ab" * 8, "2026-13-45"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _decodes_or_refuses(decode: Callable[[bytes], Any], value: bytes) -> None:
    """``decode(value)`` returns a writable value or raises MalformedRecord; nothing else."""
    try:
        decoded = decode(value)
    except MalformedRecord:
        return
    for item in decoded if isinstance(decoded, list) else [decoded]:
        if isinstance(item, Finding | Alert | AlertRetry | SampledCall):
            form = item.to_json()  # a dict (findings) or the Kafka value
            strict = json.dumps(form if isinstance(form, dict) else json.loads(form), allow_nan=False)
            strict.encode()  # and valid UTF-8


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[path[0]] = _replaced(document[path[0]], path[1:], value)
    return copy


@pytest.mark.parametrize("name", DECODERS)
def test_valid_records_decode(name: str):
    decode, samples = DECODERS[name]
    for sample in samples:
        decode(sample)  # raises if the samples themselves were refused: the mutations would prove nothing


@pytest.mark.parametrize("name", DECODERS)
@fuzz(150)
@given(value=st.binary(max_size=512))
def test_any_bytes(name: str, value: bytes):
    _decodes_or_refuses(DECODERS[name][0], value)


@pytest.mark.parametrize("name", DECODERS)
@fuzz(300)
@given(data=st.data())
def test_valid_records_with_one_hostile_value_anywhere(name: str, data: st.DataObject):
    decode, samples = DECODERS[name]
    document = json.loads(data.draw(st.sampled_from(samples)))
    paths = _paths(document)
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    hostile = data.draw(HOSTILE)
    if data.draw(st.booleans()) and path:  # a key replaced instead of a value
        parent = _replaced(document, path[:-1], {data.draw(st.text(max_size=5)): hostile})
        document = parent
    else:
        document = _replaced(document, path, hostile)
    _decodes_or_refuses(decode, json.dumps(document).encode())  # NaN and Infinity as Python writes them


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize(
    "value",
    [
        b"[" * 200_000,
        b'{"a":' * 200_000,
        b"1e400",
        b"-Infinity",
        b"9" * 5000,
        b"\xff\xfe\x00",
        b'"\\udfff"',
        b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1),
    ],
    ids=["deep-arrays", "deep-objects", "1e400", "infinity", "5000-digits", "bad-utf8", "surrogate", "just-too-deep"],
)
def test_pathological_documents(name: str, value: bytes):
    _decodes_or_refuses(DECODERS[name][0], value)


def test_strict_json_refuses_what_python_would_take():
    for value in (b"NaN", b"[1e400]", b'{"a": "\\ud800"}', b"[" * 200_000):
        with pytest.raises(MalformedRecord):
            json_document(value)
    assert json_document(b"[" * MAX_NESTING + b"]" * MAX_NESTING) == json.loads(b"[" * MAX_NESTING + b"]" * MAX_NESTING)
