from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from importlib import resources

import jsonschema
import pytest
import yaml
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from detectors.tool_outcome import ToolOutcomeConfig
from detectors.tool_outcome.detector import ToolOutcomeDetector
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_traces import attributes, iter_spans
from pipeline.tools.example_traces import (
    EXAMPLE_OUTPUT_SCHEMAS,
    EXAMPLES,
    LOG_EVENT_EXAMPLES,
    TOOL_DEFINITIONS,
    ConventionName,
    Example,
    example_log_event_telemetry,
    example_traces,
    mixed_traffic,
)
from pipeline.tools.example_traces.data import ExampleDataError, Row
from pipeline.tools.example_traces.examples import TOOL_TURN_CONVENTIONS, _examples
from pipeline.tools.example_traces.recording import recorded
from tests.unit.conftest import decode

# Attribute keys (or key prefixes ending in ".") each convention's LLM span must carry.
CONVENTION_KEYS = {
    ConventionName.GENAI: (
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
    ),
    ConventionName.OPENLLMETRY: (
        "llm.request.type",
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.1.content",
        "gen_ai.completion.0.finish_reason",
    ),
    ConventionName.OPENINFERENCE: (
        "openinference.span.kind",
        "llm.model_name",
        "llm.input_messages.0.message.role",
        "input.value",
        "output.value",
    ),
    ConventionName.SEED: ("llm.operation", "llm.response.content"),
}
TOOL_KEYS = {
    ConventionName.GENAI: "gen_ai.tool.definitions",
    ConventionName.OPENLLMETRY: "llm.request.functions.0.parameters",
    ConventionName.OPENINFERENCE: "llm.tools.0.tool.json_schema",
}


@pytest.fixture(scope="module")
def traces() -> list[TracesData]:
    return example_traces()


@pytest.fixture(scope="module")
def by_name(traces) -> dict[str, tuple[Example, TracesData]]:
    return {e.name: (e, t) for e, t in zip(EXAMPLES, traces, strict=True)}


def is_llm(span: Span) -> bool:
    return span.name in ("openai.chat", "ChatCompletion") or span.name.startswith(("chat ", "llm."))


def llm_span(example: Example, traces: TracesData) -> dict[str, object]:
    found = [attributes(sc.span.attributes) for sc in iter_spans(traces) if is_llm(sc.span)]
    assert len(found) == 1, example.name
    return found[0]


def test_log_event_examples_carry_their_content_only_in_log_records_of_the_llm_span():
    traces, logs = example_log_event_telemetry()
    records = [r for resource in logs.resource_logs for scope in resource.scope_logs for r in scope.log_records]
    for example, payload in zip(LOG_EVENT_EXAMPLES, traces, strict=True):
        attrs = llm_span(example, payload)
        assert attrs["gen_ai.operation.name"] == "chat"
        assert not any(key in attrs for key in ("gen_ai.input.messages", "gen_ai.output.messages"))
        (span,) = (sc.span for sc in iter_spans(payload) if is_llm(sc.span))
        mine = [record for record in records if record.span_id == span.span_id]
        assert all(record.trace_id == span.trace_id for record in mine)
        assert [record.event_name for record in mine] == [
            "gen_ai.system.message",
            "gen_ai.user.message",
            "gen_ai.choice",
        ]
        choice = mine[-1].body.kvlist_value.values
        message = next(kv.value for kv in choice if kv.key == "message").kvlist_value.values
        assert next(kv.value.string_value for kv in message if kv.key == "content") == example.answer


def test_one_trace_per_example_with_a_single_root(traces):
    assert len(traces) == len(EXAMPLES)
    trace_ids = set()
    for example, payload in zip(EXAMPLES, traces, strict=True):
        spans = [sc.span for sc in iter_spans(payload)]
        assert {s.trace_id for s in spans} == {spans[0].trace_id}
        roots = [s for s in spans if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].kind == Span.SPAN_KIND_SERVER, example.name
        assert all(s.parent_span_id == roots[0].span_id for s in spans if s is not roots[0])
        ran_after = [run for run in example.tool_call_runs if run is not None]
        assert len(spans) == 2 + bool(example.sources) + len(example.tool_results) + len(ran_after)
        assert {sc.resource["service.name"] for sc in iter_spans(payload)} == {example.service}
        trace_ids.add(spans[0].trace_id)
    assert len(trace_ids) == len(EXAMPLES)


def test_the_agent_runs_the_tools_the_model_called_after_the_call_under_the_calls_ids(by_name):
    example, payload = by_name["openinference_tool_bad_arguments"]
    spans = [sc.span for sc in iter_spans(payload)]
    (llm,) = [s for s in spans if is_llm(s)]
    runs = [s for s in spans if s.name.startswith("execute_tool")]
    assert [run.name for run in runs] == ["execute_tool search_docs", "execute_tool create_ticket"]
    assert all(run.start_time_unix_nano >= llm.end_time_unix_nano for run in runs)
    ids = [next(kv.value.string_value for kv in run.attributes if kv.key == "gen_ai.tool.call.id") for run in runs]
    assert ids == ["call_0", "call_1"]
    results = [
        next(kv.value.string_value for kv in run.attributes if kv.key == "gen_ai.tool.call.result") for run in runs
    ]
    assert results == [run.result for run in example.tool_call_runs if run is not None]


