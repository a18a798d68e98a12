"""The claims scorer (docs/detectors.md, seed 004): an LLM judge checks each claim of the answer.

Two requests to an OpenAI-compatible endpoint: the first extracts the answer's factual
claims, the second gives each claim a verdict against the call's context —
``supported``, ``contradicted`` or ``unsupported`` — with a one-sentence reason.
Score = hallucinated (contradicted + unsupported) claims / all claims; an answer with no
factual claims scores 0 and the reason says so.  Off by default: it costs two requests
with the whole context per sampled call.

The judge's output is untrusted text.  JSON mode is asked for where the endpoint has it,
and the parser still accepts a JSON object wrapped in prose or a code fence; anything
else (an empty answer, JSON cut off at ``max_tokens``, no JSON, the wrong shape, an
unknown verdict, a verdict missing) is a ``status=error`` finding naming the problem and
keeping the tokens the answers cost, never an exception into the stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError, field_validator

from detectors.base import DetectorResult, SampledDetector, checked_threshold
from detectors.claims import DETECTOR, ClaimsConfig
from detectors.llm_call import LLMCall
from detectors.models.chat import USAGE_KEY, ChatMessage, ChatModel, Completion, estimate_tokens, usage_evidence
from detectors.spec import Ingredients, required
from detectors.text import evidence as shown
from detectors.text.passages import clip

_Parsed = TypeVar("_Parsed")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_EVIDENCE_CHARS = 300

EXTRACT_INSTRUCTIONS = (
    "You list the factual claims an answer makes. A claim is one short, self-contained statement of fact that "
    "could be checked: numbers, dates, names, events, properties, rules. Leave out opinions, greetings, questions "
    "and instructions. Reply with a JSON object only: "
    '{"claims": ["<claim>", ...]}, or {"claims": []} when the answer states no facts.'
)
VERDICT_INSTRUCTIONS = (
    "You check claims against a context, using only the context and none of your own knowledge. For each claim, "
    'in the order given, decide: "supported" when the context states or directly implies it, "contradicted" when '
    'the context says otherwise, "unsupported" when the context does not say. Reply with a JSON object only: '
    '{"verdicts": [{"claim": "<claim>", "verdict": "supported|contradicted|unsupported", '
    '"reason": "<one sentence>"}, ...]}, one verdict per claim.'
)


class Verdict(StrEnum):
    """A claim's standing against the context."""

    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class JudgedClaim:
    """One claim and the judge's verdict on it."""

    claim: str
    verdict: Verdict
    reason: str


class JudgeOutputError(ValueError):
    """The judge's answer is not the JSON asked for; the message says how."""


class _ClaimsReply(BaseModel):
    claims: list[str]


