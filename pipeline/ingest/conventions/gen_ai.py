"""OpenTelemetry GenAI semantic conventions: current attributes and the deprecated forms.

Current: JSON-valued ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions`` / ``gen_ai.tool.definitions``, also read from the
``gen_ai.client.inference.operation.details`` span event.  Deprecated: ``gen_ai.system``,
``gen_ai.prompt`` / ``gen_ai.completion`` and the per-message span events.

Only inference operations are LLM calls: ``execute_tool``, ``embeddings``, ``retrieval``
and agent spans return ``None`` for now (their results reach grounding as tool-role
messages of the next inference span).
"""

from __future__ import annotations

from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.common import HALLUWATCH_ROWS
from pipeline.ingest.conventions.engine import Convention, Row, SpanMarkers

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion")

MESSAGE_EVENTS = {
    "gen_ai.system.message": ("input_messages", "system"),
    "gen_ai.user.message": ("input_messages", "user"),
    "gen_ai.assistant.message": ("input_messages", "assistant"),
    "gen_ai.tool.message": ("input_messages", "tool"),
    "gen_ai.choice": ("output_messages", "assistant"),
}
DETAILS_EVENTS = frozenset({"gen_ai.client.inference.operation.details"})

ROWS: tuple[Row, ...] = (
    ("gen_ai.operation.name", "operation", values.text),
    # The response model names the exact snapshot; OpenInference only has that one.
    ("gen_ai.response.model", "model", values.text),
    ("gen_ai.request.model", "model", values.text),
    ("gen_ai.provider.name", "provider", values.text),
    ("gen_ai.system", "provider", values.text),
    ("gen_ai.system_instructions", "system_instructions", values.instructions),
    ("gen_ai.input.messages", "input_messages", values.messages),
    ("gen_ai.output.messages", "output_messages", values.messages),
    ("gen_ai.prompt", "input_messages", values.legacy_messages),
    ("gen_ai.completion", "output_messages", values.legacy_messages),
    ("gen_ai.tool.definitions", "tool_definitions", values.tool_definitions),
    ("gen_ai.response.finish_reasons", "finish_reasons", values.text_list),
    ("gen_ai.usage.input_tokens", "usage.input_tokens", values.integer),
    ("gen_ai.usage.prompt_tokens", "usage.input_tokens", values.integer),
    ("gen_ai.usage.output_tokens", "usage.output_tokens", values.integer),
    ("gen_ai.usage.completion_tokens", "usage.output_tokens", values.integer),
    *HALLUWATCH_ROWS,
)


def is_inference(markers: SpanMarkers) -> bool:
    """Claim inference operations, or (no operation name) spans carrying GenAI content."""
    operation = markers.value("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return operation in INFERENCE_OPERATIONS
    return any(key in markers.keys for key in _CONTENT_KEYS) or not markers.event_names.isdisjoint(
        MESSAGE_EVENTS.keys() | DETAILS_EVENTS
    )


GEN_AI = Convention("gen_ai", ROWS, is_inference, MESSAGE_EVENTS, DETAILS_EVENTS)
