"""Detection quality on the shared labelled sets: writes bench/QUALITY.md.

Runs `halluwatch eval`'s code (the worker's detector suite, default settings) over every
set in ../shared/data and reports, per set, each detector's AUROC and F1 and the
combined verdict's precision/recall/F1/AUROC next to the all-positive baseline, and
what alerting on any detector vs on the two-detector agreement rule would have done.

The unsupported_spans detector's models were trained (``halluwatch train``) on 70 % of the
source documents of RAGTruth, BEGIN, FaithDial and WiCE; the "held-out" columns score only the
other 30 % (the same split by document, :func:`pipeline.offline.train.held_out`), which no
model saw.  FaithBench, SummEdits and HaluEval were never trained on.  The rest of the tuning
is a few thresholds (see detectors/data/thresholds.yaml).

    .venv/bin/python bench/quality.py [--data-dir ../shared/data] [--limit N] [--workers 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grounding import baseline as seed000_scores  # bench/grounding.py: seed 000's grounding, the reference
from tqdm import tqdm

from detectors.models.embeddings import Embedder
from detectors.verdict import NOT_HALLUCINATION_EVIDENCE
from pipeline.agreement.rules import AgreementRule
from pipeline.config.settings import load_settings
from pipeline.offline.eval_metrics import all_positive_f1, auroc, binary_metrics
from pipeline.offline.evaluate import (
    EvalOutput,
    EvalRecord,
    compare_alerting,
    evaluate,
    read_records,
    record_to_call,
    span_scores,
)
from pipeline.offline.train import held_out

DATASETS = ("ragtruth", "faithbench", "summedits", "begin", "faithdial_audit", "wice", "halueval_general")
ANCHORS = """Anchors (published, not measured here): LettuceDetect-large 79.2 % and -base 76.8 % example-level
F1 on RAGTruth (GPU encoders); HHEM-2.1-Open balanced accuracy 64.4 % (RAGTruth summaries) and
74.3 % (RAGTruth QA)."""


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _span_f1(records: list[EvalRecord], outputs: list[EvalOutput]) -> float | None:
    spans = span_scores(records, outputs)
    return None if spans is None else spans.f1


def dataset_rows(name: str, records: list[EvalRecord], outputs: list[EvalOutput]) -> tuple[str, list[str]]:
    """The summary-table row of one set, and its per-detector rows (all records, then held-out documents)."""
    actual = [bool(r.hallucinated) for r in records]
    held = [i for i, r in enumerate(records) if held_out(r)]
    held_set = set(held)
    combined = binary_metrics([o.hallucinated for o in outputs], actual)
    area = auroc([o.score for o in outputs], actual)
    held_area = auroc([outputs[i].score for i in held], [actual[i] for i in held])
    spans = _span_f1(records, outputs)
    held_spans = _span_f1([records[i] for i in held], [outputs[i] for i in held])
    summary = (
        f"| {name} | {len(records)} | {sum(actual)} | {_fmt(all_positive_f1(actual))} | {_fmt(combined.precision)} "
        f"| {_fmt(combined.recall)} | **{_fmt(combined.f1)}** | **{_fmt(area)}** | {_fmt(held_area)} "
        f"| {_fmt(spans)} | {_fmt(held_spans)} |"
    )
    detector_rows = []
    for detector in sorted({d for o in outputs for d in o.detectors} - NOT_HALLUCINATION_EVIDENCE):
        entries = [o.detectors[detector] for o in outputs]
        ok = [i for i, e in enumerate(entries) if e["status"] == "ok"]
        flagged = [bool(e["flagged"]) for e in entries]
        area = auroc([entries[i]["score"] for i in ok], [actual[i] for i in ok])
        held_ok = [i for i in ok if i in held_set]
        held_area = auroc([entries[i]["score"] for i in held_ok], [actual[i] for i in held_ok])
        detector_rows.append(
            f"| {name} | {detector} | {len(ok)} | {_fmt(area)} | {_fmt(held_area)} "
            f"| {_fmt(binary_metrics(flagged, actual).f1)} |"
        )
    return summary, detector_rows


def seed000_row(name: str, records: list[EvalRecord], embedder: Embedder) -> str:
    """Seed 000's grounding (each sentence against each whole source) on one set: AUROC, all and held-out."""
    usable = [r for r in records if r.context and r.answer.strip()]
    scores: list[float] = []
    for first in range(0, len(usable), 256):  # bounded batches: the cache holds one batch's texts
        scores += seed000_scores(embedder, [record_to_call(r) for r in usable[first : first + 256]], batched=True)
    actual = [bool(r.hallucinated) for r in usable]
    held = [i for i, r in enumerate(usable) if held_out(r)]
    area, held_area = auroc(scores, actual), auroc([scores[i] for i in held], [actual[i] for i in held])
    return f"| {name} | {len(usable)} | {_fmt(area)} | {_fmt(held_area)} |"


