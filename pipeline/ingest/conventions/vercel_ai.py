"""The Vercel AI SDK's own convention (``experimental_telemetry``), observed with ``ai`` 6.0.

Each provider call is an ``ai.generateText.doGenerate`` (``ai.streamText.doStream``, ...)
span: ``ai.operationId`` names it, ``gen_ai.system`` / ``gen_ai.request.model`` /
``gen_ai.response.model`` / ``gen_ai.usage.*`` are set, but there is no
``gen_ai.operation.name`` and no GenAI messages.  The content is the SDK's own:

- ``ai.prompt.messages``: a JSON list of its model messages, ``content`` a string or parts
  ``text``, ``tool-call`` (``toolCallId``, ``toolName``, ``input``) and ``tool-result``
  (``output`` = ``{type: json|text|error-json|error-text, value}``; AI SDK 4: ``args``,
  ``result`` and ``isError``);
- ``ai.prompt.tools``: one JSON string per tool, its schema in ``inputSchema`` (4: ``parameters``);
- ``ai.response.text``, ``ai.response.toolCalls`` (``input``, 4: ``args``, a JSON string),
  ``ai.response.finishReason`` (``tool-calls``, ``stop``, ...).

The wrapping ``ai.generateText`` span repeats the final text: it is not a model call.
Tool runs are ``ai.toolCall`` spans, read with the trace's other tool spans.  An
``error-text``/``error-json`` result (an undefined tool, arguments its schema refused, a tool
that threw) is read as ``Error: <value>``, so the tool's run counts as failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.common import HALLUWATCH_ROWS
from pipeline.ingest.conventions.engine import Convention, Row, SpanMarkers

# Provider calls, and the operation each is for halluwatch.
MODEL_CALLS = {
    "ai.generateText.doGenerate": "chat",
    "ai.streamText.doStream": "chat",
    "ai.generateObject.doGenerate": "generate_object",
    "ai.streamObject.doStream": "generate_object",
}


def _operation(value: Any) -> str | None:
    return MODEL_CALLS.get(value) if isinstance(value, str) else None


def _provider(value: Any) -> str | None:
    """``openai.chat`` -> ``openai``: the provider, without the SDK's API flavour."""
    if not isinstance(value, str):
        return None
    return value.split(".", 1)[0] or None


def _messages(value: Any) -> list[dict[str, Any]] | None:
    parsed = values.json_value(value)
    if not isinstance(parsed, list):
        return None
    return [message for item in parsed if (message := _message(item)) is not None] or None


def _message(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, Mapping):
        return None
    content = item.get("content")
    if not isinstance(content, list):
        return values.message_dict(item)
    parts = [part for raw in content if (part := _part(raw)) is not None]
    return values.message_dict({"role": item.get("role"), "parts": parts})


def _part(part: Any) -> dict[str, Any] | None:
    """One SDK content part in the GenAI part shape (``text``, ``tool_call``, ``tool_call_response``)."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "content": part.get("text")}
    if kind == "tool-call":
        return {
            "type": "tool_call",
            "id": part.get("toolCallId"),
            "name": part.get("toolName"),
            "arguments": part.get("input", part.get("args")),
        }
    if kind == "tool-result":
        result = _result(part["output"]) if "output" in part else _v4_result(part)
        return {"type": "tool_call_response", "id": part.get("toolCallId"), "response": result}
    return None  # reasoning, files, images: neither answer nor grounding text


def _result(output: Any) -> Any:
    if not isinstance(output, Mapping):
        return output
    kind, value = output.get("type"), output.get("value")
    if isinstance(kind, str) and kind.startswith("error-"):
        return f"Error: {values.json_text(value)}"
    return value


def _v4_result(part: Mapping[str, Any]) -> Any:
    """AI SDK 4: ``result`` beside an ``isError`` flag."""
    result = part.get("result")
    return f"Error: {values.json_text(result)}" if part.get("isError") is True else result


def _tool_calls(value: Any) -> list[dict[str, Any]] | None:
    parsed = values.json_value(value)
    if not isinstance(parsed, list):
        return None
    calls = [
        {
            "id": values.text(call.get("toolCallId")),
            "name": call["toolName"],
            "arguments": values.json_text(call.get("input", call.get("args"))),
        }
        for call in parsed
        if isinstance(call, Mapping) and isinstance(call.get("toolName"), str) and call["toolName"]
    ]
    return calls or None


def _tools(value: Any) -> list[dict[str, Any]] | None:
    items = value if isinstance(value, list | tuple) else values.json_value(value)
    if not isinstance(items, list | tuple):
        return None
    return [tool for item in items if (tool := values.tool_definition(item)) is not None] or None


ROWS: tuple[Row, ...] = (
    ("ai.operationId", "operation", _operation),
    ("gen_ai.response.model", "model", values.text),
    ("ai.response.model", "model", values.text),
    ("gen_ai.request.model", "model", values.text),
    ("ai.model.id", "model", values.text),
    ("gen_ai.system", "provider", _provider),
    ("ai.model.provider", "provider", _provider),
    ("ai.prompt.messages", "input_messages", _messages),
    ("ai.prompt.tools", "tool_definitions", _tools),
    ("ai.response.text", "output_messages.0.text", values.text),
    ("ai.response.object", "output_messages.0.text", values.text),
    ("ai.response.toolCalls", "output_messages.0.tool_calls", _tool_calls),
    ("ai.response.finishReason", "finish_reasons", values.text_list),
    ("gen_ai.usage.input_tokens", "usage.input_tokens", values.integer),
    ("ai.usage.inputTokens", "usage.input_tokens", values.integer),
    ("ai.usage.promptTokens", "usage.input_tokens", values.integer),
    ("gen_ai.usage.output_tokens", "usage.output_tokens", values.integer),
    ("ai.usage.outputTokens", "usage.output_tokens", values.integer),
    ("ai.usage.completionTokens", "usage.output_tokens", values.integer),
    *HALLUWATCH_ROWS,
)


def claims(markers: SpanMarkers) -> bool:
    """The SDK's provider-call spans (``ai.operationId``), not the ``ai.generateText`` wrapper."""
    return markers.value("ai.operationId") in MODEL_CALLS


VERCEL_AI = Convention("vercel_ai", ROWS, claims)