def test_every_convention_is_covered_with_its_attribute_keys(traces):
    assert set(Counter(e.convention for e in EXAMPLES + LOG_EVENT_EXAMPLES)) == set(ConventionName)
    for example, payload in zip(EXAMPLES, traces, strict=True):
        attrs = llm_span(example, payload)
        assert set(CONVENTION_KEYS[example.convention]) <= attrs.keys(), example.name
        if example.tools:
            assert TOOL_KEYS[example.convention] in attrs


def test_genai_messages_are_json_with_parts_and_finish_reason(by_name):
    attrs = llm_span(*by_name["genai_tool_unknown_name"])
    (output,) = json.loads(str(attrs["gen_ai.output.messages"]))
    assert output["finish_reason"] == "tool_call"
    assert output["parts"][0] == {
        "type": "tool_call",
        "id": "call_0",
        "name": "search_documents",
        "arguments": {"query": "webhook retries"},
    }
    names = [tool["name"] for tool in json.loads(str(attrs["gen_ai.tool.definitions"]))]
    assert names == ["search_docs", "create_ticket"]


def test_retrieval_documents_per_convention(by_name):
    _, payload = by_name["openinference_rag_invented_facts"]
    retriever = next(attributes(sc.span.attributes) for sc in iter_spans(payload) if sc.span.name == "retrieve")
    assert retriever["openinference.span.kind"] == "RETRIEVER"
    assert "12 hours" in str(retriever["retrieval.documents.0.document.content"])
    _, payload = by_name["genai_rag_invented_facts"]
    retrieval = next(
        attributes(sc.span.attributes) for sc in iter_spans(payload) if sc.span.name.startswith("retrieval")
    )
    assert [d["id"] for d in json.loads(str(retrieval["gen_ai.retrieval.documents"]))] == ["eiffel-1", "eiffel-2"]


@pytest.mark.parametrize("convention", sorted(TOOL_TURN_CONVENTIONS))
def test_an_agent_turn_reaches_the_detectors_in_every_layout_that_writes_one(by_name, convention):
    example, _ = by_name["genai_agent_claims_failed_booking"]
    (payload,) = recorded([replace(example, convention=convention)], 0)
    spans = decode(payload.SerializeToString())
    (tool_span,) = [ctx.span for ctx in spans if ctx.span.name == "execute_tool book_table"]
    assert tool_span.status.code == tool_span.status.STATUS_CODE_ERROR
    (call,) = [call for ctx in spans if (call := normalize_span(ctx)) is not None]
    (booking,) = [message for message in call.input_messages if message.tool_calls]
    assert [(t.name, t.arguments) for t in booking.tool_calls] == [("book_table", example.tool_results[0].arguments)]
    assert [s.text for s in call.sources] == [example.tool_results[0].result]
    (result,) = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch([call])
    assert result.flagged and result.severity == 4, result.summary


def test_tool_results_only_in_layouts_that_write_them():
    row = {"name": "x", "convention": "seed", "service": "s", "question": "q",
           "tool_results": [{"name": "t", "arguments": "{}", "result": "ok"}]}  # fmt: skip
    with pytest.raises(ExampleDataError, match=r"tool_results: not written in the seed layout"):
        _examples([row], "examples", {}, TOOL_DEFINITIONS)


def test_seed_convention_sources_and_logprobs(by_name):
    example, payload = by_name["seed_rag_cited_invented"]
    attrs = llm_span(example, payload)
    assert set(json.loads(str(attrs["rag.sources_json"]))) == {"1", "2"}
    tokens = json.loads(str(attrs["llm.response.tokens_json"]))
    assert "".join(t["token"] for t in tokens) == example.answer
    assert all(t["top_logprobs"][0] == {"token": t["token"], "logprob": t["logprob"]} for t in tokens)


def schema_errors(example: Example) -> list[str]:
    """What a schema & tool-call detector must find, computed independently with jsonschema."""
    errors = []
    for name, arguments in example.tool_calls:
        if name not in example.tools:
            errors.append(f"unknown tool {name}")
            continue
        validator = jsonschema.Draft202012Validator(TOOL_DEFINITIONS[name].parameters)
        errors += [e.message for e in validator.iter_errors(json.loads(arguments))]
    schema = EXAMPLE_OUTPUT_SCHEMAS.get(example.operation)
    if schema is not None:
        try:
            answer = json.loads(example.answer)
        except json.JSONDecodeError as exc:
            return [f"invalid JSON: {exc}"]
        errors += [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(answer)]
    return errors


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_schema_violation_labels_match_the_content(example):
    assert bool(schema_errors(example)) == (example.schema_violation is not None)


