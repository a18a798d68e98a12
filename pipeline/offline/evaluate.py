"""``halluwatch eval``: the worker's detectors over labelled records, offline.

Records use the normalized format of ``shared/data`` (``id, task, question, context,
answer, hallucinated, spans``).  Each becomes the :class:`~detectors.llm_call.LLMCall` a RAG
app's span would normalize to (question as the user turn, each context passage a
source), and goes through the very :class:`~detectors.suite.DetectorSuite` the worker
builds from the same settings, the same verdict model and the same alert rules — so each
output line says what the worker would have done (``p_hallucination``, the alert's rule and
route), and the metrics are computed from those lines.
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

from detectors.base import DetectorResult
from detectors.llm_call import LLMCall, Message, Source
from detectors.suite import DetectorSuite
from detectors.thresholds import load_thresholds
from detectors.verdict import (
    NOT_HALLUCINATION_EVIDENCE,
    VerdictModel,
    answer_spans,
    combined_verdict,
    load_verdict_model,
    verdict_features,
)
from pipeline.agreement.rules import AgreementRule
from pipeline.config.policy_book import PolicyBook
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
class EvalAlert:
    """The alert the worker's rules would raise on a record: which rule, on which route."""

    rule: str
    route: str


@dataclass(frozen=True, slots=True)
class EvalOutput:
    """The pipeline's verdict on one record, as written to the output JSONL."""

    id: str
    score: float
    hallucinated: bool
    detectors: dict[str, dict[str, Any]]
    spans: list[dict[str, Any]] = field(default_factory=list)
    verdict_features: tuple[float, ...] = ()  # the verdict model's inputs (``halluwatch train``), not written
    p_hallucination: float | None = None  # None when scored without the verdict model
    alert: EvalAlert | None = None

    def to_json(self) -> str:
        """One output line."""
        p = None if self.p_hallucination is None else round(self.p_hallucination, 6)
        alert = None if self.alert is None else {"rule": self.alert.rule, "route": self.alert.route}
        return json.dumps(
            {"id": self.id, "score": round(self.score, 6), "hallucinated": self.hallucinated, "p_hallucination": p,
             "alert": alert, "detectors": self.detectors, "spans": self.spans},
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
    suite: DetectorSuite,
    records: Sequence[EvalRecord],
    verdict: VerdictModel | None = None,
    agreement: AgreementRule | None = None,
) -> list[EvalOutput]:
    """Run the suite on a batch of records (batched exactly as the worker batches spans).

    With ``agreement``, each output names the alert its rules would raise, if any.
    """
    runs = suite.run([record_to_call(record) for record in records])
    outputs = []
    for index, record in enumerate(records):
        results = [run.results[index] for run in runs]
        score, hallucinated = combined_verdict(results, verdict)
        call_verdict = verdict.verdict(results) if verdict else None
        probability = call_verdict.probability if call_verdict else None
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
                p_hallucination=probability,
                alert=_alert(agreement, results, probability) if agreement else None,
            )
        )
    return outputs


def _alert(agreement: AgreementRule, results: Sequence[DetectorResult], probability: float | None) -> EvalAlert | None:
    flags = {r.detector: r.severity for r in results if r.flagged and r.detector not in NOT_HALLUCINATION_EVIDENCE}
    rule = agreement.first_match(flags, probability)
    return EvalAlert(rule.name, agreement.route_of(rule)) if rule else None


_process_suite: DetectorSuite | None = None
_process_verdict: VerdictModel | None = None
_process_agreement: AgreementRule | None = None


def _init_process(settings: Settings, learned_verdict: bool) -> None:
    global _process_suite, _process_verdict, _process_agreement
    thresholds = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile)
    # Without the passage store: offline scores must not depend on what earlier runs left there (a
    # part encoded in another batch differs in its last bits: int8 activations are scaled per batch).
    _process_suite = suite_from_settings(settings, thresholds, passage_store=False)
    _process_verdict = (
        load_verdict_model(settings.detectors.verdict_model, settings.detectors.embeddings.profile)
        if learned_verdict
        else None
    )
    _process_agreement = AgreementRule.from_settings(settings.alerting, PolicyBook(settings, thresholds))


def _score_in_process(records: Sequence[EvalRecord]) -> list[EvalOutput]:
    assert _process_suite is not None, "worker process not initialised"  # noqa: S101 - set by the pool initializer
    return score_batch(_process_suite, records, _process_verdict, _process_agreement)


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


