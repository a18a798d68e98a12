"""Detection quality on the shared labelled sets, for each embedding profile: writes bench/QUALITY.md.

Runs `halluwatch eval`'s code (the worker's detector suite, default settings but the
profile) over every set in ../shared/data and reports, per set, each detector's AUROC and F1
and the combined verdict's precision/recall/F1/AUROC next to the all-positive baseline, and
what alerting on any detector vs on the default alert rules would have done, and how well
p_hallucination is calibrated.  False alarms are also counted by source document, with the
phrases behind them, since a set's edited variants of one document share one misreading.
It opens with the profiles side by side: every set's AUROC on all records and on the
held-out documents, and the calibration error.

The unsupported_spans detector's models were trained (``halluwatch train``) on 70 % of the
source documents of RAGTruth, BEGIN, FaithDial and WiCE; the "held-out" columns score only the
other 30 % (the same split by document, :func:`pipeline.offline.train.held_out`), which no
model saw.  The verdict over every detector, its calibration and the route minimums are
cross-fitted over five document folds of those sets and SummEdits: the "out of fold" section
scores every record by the same recipe fitted without its document
(:func:`pipeline.offline.crossfit.out_of_fold`), beside what the shipped model does in sample.
FaithBench and HaluEval were never trained on.  The rest of the tuning is a few thresholds (see
detectors/data/thresholds.yaml).

    .venv/bin/python bench/quality.py [--data-dir ../shared/data] [--limit N] [--workers 2]
                                      [--profiles accurate,fast]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grounding import baseline as seed000_scores  # bench/grounding.py: seed 000's grounding, the reference
from tqdm import tqdm

from detectors.config import Profile
from detectors.models.embeddings import Embedder
from detectors.verdict import NOT_HALLUCINATION_EVIDENCE
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.reliability import expected_calibration_error, reliability_table
from pipeline.config.settings import load_settings
from pipeline.offline.crossfit import Quality, Scored, out_of_fold, quality
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
from pipeline.offline.train import VERDICT_SETS, held_out, verdict_rows

RECALIBRATION = "## Recalibration from an application's verdicts"  # bench/recalibration.py's section
CONTRADICTION = "contradiction"
TOP_PHRASES = 5  # per set and side, in the false-alarm table
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


def alerting_row(name: str, records: list[EvalRecord], outputs: list[EvalOutput]) -> str:
    """What "any detector" and the default alert rules (agreement and p_hallucination) did on one set, both sides."""
    sides = {
        side: [i for i, r in enumerate(records) if held_out(r) == is_held]
        for side, is_held in (("train", False), ("held-out", True))
    }
    cells = []
    for part in sides.values():
        c = compare_alerting([outputs[i] for i in part], [bool(records[i].hallucinated) for i in part])
        routes = " / ".join(f"{route} {a.false_alarm_rate:.1%}" for route, a in c.by_route.items()) or "-"
        cells.append(
            f"{c.rules.faithful} | {c.any_detector.false_alarm_rate:.1%} | {c.rules.alerts} "
            f"| {_fmt(c.rules.metrics.precision)} | {_fmt(c.rules.metrics.recall)} "
            f"| **{c.rules.false_alarm_rate:.1%}** | {routes}"
        )
    return f"| {name} | " + " | ".join(cells) + " |"


def calibration_row(name: str, records: list[EvalRecord], outputs: list[EvalOutput]) -> str:
    """Expected calibration error of p_hallucination on one set, both sides, beside the observed rate."""
    cells = []
    for is_held in (False, True):
        part = [(o.p_hallucination, bool(r.hallucinated)) for r, o in zip(records, outputs, strict=True)
                if held_out(r) == is_held and o.p_hallucination is not None]  # fmt: skip
        if not part:
            cells.append("- | - | -")
            continue
        p, actual = [x for x, _ in part], [y for _, y in part]
        cells.append(
            f"{expected_calibration_error(p, actual):.3f} | {sum(p) / len(p):.3f} | {sum(actual) / len(actual):.3f}"
        )
    return f"| {name} | " + " | ".join(cells) + " |"


def reliability_rows(records: list[EvalRecord], outputs: list[EvalOutput]) -> list[str]:
    """RAGTruth's held-out reliability table: predicted against observed per bin of p_hallucination."""
    part = [(o.p_hallucination, bool(r.hallucinated)) for r, o in zip(records, outputs, strict=True)
            if held_out(r) and o.p_hallucination is not None]  # fmt: skip
    table = reliability_table([p for p, _ in part], [y for _, y in part])
    return [f"| {b.low:.1f}-{b.high:.1f} | {b.records} | {b.predicted:.3f} | {b.observed:.3f} |" for b in table]


