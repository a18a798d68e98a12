"""The application's own model as bench/escalation.py's judge: the worker's Judge asked about labelled records.

The judge is built as the worker builds it (the claims detector's prompts, limits and threshold,
``consistency.llm`` as its endpoint) and asked about each picked record as the call a RAG app would
have traced for it (:func:`pipeline.offline.evaluate.record_to_call`), one at a time.  Its answers
stand in for the simulated judge's: on the held-out records it answered, its own judgment; on
the others "unknown", which moves nothing.  The review's verdicts are on other documents, which it
was not asked about (minutes a call on CPU), so each drawn verdict's judgment is one of its real
judgments on a record of the same label, drawn at random: its measured rates, not its answers.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recalibration import Record

from detectors.claims import DETECTOR as CLAIMS
from detectors.claims.detector import ClaimsDetector
from detectors.llm_call import LLMCall
from detectors.thresholds import load_thresholds
from pipeline.config.settings import Settings
from pipeline.judge.asking import Judge
from pipeline.judge.weight import Judgment
from pipeline.offline.evaluate import read_records, record_to_call
from pipeline.sampled.llm_client import LLMClient


@dataclass(frozen=True, slots=True)
class Asked:
    """The real judge's answer on one labelled record, and what it cost."""

    key: str
    hallucinated: bool
    judgment: Judgment
    tokens: int
    seconds: float


def picked(records: Sequence[Record], count: int, first: set[str], seed: int) -> list[Record]:
    """``count`` records, half hallucinated and half faithful; within each, those in ``first`` before the rest."""
    rng = random.Random(seed)
    chosen: list[Record] = []
    for label, share in ((True, count - count // 2), (False, count // 2)):
        pool = [r for r in records if r.hallucinated == label]
        rng.shuffle(pool)
        pool.sort(key=lambda r: r.key not in first)  # stable: the seeded order stays within each part
        chosen += pool[:share]
    return chosen


def endpoint_judge(base_url: str, model: str, timeout_seconds: float) -> tuple[Judge, LLMClient]:
    """The worker's escalation judge on ``base_url`` (and its client, to close), no retries within the timeout."""
    llm = {"base_url": base_url, "model": model, "api_key": "local", "timeout_seconds": timeout_seconds,
           "max_retries": 0}  # fmt: skip
    settings = Settings.model_validate({"consistency": {"llm": llm}})
    client = LLMClient(settings.consistency.llm)
    threshold = load_thresholds(settings.thresholds_file).for_detector(CLAIMS.name)
    return Judge(ClaimsDetector(CLAIMS.config_in(settings.consistency), threshold, client)), client


def calls(path: Path, records: Sequence[Record]) -> list[LLMCall]:
    """The calls a RAG app would have traced for ``records``, read from their labelled file."""
    labelled = {r.id: r for r in read_records(path)}
    return [record_to_call(labelled[r.key]) for r in records]


async def ask_all(judge: Judge, path: Path, records: Sequence[Record], deadline: float) -> list[Asked]:
    """The judge's answer on each of ``records`` (read from the labelled ``path``), one call at a time."""
    asked = []
    for number, (record, call) in enumerate(zip(records, calls(path, records), strict=True), 1):
        answer = await judge.answer(call, deadline)
        asked.append(Asked(record.key, record.hallucinated, answer.judgment, answer.tokens, answer.seconds))
        print(f"{path.stem} {number}/{len(records)} {record.key} hallucinated={record.hallucinated} "
              f"{answer.judgment} {answer.tokens} tokens {answer.seconds:.1f} s {answer.result.summary[:100]!r}",
              file=sys.stderr, flush=True)  # fmt: skip
    return asked


def tally(asked: Sequence[Asked]) -> dict[str, float | int | None]:
    """Sensitivity and specificity on the answered records (as the judge's weight counts them), unknowns, cost."""
    answered = [a for a in asked if a.judgment != Judgment.UNKNOWN]
    hallucinated = [a for a in answered if a.hallucinated]
    faithful = [a for a in answered if not a.hallucinated]
    caught = sum(a.judgment == Judgment.HALLUCINATED for a in hallucinated)
    cleared = sum(a.judgment == Judgment.FAITHFUL for a in faithful)
    return {
        "judged": len(asked),
        "judged_hallucinated": sum(a.hallucinated for a in asked),
        "judged_faithful": sum(not a.hallucinated for a in asked),
        "sensitivity": round(caught / len(hallucinated), 4) if hallucinated else None,
        "specificity": round(cleared / len(faithful), 4) if faithful else None,
        "unknown_share": round(1 - len(answered) / len(asked), 4) if asked else None,
        "tokens_per_call": round(sum(a.tokens for a in asked) / len(asked), 1) if asked else None,
        "seconds_per_call": round(sum(a.seconds for a in asked) / len(asked), 1) if asked else None,
    }


def standing_in(
    asked: Sequence[Asked], records: Sequence[Record], measured: set[str], seed: int
) -> dict[str, Judgment]:
    """Judgments for bench/escalation.py: real on the measured records asked, "unknown" on the measured rest,
    and on the review's side one real judgment of a record of the same label, drawn at random."""
    rng = random.Random(seed)
    real = {a.key: a.judgment for a in asked}
    by_label = {label: [a.judgment for a in asked if a.hallucinated == label] for label in (True, False)}
    out = {}
    for r in records:
        if r.key in measured:
            out[r.key] = real.get(r.key, Judgment.UNKNOWN)
        else:
            out[r.key] = rng.choice(by_label[r.hallucinated]) if by_label[r.hallucinated] else Judgment.UNKNOWN
    return out


def ask(base_url: str, model: str, path: Path, records: Sequence[Record], deadline: float) -> list[Asked]:
    """:func:`ask_all` against ``base_url``, the client closed after."""

    async def run() -> list[Asked]:
        judge, client = endpoint_judge(base_url, model, deadline)
        try:
            return await ask_all(judge, path, records, deadline)
        finally:
            await client.close()

    return asyncio.run(run())