def report(records: Sequence[EvalRecord], outputs: Sequence[EvalOutput]) -> str:
    """Per-detector and combined precision/recall/F1/AUROC next to the all-positive baseline.

    Then what "alert when any detector flags" and the alert rules (the outputs' ``alert``) would have done.
    """
    labelled = [(r, o) for r, o in zip(records, outputs, strict=True) if r.hallucinated is not None]
    if not labelled:
        return "no labels in the input: wrote scores only"
    actual = [bool(r.hallucinated) for r, _ in labelled]
    rows = [f"{'detector':<18} {'n':>6} {'P':>6} {'R':>6} {'F1':>6} {'AUROC':>6}  (ok / skipped / error)"]
    # The sentinel's flag means "unverified", not "hallucinated": no P/R for it.
    detector_names = sorted({name for _, o in labelled for name in o.detectors} - NOT_HALLUCINATION_EVIDENCE)
    skipped_all = []
    for name in detector_names:
        entries = [o.detectors.get(name, {"score": 0.0, "flagged": False, "status": "skipped"}) for _, o in labelled]
        counts = {s: sum(e["status"] == s for e in entries) for s in ("ok", "skipped", "error")}
        statuses = f"  ({counts['ok']} / {counts['skipped']} / {counts['error']})"
        if counts["skipped"] == len(entries):
            skipped_all.append(name)
        if counts["ok"]:
            scores = [float(e["score"]) for e in entries]
            rows.append(_row(name, [bool(e["flagged"]) for e in entries], scores, actual) + statuses)
        else:  # it judged no record: zeros would read as a measurement
            rows.append(f"{name:<18} {len(entries):>6} " + " ".join(f"{'n/a':>6}" for _ in range(4)) + statuses)
    rows.append(_row("combined", [o.hallucinated for _, o in labelled], [o.score for _, o in labelled], actual))
    rows.append(f"{'all-positive':<18} {len(actual):>6} {'':>6} {'':>6} {all_positive_f1(actual):>6.3f}")
    if detector_names and skipped_all == detector_names:
        without_context = not any(r.context for r, _ in labelled)
        why = ": no record has context (sources) to check an answer against" if without_context else ""
        rows.append(f"every content detector skipped every record{why}")
    rows.extend(agreement_report([o for _, o in labelled], actual))
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
class Alerting:
    """What one way of alerting did on labelled records."""

    metrics: BinaryMetrics
    alerts: int
    false_alarms: int
    faithful: int

    @property
    def false_alarm_rate(self) -> float:
        """Faithful records alerted on, as a share of the faithful records."""
        return self.false_alarms / self.faithful if self.faithful else 0.0

    @classmethod
    def of(cls, alerted: Sequence[bool], actual: Sequence[bool]) -> Alerting:
        """Tally ``alerted`` against the labels."""
        false_alarms = sum(a and not h for a, h in zip(alerted, actual, strict=True))
        return cls(binary_metrics(list(alerted), list(actual)), sum(alerted), false_alarms, actual.count(False))


@dataclass(frozen=True, slots=True)
class AlertingComparison:
    """What "alert when any detector flags" and the alert rules would have done on labelled records."""

    any_detector: Alerting
    rules: Alerting
    by_route: dict[str, Alerting]
    # Per-detector false-positive rate on faithful records, and the independence arithmetic from them.
    false_positive_rates: dict[str, float]
    predicted_any_rate: float  # 1 - prod(1 - f_i)
    predicted_pair_rate: float  # sum over pairs f_i * f_j


def compare_alerting(outputs: Sequence[EvalOutput], actual: Sequence[bool]) -> AlertingComparison:
    """Alerts of "any detector" vs the outputs' alerts (all, and by route) on the same records."""
    flags = [hallucination_flags(o) for o in outputs]
    faithful = [f for f, hallucinated in zip(flags, actual, strict=True) if not hallucinated]
    names = sorted({name for o in outputs for name in o.detectors} - NOT_HALLUCINATION_EVIDENCE)
    rates = {name: sum(name in f for f in faithful) / len(faithful) for name in names} if faithful else {}
    routes = sorted({o.alert.route for o in outputs if o.alert})
    return AlertingComparison(
        any_detector=Alerting.of([bool(f) for f in flags], actual),
        rules=Alerting.of([o.alert is not None for o in outputs], actual),
        by_route={
            route: Alerting.of([o.alert is not None and o.alert.route == route for o in outputs], actual)
            for route in routes
        },
        false_positive_rates=rates,
        predicted_any_rate=1 - math.prod(1 - rate for rate in rates.values()),
        predicted_pair_rate=sum(a * b for a, b in itertools.combinations(rates.values(), 2)),
    )


def agreement_report(outputs: Sequence[EvalOutput], actual: Sequence[bool]) -> list[str]:
    """Alerts of "any detector" vs the alert rules (and per route), and the independence arithmetic."""
    c = compare_alerting(outputs, actual)
    lines = ["", f"alerting on {len(actual)} records ({c.any_detector.faithful} faithful):"]
    rows = [("any detector", c.any_detector), ("alert rules", c.rules)]
    rows += [(f"  route {route}", alerting) for route, alerting in c.by_route.items()]
    for name, a in rows:
        lines.append(
            f"  {name:<16} alerts {a.alerts:>6}  P {a.metrics.precision:.3f}  R {a.metrics.recall:.3f}  "
            f"F1 {a.metrics.f1:.3f}  false alarms {a.false_alarms} ({a.false_alarm_rate:.1%} of faithful)"
        )
    if c.false_positive_rates:
        listed = ", ".join(f"{name} {rate:.1%}" for name, rate in c.false_positive_rates.items())
        lines.append(f"  per-detector false-positive rate f_i on faithful records: {listed}")
        lines.append(
            f"  if independent: any detector 1-\u03a0(1-f_i) = {c.predicted_any_rate:.1%}, "
            f"two agreeing \u03a3 f_i f_j = {c.predicted_pair_rate:.1%}"
        )
    return lines


def hallucination_flags(output: EvalOutput) -> dict[str, int]:
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