@dataclass
class ProfileReport:
    """One profile's tables, and the figures the side-by-side table takes from them."""

    profile: str
    seconds: float = 0.0
    summary: list[str] = field(default_factory=list)
    seed000: list[str] = field(default_factory=list)
    detectors: list[str] = field(default_factory=list)
    calibration: list[str] = field(default_factory=list)
    reliability: list[str] = field(default_factory=list)
    alerting: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)  # out of fold and in sample, per set
    false_alarms: list[str] = field(default_factory=list)  # faithful alerts by record and by document, per set
    contradiction: list[str] = field(default_factory=list)  # contradiction's flags by label, per set
    # per set: AUROC all, AUROC held-out, ECE held-out
    figures: dict[str, tuple[float | None, float | None, float | None]] = field(default_factory=dict)


def _quality_row(name: str, side: str, q: Quality) -> str:
    return (
        f"| {name} | {side} | {q.records} | {_fmt(q.auroc)} | **{q.ece:.3f}** | {q.faithful} "
        f"| **{q.alerted_faithful:.1%}** | {q.paged_faithful:.1%} | {q.recall:.3f} |"
    )


def out_of_fold_alerts(
    by_set: dict[str, tuple[list[EvalRecord], list[EvalOutput]]], routing: RouteTargets
) -> dict[str, dict[int, Scored]]:
    """Each trained set's records (by index) scored by the verdict recipe fitted without their document fold."""
    trained = [(name, i, r, o) for name in VERDICT_SETS if name in by_set
               for i, (r, o) in enumerate(zip(*by_set[name], strict=True))
               if r.context and r.answer.strip() and r.hallucinated is not None]  # fmt: skip
    rows = verdict_rows([(name, r) for name, _, r, _ in trained], [o for *_, o in trained])
    oof = out_of_fold(rows, routing) if rows else []
    by_index: dict[str, dict[int, Scored]] = {}
    for (name, index, _, _), result in zip(trained, oof, strict=True):
        by_index.setdefault(name, {})[index] = result
    return by_index


def verdict_quality_rows(
    by_set: dict[str, tuple[list[EvalRecord], list[EvalOutput]]], oof: dict[str, dict[int, Scored]]
) -> list[str]:
    """Each set's verdict out of fold (trained sets, also on held-out documents) and in sample (the shipped model)."""
    lines = []
    for name, (records, outputs) in by_set.items():
        labelled = [(r, o) for r, o in zip(records, outputs, strict=True) if r.hallucinated is not None]
        shipped = [Scored(o.p_hallucination, o.alert.route if o.alert else None) for _, o in labelled]
        actual = [bool(r.hallucinated) for r, _ in labelled]
        lines.append(_quality_row(name, "in sample (shipped)", quality(shipped, actual)))
        scored = oof.get(name)
        if not scored:
            continue
        labels = [bool(records[i].hallucinated) for i in scored]
        lines.append(_quality_row(name, "out of fold", quality(list(scored.values()), labels)))
        held = [i for i in scored if held_out(records[i])]
        lines.append(
            _quality_row(
                name,
                "out of fold, held-out documents",
                quality([scored[i] for i in held], [bool(records[i].hallucinated) for i in held]),
            )
        )
    return lines


