"""OpenLLMetry (Traceloop): the flat indexed layout of versions <= 0.52, plus GenAI rows.

From 0.55 on OpenLLMetry writes the GenAI attributes (``gen_ai.input.messages``, ...),
so its table is the flat rows followed by the GenAI ones.  Observed with 0.62 and the
openai client: span ``openai.chat``, no ``traceloop.*`` or ``llm.request.type`` on the
span, but ``gen_ai.is_streaming`` and ``gen_ai.openai.api_base``, which the official
conventions do not define; those markers tell the two apart.  LiteLLM's OTel callback
(1.110) writes the same layout, its tool calls only as ``gen_ai.completion.N.function_call.*``.
"""

from __future__ import annotations

from pipeline.ingest.conventions import gen_ai, values
from pipeline.ingest.conventions.engine import Convention, Row, SpanMarkers

_FLAT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.request.functions.")
_MARKER_PREFIXES = ("traceloop.", *_FLAT_PREFIXES)
_MARKER_KEYS = ("llm.request.type", "llm.is_streaming", "gen_ai.is_streaming", "gen_ai.openai.api_base")
_REQUEST_TYPES = frozenset({"chat", "completion"})


def _message_rows(prefix: str, target: str) -> tuple[Row, ...]:
    return (
        (f"{prefix}.{{i}}.role", f"{target}.{{0}}.role", values.text),
        (f"{prefix}.{{i}}.content", f"{target}.{{0}}", values.content_fields),
        (f"{prefix}.{{i}}.finish_reason", f"{target}.{{0}}.finish_reason", values.text),
        (f"{prefix}.{{i}}.tool_call_id", f"{target}.{{0}}.tool_call_id", values.text),
        (f"{prefix}.{{i}}.tool_calls.{{j}}.id", f"{target}.{{0}}.tool_calls.{{1}}.id", values.text),
        (f"{prefix}.{{i}}.tool_calls.{{j}}.name", f"{target}.{{0}}.tool_calls.{{1}}.name", values.text),
        (
            f"{prefix}.{{i}}.tool_calls.{{j}}.arguments",
            f"{target}.{{0}}.tool_calls.{{1}}.arguments",
            values.json_text,
        ),
    )


ROWS: tuple[Row, ...] = (
    *gen_ai.ROWS,
    ("llm.request.type", "operation", values.text),
    *_message_rows("gen_ai.prompt", "input_messages"),
    *_message_rows("gen_ai.completion", "output_messages"),
    # LiteLLM's OTel callback: the JSON output message has ``"parts": []``, the call is only here.
    ("gen_ai.completion.{i}.function_call.name", "function_calls.{0}.name", values.text),
    ("gen_ai.completion.{i}.function_call.arguments", "function_calls.{0}.arguments", values.json_text),
    ("llm.request.functions.{i}.name", "tool_definitions.{0}.name", values.text),
    ("llm.request.functions.{i}.description", "tool_definitions.{0}.description", values.text),
    ("llm.request.functions.{i}.parameters", "tool_definitions.{0}.parameters", values.json_object),
)


def claims(markers: SpanMarkers) -> bool:
    """Claim LLM-call spans that carry an OpenLLMetry marker."""
    if not (markers.has_prefix(_MARKER_PREFIXES) or any(key in markers.keys for key in _MARKER_KEYS)):
        return False
    request_type = markers.value("llm.request.type")
    return (
        request_type in _REQUEST_TYPES
        or markers.has_prefix(("gen_ai.prompt.", "gen_ai.completion."))
        or gen_ai.is_inference(markers)
    )


OPENLLMETRY = Convention("openllmetry", ROWS, claims, gen_ai.MESSAGE_EVENTS, gen_ai.DETAILS_EVENTS)
