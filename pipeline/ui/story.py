"""What the model did on one call, in the order it happened, for a person to judge it.

The instructions and the question, the sources as numbered passages (so a citation [2] finds
source 2; sources an app pasted into the question as ``[1] …`` lines are numbered the same),
the end user the call acts for and the output schema its answer must meet
(:mod:`pipeline.ui.call_terms`), the tool calls and results the request already carried, then
what the model did: its answer, and each tool call it made with its arguments, the definition
it had for that tool (or the tools it was offered instead) and what the tool's run returned.
The run of a call the model made comes after the call, in a tool execution span of the trace
(the ``tool_runs`` table), found by the call's id.

Built from the call's stored transcript (:mod:`pipeline.sinks.transcript`); a row from before
transcripts were stored shows its prompt, context and answer as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.ui.call_terms import NO_TERMS, CallTerms
from pipeline.ui.queries import CallView, ToolRunView

_MIN_PASTED_CHARS = 20  # a shorter source text found in the question may be there by chance
FOLD_CHARS = 600  # a value longer than this shows its first words; the rest is one click away
# A line of the question that starts a numbered passage, as apps paste their sources: "[1] The tower ...".
_NUMBERED_LINE = re.compile(r"^\[(\d{1,3})\][ \t]+(?=\S)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Passage:
    """One source as the model was given it: its number in the prompt's order, its id, its text.

    ``in_question``: the app pasted it into the question (numbered there) rather than sending it as a source.
    """

    number: int
    id: str
    text: str
    in_question: bool = False

    @property
    def shown_id(self) -> str:
        """The id worth showing beside the number: none when it is only a position ("1", "0"), which says nothing."""
        return "" if self.id.strip().isdigit() else self.id


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
    """The call as a person judges it: what it was given, then what the model did.

    ``offered``: the names of the tools the call's span defines, in its order; None when the
    transcript predates their record.
    """

    instructions: str
    question: str
    sources: tuple[Passage, ...]
    earlier_tool_uses: tuple[ToolUse, ...]  # tool calls and results the request carried
    answer: str
    tool_uses: tuple[ToolUse, ...]  # the tool calls the model made in this call
    offered: tuple[str, ...] | None = None
    terms: CallTerms = NO_TERMS

    @property
    def judged(self) -> str:
        """What a verdict is about: ``answer``, ``tool calls`` (a call that only called tools) or ``nothing``."""
        if self.answer:
            return "answer"
        return "tool calls" if self.tool_uses else "nothing"


def call_story(call: CallView, tool_runs: Sequence[ToolRunView] = (), terms: CallTerms = NO_TERMS) -> CallStory:
    """``call`` as it happened; ``tool_runs``: the trace's tool execution spans, for its tool calls' results.

    ``terms``: what the call was held to beyond what it carries (its end user, its output schema).
    """
    try:
        transcript = json.loads(call.transcript) if call.transcript else None
    except ValueError:
        transcript = None
    if not isinstance(transcript, dict):
        return _without_transcript(call, terms)
    definitions = {tool["name"]: tool for tool in transcript.get("tools", ()) if isinstance(tool, Mapping)}
    messages = transcript.get("messages", [])
    question = _last_user_text(messages)
    sources = tuple(
        Passage(number, str(source.get("id") or ""), str(source.get("text") or ""))
        for number, source in enumerate(transcript.get("sources", ()), 1)
    ) or _passages_in(question)
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
    offered = transcript.get("offered")
    return CallStory(
        instructions=transcript.get("instructions") or _system_text(messages),
        question=_sources_referenced(question, sources),
        sources=sources,
        earlier_tool_uses=earlier,
        answer=str(outputs[0].get("text") or "") if outputs else "",
        tool_uses=made,
        offered=tuple(str(name) for name in offered) if isinstance(offered, list) else None,
        terms=terms,
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


def _without_transcript(call: CallView, terms: CallTerms) -> CallStory:
    if call.sources_from == "prompt":
        passages = _passages_in(call.prompt)
    else:
        passages = (Passage(1, "", call.grounding),) if call.grounding else ()
    return CallStory("", _sources_referenced(call.prompt, passages), passages, (), call.answer, (), terms=terms)


def _passages_in(question: str) -> tuple[Passage, ...]:
    """The sources an app pasted into ``question`` as lines ``[1] …``, ``[2] …``, numbered as there.

    A passage runs to the next numbered line or to the first blank line.  Numbers that do not
    count up from 1 are something else (a citation quoted at the start of a line): none is taken.
    """
    starts = list(_NUMBERED_LINE.finditer(question))
    if not starts or [int(start[1]) for start in starts] != list(range(1, len(starts) + 1)):
        return ()
    ends = [start.start() for start in starts[1:]] + [len(question)]
    texts = (question[start.end() : end].split("\n\n", 1)[0].strip() for start, end in zip(starts, ends, strict=True))
    return tuple(Passage(number, "", text, in_question=True) for number, text in enumerate(texts, 1))


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
