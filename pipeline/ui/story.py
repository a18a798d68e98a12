"""What the model did on one call, in the order it happened, for a person to judge it.

The instructions and the question, the sources as numbered passages (so a citation [2] finds
source 2), the tool calls and results the request already carried, then what the model did:
its answer, and each tool call it made with its arguments, the definition it had for that
tool and what the tool's run returned.  The run of a call the model made comes after the call,
in a tool execution span of the trace (the ``tool_runs`` table), found by the call's id.

Built from the call's stored transcript (:mod:`pipeline.sinks.transcript`); a row from before
transcripts were stored shows its prompt, context and answer as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.ui.queries import CallView, ToolRunView

_MIN_PASTED_CHARS = 20  # a shorter source text found in the question may be there by chance
FOLD_CHARS = 600  # a value longer than this shows its first words; the rest is one click away


@dataclass(frozen=True, slots=True)
class Passage:
    """One source as the model was given it: its number in the prompt's order, its id, its text."""

    number: int
    id: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call with its arguments, the definition the model had for the tool, and how its run ended.

    ``definition`` is None when the model was offered no tool of that name; ``ran`` False when no
    result reached the trace (the tool was not run, or its run was not traced).
    """

    name: str
    arguments: str
    definition: str | None
    ran: bool = False
    result: str = ""
    failed: bool = False


@dataclass(frozen=True, slots=True)
class CallStory:
    """The call as a person judges it: what it was given, then what the model did."""

    instructions: str
    question: str
    sources: tuple[Passage, ...]
    earlier_tool_uses: tuple[ToolUse, ...]  # tool calls and results the request carried
    answer: str
    tool_uses: tuple[ToolUse, ...]  # the tool calls the model made in this call

    @property
    def judged(self) -> str:
        """What a verdict is about: ``answer``, ``tool calls`` (a call that only called tools) or ``nothing``."""
        if self.answer:
            return "answer"
        return "tool calls" if self.tool_uses else "nothing"


def call_story(call: CallView, tool_runs: Sequence[ToolRunView] = ()) -> CallStory:
    """``call`` as it happened; ``tool_runs``: the trace's tool execution spans, for its tool calls' results."""
    try:
        transcript = json.loads(call.transcript) if call.transcript else None
    except ValueError:
        transcript = None
    if not isinstance(transcript, dict):
        return _without_transcript(call)
    definitions = {tool["name"]: tool for tool in transcript.get("tools", ()) if isinstance(tool, Mapping)}
    sources = tuple(
        Passage(number, str(source.get("id") or ""), str(source.get("text") or ""))
        for number, source in enumerate(transcript.get("sources", ()), 1)
    )
    messages = transcript.get("messages", [])
    results = {
        m["tool_call_id"]: m.get("text", "") for m in messages if m.get("role") == "tool" and m.get("tool_call_id")
    }
    failures = {
        run["call_id"]: run for run in transcript.get("tool_runs", ()) if run.get("call_id") and run.get("failed")
    }
    earlier = tuple(
        _use(tool_call, definitions, _from_messages(tool_call, results, failures))
        for message in messages
        if message.get("role") == "assistant"
        for tool_call in message.get("tool_calls", ())
    )
    outputs = transcript.get("outputs", [])
    runs = {run.call_id: run for run in tool_runs if run.call_id}
    made = tuple(
        _use(tool_call, definitions, _from_run(runs.get(tool_call.get("id") or "")))
        for message in outputs
        for tool_call in message.get("tool_calls", ())
    )
    question = _last_user_text(messages)
    return CallStory(
        instructions=transcript.get("instructions") or _system_text(messages),
        question=_sources_referenced(question, sources),
        sources=sources,
        earlier_tool_uses=earlier,
        answer=str(outputs[0].get("text") or "") if outputs else "",
        tool_uses=made,
    )


def pretty(value: str) -> str:
    """A JSON text indented for reading; any other text as it is."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if not isinstance(parsed, dict | list):
        return value
    return json.dumps(parsed, indent=2, ensure_ascii=False)


def fold(text: str, limit: int = FOLD_CHARS) -> tuple[str, str]:
    """``text`` as (what shows, what folds away): cut at the last space before ``limit``, never inside a word.

    A text with no space before ``limit`` (one long token) is cut at the first space after it, or not at all.
    """
    if len(text) <= limit:
        return text, ""
    cut = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit))
    if cut <= 0:
        cut = min((i for i in (text.find(" ", limit), text.find("\n", limit)) if i > 0), default=len(text))
    return text[:cut], text[cut:]


def _without_transcript(call: CallView) -> CallStory:
    passages = (Passage(1, "", call.grounding),) if call.grounding and call.sources_from != "prompt" else ()
    return CallStory("", call.prompt, passages, (), call.answer, ())


def _use(tool_call: Mapping[str, Any], definitions: Mapping[str, Any], outcome: tuple[bool, str, bool]) -> ToolUse:
    name = str(tool_call.get("name") or "")
    definition = definitions.get(name)
    return ToolUse(name, pretty(str(tool_call.get("arguments") or "")), _definition_text(definition), *outcome)


def _definition_text(definition: Mapping[str, Any] | None) -> str | None:
    if definition is None:
        return None
    description = str(definition.get("description") or "")
    parameters = definition.get("parameters")
    schema = json.dumps(parameters, indent=2, ensure_ascii=False) if parameters else "(no parameters declared)"
    return f"{description}\n{schema}" if description else schema


def _from_messages(
    tool_call: Mapping[str, Any], results: Mapping[str, str], failures: Mapping[str, Mapping[str, Any]]
) -> tuple[bool, str, bool]:
    """How an earlier tool call ended, as the request's tool message (and the run's failure, if traced) says."""
    call_id = tool_call.get("id") or ""
    if call_id not in results:
        return False, "", False
    failed = failures.get(call_id)
    return True, pretty(results[call_id]), failed is not None


def _from_run(run: ToolRunView | None) -> tuple[bool, str, bool]:
    if run is None:
        return False, "", False
    return True, pretty(run.result or run.error), run.failed


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return next((str(m.get("text") or "") for m in reversed(messages) if m.get("role") == "user"), "")


def _system_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(str(m.get("text") or "") for m in messages if m.get("role") == "system" and m.get("text"))


def _sources_referenced(question: str, sources: Sequence[Passage]) -> str:
    """The question with each source pasted into it verbatim replaced by a pointer to the passage below."""
    for passage in sources:
        if len(passage.text) >= _MIN_PASTED_CHARS and passage.text in question:
            question = question.replace(passage.text, f"(source {passage.number}, below)")
    return question