class _VerdictItem(BaseModel):
    claim: str = ""
    verdict: Verdict
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _normalised(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class _VerdictsReply(BaseModel):
    verdicts: list[_VerdictItem]


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: bare, inside a code fence, or amid prose."""
    decoder = json.JSONDecoder()
    for candidate in [*(m.group(1) for m in _FENCE.finditer(text)), text]:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    raise JudgeOutputError(f"no JSON object in the judge's answer: {text[:200]!r}")


def parse_claims(text: str, max_claims: int) -> list[str]:
    """The claims of an extraction answer (blank ones dropped, at most ``max_claims``)."""
    try:
        reply = _ClaimsReply.model_validate(parse_json_object(text))
    except ValidationError as exc:
        raise JudgeOutputError(f"claims answer has the wrong shape: {_first_error(exc)}") from exc
    return [claim.strip() for claim in reply.claims if claim.strip()][:max_claims]


def parse_verdicts(text: str, claims: Sequence[str]) -> list[JudgedClaim]:
    """One verdict per claim, in order, from a verdicts answer."""
    try:
        reply = _VerdictsReply.model_validate(parse_json_object(text))
    except ValidationError as exc:
        raise JudgeOutputError(f"verdicts answer has the wrong shape: {_first_error(exc)}") from exc
    if len(reply.verdicts) != len(claims):
        raise JudgeOutputError(f"{len(reply.verdicts)} verdicts for {len(claims)} claims")
    return [JudgedClaim(claim, v.verdict, v.reason.strip()) for claim, v in zip(claims, reply.verdicts, strict=True)]


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(map(str, error['loc'])) or '<root>'}: {error['msg']}"


class ClaimsDetector(SampledDetector):
    """Extracts the answer's claims and has each judged against the call's context."""

    name = "claims"
    version = "1"

    def __init__(self, config: ClaimsConfig, threshold: float, model: ChatModel) -> None:
        self.config = config
        self.threshold = checked_threshold(threshold)
        self._model = model

    def estimated_tokens(self, call: LLMCall) -> int:
        """Extraction sees question and answer; verdicts see the context and the claims (at most the answer)."""
        context = estimate_tokens(call.grounding_text[: self.config.max_context_chars])
        answer, question = estimate_tokens(call.answer), estimate_tokens(call.prompt)
        instructions = estimate_tokens(EXTRACT_INSTRUCTIONS + VERDICT_INSTRUCTIONS)
        return instructions + question + 2 * answer + context + self.config.requests * self.config.max_tokens

    def unjudgeable(self, call: LLMCall) -> str | None:
        """Why the judge has nothing to work on in ``call`` (None: it has)."""
        if not call.answer.strip():
            return "no answer text to take claims from"
        if not call.sources and call.grounding_text.strip() == call.prompt.strip():
            return "no context beyond the question to judge the claims against"
        return None

    async def evaluate(self, call: LLMCall) -> DetectorResult:
        """Extract, judge, score; an unusable judge answer is an error result."""
        context = call.grounding_text
        if (nothing := self.unjudgeable(call)) is not None:
            return self.skipped_result(nothing, self.threshold)
        asked: list[Completion] = []  # what the judge cost so far: an unusable answer is paid for too
        try:
            question = f"Question:\n{call.prompt}\n\nAnswer:\n{call.answer}"
            asked.append(await self._ask(call, EXTRACT_INSTRUCTIONS, question))
            claims = self._parsed(asked[-1], lambda text: parse_claims(text, self.config.max_claims))
            if not claims:
                return self.score([], asked)
            listed = "\n".join(f"{i}. {claim}" for i, claim in enumerate(claims, 1))
            context = context[: self.config.max_context_chars]
            asked.append(await self._ask(call, VERDICT_INSTRUCTIONS, f"Context:\n{context}\n\nClaims:\n{listed}"))
            return self.score(self._parsed(asked[-1], lambda text: parse_verdicts(text, claims)), asked)
        except JudgeOutputError as exc:
            return self.error_result(f"judge output unusable: {exc}", {USAGE_KEY: usage_evidence(asked)})

    def _parsed(self, answer: Completion, parse: Callable[[str], _Parsed]) -> _Parsed:
        """``parse`` of the judge's answer; when it is unusable, the error says whether it was empty or cut off."""
        if not answer.text.strip():
            raise JudgeOutputError(f"the judge's answer is empty (finish_reason={answer.finish_reason})")
        try:
            return parse(answer.text)
        except JudgeOutputError as exc:
            if not answer.cut_off:
                raise
            # The JSON never closed: say why rather than only "no JSON object".
            if answer.out_of_room(self.config.max_tokens):
                why = f"ran out of the endpoint's context window after {answer.completion_tokens} tokens"
            else:
                why = f"was cut off at max_tokens={self.config.max_tokens}"
            raise JudgeOutputError(f"the judge's answer {why} (finish_reason=length): {exc}") from exc

    async def _ask(self, call: LLMCall, instructions: str, content: str) -> Completion:
        messages: list[ChatMessage] = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": content},
        ]
        return await self._model.complete(
            messages,
            model=call.model,
            temperature=0.0,
            max_tokens=self.config.max_tokens,
            json_mode=self.config.json_mode,
        )

    def score(self, judged: Sequence[JudgedClaim], completions: Sequence[Completion]) -> DetectorResult:
        """The result for judged claims: the share not supported by the context."""
        counts = {verdict: sum(1 for c in judged if c.verdict is verdict) for verdict in Verdict}
        wrong = [c for c in judged if c.verdict is not Verdict.SUPPORTED]
        score = len(wrong) / len(judged) if judged else 0.0
        evidence: dict[str, Any] = {
            "claims": [{"claim": c.claim, "verdict": str(c.verdict), "reason": c.reason} for c in judged],
            **{str(verdict): count for verdict, count in counts.items()},
            "reason": _reason(judged, wrong),
            USAGE_KEY: usage_evidence(completions),
        }
        return self.scored_result(
            score,
            self.threshold,
            severity=4 if counts[Verdict.CONTRADICTED] else 2,  # HaluGate: contradiction 4, unsupported 2
            summary=evidence["reason"],
            evidence=evidence,
            flaggable=bool(judged),  # no claims, nothing to flag, whatever the threshold
        )


def _reason(judged: Sequence[JudgedClaim], wrong: Sequence[JudgedClaim]) -> str:
    if not judged:
        return "the answer makes no factual claims: score 0"
    if not wrong:
        return f"all {len(judged)} claims are supported by the context"
    worst = sorted(wrong, key=lambda c: c.verdict is not Verdict.CONTRADICTED)[0]  # a contradiction first
    why = f" ({clip(worst.reason, _EVIDENCE_CHARS)})" if worst.reason else ""
    return f"{len(wrong)} of {len(judged)} claims not supported by the context; {worst.verdict}: " + (
        f'"{clip(worst.claim, _EVIDENCE_CHARS)}"{why}'
    )


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    judged = [c for c in shown.records(evidence.get("claims")) if c.get("verdict") in ("contradicted", "unsupported")]
    judged.sort(key=lambda c: c.get("verdict") != "contradicted")  # contradictions first: the stronger evidence
    lines = []
    for claim in judged:
        reason = shown.snippet(claim.get("reason"))
        lines.append(
            f"{claim['verdict']} claim: {shown.quoted(claim.get('claim'))}" + (f" ({reason})" if reason else "")
        )
    return lines[: shown.EVIDENCE_ITEMS] + shown.more(len(lines), shown.EVIDENCE_ITEMS, "claim(s)")


def build(ing: Ingredients) -> ClaimsDetector | None:
    """The judge, or None when its settings turn it off."""
    config = ing.config(DETECTOR)
    return ClaimsDetector(config, ing.threshold, required(ing.chat, "an LLM endpoint")) if config.enabled else None
