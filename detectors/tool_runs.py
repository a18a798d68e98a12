"""What the tools of the current turn did, read from the call's own messages (docs/architecture.md, trace-level facts).

An agent's final LLM call carries its turn in its input: the user's request, the
assistant's tool calls, and one ``tool`` message per call with its result.  This module
pairs each requested call with its result and classifies the result:

* ``failed``: the result says so -- a JSON object (or a Python ``dict`` literal, as LlamaIndex
  records a tool's return value) with a non-empty ``error``/``errors``/
  ``exception``, ``"success": false`` or ``"ok": false``, a ``status``/``state``/``outcome``
  of ``error``, ``failed``, ``declined``... or an HTTP status of 400-599; or plain text whose
  first line is an error (``Error: ...``, ``Traceback``, ``ValueError: ...``, ``HTTP 503``);
* ``not_run``: the call was requested and no result came back in the conversation;
* ``ok``: anything else.  A failed call followed by a successful call of the same tool is a
  retry that worked, so it counts as ``ok``.

Tool execution spans of the trace (:class:`~detectors.llm_call.ToolSpan`, attached by the
pipeline) are paired with the requests too, by call id, else by tool name: a span that ended
in error fails its run whatever the tool message says, one that ended well means the tool ran
even where the conversation holds no result, and a failed span nobody's request names is a
failed run of its own.

Only the current turn counts (the messages after the last user message): an earlier
turn's failure was that turn's answer's business.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from detectors.llm_call import Message, ToolSpan

MAX_RESULT_CHARS = 20_000  # longer results are not parsed as JSON (the head is still read as text)
_REASON_CHARS = 200

# Result keys and values that mean the tool did not do its job, matched case-insensitively.
_ERROR_KEYS = frozenset({"error", "errors", "exception", "fault", "error_message", "errormessage"})
_STATUS_KEYS = frozenset({"status", "state", "outcome", "result"})
_SUCCESS_KEYS = frozenset({"success", "ok", "succeeded"})
_FAILED_KEYS = frozenset({"iserror", "is_error", "failed"})  # MCP's CallToolResult says "isError": true
_HTTP_STATUS_KEYS = frozenset({"status", "status_code", "statuscode", "http_status", "httpstatus"})
FAILURE_STATUSES = frozenset(
    {
        "error",
        "failed",
        "failure",
        "fail",
        "denied",
        "rejected",
        "declined",
        "forbidden",
        "unauthorized",
        "timeout",
        "timed_out",
        "aborted",
        "unavailable",
        "internal_error",
    }
)
_ERROR_LINE = re.compile(
    r"""\s*(?:
        (?:error|exception|traceback|fatal|failed|failure)\b       # "Error: ...", "Traceback (most recent..."
      | (?:an\ error\ occurred|failed\ to|could\ not|couldn't|unable\ to)\b  # agent frameworks' own wording
      | [\w.]*(?:Error|Exception)\b\s*[:(]                          # "ValueError: ...", "requests.HTTPError("
      | HTTP(?:/\d(?:\.\d)?)?\s+[45]\d\d\b                          # "HTTP 503", "HTTP/1.1 404 Not Found"
    )""",
    re.IGNORECASE | re.VERBOSE,
)


class Outcome(StrEnum):
    """How a requested tool call ended, as far as the conversation shows."""

    OK = "ok"
    FAILED = "failed"
    NOT_RUN = "not_run"


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call of the current turn: what was asked, and how it ended.

    ``name`` is empty for a result whose request the conversation does not show;
    ``reason`` says why a run counts as failed (the error it returned), else ``""``;
    ``span_id`` names the tool execution span of the run, when the trace has one.
    """

    name: str
    call_id: str | None
    outcome: Outcome
    reason: str = ""
    span_id: str | None = None

    def to_evidence(self) -> dict[str, str]:
        """The run as a finding shows it."""
        evidence = {"tool": self.name or "(unnamed)", "outcome": str(self.outcome)}
        if self.call_id:
            evidence["call_id"] = self.call_id
        if self.reason:
            evidence["reason"] = self.reason
        if self.span_id:
            evidence["span_id"] = self.span_id
        return evidence


def current_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages after the last user message (all of them when there is none)."""
    last_user = max((i for i, message in enumerate(messages) if message.role == "user"), default=-1)
    return messages[last_user + 1 :]


def tool_runs(
    messages: Sequence[Message],
    tool_spans: Sequence[ToolSpan] = (),
    failure_statuses: Iterable[str] = FAILURE_STATUSES,
) -> list[ToolRun]:
    """The current turn's tool calls with their outcomes, in the order they were requested.

    Results are paired with requests by ``tool_call_id``; results without one (some
    instrumentations drop it) take the earliest unpaired request.  A result nobody asked
    for in the recorded messages still counts, with an empty name.  ``tool_spans`` then
    confirm or overrule each run (module docstring).
    """
    statuses = frozenset(status.lower() for status in failure_statuses)
    requested: list[tuple[str, str | None]] = []
    results: dict[int, str] = {}  # index into requested -> result text
    unrequested: list[tuple[str | None, str]] = []
    for message in current_turn(messages):
        requested += [(call.name, call.id) for call in message.tool_calls]
        if message.role != "tool":
            continue
        index = _request_for(message.tool_call_id, requested, results)
        if index is None:
            unrequested.append((message.tool_call_id, message.text))
        else:
            results[index] = message.text
    runs = [
        ToolRun(name, call_id, *_outcome(results[i], statuses))
        if i in results
        else ToolRun(name, call_id, Outcome.NOT_RUN)
        for i, (name, call_id) in enumerate(requested)
    ]
    runs += [ToolRun("", call_id, *_outcome(text, statuses)) for call_id, text in unrequested]
    return _retries_forgiven(_with_spans(runs, tool_spans))


def _with_spans(runs: list[ToolRun], spans: Sequence[ToolSpan]) -> list[ToolRun]:
    """Runs overruled or confirmed by their execution spans, plus failed spans no run names."""
    unpaired = list(spans)
    paired = []
    for run in runs:
        span = next((s for s in unpaired if run.call_id and s.call_id == run.call_id), None)
        span = span or next((s for s in unpaired if not (run.call_id and s.call_id) and s.name == run.name), None)
        if span is None:
            paired.append(run)
            continue
        unpaired.remove(span)
        paired.append(_as_span_says(run, span))
    paired += [_as_span_says(ToolRun(s.name, s.call_id, Outcome.FAILED), s) for s in unpaired if s.failed]
    return paired


def _as_span_says(run: ToolRun, span: ToolSpan) -> ToolRun:
    if span.failed:
        reason = run.reason if run.outcome is Outcome.FAILED else ""
        return ToolRun(run.name or span.name, run.call_id, Outcome.FAILED, reason or _quote(span.error), span.span_id)
    outcome = Outcome.OK if run.outcome is Outcome.NOT_RUN else run.outcome
    return ToolRun(run.name or span.name, run.call_id, outcome, run.reason, span.span_id)


def _request_for(
    call_id: str | None, requested: Sequence[tuple[str, str | None]], results: Mapping[int, str]
) -> int | None:
    if call_id:
        return next((i for i, (_, id_) in enumerate(requested) if id_ == call_id and i not in results), None)
    return next((i for i in range(len(requested)) if i not in results), None)


def _retries_forgiven(runs: list[ToolRun]) -> list[ToolRun]:
    """A failure later retried with success (same tool) is not a failure of the turn."""
    forgiven = []
    for i, run in enumerate(runs):
        retried = run.name and any(later.name == run.name and later.outcome is Outcome.OK for later in runs[i + 1 :])
        forgiven.append(
            replace(run, outcome=Outcome.OK, reason="") if run.outcome is Outcome.FAILED and retried else run
        )
    return forgiven


def _outcome(result: str, statuses: frozenset[str]) -> tuple[Outcome, str]:
    reason = failure_reason(result, statuses)
    return (Outcome.OK, "") if reason is None else (Outcome.FAILED, reason)


def failure_reason(result: str, statuses: frozenset[str] = FAILURE_STATUSES) -> str | None:
    """Why ``result`` reads as a failed tool run (a short quote of the error), or ``None``."""
    stripped = result.strip()
    if stripped.startswith("{") and len(stripped) <= MAX_RESULT_CHARS:
        document = _object(stripped)
        if isinstance(document, dict):
            return _json_failure(document, statuses)
    first_line = stripped.split("\n", 1)[0]
    return _quote(first_line) if _ERROR_LINE.match(first_line) else None


def _object(text: str) -> Any:
    """A result's object: JSON, else a Python literal (``{'error': 'no seats left'}``), else ``None``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)  # literals only: never runs code
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _json_failure(document: Mapping[str, Any], statuses: frozenset[str]) -> str | None:
    named = {key.lower(): (key, value) for key, value in document.items() if isinstance(key, str)}
    # The error itself says most: looked for first, wherever it sits among the keys.
    for name, (key, value) in named.items():
        if name in _ERROR_KEYS and value not in (None, False, "", [], {}):
            return _quote(f"{key}: {_text(value)}")
    for name, (key, value) in named.items():
        if name in _SUCCESS_KEYS and value is False:
            return _quote(f"{key}: false" + _also_error(document))
        if name in _FAILED_KEYS and value is True:
            return _quote(f"{key}: true" + _also_error(document))
        if name in _STATUS_KEYS and isinstance(value, str) and value.strip().lower().replace(" ", "_") in statuses:
            return _quote(f"{key}: {value}" + _also_error(document))
        if name in _HTTP_STATUS_KEYS and isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return _quote(f"{key}: {value}" + _also_error(document))
    return None


def _also_error(document: Mapping[str, Any]) -> str:
    """The message that usually sits beside a failure status, for the evidence."""
    for key in ("message", "detail", "reason", "description"):
        if isinstance(document.get(key), str) and document[key]:
            return f" ({document[key]})"
    content = document.get("content")  # MCP: [{"type": "text", "text": "..."}]
    first = content[0] if isinstance(content, list) and content else None
    return f" ({first['text']})" if isinstance(first, Mapping) and isinstance(first.get("text"), str) else ""


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("message", "detail", "reason"):
            if isinstance(message := value.get(key), str) and message:
                return message
    return json.dumps(value, ensure_ascii=False)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
