"""What an application's alerts do on its calls to come once its route minimums are chosen from its verdicts.

Each labelled file is one application's traffic, scored as `halluwatch eval` scores it
(bench/recalibration.py's scoring; ``--scored DIR`` keeps and reuses the scores).  Each seed
splits the set's source documents at random in two: the **traffic so far**, where the review
queue's sampler (equal shares per stratum, a seeded random order within each) draws the verdicts
and whose labels answer for the reviewer, and the **calls to come**, which nobody reviews.  The
application's proposal is fitted from those verdicts and the whole traffic so far
(:func:`pipeline.calibration.app_map.propose`, as Propose and ``review.auto_apply_after`` make it),
applied, and scored on the calls to come beside the shipped map and minimums.

The ceiling is what the same rules reach on the calls to come when their slack minimum is chosen
from those calls' own labels: the lowest at which at most 3 % of their faithful calls alert.

Shares are fractions, means over seeds unless the key ends in ``_p90`` (the 90th percentile over
seeds).  ``*_documents_*``: the share of the calls to come's documents with a faithful call
alerted, of those with a faithful call (a document's many answers are not independent chances).

    .venv/bin/python bench/operating_point.py [FILE.jsonl ...] [--verdicts 50,100,200,400] [--seeds 20]
        [--json OUT] [--scored DIR] [--workers 1] [--markdown]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recalibration import Application, Record, draw, shared_sets

from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.app_map import JudgedCall, propose
from pipeline.calibration.operating_point import TrafficCall
from pipeline.calibration.proposals import held_back
from pipeline.offline.evaluate import read_records

CEILING_TARGET = 0.03


def documents(path: Path) -> dict[str, str]:
    """Each record's source document: a digest of its context (records of one document share it)."""
    return {r.id: hashlib.sha256("\x00".join(r.context).encode()).hexdigest() for r in read_records(path)}


