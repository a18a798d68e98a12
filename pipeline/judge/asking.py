"""The application's own model as the judge of one escalated call: the claims detector's prompts, within a deadline.

The judge asks what the claims detector asks (extract the answer's claims, then give each a
verdict against the call's context) through the same ``openai`` client, which retries 429s,
5xx and timeouts itself; the deadline bounds the whole exchange, retries included.  Its
answer becomes a judgment: "hallucinated" when the share of claims the context does not
support reaches the claims threshold, "faithful" when it does not (an answer with no factual
claims among them), "unknown" when no usable answer came (malformed, an endpoint failing for
good, the deadline), which moves nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass

from detectors.base import DetectorResult, DetectorStatus
from detectors.claims.detector import ClaimsDetector
from detectors.llm_call import LLMCall
from detectors.models.chat import USAGE_KEY
from pipeline.config.alerting import JUDGE, JUDGE_SEVERITY
from pipeline.judge.records import JUDGMENT_KEY
from pipeline.judge.weight import Judgment


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    """What the judge answered on one call, as its finding stores it, and what that cost."""

    judgment: Judgment
    result: DetectorResult  # detector "judge": the claims and their verdicts, the judgment, the cost
    tokens: int
    seconds: float


class Judge:
    """Asks the application's model about escalated calls."""

    version = "1"

    def __init__(self, claims: ClaimsDetector) -> None:
        self._claims = claims

    def can_judge(self, call: LLMCall) -> bool:
        """Whether ``call`` gives the judge something to judge: an answer, and context beyond the question."""
        return self._claims.unjudgeable(call) is None

    def estimated_tokens(self, call: LLMCall) -> int:
        """What judging ``call`` is reserved at before the answers report their usage."""
        return self._claims.estimated_tokens(call)

    async def answer(self, call: LLMCall, seconds_left: float) -> JudgeAnswer:
        """The judgment on ``call``, given up (as "unknown") once ``seconds_left`` have passed."""
        started = time.monotonic()
        if seconds_left <= 0:
            result = self._claims.skipped_result("its deadline passed before the judge was asked")
        else:
            try:
                result = await asyncio.wait_for(self._claims.evaluate(call), seconds_left)
            except TimeoutError:
                result = self._claims.error_result(f"no answer within its deadline ({seconds_left:.0f} s)")
            except Exception as exc:  # an endpoint failing for good (after the client's retries)
                result = self._claims.error_result(f"{type(exc).__name__}: {exc}")
        return self._answer(result, time.monotonic() - started, call)

    def _answer(self, result: DetectorResult, seconds: float, call: LLMCall) -> JudgeAnswer:
        usage = result.evidence.get(USAGE_KEY)
        if isinstance(usage, dict):
            tokens = int(usage.get("tokens", 0))
        else:  # failed midway: what it cost is unknown, so the estimate is counted
            tokens = self.estimated_tokens(call) if result.status is DetectorStatus.ERROR else 0
        judgment = judgment_of(result)
        flagged = judgment is Judgment.HALLUCINATED
        judged = dataclasses.replace(
            result,
            detector=JUDGE,
            detector_version=f"{self.version}+claims.{result.detector_version}",
            flagged=flagged,
            severity=JUDGE_SEVERITY if flagged else 0,
            flag_severity=JUDGE_SEVERITY,
            evidence={**result.evidence, JUDGMENT_KEY: str(judgment), "seconds": round(seconds, 3)},
        )
        return JudgeAnswer(judgment, judged, tokens, seconds)


def judgment_of(result: DetectorResult) -> Judgment:
    """The claims result read as a judgment of the whole call."""
    if result.status is not DetectorStatus.OK:
        return Judgment.UNKNOWN
    return Judgment.HALLUCINATED if result.flagged else Judgment.FAITHFUL
