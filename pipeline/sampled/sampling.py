"""Which LLM calls the sampled detectors judge: high-risk ones, in a share picked by trace id.

Both halves are pure functions of the call, so every worker, every restart and every
replay makes the same choice: the share is a hash of the trace id (never Python's
per-process ``hash``, never a random draw), and the risk rules read only the call.
Sampling by trace rather than by call keeps all LLM calls of a sampled trace together.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from detectors.llm_call import LLMCall
from pipeline.config.sampled import RiskRule

_HASH_SPACE = 1 << 64


def trace_sampled(trace_id: str, rate: float) -> bool:
    """Whether ``trace_id`` falls in the sampled share ``rate`` (0..1), the same answer everywhere."""
    digest = hashlib.blake2b(trace_id.lower().encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * _HASH_SPACE


class _CompiledRule:
    """A :class:`RiskRule` ready to match: lower-cased values, one keyword regex."""

    def __init__(self, rule: RiskRule) -> None:
        self.name = rule.name
        self.attribute = rule.attribute
        self.values = frozenset(value.lower() for value in rule.values)
        alternatives = "|".join(re.escape(keyword) for keyword in rule.keywords)
        # Lookarounds instead of \b, so keywords that start or end with punctuation still match whole.
        self.keywords = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE) if alternatives else None

    def matches(self, call: LLMCall) -> bool:
        if self.attribute:
            if self.attribute not in call.attributes:
                return False
            if self.values and str(call.attributes[self.attribute]).lower() not in self.values:
                return False
        return self.keywords is None or self.keywords.search(_prompt_text(call)) is not None


def _prompt_text(call: LLMCall) -> str:
    """What the app asked: system instructions and the system and user turns (not retrieved sources)."""
    parts = [call.system_instructions, *(m.text for m in call.input_messages if m.role in ("system", "user"))]
    return "\n".join(part for part in parts if part)


class Sampler:
    """Picks the calls for the sampled detectors: content-bearing, in the trace share, high-risk."""

    def __init__(self, rate: float, rules: Sequence[RiskRule]) -> None:
        self.rate = rate
        self._rules = [_CompiledRule(rule) for rule in rules]

    def rule_for(self, call: LLMCall, rate: float | None = None) -> str | None:
        """The name of the first risk rule that samples ``call``, or None when it is not sampled.

        ``rate``, when given, replaces the sampler's own (the call's application policy sets it).
        """
        # The hash first: it turns away all but ``rate`` of the calls before any text is scanned.
        if not trace_sampled(call.trace_id, self.rate if rate is None else rate) or not call.has_content:
            return None
        return next((rule.name for rule in self._rules if rule.matches(call)), None)
