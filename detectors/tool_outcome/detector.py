"""Tool outcome detector (docs/architecture.md, trace-level facts): answers that claim what the tools did not do.

The classic agent hallucination is "I've booked your flight" after the booking tool
returned an error.  The call's own messages show the turn (:mod:`detectors.tool_runs`):
which tools were called and how each ended.  Against that, the answer is read sentence
by sentence:

* a **claim** is an affirmative sentence (no negation, no future or condition, not a
  question) saying an action is done: a past form of a verb in the tool's name
  (``book_flight`` -> "booked", ``cancelOrder`` -> "cancelled") or of a common action
  verb ("sent", "scheduled", "refunded"), or a completion word ("successfully",
  "confirmed", "all set");
* the answer **reports** a failure when it says anything of the kind anywhere ("failed",
  "unable", "couldn't", "unfortunately", "error", "try again", "sold out"), or passes on a
  value of the error that the request did not hold ("shall I take 21:15?", or "9.15pm").

Scores, highest wins:

==============================================  =====  ========
finding                                         score  severity
==============================================  =====  ========
a tool failed and the answer claims it done      1.0   4
a tool never ran (or is only being requested     0.8   2
now) and the answer claims it done
a tool failed and the answer does not say so     0.6   2
==============================================  =====  ========

Precision first: any report of a failure clears every failure of the turn, and a sentence
with a negation is never a claim.  Values restated wrongly from a tool's result are the
contradiction detector's (tool results are sources).  Tool execution spans elsewhere in the
trace come with the call (:mod:`pipeline.ingest.trace_facts`): one that ended in error fails
its run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detectors import grounding
from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.llm_call import LLMCall
from detectors.spec import Ingredients
from detectors.text import evidence as shown
from detectors.text.prose import Sentence, key_words, split_sentences, word_list
from detectors.text.quantities import extract_values
from detectors.tool_outcome import DETECTOR, ToolOutcomeConfig
from detectors.tool_runs import FAILURE_STATUSES, Outcome, ToolRun, current_turn, tool_runs

MAX_SPANS_LISTED = 5
_MAX_RUNS_LISTED = 10

_CLAIMED_FAILED = 1.0
_CLAIMED_NOT_RUN = 0.8
_UNREPORTED_FAILURE = 0.6

_ACTION_PASTS = word_list("action_pasts.txt")  # said of an action done, whatever the tool is called
_COMPLETION = re.compile(r"\b(?:successfully|success|all set|went through|taken care of|is done|are done)\b")
_IRREGULAR_PASTS = {
    "send": ("sent",),
    "pay": ("paid",),
    "make": ("made",),
    "buy": ("bought",),
    "get": ("got", "gotten"),
    "find": ("found",),
    "write": ("wrote", "written"),
    "run": ("ran",),
    "take": ("took", "taken"),
    "give": ("gave", "given"),
    "do": ("did", "done"),
    "sell": ("sold",),
    "hold": ("held",),
    "build": ("built",),
    "set": ("set",),
    "put": ("put",),
}
# A sentence with one of these does not state that something is done.
_NOT_A_CLAIM = re.compile(
    r"n't\b|\b(?:not|never|no|unable|cannot|will|would|could|should|can|might|may|if|once|until|unless|"
    r"try|tried|trying|attempt|attempted|going to|about to|let me|shall)\b|['\u2019]ll\b"
)
# Any of these and the answer has told the user something went wrong.
_REPORTS_FAILURE = re.compile(
    r"\b(?:errors?|fail(?:s|ed|ure)?|unable|couldn['\u2019]?t|could not|can['\u2019]?t|cannot|unfortunately|"
    r"went wrong|unsuccessful|declined|denied|rejected|unavailable|not available|try again|retry|timed out|"
    r"didn['\u2019]?t go through|did not go through|wasn['\u2019]?t able|was not able|not possible|"
    r"(?:is|are|was|were) full|fully booked|sold out|no longer available|not found|invalid|expired|insufficient)\b"
)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")


@dataclass(frozen=True, slots=True)
class _Finding:
    run: ToolRun
    score: float
    severity: int
    claims: tuple[Sentence, ...]


class ToolOutcomeDetector(Detector):
    """Flags answers that claim success for tools that failed or never ran, or hide a failure."""

    name = "tool_outcome"
    version = "1.2.0"

    def __init__(self, config: ToolOutcomeConfig, threshold: float, *, language: str = "en") -> None:
        self._threshold = checked_threshold(threshold)
        self._statuses = FAILURE_STATUSES | {status.lower() for status in config.extra_failure_statuses}
        self._language = language  # sentence splitting, as grounding's

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Check each call; string work on the call's own messages."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        if not call.answer.strip():
            return self.skipped_result("no answer text to check", self._threshold)
        runs = tool_runs(call.input_messages, call.tool_spans, self._statuses)
        # Tool calls made in this very answer have not run yet: "booked" beside them is premature.
        runs += [ToolRun(tool.name, tool.id, Outcome.NOT_RUN) for tool in call.output_tool_calls]
        if not runs:
            return self.skipped_result("no tool calls in this turn", self._threshold)
        sentences = split_sentences(call.answer, self._language)
        reported = _reports_failure(call, runs)
        findings = [f for run in runs if (f := self._finding(run, sentences, reported=reported)) is not None]
        top = max(findings, key=lambda f: f.score, default=None)
        score = top.score if top else 0.0
        return self.scored_result(
            score,
            self._threshold,
            severity=top.severity if top else 0,
            summary=_summary(top, runs, reported=reported),
            evidence=_evidence(runs, findings, reported=reported, turn_messages=len(current_turn(call.input_messages))),
        )

    @staticmethod
    def _finding(run: ToolRun, sentences: Sequence[Sentence], *, reported: bool) -> _Finding | None:
        if run.outcome is Outcome.OK or (reported and run.outcome is Outcome.FAILED):
            return None
        claims = tuple(sentence for sentence in sentences if _claims_done(sentence.text, run.name))
        if run.outcome is Outcome.FAILED:
            return _Finding(run, _CLAIMED_FAILED, 4, claims) if claims else _Finding(run, _UNREPORTED_FAILURE, 2, ())
        return _Finding(run, _CLAIMED_NOT_RUN, 2, claims) if claims and not reported else None


def _reports_failure(call: LLMCall, runs: Sequence[ToolRun]) -> bool:
    """Whether the answer tells of a failure: in so many words, or by passing on what the error said.

    "Shall I take 21:15?" after ``No table free at 19:30; next free slot 21:15`` reports it
    without a word of the failure vocabulary: it passes on a value of the error (21:15, or 9.15pm
    as the answer may write it) that the request did not hold (19:30 is the request's: a claim
    repeats that one).
    """
    text = call.answer.lower()
    if _REPORTS_FAILURE.search(text):
        return True
    asked = " ".join(
        [call.prompt, *(tool.arguments or "" for m in current_turn(call.input_messages) for tool in m.tool_calls)]
    )
    details = {d for run in runs if run.outcome is Outcome.FAILED for d in _details(run.reason)}
    return bool((details - _details(asked)) & _details(call.answer))


def _details(text: str) -> set[tuple[str, float, float]]:
    """The values of a text as normalized: "9.15pm" in an answer passes on "21:15" of an error."""
    return {(str(value.kind), value.low, value.high) for value in extract_values(text)}


def _claims_done(sentence: str, tool: str) -> bool:
    """Whether ``sentence`` affirms that an action (``tool``'s or any) is done."""
    text = sentence.lower().strip()
    if text.endswith("?") or _NOT_A_CLAIM.search(text):
        return False
    if _COMPLETION.search(text):
        return True
    words = set(_WORD.findall(text))
    return bool(words & (_ACTION_PASTS | _tool_pasts(tool)))


def _tool_pasts(tool: str) -> frozenset[str]:
    """Past forms of every word of a tool's name: ``book_flight`` -> booked, flighted (harmless)."""
    return frozenset(form for word in key_words(tool) if len(word) >= 2 for form in past_forms(word))


def past_forms(verb: str) -> tuple[str, ...]:
    """Simple past and participle spellings of ``verb`` (over-generated: "cancel" gives both spellings)."""
    if verb in _IRREGULAR_PASTS:
        return _IRREGULAR_PASTS[verb]
    if verb.endswith("e"):
        return (verb + "d",)
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return (verb[:-1] + "ied",)
    doubled = verb + verb[-1] + "ed"  # ship -> shipped, cancel -> cancelled, transfer -> transferred
    return (verb + "ed", doubled) if verb[-1] not in "aeiouwxy" and verb[-2] in "aeiou" else (verb + "ed",)


def _summary(top: _Finding | None, runs: Sequence[ToolRun], *, reported: bool) -> str:
    if top is None:
        failed = [run for run in runs if run.outcome is not Outcome.OK]
        if failed and reported:
            return f"the answer reports that {_name(failed[0])} did not succeed"
        return f"{len(runs)} tool call(s) in this turn; the answer claims nothing they did not do"
    run = top.run
    if run.outcome is Outcome.FAILED and top.claims:
        line = f"answer claims {_name(run)} succeeded; the tool returned {run.reason}"
    elif run.outcome is Outcome.FAILED:
        line = f"answer does not say that {_name(run)} failed ({run.reason})"
    else:
        line = f"answer claims {_name(run)} done, but no result of it is recorded"
    return line[:500]


def _name(run: ToolRun) -> str:
    return run.name or f"tool call {run.call_id or '(no id)'}"


def _evidence(
    runs: Sequence[ToolRun], findings: Sequence[_Finding], *, reported: bool, turn_messages: int
) -> dict[str, Any]:
    claims = sorted({sentence for finding in findings for sentence in finding.claims}, key=lambda s: s.start)
    return {
        "runs": [run.to_evidence() for run in runs[:_MAX_RUNS_LISTED]],
        "failed": sum(run.outcome is Outcome.FAILED for run in runs),
        "not_run": sum(run.outcome is Outcome.NOT_RUN for run in runs),
        "failure_reported": reported,
        "turn_messages": turn_messages,
        "spans": [{"start": s.start, "end": s.end, "text": s.text[:300]} for s in claims[:MAX_SPANS_LISTED]],
    }


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    claims = (shown.quoted(span.get("text")) for span in shown.records(evidence.get("spans")))
    lines = [f"answer claims: {said}" for said in claims if said]
    for run in shown.records(evidence.get("runs")):
        outcome, tool = shown.word(run.get("outcome")), shown.word(run.get("tool"))
        if outcome == "failed":
            reason = shown.snippet(run.get("reason"))
            lines.append(f"tool {tool} failed" + (f": {reason}" if reason else ""))
        elif outcome == "not_run":
            lines.append(f"tool {tool} has no recorded result")
    return lines[: shown.EVIDENCE_ITEMS] + shown.more(len(lines), shown.EVIDENCE_ITEMS, "line(s)")


def build(ing: Ingredients) -> ToolOutcomeDetector:
    """The detector, from its settings and threshold."""
    return ToolOutcomeDetector(ing.config(DETECTOR), ing.threshold, language=ing.config(grounding.DETECTOR).language)
