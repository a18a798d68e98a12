"""OpenInference (Arize): flat ``llm.*`` attributes on spans of kind ``LLM``.

Observed with openinference-instrumentation-openai 0.1.66: span ``ChatCompletion``
(INTERNAL), ``llm.model_name`` is the *response* model (the requested one is only inside
``llm.invocation_parameters``), one span-level ``llm.finish_reason``, tool definitions as
OpenAI JSON in ``llm.tools.N.tool.json_schema``, and logprobs only inside the raw
response JSON in ``output.value``.  LlamaIndex (openinference-instrumentation-llama-index
4.6) also marks wrapper spans as ``LLM``; they carry no messages and no token counts and are
not claimed.
"""

from __future__ import annotations

from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.common import HALLUWATCH_ROWS
from pipeline.ingest.conventions.engine import Convention, Row, SpanMarkers


def _message_rows(prefix: str, target: str) -> tuple[Row, ...]:
    message, call = f"{prefix}.{{i}}.message", f"{prefix}.{{i}}.message.tool_calls.{{j}}.tool_call"
    return (
        (f"{message}.role", f"{target}.{{0}}.role", values.text),
        (f"{message}.content", f"{target}.{{0}}.text", values.text),
        (f"{message}.contents.{{k}}.message_content.text", f"{target}.{{0}}.parts.{{1}}", values.text),
        (f"{message}.tool_call_id", f"{target}.{{0}}.tool_call_id", values.text),
        (f"{message}.name", f"{target}.{{0}}.name", values.text),
        (f"{call}.id", f"{target}.{{0}}.tool_calls.{{1}}.id", values.text),
        (f"{call}.function.name", f"{target}.{{0}}.tool_calls.{{1}}.name", values.text),
        (f"{call}.function.arguments", f"{target}.{{0}}.tool_calls.{{1}}.arguments", values.json_text),
    )


ROWS: tuple[Row, ...] = (
    ("llm.model_name", "model", values.text),
    ("llm.invocation_parameters", "model", values.model_of_parameters),
    ("llm.provider", "provider", values.text),
    ("llm.system", "provider", values.text),
    ("llm.finish_reason", "finish_reasons", values.text_list),
    ("llm.token_count.prompt", "usage.input_tokens", values.integer),
    ("llm.token_count.completion", "usage.output_tokens", values.integer),
    *HALLUWATCH_ROWS,
    ("output.value", "logprobs", values.openai_response_logprobs),
    *_message_rows("llm.input_messages", "input_messages"),
    *_message_rows("llm.output_messages", "output_messages"),
    ("llm.tools.{i}.tool.json_schema", "tool_definitions.{0}", values.tool_definition),
    ("retrieval.documents.{i}.document.id", "sources.{0}.id", values.json_text),
    ("retrieval.documents.{i}.document.content", "sources.{0}.text", values.text),
    ("retrieval.documents.{i}.document.score", "sources.{0}.score", values.number),
)


# What a real model call leaves on its span: its messages, or (content hidden) its token counts.
_CALL_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.token_count.")


def claims(markers: SpanMarkers) -> bool:
    """``openinference.span.kind`` is ``LLM`` (RETRIEVER, TOOL, CHAIN, ... are not) and it made a call.

    An LLM span with neither messages nor token counts is a wrapper around the real call
    (LlamaIndex's ``OpenAI.predict`` and ``OpenAI._prepare_chat_with_tools``), not a call of
    its own; one whose content is hidden (``OPENINFERENCE_HIDE_INPUTS``) still counts tokens.
    """
    kind = markers.value("openinference.span.kind")
    return isinstance(kind, str) and kind.upper() == "LLM" and markers.has_prefix(_CALL_PREFIXES)


OPENINFERENCE = Convention("openinference", ROWS, claims)
