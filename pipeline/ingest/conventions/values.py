"""Attribute value converters for the convention tables.

Every converter takes one raw attribute value of any type and returns a draft value, or
``None`` when the value is unusable (wrong type, malformed JSON): the engine then skips
that one field instead of failing the span.  JSON-valued attributes may also arrive
already structured (OTLP ``kvlist``/``array`` values), so each parser accepts both.

Draft message shape (shared with the flat indexed layouts)::

    {"role", "text", "parts": [str], "tool_calls": [{"id", "name", "arguments"}],
     "tool_call_id", "name", "finish_reason", "results": [{"id", "text"}]}

``results`` holds tool results found in message parts (GenAI ``tool_call_response``);
they become grounding sources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_JSON_ERRORS = (ValueError, RecursionError)
# A "\ud800" escape without its pair decodes to a lone surrogate, which no UTF-8 encoder
# takes: one such answer would make every ClickHouse insert and Kafka send of its batch fail.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def text(value: Any) -> str | None:
    """Accept a string; anything else is unusable."""
    return value if isinstance(value, str) else None


def integer(value: Any) -> int | None:
    """Read an integer, also from an integral float or a numeric string (never a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def number(value: Any) -> float | None:
    """Read a float, also from an int or a numeric string (never a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def text_list(value: Any) -> list[str] | None:
    """Read a list of strings (``gen_ai.response.finish_reasons``); one string becomes a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)] or None
    return None


def json_value(value: Any) -> Any:
    """Parse a JSON string; structured values pass through; malformed JSON gives ``None``."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except _JSON_ERRORS:
        return None
    if not _SURROGATE_ESCAPE.search(value):
        return parsed
    try:
        return _without_surrogates(parsed)
    except RecursionError:  # as deep as json.loads could go, and a little deeper
        return None


def _without_surrogates(value: Any) -> Any:
    """``value`` with lone surrogates in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    return value


def json_object(value: Any) -> dict[str, Any] | None:
    """Read a JSON object (e.g. a tool's parameter schema), as a string or structured."""
    parsed = json_value(value)
    return parsed if isinstance(parsed, dict) else None