def _phrase_cell(phrases: Counter[str]) -> str:
    return ", ".join(f"`{text}` ({count})" for text, count in phrases.most_common(TOP_PHRASES)) or "-"


def false_alarm_row(name: str, side: str, records: list[EvalRecord], outputs: list[EvalOutput],
                    alerted: dict[int, bool]) -> str:  # fmt: skip
    """Faithful records alerted on one side, the documents they come from, and the flagged phrases behind them.

    Edited variants of one document repeat its misreading: a rate over records is not a rate over documents.
    """
    faithful = [i for i in alerted if records[i].hallucinated is False]
    false_alarms = [i for i in faithful if alerted[i]]
    documents = Counter(records[i].context for i in false_alarms)
    # One line each: a phrase across paragraphs would break the table's row.
    phrases = Counter(
        " ".join(span["text"].lower().split()) for i in false_alarms for span in outputs[i].spans if span.get("text")
    )
    largest = max(documents.values(), default=0)
    return (
        f"| {name} | {side} | {len(faithful)} | {len(false_alarms)} | **{len(documents)}** | {largest} "
        f"| {_phrase_cell(phrases)} |"
    )


def false_alarm_rows(
    by_set: dict[str, tuple[list[EvalRecord], list[EvalOutput]]], oof: dict[str, dict[int, Scored]]
) -> list[str]:
    """Each set's faithful alerts by record and by document, in sample and (trained sets) out of fold."""
    lines = []
    for name, (records, outputs) in by_set.items():
        shipped = {i: o.alert is not None for i, o in enumerate(outputs) if records[i].hallucinated is not None}
        lines.append(false_alarm_row(name, "in sample (shipped)", records, outputs, shipped))
        if name in oof:
            folded = {i: result.route is not None for i, result in oof[name].items()}
            lines.append(false_alarm_row(name, "out of fold", records, outputs, folded))
    return lines


def contradiction_rows(by_set: dict[str, tuple[list[EvalRecord], list[EvalOutput]]]) -> list[str]:
    """How many hallucinated and faithful records each set's contradiction detector flags."""
    lines = []
    for name, (records, outputs) in by_set.items():
        counts = {}
        for label in (True, False):
            part = [o for r, o in zip(records, outputs, strict=True) if r.hallucinated is label]
            flagged = sum(bool(o.detectors.get(CONTRADICTION, {}).get("flagged")) for o in part)
            counts[label] = f"{flagged} of {len(part)} ({flagged / len(part):.1%})" if part else "-"
        lines.append(f"| {name} | {counts[True]} | {counts[False]} |")
    return lines


def profile_report(profile: Profile, args: argparse.Namespace) -> ProfileReport:
    """Every set through the suite of ``profile``: its tables."""
    settings = load_settings()
    settings.detectors.embeddings = settings.detectors.embeddings.for_profile(profile)
    report = ProfileReport(profile)
    embedder = Embedder(settings.detectors.embeddings)
    by_set: dict[str, tuple[list[EvalRecord], list[EvalOutput]]] = {}
    for name in DATASETS:
        path = args.data_dir / name / f"{name}.jsonl"
        records = list(read_records(path))[: args.limit]
        started = time.perf_counter()
        outputs = list(tqdm(evaluate(records, settings, workers=args.workers), total=len(records), desc=name))
        report.seconds += time.perf_counter() - started
        by_set[name] = (records, outputs)
        summary, rows = dataset_rows(name, records, outputs)
        report.summary.append(summary)
        report.detectors.extend(rows)
        report.alerting.append(alerting_row(name, records, outputs))
        report.calibration.append(calibration_row(name, records, outputs))
        report.figures[name] = headline(records, outputs)
        if name == "ragtruth":
            report.reliability = reliability_rows(records, outputs)
        report.seed000.append(seed000_row(name, records, embedder))
        print(profile, summary, flush=True)
    oof = out_of_fold_alerts(by_set, RouteTargets.from_settings(settings.alerting))
    report.verdict = verdict_quality_rows(by_set, oof)
    report.false_alarms = false_alarm_rows(by_set, oof)
    report.contradiction = contradiction_rows(by_set)
    return report