def alerting_row(name: str, records: list[EvalRecord], outputs: list[EvalOutput], rule: AgreementRule) -> str:
    """Any-detector alerts vs the agreement rule's on one set (docs/detectors.md)."""
    c = compare_alerting(outputs, [bool(r.hallucinated) for r in records], rule)
    held = [i for i, r in enumerate(records) if held_out(r)]
    h = compare_alerting([outputs[i] for i in held], [bool(records[i].hallucinated) for i in held], rule)

    def share(count: int) -> str:
        return f"{count / c.clean:.1%}" if c.clean else "-"

    return (
        f"| {name} | {c.clean} | {c.any_alerts} | {_fmt(c.any_detector.precision)} | {_fmt(c.any_detector.recall)} "
        f"| {share(c.any_false_alarms)} | {c.agreement_alerts} | {_fmt(c.agreement.precision)} "
        f"| {_fmt(c.agreement.recall)} | {share(c.agreement_false_alarms)} "
        f"| {_fmt(h.agreement.precision)} / {_fmt(h.agreement.recall)} "
        f"| {c.predicted_any_rate:.1%} / {c.predicted_pair_rate:.1%} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--limit", type=int, help="records per set (for a quick look; QUALITY.md wants all)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("QUALITY.md"))
    args = parser.parse_args()
    settings = load_settings()
    rule = AgreementRule.from_settings(settings.alerting)
    summary_rows, detector_rows, alerting_rows, seed_rows, seconds = [], [], [], [], 0.0
    embedder = Embedder(settings.detectors.embeddings)
    for name in DATASETS:
        path = args.data_dir / name / f"{name}.jsonl"
        records = list(read_records(path))[: args.limit]
        started = time.perf_counter()
        outputs = list(tqdm(evaluate(records, settings, workers=args.workers), total=len(records), desc=name))
        seconds += time.perf_counter() - started
        summary, rows = dataset_rows(name, records, outputs)
        summary_rows.append(summary)
        detector_rows.extend(rows)
        alerting_rows.append(alerting_row(name, records, outputs, rule))
        seed_rows.append(seed000_row(name, records, embedder))
        print(summary, flush=True)
    args.output.write_text(
        "\n".join(
            [
                "# Detection quality",
                "",
                f"Generated {date.today()} by `.venv/bin/python bench/quality.py` with the default settings "
                f"(built-in thresholds), {seconds:.0f} s of scoring on this 2-core machine. All shared records,",
                "and (held-out) the 30 % of source documents `halluwatch train` left out; the maintainers keep",
                "another ~30 % of each set for blind evaluation.",
                "",
                "| set | n | hallucinated | all-positive F1 | P | R | F1 | AUROC | AUROC held-out | span F1 "
                "| span F1 held-out |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
                *summary_rows,
                "",
                ANCHORS,
                "",
                "Reference: seed 000's grounding on the same runtime (each answer sentence of 4+ words against",
                "each whole source, one embedding per text, score 1 - the lowest sentence's best cosine).",
                "",
                "| set | scored | AUROC | AUROC held-out |",
                "|---|---|---|---|",
                *seed_rows,
                "",
                "## Per detector (AUROC over the records the detector scored; F1 of its own flag over all)",
                "",
                "| set | detector | scored | AUROC | AUROC held-out | F1 |",
                "|---|---|---|---|---|---|",
                *detector_rows,
                "",
                "## Alerting: any detector vs the two-detector agreement rule (default rules)",
                "",
                "False alarms are alerts on clean records, as a share of the clean records. The last column is",
                "docs/detectors.md's arithmetic from each detector's false-positive rate f_i on clean records, as if",
                "the detectors were independent: any detector 1-\u03a0(1-f_i) / two agreeing \u03a3 f_i f_j.",
                "",
                "| set | clean | any: alerts | P | R | false alarms | agreement: alerts | P | R | false alarms "
                "| agreement P / R held-out | predicted any / pair |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
                *alerting_rows,
                "",
            ]
        )
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