def split(records: Sequence[Record], document_of: dict[str, str], seed: int) -> tuple[list[Record], list[Record]]:
    """The records of a random half of the documents (the traffic so far) and of the other half (calls to come)."""
    names = sorted({document_of[r.key] for r in records})
    so_far = set(np.random.default_rng([seed, 7]).permutation(names)[: len(names) // 2])
    return [r for r in records if document_of[r.key] in so_far], [
        r for r in records if document_of[r.key] not in so_far
    ]


def routes_of(records: Sequence[Record], calibration: PlattScaling, minimums: dict[str, float],
              routing: RouteTargets) -> list[str | None]:  # fmt: skip
    """The route each record's alert takes under a map and minimums (None: no alert)."""
    agreement = routing.agreement(minimums)
    out = []
    for r in records:
        p = None if r.probability is None else calibration.apply_one(r.probability)
        rule = agreement.first_match(r.flags, p)
        out.append(rule.route if rule else None)
    return out


def shares(records: Sequence[Record], routes: Sequence[str | None], document_of: dict[str, str]) -> dict[str, float]:
    """Recall, the faithful records alerted and paged, and the documents with a faithful record alerted."""
    faithful = [(r, route) for r, route in zip(records, routes, strict=True) if not r.hallucinated]
    hallucinated = [route for r, route in zip(records, routes, strict=True) if r.hallucinated]
    with_faithful = {document_of[r.key] for r, _ in faithful}
    alarmed = {document_of[r.key] for r, route in faithful if route is not None}
    return {
        "recall": sum(route is not None for route in hallucinated) / max(len(hallucinated), 1),
        "alerted_faithful": sum(route is not None for _, route in faithful) / max(len(faithful), 1),
        "paged_faithful": sum(route == "page" for _, route in faithful) / max(len(faithful), 1),
        "alerted_faithful_documents": len(alarmed) / max(len(with_faithful), 1),
    }


def ceiling(records: Sequence[Record], routing: RouteTargets, shipped: dict[str, float]) -> float:
    """The recall of the lowest slack minimum (page as shipped) alerting at most 3 % of these records' faithful."""
    closed = routes_of(records, PlattScaling(), {**shipped, "slack": 1.0 + 1e-9}, routing)
    opened = routes_of(records, PlattScaling(), {**shipped, "slack": 0.0}, routing)
    faithful = sum(not r.hallucinated for r in records)
    hallucinated = len(records) - faithful
    alarms = sum(route is not None and not r.hallucinated for r, route in zip(records, closed, strict=True))
    hits = sum(route is not None and r.hallucinated for r, route in zip(records, closed, strict=True))
    recall = hits / max(hallucinated, 1) if alarms <= CEILING_TARGET * faithful else 0.0
    gated = sorted(((r.probability, r.hallucinated) for r, now, then in zip(records, closed, opened, strict=True)
                    if now is None and then is not None and r.probability is not None), reverse=True)  # fmt: skip
    index = 0
    while index < len(gated):  # lower the minimum one p at a time, ties together
        level = gated[index][0]
        while index < len(gated) and gated[index][0] == level:
            alarms += not gated[index][1]
            hits += gated[index][1]
            index += 1
        if alarms > CEILING_TARGET * faithful:
            break
        recall = hits / max(hallucinated, 1)
    return recall


def fitted(
    name: str, so_far: Sequence[Record], count: int, seed: int, app: Application
) -> tuple[PlattScaling, dict[str, float]]:
    """The map and minimums the application runs with after ``count`` verdicts on its traffic so far."""
    population: dict[str, int] = {}
    for r in so_far:
        population[r.stratum] = population.get(r.stratum, 0) + 1
    drawn = draw(so_far, count, seed)
    calls = [JudgedCall(r.key, r.stratum, r.probability, r.hallucinated, pi, r.flags)
             for r, pi in drawn if r.probability is not None]  # fmt: skip
    traffic = [TrafficCall(r.probability, r.flags) for r in so_far if r.probability is not None]
    proposal = propose(name, calls, population, app.routing, app.shipped, shrinkage=app.shrinkage, traffic=traffic)
    if held_back(proposal):
        return PlattScaling(), dict(app.shipped)
    return proposal.calibration, proposal.minimums


def run_set(name: str, records: list[Record], document_of: dict[str, str], counts: Sequence[int], seeds: int,
            app: Application) -> list[dict[str, object]]:  # fmt: skip
    """One row per verdict count: the calls to come under the fitted proposal and under the shipped one."""
    values: dict[int, dict[str, list[float]]] = {count: {} for count in counts}
    for seed in range(seeds):
        so_far, to_come = split(records, document_of, seed)
        shipped = shares(to_come, routes_of(to_come, PlattScaling(), app.shipped, app.routing), document_of)
        best = ceiling(to_come, app.routing, app.shipped)
        for count in counts:
            calibration, minimums = fitted(name, so_far, count, seed, app)
            after = shares(to_come, routes_of(to_come, calibration, minimums, app.routing), document_of)
            row = {"recall_to_come": after["recall"], "recall_to_come_shipped": shipped["recall"],
                   "alerted_faithful_to_come": after["alerted_faithful"],
                   "paged_faithful_to_come": after["paged_faithful"],
                   "alerted_faithful_documents_to_come": after["alerted_faithful_documents"],
                   "alerted_faithful_to_come_shipped": shipped["alerted_faithful"],
                   "ceiling_recall_to_come": best, "slack_minimum_on_shipped_p": calibration.inverse().apply_one(
                       min(minimums.get("slack", 1.0), 1 - 1e-6))}  # fmt: skip
            for key, value in row.items():
                values[count].setdefault(key, []).append(value)
    rows = []
    for count, found in values.items():
        row: dict[str, object] = {"set": name, "verdicts": count, "seeds": seeds}
        row |= {key: round(statistics.mean(v), 4) for key, v in found.items()}
        for key in ("alerted_faithful_to_come", "paged_faithful_to_come"):
            row[f"{key}_p90"] = round(float(np.percentile(found[key], 90)), 4)
        rows.append(row)
    return rows


COLUMNS = ("set", "verdicts", "recall_to_come_shipped", "recall_to_come", "ceiling_recall_to_come",
           "alerted_faithful_to_come", "alerted_faithful_to_come_p90", "paged_faithful_to_come",
           "paged_faithful_to_come_p90", "alerted_faithful_documents_to_come",
           "alerted_faithful_to_come_shipped")  # fmt: skip


def markdown(rows: Sequence[dict[str, object]]) -> list[str]:
    """The rows as bench/README.md's table."""
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS),
            *("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |" for row in rows)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="labelled JSONL files (default: the shared sets)")
    parser.add_argument("--verdicts", default="50,100,200,400", help="verdict counts drawn on the traffic so far")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1, help="scoring workers, where a set is not kept")
    parser.add_argument("--scored", type=Path, metavar="DIR", help="keep each set's scores in DIR; reuse those there")
    parser.add_argument("--json", type=Path, help="write one JSON object per set and verdict count here")
    parser.add_argument("--markdown", action="store_true", help="print the rows as a markdown table at the end")
    args = parser.parse_args()
    counts = [int(n) for n in args.verdicts.split(",")]
    app = Application.configured()
    out = []
    for path in args.files or shared_sets():
        records = app.scored(path, args.scored, args.workers)
        for row in run_set(path.stem, records, documents(path), counts, args.seeds, app):
            print(json.dumps(row), flush=True)
            out.append(row)
            if args.json:
                args.json.write_text("".join(json.dumps(r) + "\n" for r in out))
    if args.markdown:
        print("\n".join(markdown(out)))


if __name__ == "__main__":
    main()