def kept_report(profile: Profile, args: argparse.Namespace) -> ProfileReport:
    """``profile``'s tables: from ``--keep``'s folder when there (one profile measured per run), else measured."""
    kept = args.keep / f"{profile}.json" if args.keep else None
    if kept is not None and kept.exists():
        return ProfileReport(**json.loads(kept.read_text("utf-8")))
    report = profile_report(profile, args)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(asdict(report)), "utf-8")
    return report


def headline(records: list[EvalRecord], outputs: list[EvalOutput]) -> tuple[float | None, float | None, float | None]:
    """The verdict's AUROC on all records and on the held-out documents, and its held-out calibration error."""
    actual = [bool(r.hallucinated) for r in records]
    held = [i for i, r in enumerate(records) if held_out(r)]
    held_p = [(outputs[i].p_hallucination, actual[i]) for i in held if outputs[i].p_hallucination is not None]
    ece = expected_calibration_error([p for p, _ in held_p], [y for _, y in held_p]) if held_p else None
    return (
        auroc([o.score for o in outputs], actual),
        auroc([outputs[i].score for i in held], [actual[i] for i in held]),
        ece,
    )


def side_by_side(reports: list[ProfileReport]) -> list[str]:
    """One row per set: each profile's AUROC (all, held-out) and held-out ECE; the held-out change from the first."""
    first, *others = reports
    head = [f"{r.profile}: AUROC | held-out | ECE held-out" for r in reports]
    head += [f"held-out change, {r.profile}" for r in others]
    lines = ["| set | " + " | ".join(head) + " |", "|---|" + "---|" * (3 * len(reports) + len(others))]
    for name in DATASETS:
        cells = [" | ".join(_fmt(v) for v in r.figures[name]) for r in reports]
        deltas = [_delta(r.figures[name][1], first.figures[name][1]) for r in others]
        lines.append(f"| {name} | " + " | ".join(cells + deltas) + " |")
    return lines


def _delta(value: float | None, reference: float | None) -> str:
    return "-" if value is None or reference is None else f"{value - reference:+.3f}"