def test_enough_positive_and_negative_examples_for_the_schema_detector():
    flagged = [e for e in EXAMPLES if e.schema_violation]
    assert len(flagged) >= 4
    assert len(EXAMPLES) - len(flagged) >= 4
    assert any(e.finish_reason == "length" for e in flagged)
    assert any(e.hallucinated and not e.schema_violation for e in EXAMPLES)


@pytest.mark.parametrize(
    ("row", "key", "kind", "error"),
    [
        ({"name": "x", "answr": "y"}, "name", str, r"examples\[3\]: unknown keys \['answr'\]"),
        ({"name": 7}, "name", str, r"examples\[3\]\.name: expected str, got 7"),
        ({"confidence": True}, "confidence", float, r"examples\[3\]\.confidence: expected float, got True"),
        ({}, "name", str, r"examples\[3\]: missing 'name'"),
    ],
)
def test_data_file_mistakes_fail_naming_their_place(row, key, kind, error):
    with pytest.raises(ExampleDataError, match=error), Row(row, "examples.yaml examples[3]") as reader:
        reader.need(key, kind)


def test_tool_parameters_are_valid_draft_2020_12():
    for tool in TOOL_DEFINITIONS.values():
        jsonschema.Draft202012Validator.check_schema(tool.parameters)


def _nulls(value: object, where: str) -> list[str]:
    """Where ``value`` holds a null: in these files, the tail of a flow map split at an unquoted comma."""
    if isinstance(value, dict):
        items = [(f"{where}.{key}", item) for key, item in value.items()]
    elif isinstance(value, list):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    else:
        return []
    return [path for path, item in items if item is None] + [n for path, item in items for n in _nulls(item, path)]


def test_no_example_data_file_holds_a_null_from_a_comma_in_a_flow_map():
    files = [f for f in resources.files("pipeline.tools.example_traces").iterdir() if f.name.endswith(".yaml")]
    assert len(files) >= 5
    for file in files:
        assert _nulls(yaml.safe_load(file.read_text("utf-8")), file.name) == []


def test_every_description_in_the_tool_schemas_is_the_whole_sentence():
    time = TOOL_DEFINITIONS["book_table"].parameters["properties"]["time"]
    assert time == {"type": "string", "description": "Local time, HH:MM."}
    for tool in TOOL_DEFINITIONS.values():
        for name, schema in tool.parameters["properties"].items():
            assert set(schema) <= {"type", "description", "enum", "minimum", "maximum"}, (tool.name, name)
            assert isinstance(schema.get("description", ""), str)


def test_output_schemas_are_valid_draft_2020_12():
    for schema in EXAMPLE_OUTPUT_SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    assert {e.operation for e in EXAMPLES if e.convention is ConventionName.SEED} >= set(EXAMPLE_OUTPUT_SCHEMAS)


def test_mixed_traffic_counts_and_ratio():
    traffic = list(mixed_traffic(50, spans_per_trace=20, llm_spans_per_trace=2, seed=3))
    assert len(traffic) == 50
    trace_ids = set()
    for payload in traffic:
        spans = [sc.span for sc in iter_spans(payload)]
        assert len(spans) == 20
        assert sum(map(is_llm, spans)) == 2
        assert len({s.trace_id for s in spans}) == 1
        assert len({s.span_id for s in spans}) == 20
        (root,) = [s for s in spans if not s.parent_span_id]
        assert root.kind == Span.SPAN_KIND_SERVER
        assert all(s.end_time_unix_nano > s.start_time_unix_nano >= root.start_time_unix_nano for s in spans)
        trace_ids.add(spans[0].trace_id)
    assert len(trace_ids) == 50


def test_mixed_traffic_ids_follow_the_seed():
    def ids(seed: int) -> list[bytes]:
        return [sc.span.span_id for t in mixed_traffic(3, spans_per_trace=4, seed=seed) for sc in iter_spans(t)]

    assert ids(1) == ids(1)
    assert ids(1) != ids(2)


def test_mixed_traffic_draws_llm_spans_from_every_convention():
    names = {sc.span.name for t in mixed_traffic(200, spans_per_trace=2) for sc in iter_spans(t) if is_llm(sc.span)}
    assert {"openai.chat", "ChatCompletion", "chat gpt-4o-mini", "llm.extract_order"} <= names


@pytest.mark.parametrize(("spans", "llm"), [(1, 1), (5, 5), (5, -1)])
def test_mixed_traffic_rejects_traces_without_a_root(spans, llm):
    with pytest.raises(ValueError, match="llm_spans_per_trace"):
        next(mixed_traffic(1, spans_per_trace=spans, llm_spans_per_trace=llm))
