"""What a call gave the model and what the model did, kept with its ``llm_calls`` row for the pages.

The row's ``prompt``, ``answer`` and ``grounding`` are what the detectors read; a person judging
the call needs more: the instructions apart from the question, the sources one by one with
their ids, every tool call with its arguments and the definition the model had for that tool,
the names of the tools it was offered, the tool results it was given.  ``transcript`` holds
them as one JSON object (:func:`transcript_json`), its texts as the table's content mode
allows: ``hash`` and ``drop`` keep none of it (a digest of a tool's arguments tells a
reviewer nothing), so the pages say the text was withheld.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from detectors.llm_call import LLMCall, Message
from pipeline.config.content_policy import ContentPolicy
from pipeline.ingest.trace_facts import PROMPT_SOURCE_ID

TRANSCRIPT_VERSION = 1


def transcript_json(call: LLMCall, content: ContentPolicy) -> str:
    """``call``'s transcript as JSON (``""`` under ``hash`` and ``drop``); read back by the pages."""
    if content.mode not in ("store", "redact"):
        return ""
    text = content.text
    called = {
        tool_call.name for message in (*call.input_messages, *call.output_messages) for tool_call in message.tool_calls
    }
    transcript: dict[str, Any] = {
        "version": TRANSCRIPT_VERSION,
        "instructions": text(call.system_instructions),
        "messages": _messages(call.input_messages, content),
        "outputs": _messages(call.output_messages, content),
        # The prompt context a trace-grounded call carries as one more source is the prompt itself,
        # shown as instructions and question: not repeated among the sources.
        "sources": [{"id": s.id, "text": text(s.text)} for s in call.sources if s.id != PROMPT_SOURCE_ID],
        # Only the definitions of the tools called: the pages show each call beside its definition, and an
        # agent offered fifty tools would otherwise store fifty schemas with every call.  The names of all
        # tools offered are kept, for a call that names a tool the model was not offered.
        "offered": [tool.name for tool in call.tool_definitions],
        "tools": [
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            for tool in call.tool_definitions
            if tool.name in called
        ],
        "tool_runs": [
            {"name": run.name, "call_id": run.call_id, "failed": run.failed, "error": text(run.error)}
            for run in call.tool_spans
        ],
    }
    return json.dumps(transcript, ensure_ascii=False, default=str)


def _messages(messages: Sequence[Message], content: ContentPolicy) -> list[dict[str, Any]]:
    return [
        {
            "role": message.role,
            "text": content.text(message.text),
            "tool_calls": [
                {"name": call.name, "arguments": content.text(call.arguments or ""), "id": call.id}
                for call in message.tool_calls
            ],
            "tool_call_id": message.tool_call_id,
        }
        for message in messages
    ]