def profile_sections(report: ProfileReport) -> list[str]:
    """One profile's tables, under its heading."""
    return [
        f"## Profile `{report.profile}`",
        "",
        f"{report.seconds:.0f} s of scoring.",
        "",
        "| set | n | hallucinated | all-positive F1 | P | R | F1 | AUROC | AUROC held-out | span F1 "
        "| span F1 held-out |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *report.summary,
        "",
        "Reference: seed 000's grounding on the same runtime (each answer sentence of 4+ words against",
        "each whole source, one embedding per text, score 1 - the lowest sentence's best cosine).",
        "",
        "| set | scored | AUROC | AUROC held-out |",
        "|---|---|---|---|",
        *report.seed000,
        "",
        f"### `{report.profile}`: the verdict out of fold and in sample",
        "",
        "p_hallucination and the default alert rules on each set. Out of fold: every record of the",
        "sets the verdict is trained on scored by the verdict, calibration and route minimums that",
        "`halluwatch train` fits, fitted without the record's document fold (five folds by source",
        "document); also on the 30 % of documents the unsupported_spans models never saw either.",
        "In sample: the shipped model and minimums, which saw every record of those sets.",
        "FaithBench and HaluEval were never trained on. Alerted and paged: shares of the faithful",
        "records (targets: all alerts 3 %, pages 1 %); recall: share of the hallucinated alerted.",
        "",
        "| set | scored by | n | AUROC | ECE | faithful | alerted | paged | recall |",
        "|---|---|---|---|---|---|---|---|---|",
        *report.verdict,
        "",
        f"### `{report.profile}`: false alarms by document",
        "",
        "The faithful records alerted on (in sample: the shipped model; out of fold: as above), how many",
        "source documents they come from, the most alerts any one document accounts for, and the answer",
        "phrases the flagged detectors point at most often. Many sets hold several answers or edited",
        "variants per document, and one misread phrase repeats across all of them.",
        "",
        "| set | scored by | faithful | alerted | documents | most from one | top phrases |",
        "|---|---|---|---|---|---|---|",
        *report.false_alarms,
        "",
        f"### `{report.profile}`: what contradiction flags",
        "",
        "Records its own flag marks, hallucinated and faithful (whatever the alert rules then do).",
        "",
        "| set | hallucinated flagged | faithful flagged |",
        "|---|---|---|",
        *report.contradiction,
        "",
        f"### `{report.profile}`: per detector (AUROC over the records the detector scored; "
        "F1 of its own flag over all)",
        "",
        "| set | detector | scored | AUROC | AUROC held-out | F1 |",
        "|---|---|---|---|---|---|",
        *report.detectors,
        "",
        f"### `{report.profile}`: calibration of p_hallucination",
        "",
        "Expected calibration error (10 equal-width bins), mean predicted probability and observed share",
        "of hallucinated records, on each side of the split. The verdict is calibrated on RAGTruth's",
        "training documents (real answers to retrieval prompts); the other sets are built to be mostly",
        "hallucinated, so their observed share sits far above what the same scores mean on RAGTruth.",
        "",
        "| set | ECE train | mean p | observed | ECE held-out | mean p | observed |",
        "|---|---|---|---|---|---|---|",
        *report.calibration,
        "",
        "RAGTruth, held-out documents: predicted against observed per bin.",
        "",
        "| p_hallucination | records | mean predicted | observed |",
        "|---|---|---|---|",
        *report.reliability,
        "",
        f"### `{report.profile}`: alerting, any detector vs the default alert rules",
        "",
        "False alarms are alerts on faithful records, as a share of the faithful records. The alert",
        "rules are the defaults: two independent detectors agree, and (except where a fact decides) the",
        "call's p_hallucination reaches its route's minimum. Per route, the false-alarm share of that",
        "route alone.",
        "",
        "| set | train: faithful | any detector: false alarms | alerts | P | R | false alarms | by route "
        "| held-out: faithful | any detector: false alarms | alerts | P | R | false alarms | by route |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *report.alerting,
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--limit", type=int, help="records per set (for a quick look; QUALITY.md wants all)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--profiles", default="accurate,fast", help="embedding profiles, comma-separated")
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("QUALITY.md"))
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep each profile's tables in DIR/<profile>.json; reuse those there"
    )
    args = parser.parse_args()
    reports = [kept_report(profile, args) for profile in args.profiles.split(",")]  # type: ignore[arg-type]
    # bench/recalibration.py's section, at the end, stays as it was.
    kept = args.output.read_text().partition(RECALIBRATION)[2] if args.output.exists() else ""
    args.output.write_text(
        "\n".join(
            [
                "# Detection quality",
                "",
                f"Generated {date.today()} by `.venv/bin/python bench/quality.py` with the default settings "
                "(each profile's built-in models and thresholds), on this 2-core machine. All shared records,",
                "and (held-out) the 30 % of source documents `halluwatch train` left out, which no learned model",
                "saw (the out-of-fold side of its split); the maintainers keep another ~30 % of each set for",
                "blind evaluation.",
                "",
                "## The embedding profiles side by side",
                "",
                "The combined verdict's AUROC on all records and on the held-out documents, and the expected",
                "calibration error of p_hallucination on the held-out documents (10 equal-width bins).",
                "",
                *side_by_side(reports),
                "",
                ANCHORS,
                "",
                *(line for report in reports for line in profile_sections(report)),
                *([RECALIBRATION + kept.rstrip("\n"), ""] if kept else []),
            ]
        )
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
