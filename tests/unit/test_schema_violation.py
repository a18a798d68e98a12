"""Schema & tool-call violation detector (docs/detectors.md): every violation kind, no false flags."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from detectors.base import Detector, DetectorResult, DetectorStatus, run_detector
from detectors.llm_call import LLMCall, Message, ToolCall, ToolDefinition
from detectors.schema_violation import SchemaViolationConfig, ToolSpec
from detectors.schema_violation.detector import MAX_VIOLATIONS, SchemaViolationDetector

SEARCH_DOCS = ToolDefinition(
    name="search_docs",
    description="Full-text search over the knowledge base.",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "sort": {"type": "string", "enum": ["relevance", "date"]},
        },
        "required": ["query"],
    },
)
GET_WEATHER = ToolSpec(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"const": "celsius"}},
        "required": ["city"],
    },
)
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "integer", "minimum": 1}},
    },
    "required": ["answer", "citations"],
}
VALID_ANSWER = '{"answer": "The tower is 330 m tall.", "citations": [1]}'


def make_call(
    answer: str = "",
    *,
    tool_calls: tuple[ToolCall, ...] = (),
    definitions: tuple[ToolDefinition, ...] = (),
    operation: str = "chat",
    span_name: str = "chat gpt-4o",
    finish_reason: str | None = "stop",
    span_id: str = "b" * 16,
) -> LLMCall:
    return LLMCall(
        trace_id="a" * 32,
        span_id=span_id,
        parent_span_id=None,
        service="support-bot",
        span_name=span_name,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        convention="gen_ai",
        operation=operation,
        input_messages=(Message(role="user", text="How tall is the Eiffel tower?"),),
        output_messages=(Message(role="assistant", text=answer, tool_calls=tool_calls, finish_reason=finish_reason),),
        tool_definitions=definitions,
    )


def tool_call(name: str, arguments: dict[str, Any] | str | None) -> ToolCall:
    return ToolCall(name=name, arguments=json.dumps(arguments) if isinstance(arguments, dict) else arguments)


def detector(
    output_schemas: dict[str, dict[str, Any]] | None = None,
    tools: list[ToolSpec] | None = None,
    threshold: float = 0.5,
) -> SchemaViolationDetector:
    config = SchemaViolationConfig(output_schemas=output_schemas or {}, tools=tools or [])
    return SchemaViolationDetector(config, threshold=threshold)


def detect(call: LLMCall, **kwargs: Any) -> DetectorResult:
    (result,) = detector(**kwargs).detect_batch([call])
    json.dumps(result.evidence, allow_nan=False)  # evidence is always storable
    return result


def violations(result: DetectorResult) -> list[dict[str, str]]:
    found: list[dict[str, str]] = result.evidence["violations"]
    return found


def kinds(result: DetectorResult) -> list[str]:
    return [violation["kind"] for violation in violations(result)]


def check_tool(
    arguments: dict[str, Any] | str | None,
    name: str = "search_docs",
    definition: ToolDefinition = SEARCH_DOCS,
) -> DetectorResult:
    return detect(make_call(tool_calls=(tool_call(name, arguments),), definitions=(definition,)))


# --- tool calls --------------------------------------------------------------------------


def test_valid_tool_call_is_checked_and_not_flagged() -> None:
    result = check_tool({"query": "eiffel tower height", "limit": 5, "sort": "date"})
    assert result.status is DetectorStatus.OK
    assert (result.score, result.flagged, result.severity) == (0.0, False, 0)
    assert result.evidence["checked"] == {"output_schema": False, "tool_calls": 1}
    assert violations(result) == []


def test_unknown_tool_suggests_the_closest_name() -> None:
    result = check_tool({"query": "x"}, name="search_documents")
    assert (result.score, result.flagged, result.severity) == (1.0, True, 4)
    assert result.summary == "tool 'search_documents' is not defined (did you mean 'search_docs'?)"
    assert violations(result) == [
        {
            "kind": "unknown_tool",
            "tool": "search_documents",
            "suggestion": "search_docs",
            "message": result.summary,
        }
    ]


def test_unknown_tool_without_a_close_name_lists_the_known_ones() -> None:
    result = check_tool({}, name="delete_database")
    (violation,) = violations(result)
    assert violation["kind"] == "unknown_tool"
    assert "suggestion" not in violation
    assert violation["message"] == "tool 'delete_database' is not defined (known: search_docs)"


@pytest.mark.parametrize("arguments", ['{"query": "x"', "not json", "[1, 2]", '"a string"', "null"])
def test_arguments_that_are_not_a_json_object(arguments: str) -> None:
    result = check_tool(arguments)
    (violation,) = violations(result)
    assert violation["kind"] == "invalid_arguments_json"
    assert violation["tool"] == "search_docs"
    assert violation["value"] == arguments
    assert result.flagged


def test_missing_required_parameter() -> None:
    result = check_tool({"limit": 3})
    assert violations(result) == [
        {
            "kind": "missing_parameter",
            "tool": "search_docs",
            "parameter": "query",
            "path": "$.query",
            "message": "tool 'search_docs': missing required parameter 'query'",
        }
    ]


def test_every_missing_parameter_is_reported_once() -> None:
    definition = ToolDefinition(
        name="book",
        parameters={"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]},
    )
    result = check_tool({}, "book", definition)
    assert [v["parameter"] for v in violations(result)] == ["a", "b"]
    assert result.evidence["violation_count"] == 2


def test_wrong_type() -> None:
    (violation,) = violations(check_tool({"query": "x", "limit": "5"}))
    assert violation["kind"] == "wrong_type"
    assert (violation["parameter"], violation["path"], violation["value"]) == ("limit", "$.limit", '"5"')
    assert violation["message"] == "tool 'search_docs': $.limit should be integer, got string"


@pytest.mark.parametrize(("limit", "phrase"), [(0, "below the minimum 1"), (500, "above the maximum 50")])
def test_out_of_range(limit: int, phrase: str) -> None:
    (violation,) = violations(check_tool({"query": "x", "limit": limit}))
    assert violation["kind"] == "out_of_range"
    assert violation["parameter"] == "limit"
    assert violation["value"] == str(limit)
    assert phrase in violation["message"]


def test_exclusive_bounds_are_out_of_range() -> None:
    definition = ToolDefinition(
        name="set_temperature",
        parameters={"type": "object", "properties": {"t": {"type": "number", "exclusiveMinimum": 0}}},
    )
    result = check_tool({"t": 0}, "set_temperature", definition)
    assert kinds(result) == ["out_of_range"]
    assert "must be greater than 0" in result.summary


def test_not_in_enum() -> None:
    (violation,) = violations(check_tool({"query": "x", "sort": "newest"}))
    assert violation["kind"] == "not_in_enum"
    assert violation["value"] == '"newest"'
    assert violation["message"] == 'tool \'search_docs\': $.sort = "newest" is not one of ["relevance","date"]'


def test_const_counts_as_enum() -> None:
    call = make_call(tool_calls=(tool_call("get_weather", {"city": "Paris", "unit": "kelvin"}),))
    assert kinds(detect(call, tools=[GET_WEATHER])) == ["not_in_enum"]


def test_other_keywords_are_reported_as_other() -> None:
    definition = ToolDefinition(
        name="lookup",
        parameters={
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}},
        },
    )
    result = check_tool({"sku": "abc"}, "lookup", definition)
    (violation,) = violations(result)
    assert (violation["kind"], violation["parameter"]) == ("other", "sku")
    assert "'pattern'" in violation["message"]


def test_nested_violations_carry_their_json_path() -> None:
    definition = ToolDefinition(
        name="filter",
        parameters={
            "type": "object",
            "properties": {
                "rules": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"field name": {"type": "string"}}},
                }
            },
        },
    )
    arguments = {"rules": [{"field name": "a"}, {"field name": 7}]}
    result = check_tool(arguments, "filter", definition)
    (violation,) = violations(result)
    assert violation["path"] == '$.rules[1]["field name"]'
    assert violation["parameter"] == "rules"


class TestUnknownParameter:
    def test_reported_when_the_schema_lists_properties(self) -> None:
        (violation,) = violations(check_tool({"query": "x", "page": 2}))
        assert violation == {
            "kind": "unknown_parameter",
            "tool": "search_docs",
            "parameter": "page",
            "path": "$.page",
            "value": "2",
            "message": "tool 'search_docs': unknown parameter 'page'",
        }

    @pytest.mark.parametrize(
        "extra_keywords",
        [
            {"additionalProperties": True},
            {"additionalProperties": {"type": "integer"}},
            {"patternProperties": {"^pa": {"type": "integer"}}},
            {"allOf": [{"properties": {"page": {"type": "integer"}}}]},
        ],
    )
    def test_schema_that_admits_more_is_respected(self, extra_keywords: dict[str, Any]) -> None:
        parameters = {"type": "object", "properties": {"query": {"type": "string"}}, **extra_keywords}
        definition = ToolDefinition(name="search_docs", parameters=parameters)
        assert violations(check_tool({"query": "x", "page": 2}, definition=definition)) == []

    def test_explicit_false_with_pattern_properties_reports_only_unmatched_keys(self) -> None:
        parameters = {
            "type": "object",
            "properties": {"query": {}},
            "patternProperties": {"^x-": {}},
            "additionalProperties": False,
        }
        definition = ToolDefinition(name="search_docs", parameters=parameters)
        result = check_tool({"query": "q", "x-trace": 1, "page": 2}, definition=definition)
        assert [v["parameter"] for v in violations(result)] == ["page"]

    def test_not_reported_when_the_schema_lists_no_properties(self) -> None:
        definition = ToolDefinition(name="anything", parameters={"type": "object"})
        assert violations(check_tool({"whatever": 1}, "anything", definition)) == []


class TestRegistry:
    def test_config_tools_are_used_when_the_span_has_no_definitions(self) -> None:
        call = make_call(tool_calls=(tool_call("get_weather", {"city": "Paris"}),))
        result = detect(call, tools=[GET_WEATHER])
        assert (result.status, result.flagged) == (DetectorStatus.OK, False)
        assert result.evidence["checked"]["tool_calls"] == 1

    def test_span_and_config_tools_are_merged(self) -> None:
        calls = (tool_call("get_weather", {"city": "Paris"}), tool_call("search_docs", {"query": "q"}))
        result = detect(make_call(tool_calls=calls, definitions=(SEARCH_DOCS,)), tools=[GET_WEATHER])
        assert (result.flagged, result.evidence["checked"]["tool_calls"]) == (False, 2)

    def test_span_definition_wins_a_name_clash(self) -> None:
        config_version = ToolSpec(
            name="search_docs", parameters={"type": "object", "properties": {"q": {}}, "required": ["q"]}
        )
        call = make_call(tool_calls=(tool_call("search_docs", {"query": "x"}),), definitions=(SEARCH_DOCS,))
        assert violations(detect(call, tools=[config_version])) == []

    def test_no_definitions_anywhere_means_tool_calls_cannot_be_checked(self) -> None:
        result = detect(make_call(tool_calls=(tool_call("search_documents", {"q": 1}),)))
        assert (result.status, result.score, result.flagged) == (DetectorStatus.SKIPPED, 0.0, False)

    def test_definition_without_parameters_checks_the_name_only(self) -> None:
        definition = ToolDefinition(name="ping")
        calls = (tool_call("ping", "{not json"), tool_call("pong", {}))
        result = detect(make_call(tool_calls=calls, definitions=(definition,)))
        assert kinds(result) == ["unknown_tool"]
        assert result.evidence["checked"]["tool_calls"] == 2

    def test_arguments_not_recorded_are_not_checked(self) -> None:
        assert violations(check_tool(None)) == []

    def test_empty_arguments_mean_an_empty_object(self) -> None:
        assert kinds(check_tool("")) == ["missing_parameter"]

    def test_tool_calls_of_every_output_choice_are_checked(self) -> None:
        call = make_call(tool_calls=(tool_call("search_docs", {"query": "q"}),), definitions=(SEARCH_DOCS,))
        second = Message(role="assistant", tool_calls=(tool_call("search_documents", {}),))
        call = replace(call, output_messages=(*call.output_messages, second))
        result = detect(call)
        assert (kinds(result), result.evidence["checked"]["tool_calls"]) == (["unknown_tool"], 2)


class TestUntrustedSpanSchemas:
    @pytest.mark.parametrize(
        "parameters",
        [
            {"type": "object", "properties": {"q": {"type": "no-such-type"}}, "required": ["q"]},
            {"type": "object", "properties": {"q": {"type": "string", "pattern": "(unclosed"}}},
            {"type": 42},
            {"properties": "not a mapping"},
        ],
    )
    def test_invalid_schema_means_parameters_cannot_be_checked(self, parameters: dict[str, Any]) -> None:
        definition = ToolDefinition(name="search", parameters=parameters)
        calls = (tool_call("search", {"q": 1, "extra": True}), tool_call("serch", {}))
        result = detect(make_call(tool_calls=calls, definitions=(definition,)))
        assert kinds(result) == ["unknown_tool"]  # the name is still checked
        assert violations(result)[0]["suggestion"] == "search"

    def test_remote_ref_is_never_fetched(self, monkeypatch: pytest.MonkeyPatch) -> None:
        connections: list[object] = []

        def no_network(*args: object, **kwargs: object) -> None:
            connections.append(args)  # recorded: the detector would swallow an exception
            raise OSError("no network in unit tests")

        monkeypatch.setattr(socket, "create_connection", no_network)
        definition = ToolDefinition(
            name="search",
            parameters={
                "type": "object",
                "properties": {"q": {"$ref": "https://schemas.example.com/q.json"}},
            },
        )
        result = check_tool({"q": 1}, "search", definition)
        assert (result.status, violations(result), connections) == (DetectorStatus.OK, [], [])

    def test_non_dict_mapping_and_odd_values_do_not_crash(self) -> None:
        parameters = MappingProxyType({"type": "object", "properties": MappingProxyType({"q": {"type": "string"}})})
        definition = ToolDefinition(name="search", parameters=parameters)
        result = check_tool({"q": 1}, "search", definition)
        assert kinds(result) == ["wrong_type"]

    def test_same_definition_on_many_spans_is_compiled_once(self) -> None:
        det = detector()
        call = make_call(tool_calls=(tool_call("search_docs", {"query": "q"}),), definitions=(SEARCH_DOCS,))
        det.detect_batch([call])
        compiled = det._schemas._span_tools.cache_info()
        det.detect_batch([call] * 50)
        assert det._schemas._span_tools.cache_info().misses == compiled.misses == 1
        det.close()
        assert det._schemas._span_tools.cache_info().currsize == 0


# --- structured output --------------------------------------------------------------------


def check_answer(answer: str, finish_reason: str | None = "stop") -> DetectorResult:
    call = make_call(answer, operation="answer_with_citations", finish_reason=finish_reason)
    return detect(call, output_schemas={"answer_with_citations": ANSWER_SCHEMA})


def test_valid_structured_output() -> None:
    result = check_answer(VALID_ANSWER)
    assert (result.status, result.score, result.flagged) == (DetectorStatus.OK, 0.0, False)
    assert result.evidence["checked"] == {"output_schema": True, "tool_calls": 0}


@pytest.mark.parametrize(
    "answer",
    [
        f"```json\n{VALID_ANSWER}\n```",
        f"```\n{VALID_ANSWER}\n```",
        f"Here is the result:\n```JSON\n{VALID_ANSWER}\n```\nAnything else?",
    ],
)
def test_fenced_json_is_tolerated(answer: str) -> None:
    assert check_answer(answer).flagged is False


def test_every_schema_error_is_reported_with_its_path() -> None:
    result = check_answer('{"answer": 42, "citations": [0, "two"]}')
    assert result.flagged
    assert [(v["kind"], v["path"]) for v in violations(result)] == [
        ("output_schema", "$.answer"),
        ("output_schema", "$.citations[0]"),
        ("output_schema", "$.citations[1]"),
    ]
    assert result.summary == "answer: $.answer should be string, got integer (+2 more)"


def test_missing_output_property() -> None:
    (violation,) = violations(check_answer('{"answer": "x"}'))
    assert violation == {
        "kind": "output_schema",
        "path": "$.citations",
        "message": "answer: missing required property 'citations'",
    }


def test_unparseable_output() -> None:
    result = check_answer("The tower is 330 m tall [1].")
    (violation,) = violations(result)
    assert violation["kind"] == "output_not_json"
    assert violation["message"].startswith("answer: not valid JSON (Expecting value at line 1 column 1")
    assert result.flagged


@pytest.mark.parametrize("answer", ['{"answer": "The tower is 33', '```json\n{"answer": "The tower is 33'])
def test_truncated_output_is_named_as_such(answer: str) -> None:
    result = check_answer(answer, finish_reason="length")
    assert kinds(result) == ["output_truncated"]
    assert result.summary == "answer: truncated JSON (finish_reason=length)"


@pytest.mark.parametrize("answer", ["", "   \n"])
def test_empty_answer_is_not_checked(answer: str) -> None:
    result = check_answer(answer)
    assert (result.status, result.flagged) == (DetectorStatus.SKIPPED, False)


def test_schema_is_matched_on_operation_then_span_name() -> None:
    schemas = {"chat": {"type": "object"}, "summarise": {"type": "array"}}
    by_operation = make_call("[]", operation="chat", span_name="summarise")
    by_span_name = make_call("[]", operation="", span_name="summarise")
    unmatched = make_call("[]", operation="embeddings", span_name="embed")
    results = detector(output_schemas=schemas).detect_batch([by_operation, by_span_name, unmatched])
    assert [(r.status, r.flagged) for r in results] == [
        (DetectorStatus.OK, True),
        (DetectorStatus.OK, False),
        (DetectorStatus.SKIPPED, False),
    ]


def test_unresolvable_ref_in_config_schema_means_not_checked() -> None:
    schemas = {"chat": {"$ref": "https://schemas.example.com/answer.json"}}
    assert detect(make_call("{}"), output_schemas=schemas).status is DetectorStatus.SKIPPED


def test_pathologically_nested_answer_does_not_raise() -> None:
    result = check_answer("[" * 100_000 + "]" * 100_000)
    assert kinds(result) == ["output_not_json"]


def test_non_english_text() -> None:
    valid = check_answer('{"answer": "埃菲尔铁塔高330米。", "citations": [1]}')
    assert (valid.status, valid.flagged) == (DetectorStatus.OK, False)
    prose = check_answer("埃菲尔铁塔高330米。【1】")
    assert kinds(prose) == ["output_not_json"]
    wrong = check_answer('{"answer": ["Der Turm ist 330 m hoch."], "citations": [1]}')
    assert violations(wrong)[0]["value"] == '["Der Turm ist 330 m hoch."]'
    unicode_tool = check_tool({"query": "высота башни", "sort": "дата"})
    assert violations(unicode_tool)[0]["value"] == '"дата"'


# --- result, config, batch -----------------------------------------------------------------


def test_output_and_tool_violations_are_reported_together() -> None:
    call = make_call(
        '{"answer": 1, "citations": []}',
        operation="answer_with_citations",
        tool_calls=(tool_call("search_documents", {}),),
        definitions=(SEARCH_DOCS,),
    )
    result = detect(call, output_schemas={"answer_with_citations": ANSWER_SCHEMA})
    assert kinds(result) == ["output_schema", "unknown_tool"]
    assert result.evidence["checked"] == {"output_schema": True, "tool_calls": 1}


def test_nothing_to_check_is_skipped() -> None:
    result = detect(make_call("Paris."))
    assert result.status is DetectorStatus.SKIPPED
    assert (result.score, result.flagged, result.severity) == (0.0, False, 0)


def test_evidence_is_capped() -> None:
    calls = tuple(tool_call(f"unknown_{i}", {}) for i in range(MAX_VIOLATIONS + 15))
    result = detect(make_call(tool_calls=calls, definitions=(SEARCH_DOCS,)))
    assert len(violations(result)) == MAX_VIOLATIONS
    assert result.evidence["violation_count"] == MAX_VIOLATIONS + 15
    assert result.summary.endswith(f"(+{MAX_VIOLATIONS + 14} more)")


def test_huge_values_are_truncated_in_evidence() -> None:
    (violation,) = violations(check_tool({"query": "x", "sort": "z" * 10_000}))
    assert len(violation["value"]) <= 200
    assert len(violation["message"]) < 500


def test_threshold_decides_the_flag() -> None:
    call = make_call(tool_calls=(tool_call("search_documents", {}),), definitions=(SEARCH_DOCS,))
    strict = detect(call, threshold=1.0)
    assert (strict.flagged, strict.threshold) == (True, 1.0)
    skipped = detect(make_call("Paris."), threshold=0.0)
    assert skipped.flagged is False


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_threshold_out_of_range_is_rejected(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        detector(threshold=threshold)


def test_invalid_output_schema_in_config_names_the_operation() -> None:
    with pytest.raises(ValueError, match="output schema of operation 'answer_with_citations'"):
        SchemaViolationConfig(output_schemas={"answer_with_citations": {"type": "strnig"}})


def test_invalid_tool_schema_in_config_names_the_tool() -> None:
    with pytest.raises(ValueError, match="parameters of tool 'get_weather'"):
        SchemaViolationConfig.model_validate(
            {"tools": [{"name": "get_weather", "parameters": {"properties": {"city": {"minimum": "zero"}}}}]}
        )


def test_duplicate_and_unknown_config_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="more than once: get_weather"):
        SchemaViolationConfig(tools=[GET_WEATHER, GET_WEATHER])
    with pytest.raises(ValueError, match="output_schema"):
        SchemaViolationConfig.model_validate({"output_schema": {}})


def test_batch_order_is_preserved() -> None:
    good = make_call(
        tool_calls=(tool_call("search_docs", {"query": "q"}),), definitions=(SEARCH_DOCS,), span_id="1" * 16
    )
    bad = make_call(tool_calls=(tool_call("search_documents", {}),), definitions=(SEARCH_DOCS,), span_id="2" * 16)
    plain = make_call("Paris.", span_id="3" * 16)
    results = detector().detect_batch([bad, good, plain, bad])
    assert [(r.status, r.flagged) for r in results] == [
        (DetectorStatus.OK, True),
        (DetectorStatus.OK, False),
        (DetectorStatus.SKIPPED, False),
        (DetectorStatus.OK, True),
    ]


def test_run_detector_wraps_it() -> None:
    det: Detector = detector(output_schemas={"answer_with_citations": ANSWER_SCHEMA})
    calls = [
        make_call("not json", operation="answer_with_citations"),
        make_call(tool_calls=(tool_call("search_docs", "{bad"),), definitions=(SEARCH_DOCS,)),
    ]
    results = run_detector(det, calls)
    assert [(r.detector, r.detector_version, r.status) for r in results] == [
        ("schema_violation", SchemaViolationDetector.version, DetectorStatus.OK)
    ] * 2
    assert all(r.flagged for r in results)
    assert run_detector(det, []) == []
