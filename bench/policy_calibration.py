"""Per-application calibration on labelled data: alerts per app, each app calibrated alone vs globally.

RAGTruth's three tasks stand for three applications of one deployment (a QA bot, a
summariser, a data-to-text writer): one policy each, selected by operation (``halluwatch
eval`` traces a record as service ``eval``, operation = its task). Thresholds are fitted on
the source documents of the training side (:func:`pipeline.offline.train.held_out`) and the
agreement alerts are measured on the held-out documents, per app, at three sets of
thresholds: the global fit (all apps pooled), the app's own fit alone, and what
``halluwatch calibrate`` writes (the app's fit shrunk toward the global one).

    .venv/bin/python bench/policy_calibration.py [--data ../shared/data/ragtruth/ragtruth.jsonl] [--workers 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm

from detectors.thresholds import load_thresholds
from pipeline.agreement.rules import AgreementRule
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import load_settings
from pipeline.offline.calibrate import alert_point, calibrate, labelled_from_eval, operating_point
from pipeline.offline.evaluate import evaluate, read_records, record_to_call
from pipeline.offline.policy_calibration import ALONE, GLOBAL, SHRUNK, calibrate_policies
from pipeline.offline.train import held_out

TASKS = ("qa", "summary", "data2txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/ragtruth/ragtruth.jsonl"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shrinkage", type=float, default=100.0)
    parser.add_argument("--min-positives", type=int, default=30)
    parser.add_argument("--target", action="append", default=[], metavar="APP=P", help="an app's own target precision")
    args = parser.parse_args()

    targets = {app: float(value) for app, _, value in (target.partition("=") for target in args.target)}
    policies = {task: {"match": {"operation": task}, "target_precision": targets.get(task)} for task in TASKS}
    settings = load_settings(policies=policies)
    records = list(read_records(args.data))
    outputs = list(tqdm(evaluate(records, settings, workers=args.workers), total=len(records), unit="rec"))
    book = PolicyBook(settings, load_thresholds())
    labelled = labelled_from_eval(records, outputs, lambda record: book.for_call(record_to_call(record)).name)
    heldout_ids = {record.id for record in records if held_out(record)}
    fitting = [r for r in labelled if r.id not in heldout_ids]
    heldout = [r for r in labelled if r.id in heldout_ids]
    rule = AgreementRule.from_settings(settings.alerting, book)
    # Everything on the training side is fitted on (holdout 0): the held-out documents are the test.
    overall = calibrate(fitting, load_thresholds(), rule, holdout=0.0, min_positives=args.min_positives)
    groups = {g.policy: g for g in calibrate_policies(fitting, overall, rule, args.shrinkage, targets)}
    pooled = {name: detector.threshold for name, detector in overall.detectors.items()}

    print(f"{args.data.name}: {len(fitting)} records fitted on, {len(heldout)} held-out (by source document)")
    print("| app | fitted on (positives) | weight | held-out (positives) | global P / R | alone P / R | shrunk P / R |")
    print("|---|---|---|---|---|---|---|")
    totals = {choice: [0, 0, 0] for choice in (GLOBAL, ALONE, SHRUNK)}  # true positives, flagged, positives
    for task in TASKS:
        group = groups[task]
        test = [r for r in heldout if r.policy == task]
        points = {
            GLOBAL: alert_point(test, pooled, rule),
            ALONE: alert_point(test, pooled | group.alone, rule),
            SHRUNK: alert_point(test, pooled | group.thresholds, rule),
        }
        for choice, point in points.items():
            counts = (point.true_positives, point.flagged, point.true_positives + point.false_negatives)
            totals[choice] = [a + b for a, b in zip(totals[choice], counts, strict=True)]
        cells = " | ".join(_cell(p.true_positives, p.flagged, p.true_positives + p.false_negatives)
                           for p in points.values())  # fmt: skip
        print(f"| {task} | {group.records} ({group.positives}) | {group.weight:.2f} | "
              f"{len(test)} ({sum(r.hallucinated for r in test)}) | {cells} |")  # fmt: skip
    cells = " | ".join(_cell(*totals[choice]) for choice in (GLOBAL, ALONE, SHRUNK))
    print(f"| all apps, each at its own | {len(fitting)} | | {len(heldout)} | {cells} |")
    print("\nPer app, each detector it could fit: threshold, then its own flags' P / R on the app's held-out calls")
    for task in TASKS:
        group = groups[task]
        print(f"{task}: {group.note}")
        test = [r for r in heldout if r.policy == task]
        for name in sorted(group.thresholds):
            scores = [(r.detectors[name].score, r.hallucinated) for r in test if r.detectors.get(name) and
                      r.detectors[name].status == "ok"]  # fmt: skip
            described = []
            for choice, threshold in (("global", pooled[name]), ("alone", group.alone[name]),
                                     ("shrunk", group.thresholds[name])):  # fmt: skip
                point = operating_point([score for score, _ in scores], [label for _, label in scores], threshold)
                described.append(
                    f"{choice} {threshold:.3g}: {point.precision:.3f} / {point.recall:.3f} ({point.flagged})"
                )
            print(f"  {name}: " + "; ".join(described))


def _cell(true_positives: int, flagged: int, positives: int) -> str:
    precision = true_positives / flagged if flagged else 0.0
    recall = true_positives / positives if positives else 0.0
    return f"{precision:.3f} / {recall:.3f} ({flagged})"


if __name__ == "__main__":
    main()
