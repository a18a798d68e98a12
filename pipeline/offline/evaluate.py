"""``halluwatch eval``: the worker's detectors over labelled records, offline.

Records use the normalized format of ``shared/data`` (``id, task, question, context,
answer, hallucinated, spans``).  Each becomes the :class:`~detectors.llm_call.LLMCall` a RAG
app's span would normalize to (question as the user turn, each context passage a
source), and goes through the very :class:`~detectors.suite.DetectorSuite` the worker
builds from the same settings — so offline numbers are production numbers.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detectors.llm_call import LLMCall, Message, Source
from detectors.models.learned import ScaledLogistic
from detectors.suite import DetectorSuite
from detectors.thresholds import load_thresholds
from detectors.verdict import (
    NOT_HALLUCINATION_EVIDENCE,
    answer_spans,
    combined_verdict,
    load_verdict_model,
    verdict_features,
)
from pipeline.agreement.rules import AgreementRule
from pipeline.config.settings import Settings
from pipeline.offline.eval_metrics import BinaryMetrics, all_positive_f1, auroc, binary_metrics, span_overlap
from pipeline.spans.suite import suite_from_settings


class EvalInputError(ValueError):
    """A record file line that is not a usable record; the message names file and line."""


@dataclass(frozen=True, slots=True)
class EvalRecord:
    """One labelled (or unlabelled) example."""

    id: str
    question: str
    context: tuple[str, ...]
    answer: str
    task: str = ""
    hallucinated: bool | None = None
    spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class EvalOutput:
    """The pipeline's verdict on one record, as written to the output JSONL."""

    id: str
    score: float
    hallucinated: bool
    detectors: dict[str, dict[str, Any]]
    spans: list[dict[str, Any]] = field(default_factory=list)
    verdict_features: tuple[float, ...] = ()  # the verdict model's inputs (``halluwatch train``), not written

    def to_json(self) -> str:
        """One output line."""
        return json.dumps(
            {"id": self.id, "score": round(self.score, 6), "hallucinated": self.hallucinated,
             "detectors": self.detectors, "spans": self.spans},
            ensure_ascii=False,
        )  # fmt: skip