def json_text(value: Any) -> str | None:
    """Render a value that may be structured as text: tool arguments and results stay JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def content_text(value: Any) -> str | None:
    """Read message content: plain text, or a JSON list of content parts (multimodal)."""
    if isinstance(value, str) and value.startswith("[{"):
        parts = json_value(value)
        if isinstance(parts, list):
            return "\n".join(_part_texts(parts)) or None
    if isinstance(value, list):
        return "\n".join(_part_texts(value)) or None
    return text(value)


def content_fields(value: Any) -> dict[str, Any] | None:
    """Read one flat ``content`` attribute into message fields: its text, or its tool blocks.

    OpenLLMetry's flat layout (``gen_ai.prompt.N.content``) carries Anthropic's content list
    as JSON; a list with ``tool_use``/``tool_result`` blocks gives the message its tool calls
    and results, anything else its text.
    """
    message = message_dict({"content": value})
    if message is None or not (message.get("results") or message["tool_calls"]):
        body = content_text(value)
        return {"text": body} if body is not None else None
    return {key: message[key] for key in ("parts", "results", "tool_calls", "tool_call_id")}


def _part_texts(parts: list[Any]) -> list[str]:
    found = []
    for part in parts:
        if isinstance(part, str):
            found.append(part)
        elif isinstance(part, Mapping) and part.get("type", "text") == "text":
            body = part.get("content", part.get("text"))
            if isinstance(body, str):
                found.append(body)
    return found


def instructions(value: Any) -> str | None:
    """Read ``gen_ai.system_instructions``: a JSON list of parts, or plain text."""
    parsed = json_value(value)
    if isinstance(parsed, list):
        return "\n".join(_part_texts(parsed)) or None
    return value if isinstance(value, str) else None


def messages(value: Any) -> list[dict[str, Any]] | None:
    """Read a list of messages, GenAI ``{role, parts}`` or OpenAI ``{role, content}`` shaped."""
    parsed = json_value(value)
    if not isinstance(parsed, list):
        return None
    return [message for item in parsed if (message := message_dict(item)) is not None] or None


def legacy_messages(value: Any) -> list[dict[str, Any]] | None:
    """Read deprecated ``gen_ai.prompt``/``gen_ai.completion``: a JSON message list or text."""
    return messages(value) or ([{"text": value}] if isinstance(value, str) and value else None)


def message_dict(obj: Any) -> dict[str, Any] | None:
    """Convert one message object to the draft message shape, whatever its source layout."""
    if not isinstance(obj, Mapping):
        return None
    message: dict[str, Any] = {
        "role": text(obj.get("role")),
        "tool_call_id": text(obj.get("tool_call_id")),
        "name": text(obj.get("name")),
        "finish_reason": text(obj.get("finish_reason")),
        "tool_calls": [call for item in _list(obj.get("tool_calls")) if (call := _tool_call(item))],
    }
    parts = obj.get("parts")
    content = json_value(obj.get("content")) if _has_blocks(obj.get("content")) else obj.get("content")
    if isinstance(parts, list):
        _read_parts(parts, message)
    elif isinstance(content, list) and any(_is_block(block) for block in content):
        _read_parts([_block_part(block) for block in content], message)
    else:
        message["text"] = content_text(content)
    return message


# Anthropic's message content blocks, as instrumentations copy them from the request
# (``tool_use`` asks for a tool, ``tool_result`` answers it inside a ``user`` message).
_BLOCKS = frozenset({"tool_use", "tool_result"})


def _has_blocks(content: Any) -> bool:
    return isinstance(content, str) and content.startswith("[{") and '"tool_' in content


def _is_block(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in _BLOCKS


def _block_part(block: Any) -> Any:
    """An Anthropic content block in the GenAI part shape; other blocks pass through."""
    if not _is_block(block):
        return block
    if block["type"] == "tool_use":
        return {"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    result = block.get("content")
    body = "\n".join(_part_texts(result)) if isinstance(result, list) else json_text(result)
    if block.get("is_error") is True and body is not None:
        body = f"Error: {body}"  # the API's own failure flag, in the words tool_runs reads
    return {"type": "tool_call_response", "id": block.get("tool_use_id"), "response": body}


def _read_parts(parts: list[Any], message: dict[str, Any]) -> None:
    texts, results = [], []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            body = text(part.get("content", part.get("text")))
            if body:
                texts.append(body)
        elif kind == "tool_call" and (call := _tool_call(part)):
            message["tool_calls"].append(call)
        elif kind == "tool_call_response":
            result = json_text(part.get("response", part.get("result")))
            if result is not None:
                results.append({"id": text(part.get("id")), "text": result})
                texts.append(result)
        # reasoning, blob, uri, file: not part of the answer or of the grounding text.
    message["parts"] = texts
    message["results"] = results
    if results and not message["tool_call_id"]:
        message["tool_call_id"] = results[0]["id"]


def _list(value: Any) -> list[Any]:
    parsed = json_value(value)
    return parsed if isinstance(parsed, list) else []


def _tool_call(obj: Any) -> dict[str, Any] | None:
    """Read OpenAI ``{id, function: {name, arguments}}`` or GenAI ``{id, name, arguments}``."""
    if not isinstance(obj, Mapping):
        return None
    function = obj.get("function")
    body = function if isinstance(function, Mapping) else obj
    name = text(body.get("name"))
    if not name:
        return None
    return {"id": text(obj.get("id")), "name": name, "arguments": json_text(body.get("arguments"))}


def event_message(attrs: Mapping[str, Any], role: str) -> dict[str, Any] | None:
    """Read a deprecated GenAI message event (``gen_ai.user.message``, ``gen_ai.choice``, ...).

    The content is in the event attributes (``content``, ``tool_calls``, ``id`` for tool
    messages); ``gen_ai.choice`` nests it under ``message`` and adds ``finish_reason``.
    """
    body = json_value(attrs["message"]) if "message" in attrs else attrs
    message = message_dict(body)
    if message is None:
        return None
    message["role"] = message["role"] or text(attrs.get("role")) or role
    message["finish_reason"] = message["finish_reason"] or text(attrs.get("finish_reason"))
    if role == "tool" and not message["tool_call_id"]:
        message["tool_call_id"] = text(attrs.get("id"))
    return message


def tool_definitions(value: Any) -> list[dict[str, Any]] | None:
    """Read ``gen_ai.tool.definitions``: a list of tool objects, as JSON or structured."""
    parsed = json_value(value)
    if not isinstance(parsed, list):
        return None
    return [tool for item in parsed if (tool := tool_definition(item)) is not None] or None


# Where a tool's JSON Schema sits: OpenAI, Anthropic, the Vercel AI SDK, Google GenAI (whose
# ``parameters`` is null when the schema is in ``parameters_json_schema``).
_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema", "parameters_json_schema", "parametersJsonSchema")


def tool_definition(value: Any) -> dict[str, Any] | None:
    """Read one tool, flat ``{name, description, parameters}`` or OpenAI ``{function: {...}}``."""
    parsed = json_value(value)
    if not isinstance(parsed, Mapping):
        return None
    function = parsed.get("function")
    body = function if isinstance(function, Mapping) else parsed
    return {
        "name": text(body.get("name")),
        "description": text(body.get("description")),
        "parameters": json_object(next((body[key] for key in _SCHEMA_KEYS if body.get(key) is not None), None)),
    }


def token_logprobs(value: Any) -> list[Any] | None:
    """Read per-token logprobs ``[{token, logprob, top_logprobs: [{token, logprob}]}]``."""
    parsed = json_value(value)
    return parsed if isinstance(parsed, list) and parsed else None


def openai_response_logprobs(value: Any) -> list[Any] | None:
    """Read ``choices[0].logprobs.content`` of a raw OpenAI response (OpenInference ``output.value``).

    The substring test skips parsing the (often large) response when it has no logprobs.
    """
    if not isinstance(value, str) or '"top_logprobs"' not in value:
        return None
    document = json_value(value)
    try:
        return token_logprobs(document["choices"][0]["logprobs"]["content"])
    except (KeyError, IndexError, TypeError):
        return None


def sources_map(value: Any) -> list[dict[str, Any]] | None:
    """Read seed ``rag.sources_json``: ``{"1": "source text", ...}``; keys are citation ids."""
    parsed = json_value(value)
    if not isinstance(parsed, Mapping):
        return None
    return [{"id": str(key), "text": body} for key, body in parsed.items() if isinstance(body, str)] or None


def model_of_parameters(value: Any) -> str | None:
    """Read the requested model inside OpenInference ``llm.invocation_parameters``."""
    parsed = json_value(value)
    return text(parsed.get("model")) if isinstance(parsed, Mapping) else None
