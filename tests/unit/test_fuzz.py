"""Hostile input: fuzzed and pathological messages through decoding, normalizing, detectors and rows.

Properties checked on every message: processing never raises and never reports an
internal error; whatever cannot be used is dead-lettered with a reason; every finding
has a finite score in [0, 1] and serializes to strict JSON and UTF-8 (as the worker
sends it to Kafka and ClickHouse); every ``llm_calls`` row encodes to UTF-8.
Pathological texts (long digit, space, name and token runs) go through the sentence
splitter, citation parser, number and name extractors and the redactor; a regex that
backtracks would blow the per-test timeout, which is what catches it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from detectors.confidence import ConfidenceConfig
from detectors.confidence.detector import ConfidenceDetector
from detectors.config import ModelBaseline
from detectors.contradiction import ContradictionConfig
from detectors.contradiction.detector import ContradictionDetector
from detectors.schema_violation import SchemaViolationConfig
from detectors.schema_violation.detector import SchemaViolationDetector
from detectors.sentinel import SentinelConfig
from detectors.sentinel.detector import SentinelDetector
from detectors.suite import DetectorSuite
from detectors.text.prose import parse_citations, split_sentences
from detectors.text.quantities import extract_claims, extract_names, extract_values
from pipeline.config.content_policy import STORE_ALL, ContentLimits, redact
from pipeline.ingest.otlp_traces import encode_traces_json
from pipeline.sinks.rows import finding_row, llm_call_row
from pipeline.spans.processor import BatchResult, InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import example_traces
from tests.fuzzing import fuzz

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MAX_CALL_CHARS = 20_000


DEAD_LETTER_KINDS = {"too_large", "undecodable", "malformed_span", "invalid_id"}
COUNTS = {"messages": 0, "texts": 0}


@pytest.fixture(scope="module", autouse=True)
def fuzz_counts() -> Iterator[None]:
    """How much the module fuzzed (run with -s to see it); the note on hostile input quotes it."""
    yield
    print(f"\nfuzzed messages: {COUNTS['messages']}, fuzzed texts: {COUNTS['texts']}")


PROCESSOR = SpanBatchProcessor(
    DetectorSuite(
        structural=[
            SchemaViolationDetector(
                SchemaViolationConfig(output_schemas={"extract": {"type": "object", "required": ["total"]}}), 0.5
            )
        ],
        content=[
            ContradictionDetector(ContradictionConfig(), 0.5),
            ConfidenceDetector(ConfidenceConfig(default_baseline=ModelBaseline(mean=1.0, stdev=0.5, n=10)), 0.5),
        ],
        sentinel=SentinelDetector(SentinelConfig(), 0.5),
    ),
    "fuzz",
    limits=ContentLimits(MAX_CALL_CHARS),
)


def process(*messages: InboundMessage) -> BatchResult:
    """Process like the worker and check the sink-side properties of everything that came out."""
    result = PROCESSOR.process(messages)
    COUNTS["messages"] += len(messages)
    for letter in result.dead_letters:
        assert letter.reason_kind in DEAD_LETTER_KINDS, letter.reason
        assert letter.reason and all(value for _, value in letter.headers())
    for record in result.findings:
        assert math.isfinite(record.score) and 0.0 <= record.score <= 1.0, record
        json.dumps(record, ensure_ascii=False, default=str, allow_nan=False).encode()  # strict JSON, valid UTF-8
        _encodes(finding_row(record, NOW))
    for call in result.llm_calls:
        _encodes(llm_call_row(call, STORE_ALL.llm_calls, NOW))
    return result


def _encodes(row: list[Any]) -> None:
    for value in row:
        for text in value.values() if isinstance(value, dict) else [value]:
            if isinstance(text, str):
                text.encode("utf-8")


def keyed(value: bytes) -> InboundMessage:
    return InboundMessage(b"0" * 32, value, "fuzz", 0, 0)


# --- bytes, truncated protobuf, arbitrary JSON ---------------------------------------------------

EXAMPLES = [trace.SerializeToString() for trace in example_traces()]


@fuzz(400)
@given(value=st.binary(max_size=4096), key=st.one_of(st.none(), st.binary(max_size=40)))
def test_random_bytes(value, key):
    process(InboundMessage(key, value))


@fuzz(300)
@given(data=st.data())
def test_truncated_and_corrupted_protobuf(data):
    message = bytearray(data.draw(st.sampled_from(EXAMPLES)))
    for _ in range(data.draw(st.integers(0, 4))):
        message[data.draw(st.integers(0, len(message) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(message)))
    process(keyed(bytes(message[:cut])), InboundMessage(None, bytes(message)))


JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=50),
    st.sampled_from(["", "0" * 32, "zz", "ab" * 8, "00" * 16]),
)  # fmt: skip
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@fuzz(300)
@given(data=st.data())
def test_otlp_json_documents(data):
    """Arbitrary JSON, and real OTLP/JSON with arbitrary values put in at arbitrary places."""
    document = json.loads(encode_traces_json(_parsed(data.draw(st.sampled_from(EXAMPLES)))))
    node: Any = document
    while isinstance(node, dict | list) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else list(range(len(node)))))
        if not isinstance(node[key], dict | list):
            break
        node = node[key]
    if isinstance(node, dict | list) and node:
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else list(range(len(node)))))
        node[key] = data.draw(JSON_VALUES)
    process(keyed(json.dumps(document).encode()), keyed(json.dumps(data.draw(JSON_VALUES)).encode()))


def _parsed(value: bytes) -> TracesData:
    traces = TracesData()
    traces.ParseFromString(value)
    return traces


# --- hostile LLM spans ------------------------------------------------------------------------------

PROTO_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)  # protobuf refuses surrogates
ANY_TEXT = st.text(max_size=300)  # JSON escapes may carry lone surrogates
NUMBERS = st.floats(allow_nan=True, allow_infinity=True)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", "", "x"]),
         "parts": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_call", "reasoning", "?"]),
                                                  "content": ANY_TEXT | JSON_VALUES,
                                                  "name": ANY_TEXT, "arguments": JSON_VALUES}), max_size=3),
         "finish_reason": st.sampled_from(["stop", "length", "tool_calls", ""])}
    ),
    max_size=3,
)  # fmt: skip
LOGPROBS = st.lists(
    st.fixed_dictionaries(
        {"token": ANY_TEXT, "logprob": NUMBERS,
         "top_logprobs": st.lists(st.fixed_dictionaries({"token": ANY_TEXT, "logprob": NUMBERS}), max_size=5)}
    ),
    max_size=30,
)  # fmt: skip
SCHEMAS = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["object", "string", 5, "nonsense"]),
         "properties": st.dictionaries(st.text(max_size=8), st.fixed_dictionaries(
             {"type": st.sampled_from(["string", "integer", "array"]),
              "pattern": st.sampled_from(["^(a+)+$", "(x)\\1", "[", "^[0-9]{3}$", "(?=a)"]),
              "minimum": NUMBERS}), max_size=3),
         "required": st.lists(st.text(max_size=8), max_size=3),
         "$ref": st.sampled_from(["#/nowhere", "http://127.0.0.1:9/schema", "#"])}
    ),
)  # fmt: skip
TOOLS = st.lists(st.fixed_dictionaries({"name": ANY_TEXT, "description": ANY_TEXT, "parameters": SCHEMAS}), max_size=3)


def _json(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    """JSON text of a value; lone surrogates become escapes, NaN and Infinity literals as Python writes them."""
    return strategy.map(lambda value: json.dumps(value, allow_nan=True))


JSON_ATTRIBUTES: dict[str, st.SearchStrategy[str]] = {
    "gen_ai.input.messages": _json(MESSAGES),
    "gen_ai.output.messages": _json(MESSAGES),
    "gen_ai.tool.definitions": _json(TOOLS),
    "halluwatch.response.logprobs": _json(LOGPROBS),
    "llm.response.tokens_json": _json(LOGPROBS),
    "rag.sources_json": _json(st.dictionaries(st.text(max_size=4), ANY_TEXT | JSON_VALUES, max_size=3)),
    "output.value": _json(JSON_VALUES | st.fixed_dictionaries({"choices": st.lists(JSON_VALUES, max_size=2)})),
    "llm.tools.0.tool.json_schema": _json(SCHEMAS),
    "llm.request.functions.0.parameters": _json(SCHEMAS),
    "gen_ai.tool.call.arguments": _json(JSON_VALUES),
}
TEXT_ATTRIBUTES = [
    "gen_ai.system_instructions", "gen_ai.prompt", "gen_ai.completion", "llm.response.content", "input.value",
    "gen_ai.prompt.0.content", "gen_ai.completion.0.content", "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.content", "retrieval.documents.0.document.content", "gen_ai.request.model",
    "gen_ai.prompt.0.role", "llm.request.functions.0.name", "gen_ai.completion.0.tool_calls.0.arguments",
]  # fmt: skip
MARKERS = [
    ("chat gpt", {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}),
    ("llm.chat", {"llm.operation": "extract"}),
    ("ChatCompletion", {"openinference.span.kind": "LLM"}),
    ("openai.chat", {"llm.request.type": "chat", "traceloop.span.kind": "llm"}),
]


@st.composite
def llm_spans(draw: st.DrawFn) -> Span:
    name, markers = draw(st.sampled_from(MARKERS))
    times = st.integers(0, 2**64 - 1)
    span = Span(name=name, trace_id=draw(st.sampled_from([b"\x01" * 16, b"", b"\x02" * 3])),
                span_id=draw(st.sampled_from([b"\x03" * 8, b"\x04"])),
                start_time_unix_nano=draw(times), end_time_unix_nano=draw(times))  # fmt: skip
    for key, value in markers.items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    for key in draw(st.lists(st.sampled_from(sorted(JSON_ATTRIBUTES)), max_size=4, unique=True)):
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=draw(JSON_ATTRIBUTES[key]))))
    for key in draw(st.lists(st.sampled_from(TEXT_ATTRIBUTES), max_size=4, unique=True)):
        span.attributes.append(KeyValue(key=key, value=draw(any_values())))
    for _ in range(draw(st.integers(0, 2))):
        event = span.events.add(name=draw(st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "gen_ai.x"])))
        event.attributes.append(KeyValue(key="content", value=draw(any_values())))
    return span


def any_values() -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        PROTO_TEXT.map(lambda text: AnyValue(string_value=text)),
        NUMBERS.map(lambda number: AnyValue(double_value=number)),
        st.integers(-(2**63), 2**63 - 1).map(lambda number: AnyValue(int_value=number)),
        st.booleans().map(lambda flag: AnyValue(bool_value=flag)),
        st.binary(max_size=20).map(lambda raw: AnyValue(bytes_value=raw)),
        st.just(AnyValue()),
    )
    return st.recursive(scalars, _containers, max_leaves=10)


def _containers(inner: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
    def array(values: list[AnyValue]) -> AnyValue:
        value = AnyValue()
        value.array_value.values.extend(values)
        return value

    def kvlist(items: dict[str, AnyValue]) -> AnyValue:
        value = AnyValue()
        value.kvlist_value.values.extend(KeyValue(key=k, value=v) for k, v in items.items())
        return value

    return st.lists(inner, max_size=3).map(array) | st.dictionaries(PROTO_TEXT, inner, max_size=3).map(kvlist)


def traces_of(*spans: Span) -> TracesData:
    traces = TracesData()
    scope = traces.resource_spans.add().scope_spans.add()
    scope.spans.extend(spans)
    return traces


@fuzz(250)
@given(spans=st.lists(llm_spans(), min_size=1, max_size=3))
def test_hostile_llm_spans(spans):
    traces = traces_of(*spans)
    process(keyed(traces.SerializeToString()), keyed(encode_traces_json(traces)))


# --- fixed hostile messages -----------------------------------------------------------------------


def _span(attributes: dict[str, Any], name: str = "chat gpt") -> Span:
    span = Span(name=name, trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    for key, value in {"gen_ai.operation.name": "chat", **attributes}.items():
        any_value = AnyValue(double_value=value) if isinstance(value, float) else AnyValue(string_value=value)
        span.attributes.append(KeyValue(key=key, value=any_value))
    return span


def _output(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def test_deep_nesting_is_refused_or_ignored():
    deep = traces_of(_span({}))  # built in place: copying a message this deep would parse it
    nested = deep.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="gen_ai.deep").value
    for _ in range(200):  # deeper than protobuf's decoder takes (100), within what its encoder writes
        nested = nested.kvlist_value.values.add(key="k").value
    nested.string_value = "x"
    result = process(keyed(deep.SerializeToString()))
    assert [letter.reason_kind for letter in result.dead_letters] == ["undecodable"]
    assert "MaxDepth" in result.dead_letters[0].reason
    deep_json = _span({"gen_ai.output.messages": "[" * 100_000 + "]" * 100_000, "gen_ai.input.messages": "{" * 50_000})
    result = process(keyed(traces_of(deep_json).SerializeToString()))
    assert len(result.llm_calls) == 1 and result.llm_calls[0].answer == ""  # the unreadable field is skipped


def test_huge_content_is_cut_and_the_findings_say_so():
    answer = "The total is 1,234 units. " * 80_000  # 2 MB
    span = _span({"gen_ai.output.messages": _output(answer), "gen_ai.system_instructions": "S" * 1_000_000})
    result = process(keyed(traces_of(span).SerializeToString()))
    (call,) = result.llm_calls
    assert len(call.answer) == MAX_CALL_CHARS and call.system_instructions == ""
    assert call.truncated == ("output_messages", "system_instructions")
    assert all(record.evidence["truncated"] == list(call.truncated) for record in result.findings)


def test_a_message_of_100k_spans():
    spans = [Span(name=f"SELECT {i}", trace_id=b"\x01" * 16, span_id=i.to_bytes(8, "big")) for i in range(1, 100_001)]
    spans += [_span({"gen_ai.output.messages": _output(f"Answer {i} is 42.")}) for i in range(100)]
    result = process(keyed(traces_of(*spans).SerializeToString()))
    assert result.spans == 100_100 and len(result.llm_calls) == 100 and not result.dead_letters


def test_invalid_utf8_and_lone_surrogates():
    value = traces_of(_span({"gen_ai.system_instructions": "caf\u00e9 ok"})).SerializeToString()
    broken = value.replace("é".encode(), b"\xff\xfe")
    result = process(keyed(broken))
    assert [letter.reason_kind for letter in result.dead_letters] == ["undecodable"]
    # JSON escapes in a JSON attribute decode to lone surrogates: they must never reach a sink.
    escaped = '[{"role": "assistant", "parts": [{"type": "text", "content": "bad \\ud800 end \\udfff"}]}]'
    result = process(keyed(traces_of(_span({"gen_ai.output.messages": escaped})).SerializeToString()))
    assert result.llm_calls[0].answer == "bad \ufffd end \ufffd"
    json_payload = encode_traces_json(traces_of(_span({}))).replace(b'"chat"', b'"ch\\ud800at"')
    assert process(keyed(json_payload)).dead_letters[0].reason_kind == "undecodable"


def test_nan_and_infinite_logprobs():
    tokens = (
        '[{"token": "The", "logprob": NaN, "top_logprobs": [{"token": "The", "logprob": NaN}, '
        '{"token": "A", "logprob": -Infinity}]}, {"token": " end", "logprob": Infinity, "top_logprobs": []}]'
    )
    spans = [
        _span({"gen_ai.output.messages": _output("The end."), "halluwatch.response.logprobs": tokens}),
        _span({"llm.response.content": "The end.", "llm.response.tokens_json": tokens}, name="llm.chat"),
        _span({"gen_ai.output.messages": _output("x"), "gen_ai.request.temperature": math.nan}),
    ]
    result = process(keyed(traces_of(*spans).SerializeToString()))
    assert len(result.llm_calls) == 3 and result.findings  # scores checked finite in process()


# --- pathological text ----------------------------------------------------------------------------

SIZE = 60_000
PATHOLOGICAL: dict[str, str] = {
    "digit run": "1" * SIZE,
    "digits and spaces": "1 " * (SIZE // 2),
    "citation then spaces": "a[1]" + " " * SIZE + "b",
    "open citation list": "[" + "1, " * (SIZE // 3),
    "repeated open citations": "[1," * (SIZE // 3),
    "number separators": "1,2.3-4/" * (SIZE // 8),
    "capitalised words": "A " * (SIZE // 2),
    "function-word names": "The " * (SIZE // 4) + "Zed",
    "names and numbers": "Ab 1 " * (SIZE // 5),
    "between ranges": "between 1 and " * (SIZE // 14),
    "months": "March 3, " * (SIZE // 9),
    "number words": "twenty-one " * (SIZE // 11),
    "no sentence end": "word " * (SIZE // 5),
    "newlines": "\n" * SIZE,
    "email-like": ("a" * 60 + "@") * (SIZE // 61),
    "dotted": "a." * (SIZE // 2),
    "token prefixes": "sk-" * (SIZE // 3),
    "bearer": "bearer " * (SIZE // 7),
    "card-like groups": "4111 " * (SIZE // 5),
    "phone-like groups": "(415) 555-" * (SIZE // 10),
    "private key header": "-----BEGIN PRIVATE KEY-----" * (SIZE // 27),
    "surrogates": "\ud800" * 1000 + "x",
}
TEXT_FUNCTIONS: dict[str, Callable[[str], object]] = {
    "split_sentences": lambda text: split_sentences(text, max_chars=400),
    "parse_citations": parse_citations,
    "extract_claims": extract_claims,
    "extract_names": lambda text: list(extract_names(text, extract_values(text))),
    "redact": redact,
}


@pytest.mark.timeout(120)  # each input runs in well under a second; a backtracking regex would hang
@pytest.mark.parametrize("function", sorted(TEXT_FUNCTIONS))
def test_pathological_text(function):
    for text in PATHOLOGICAL.values():
        TEXT_FUNCTIONS[function](text)
        COUNTS["texts"] += 1


TRICKY_TEXT = st.text(
    st.sampled_from(list("0123456789 .,;:-/[]【】()$%@+'\"\n\tAaBbMmJjTtsSkK-\u2013\u3002\ud800é")), max_size=2000
)


@fuzz(300)
@given(text=TRICKY_TEXT)
def test_text_offsets_hold_on_any_text(text):
    COUNTS["texts"] += 1
    for sentence in split_sentences(text, max_chars=50):
        assert text[sentence.start : sentence.end] == sentence.text and sentence.text.strip() == sentence.text
    values = extract_values(text)
    for mention in [*values, *extract_names(text, values), *extract_claims(text)]:
        assert text[mention.start : mention.end] == mention.text
    assert "@" not in redact(text) or "[email]" not in redact(redact(text))  # redaction is stable
    parse_citations(text)


# --- the schema registry ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [{"type": "nonsense"}, {"properties": 5}, {"required": "total"}, {"minimum": "zero"}, {"$defs": []}],
)
def test_invalid_configured_schemas_are_refused_naming_the_operation(schema):
    with pytest.raises(ValueError, match="output schema of operation 'extract'"):
        SchemaViolationConfig(output_schemas={"extract": schema})


@pytest.mark.timeout(60)
def test_a_backtracking_pattern_in_a_span_tool_schema_is_matched_in_linear_time():
    tools = json.dumps([{"name": "lookup", "parameters": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^(a+)+$"}}}}])  # fmt: skip
    call = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "name": "lookup", "arguments": {"code": "a" * 50_000 + "!"}}]}])  # fmt: skip
    result = process(keyed(traces_of(_span({"gen_ai.tool.definitions": tools, "gen_ai.output.messages": call}))
                           .SerializeToString()))  # fmt: skip
    (schema,) = [record for record in result.findings if record.detector == "schema_violation"]
    assert schema.flagged and "violates 'pattern'" in schema.summary