def read_records(path: Path) -> Iterator[EvalRecord]:
    """Records of a JSONL file; a bad line raises :class:`EvalInputError` naming it."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield _record(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise EvalInputError(f"{path}:{number}: not a usable record: {exc!r}") from exc


def _record(raw: dict[str, Any]) -> EvalRecord:
    context = raw.get("context") or ()
    passages = (context,) if isinstance(context, str) else tuple(str(passage) for passage in context)
    label = raw.get("hallucinated")
    return EvalRecord(
        id=str(raw["id"]),
        question=str(raw.get("question") or ""),
        context=tuple(p for p in passages if p),
        answer=str(raw["answer"]),
        task=str(raw.get("task") or ""),
        hallucinated=None if label is None else bool(label),
        spans=tuple((int(s["start"]), int(s["end"])) for s in raw.get("spans") or ()),
    )


def record_to_call(record: EvalRecord) -> LLMCall:
    """The LLM call a RAG app would have traced for this record."""
    return LLMCall(
        trace_id=hashlib.md5(record.id.encode(), usedforsecurity=False).hexdigest(),  # stable, not a security use
        span_id="0" * 16,
        parent_span_id=None,
        service="eval",
        span_name="eval",
        start_time_unix_nano=0,
        end_time_unix_nano=0,
        convention="eval",
        operation=record.task,
        input_messages=(Message("user", record.question),) if record.question else (),
        output_messages=(Message("assistant", record.answer, finish_reason="stop"),),
        sources=tuple(Source(str(i), passage) for i, passage in enumerate(record.context, start=1)),
    )


def score_batch(
    suite: DetectorSuite, records: Sequence[EvalRecord], verdict: ScaledLogistic | None = None
) -> list[EvalOutput]:
    """Run the suite on a batch of records (batched exactly as the worker batches spans)."""
    runs = suite.run([record_to_call(record) for record in records])
    outputs = []
    for index, record in enumerate(records):
        results = [run.results[index] for run in runs]
        score, hallucinated = combined_verdict(results, verdict)
        outputs.append(
            EvalOutput(
                id=record.id,
                score=score,
                hallucinated=hallucinated,
                detectors={
                    r.detector: {
                        "score": r.score,
                        "flagged": r.flagged,
                        "status": str(r.status),
                        "severity": r.severity,
                        "version": r.detector_version,
                    }
                    for r in results
                },
                spans=answer_spans(results, hallucinated),
                verdict_features=tuple(float(v) for v in verdict_features(results)),
            )
        )
    return outputs


_process_suite: DetectorSuite | None = None
_process_verdict: ScaledLogistic | None = None


def _init_process(settings: Settings, learned_verdict: bool) -> None:
    global _process_suite, _process_verdict
    _process_suite = suite_from_settings(settings, load_thresholds(settings.thresholds_file))
    _process_verdict = load_verdict_model(settings.detectors.verdict_model) if learned_verdict else None


def _score_in_process(records: Sequence[EvalRecord]) -> list[EvalOutput]:
    assert _process_suite is not None, "worker process not initialised"  # noqa: S101 - set by the pool initializer
    return score_batch(_process_suite, records, _process_verdict)


def evaluate(
    records: Iterable[EvalRecord],
    settings: Settings,
    batch_size: int = 32,
    workers: int = 1,
    learned_verdict: bool = True,
) -> Iterator[EvalOutput]:
    """Score records in input order; ``workers`` > 1 runs batches in separate processes.

    ``learned_verdict=False`` combines the detectors by their maximum, as training the verdict model needs.
    """
    if batch_size < 1 or workers < 1:
        raise ValueError(f"batch_size and workers must be positive, got {batch_size} and {workers}")
    batches = _batched(records, batch_size)
    if workers == 1:
        _init_process(settings, learned_verdict)
        for batch in batches:
            yield from _score_in_process(batch)
        return
    with ProcessPoolExecutor(workers, initializer=_init_process, initargs=(settings, learned_verdict)) as pool:
        for outputs in pool.map(_score_in_process, batches):
            yield from outputs


def _batched(records: Iterable[EvalRecord], size: int) -> Iterator[list[EvalRecord]]:
    batch: list[EvalRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def report(records: Sequence[EvalRecord], outputs: Sequence[EvalOutput], agreement: AgreementRule | None = None) -> str:
    """Per-detector and combined precision/recall/F1/AUROC next to the all-positive baseline.

    With ``agreement``, also what that rule would have alerted on against "any detector".
    """
    labelled = [(r, o) for r, o in zip(records, outputs, strict=True) if r.hallucinated is not None]
    if not labelled:
        return "no labels in the input: wrote scores only"
    actual = [bool(r.hallucinated) for r, _ in labelled]
    rows = [f"{'detector':<18} {'n':>6} {'P':>6} {'R':>6} {'F1':>6} {'AUROC':>6}  (ok / skipped / error)"]
    # The sentinel's flag means "unverified", not "hallucinated": no P/R for it.
    detector_names = sorted({name for _, o in labelled for name in o.detectors} - NOT_HALLUCINATION_EVIDENCE)
    for name in [*detector_names, "combined"]:
        if name == "combined":
            scores = [o.score for _, o in labelled]
            verdicts = [o.hallucinated for _, o in labelled]
            statuses = ""
        else:
            entries = [
                o.detectors.get(name, {"score": 0.0, "flagged": False, "status": "skipped"}) for _, o in labelled
            ]
            scores = [float(e["score"]) for e in entries]
            verdicts = [bool(e["flagged"]) for e in entries]
            counts = {s: sum(e["status"] == s for e in entries) for s in ("ok", "skipped", "error")}
            statuses = f"  ({counts['ok']} / {counts['skipped']} / {counts['error']})"
        rows.append(_row(name, verdicts, scores, actual) + statuses)
    rows.append(f"{'all-positive':<18} {len(actual):>6} {'':>6} {'':>6} {all_positive_f1(actual):>6.3f}")
    if agreement is not None:
        rows.extend(agreement_report([o for _, o in labelled], actual, agreement))
    spans = span_scores([r for r, _ in labelled], [o for _, o in labelled])
    if spans is not None:
        rows.append(
            f"span overlap (characters, over all {len(labelled)} labelled records): "
            f"P {spans.precision:.3f}  R {spans.recall:.3f}  F1 {spans.f1:.3f}"
        )
    return "\n".join(rows)


def span_scores(records: Sequence[EvalRecord], outputs: Sequence[EvalOutput]) -> BinaryMetrics | None:
    """Character-overlap span precision/recall/F1 as LettuceDetect counts them; None without span labels.

    Over every labelled record, clean ones included: a character marked in a clean answer is a
    false positive like any other.
    """
    if not any(r.spans for r in records):
        return None
    pairs = [(r, o) for r, o in zip(records, outputs, strict=True) if r.hallucinated is not None]
    return span_overlap([[(s["start"], s["end"]) for s in o.spans] for _, o in pairs], [r.spans for r, _ in pairs])


@dataclass(frozen=True, slots=True)
class AlertingComparison:
    """What "alert when any detector flags" and the agreement rule would have done on labelled records."""

    any_detector: BinaryMetrics
    agreement: BinaryMetrics
    any_alerts: int
    agreement_alerts: int
    clean: int
    any_false_alarms: int
    agreement_false_alarms: int
    # Per-detector false-positive rate on clean records, and the arithmetic of docs/detectors.md from them.
    false_positive_rates: dict[str, float]
    predicted_any_rate: float  # 1 - prod(1 - f_i)
    predicted_pair_rate: float  # sum over pairs f_i * f_j


def compare_alerting(
    outputs: Sequence[EvalOutput], actual: Sequence[bool], agreement: AgreementRule
) -> AlertingComparison:
    """Alerts of "any detector" vs the agreement rule on the same records."""
    flags = [_hallucination_flags(o) for o in outputs]
    any_detector = [bool(f) for f in flags]
    agreed = [agreement.agrees(f) for f in flags]
    clean = [f for f, hallucinated in zip(flags, actual, strict=True) if not hallucinated]
    names = sorted({name for o in outputs for name in o.detectors} - NOT_HALLUCINATION_EVIDENCE)
    rates = {name: sum(name in f for f in clean) / len(clean) for name in names} if clean else {}
    return AlertingComparison(
        any_detector=binary_metrics(any_detector, list(actual)),
        agreement=binary_metrics(agreed, list(actual)),
        any_alerts=sum(any_detector),
        agreement_alerts=sum(agreed),
        clean=len(clean),
        any_false_alarms=sum(bool(f) for f in clean),
        agreement_false_alarms=sum(agreement.agrees(f) for f in clean),
        false_positive_rates=rates,
        predicted_any_rate=1 - math.prod(1 - rate for rate in rates.values()),
        predicted_pair_rate=sum(a * b for a, b in itertools.combinations(rates.values(), 2)),
    )


def agreement_report(outputs: Sequence[EvalOutput], actual: Sequence[bool], agreement: AgreementRule) -> list[str]:
    """Alerts of "any detector" vs the agreement rule, and the arithmetic of docs/detectors.md on clean records."""
    c = compare_alerting(outputs, actual, agreement)
    lines = ["", f"alerting on {len(actual)} records ({c.clean} clean):"]
    for name, metrics, alerts, false_alarms in (
        ("any detector", c.any_detector, c.any_alerts, c.any_false_alarms),
        ("agreement rule", c.agreement, c.agreement_alerts, c.agreement_false_alarms),
    ):
        lines.append(
            f"  {name:<16} alerts {alerts:>6}  P {metrics.precision:.3f}  R {metrics.recall:.3f}  F1 {metrics.f1:.3f}  "
            f"false alarms {false_alarms} ({false_alarms / c.clean if c.clean else 0.0:.1%} of clean)"
        )
    if c.false_positive_rates:
        listed = ", ".join(f"{name} {rate:.1%}" for name, rate in c.false_positive_rates.items())
        lines.append(f"  per-detector false-positive rate f_i on clean records: {listed}")
        lines.append(
            f"  if independent: any detector 1-\u03a0(1-f_i) = {c.predicted_any_rate:.1%}, "
            f"two agreeing \u03a3 f_i f_j = {c.predicted_pair_rate:.1%}"
        )
    return lines


def _hallucination_flags(output: EvalOutput) -> dict[str, int]:
    """Detectors that flagged a record as hallucinated (name -> severity), as the agreement stage counts them."""
    return {
        name: int(entry.get("severity", 0))
        for name, entry in output.detectors.items()
        if entry["flagged"] and entry["status"] == "ok" and name not in NOT_HALLUCINATION_EVIDENCE
    }


def _row(name: str, verdicts: list[bool], scores: list[float], actual: list[bool]) -> str:
    metrics = binary_metrics(verdicts, actual)
    area = auroc(scores, actual)
    area_text = f"{area:.3f}" if area is not None else "-"
    return (
        f"{name:<18} {metrics.total:>6} {metrics.precision:>6.3f} {metrics.recall:>6.3f} "
        f"{metrics.f1:>6.3f} {area_text:>6}"
    )
