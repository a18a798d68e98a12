"""How far an application's own verdicts move p_hallucination and the routes' false alarms: before and after.

Each labelled file (the shared JSONL format) is one application's traffic: every record is
scored as `halluwatch eval` scores it (the worker's detectors, the shipped verdict and route
minimums).  The review queue's own sampler (:mod:`pipeline.rate.sampler`: equal shares per
stratum of p_hallucination and the alerted calls, a seeded random order within each) draws the
records people would judge; their labels answer for the reviewer.  After each count of
``--verdicts`` the application's map and route minimums are fitted from those verdicts
(:func:`pipeline.calibration.app_map.propose`, the shrinkage of ``review.map_shrinkage``), and the
records nobody reviewed are scored before (shipped) and after (the map): ECE of p, the share of
faithful records paged and alerted (targets 1 % and 3 %), and the recall of alerts.  Averaged
over ``--seeds`` draws.

ECE on a few hundred records is noisy even for a perfect probability, so ``ece_floor95`` is the
95th percentile of the ECE that a perfectly calibrated p with the after-values would show on the
same records (labels drawn from p itself, 200 times).  And ``ece_random_sample`` is what the same
number of verdicts gives at best without strata or a prior: a Platt map fitted on a simple random
sample of that many records, each weighing the same, measured on the rest.

    .venv/bin/python bench/recalibration.py [FILE.jsonl ...] [--verdicts 25,50,100,200] [--seeds 5] [--json OUT]
        [--markdown]  (writes its section of bench/QUALITY.md) [--scored DIR]  (keeps each set's scores there
        and reuses them: comparing two versions of the fitting then scores each set once)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm

from detectors.thresholds import load_thresholds
from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.app_map import JudgedCall, Proposal, propose
from pipeline.calibration.fitting import fit_platt
from pipeline.calibration.proposals import held_back
from pipeline.calibration.reliability import expected_calibration_error
from pipeline.config.settings import load_settings
from pipeline.offline.evaluate import evaluate, hallucination_flags, read_records
from pipeline.rate.sampler import Strata, inclusion_probability, next_stratum

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# The shared sets whose records have sources to check answers against (HaluEval's have none).
WITH_CONTEXT = ("ragtruth", "faithbench", "summedits", "begin", "faithdial_audit", "wice")
FLOOR_DRAWS = 200
QUALITY = Path(__file__).with_name("QUALITY.md")
SECTION = "## Recalibration from an application's verdicts"


@dataclass(frozen=True, slots=True)
class Record:
    """One scored record of the application's traffic."""

    key: str
    probability: float | None
    flags: dict[str, int]
    hallucinated: bool
    stratum: str


def scored(path: Path, workers: int, strata: Strata, routing: RouteTargets, minimums: dict[str, float]) -> list[Record]:
    """The file's labelled records as `halluwatch eval` scores them, each with its audit stratum."""
    records = [r for r in read_records(path) if r.hallucinated is not None]
    settings = load_settings()
    agreement = routing.agreement(minimums)
    out = []
    for record, output in zip(records, tqdm(evaluate(records, settings, workers=workers), total=len(records),
                                            desc=path.stem), strict=True):  # fmt: skip
        flags = hallucination_flags(output)
        alerted = agreement.first_match(flags, output.p_hallucination) is not None
        stratum = strata.of(output.p_hallucination, alerted)
        out.append(Record(record.id, output.p_hallucination, flags, bool(record.hallucinated), stratum))
    return out


def scored_once(path: Path, keep: Path | None, workers: int, strata: Strata, routing: RouteTargets,
                minimums: dict[str, float]) -> list[Record]:  # fmt: skip
    """:func:`scored`, read from ``keep`` when an earlier run left the set's scores there (and left there when not)."""
    kept = keep / f"{path.stem}.jsonl" if keep else None
    if kept and kept.exists():
        return [Record(**json.loads(line)) for line in kept.read_text().splitlines()]
    records = scored(path, workers, strata, routing, minimums)
    if kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text("".join(json.dumps(dataclasses.asdict(r)) + "\n" for r in records))
    return records


def shared_sets() -> list[Path]:
    """The shared labelled sets with context, as the benches read them by default."""
    return [DATA / name / f"{name}.jsonl" for name in WITH_CONTEXT]


@dataclass(frozen=True, slots=True)
class Application:
    """What the benches play a labelled set as: one application under the default settings."""

    routing: RouteTargets
    shipped: dict[str, float]
    strata: Strata
    shrinkage: float

    @classmethod
    def configured(cls) -> Application:
        """The default settings' routes, shipped minimums, review strata and map shrinkage."""
        settings = load_settings()
        return cls(RouteTargets.from_settings(settings.alerting),
                   load_thresholds(settings.thresholds_file).alert_probability,
                   Strata.configured(settings.review), settings.review.map_shrinkage)  # fmt: skip

    def scored(self, path: Path, keep: Path | None, workers: int) -> list[Record]:
        """:func:`scored_once` for this application."""
        return scored_once(path, keep, workers, self.strata, self.routing, self.shipped)


def draw(records: Sequence[Record], count: int, seed: int) -> list[tuple[Record, float]]:
    """``count`` records as the review queue serves them, each with its inclusion probability (k / N)."""
    rng = np.random.default_rng(seed)
    by_stratum: dict[str, list[Record]] = {}
    for index in rng.permutation(len(records)):
        by_stratum.setdefault(records[index].stratum, []).append(records[index])
    population = {name: len(members) for name, members in by_stratum.items()}
    judged = dict.fromkeys(by_stratum, 0)
    drawn: list[tuple[Record, float]] = []
    while len(drawn) < count:
        open_strata = [name for name, members in by_stratum.items() if judged[name] < len(members)]
        stratum = next_stratum(population, judged, open_strata)
        if stratum is None:
            break
        probability = inclusion_probability(judged[stratum], population[stratum])
        drawn.append((by_stratum[stratum][judged[stratum]], probability))
        judged[stratum] += 1
    return drawn


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one map and its minimums do on the records nobody reviewed."""

    ece: float
    page_faithful: float
    alerted_faithful: float
    recall: float


def outcome(
    records: Sequence[Record], calibration: PlattScaling, minimums: dict[str, float], routing: RouteTargets
) -> Outcome:
    """ECE of the mapped p, the faithful records paged and alerted, and the hallucinated ones alerted."""
    agreement = routing.agreement(minimums)
    with_p = [r for r in records if r.probability is not None]
    p = calibration.apply(np.array([r.probability for r in with_p])) if with_p else np.zeros(0)
    mapped = {r.key: float(q) for r, q in zip(with_p, p, strict=True)}
    routes = []
    for r in records:
        rule = agreement.first_match(r.flags, mapped.get(r.key))
        routes.append(rule.route if rule else None)
    faithful = [route for route, r in zip(routes, records, strict=True) if not r.hallucinated]
    hallucinated = [route for route, r in zip(routes, records, strict=True) if r.hallucinated]
    return Outcome(
        ece=expected_calibration_error(list(p), [r.hallucinated for r in with_p]),
        page_faithful=sum(route == "page" for route in faithful) / max(len(faithful), 1),
        alerted_faithful=sum(route is not None for route in faithful) / max(len(faithful), 1),
        recall=sum(route is not None for route in hallucinated) / max(len(hallucinated), 1),
    )


def ece_floor95(records: Sequence[Record], calibration: PlattScaling, seed: int) -> float:
    """The 95th percentile of the ECE a perfectly calibrated p with these values shows on these records."""
    p = calibration.apply(np.array([r.probability for r in records if r.probability is not None]))
    rng = np.random.default_rng(seed)
    draws = [expected_calibration_error(list(p), list(rng.random(len(p)) < p)) for _ in range(FLOOR_DRAWS)]
    return float(np.percentile(draws, 95))


def random_sample_ece(records: Sequence[Record], count: int, seed: int) -> float:
    """ECE on the other records of a Platt map fitted on ``count`` records drawn at random, each weighing the same."""
    with_p = [r for r in records if r.probability is not None]
    order = np.random.default_rng(seed).permutation(len(with_p))
    p = np.array([r.probability for r in with_p])
    y = np.array([float(r.hallucinated) for r in with_p])
    fitted = fit_platt(p[order[:count]], y[order[:count]])
    rest = order[count:]
    return expected_calibration_error(list(fitted.apply(p[rest])), list(y[rest].astype(bool)))


def refit(
    name: str, drawn: Sequence[tuple[Record, float]], population: dict[str, int], routing: RouteTargets,
    shipped: dict[str, float], shrinkage: float,
) -> Proposal:  # fmt: skip
    """The application's proposed map and minimums from the drawn records' labels (``held_back``: not applied)."""
    calls = [JudgedCall(r.key, r.stratum, r.probability, r.hallucinated, pi, r.flags)
             for r, pi in drawn if r.probability is not None]  # fmt: skip
    return propose(name, calls, population, routing, shipped, shrinkage=shrinkage)


def run_set(
    name: str, records: list[Record], counts: Sequence[int], seeds: int, routing: RouteTargets,
    shipped: dict[str, float], shrinkage: float,
) -> list[dict[str, object]]:  # fmt: skip
    """One JSON object per verdict count: before and after on the unreviewed records, averaged over seeds."""
    population: dict[str, int] = {}
    for r in records:
        population[r.stratum] = population.get(r.stratum, 0) + 1
    rows = []
    for count in counts:
        results: dict[str, list[float]] = {}
        for seed in range(seeds):
            drawn = draw(records, count, seed)
            reviewed = {r.key for r, _ in drawn}
            proposal = refit(name, drawn, population, routing, shipped, shrinkage)
            applied = not held_back(proposal)
            calibration, minimums = (proposal.calibration, proposal.minimums) if applied else (PlattScaling(), shipped)
            rest = [r for r in records if r.key not in reviewed]
            before = outcome(rest, PlattScaling(), shipped, routing)
            after = outcome(rest, calibration, minimums, routing)
            values = {
                "ece_before": before.ece, "ece_after": after.ece,
                "ece_floor95": ece_floor95(rest, calibration, seed), "applied": float(applied),
                "ece_proposal": outcome(rest, proposal.calibration, proposal.minimums, routing).ece,
                "ece_random_sample": random_sample_ece(records, count, seed),
                "page_faithful_before": before.page_faithful, "page_faithful_after": after.page_faithful,
                "alerted_faithful_before": before.alerted_faithful, "alerted_faithful_after": after.alerted_faithful,
                "recall_before": before.recall, "recall_after": after.recall,
            }  # fmt: skip
            for key, value in values.items():
                results.setdefault(key, []).append(value)
        rows.append({"set": name, "verdicts": count, **{k: round(statistics.mean(v), 4) for k, v in results.items()}})
    return rows


def write_section(path: Path, rows: Sequence[dict[str, object]], seeds: int) -> None:
    """Replace (or add) this bench's section at the end of QUALITY.md (bench/quality.py keeps it when it rewrites)."""
    text = path.read_text() if path.exists() else ""
    head = text.split(SECTION)[0].rstrip()
    columns = ["set", "verdicts", "ece_before", "ece_after", "ece_floor95", "applied", "ece_proposal",
               "ece_random_sample", "page_faithful_before",
               "page_faithful_after", "alerted_faithful_before", "alerted_faithful_after", "recall_before",
               "recall_after"]  # fmt: skip
    lines = [
        SECTION,
        "",
        f"`.venv/bin/python bench/recalibration.py --workers 2 --seeds {seeds} --markdown`: each shared",
        "set with context as one application's traffic, scored as `halluwatch eval` scores it; the review",
        "queue's sampler draws the verdicts (the labels answer), the app's map and minimums are fitted after",
        f"each count, and the records nobody reviewed are scored before (shipped) and after; means over {seeds}",
        "seeds. After: the proposal where it beats the shipped calibration out of sample on the verdicts",
        "(Brier), as `review.auto_apply_after` applies, else the shipped one; applied:",
        "the share of draws it did; ece_proposal: the proposal's ECE either way. ece_floor95: the 95th",
        "percentile of the ECE a perfectly calibrated p with the same values shows on the same records.",
        "ece_random_sample: a Platt map fitted on as many records drawn at random (no strata, no prior), on",
        "the rest: what that many",
        "verdicts give at best.",
        "Shares of faithful records paged and alerted (targets 1 % and 3 %) and recall of alerts.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows),
        "",
    ]
    path.write_text(head + "\n\n" + "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="labelled JSONL files (default: the shared sets)")
    parser.add_argument("--verdicts", default="25,50,100,200", help="verdict counts to recalibrate after")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write one JSON object per set and verdict count here")
    parser.add_argument("--scored", type=Path, metavar="DIR", help="keep each set's scores in DIR; reuse those there")
    parser.add_argument("--markdown", action="store_true", help=f"write the results as the {SECTION!r} of QUALITY.md")
    args = parser.parse_args()
    counts = [int(n) for n in args.verdicts.split(",")]
    app = Application.configured()
    out = []
    for path in args.files or shared_sets():
        records = app.scored(path, args.scored, args.workers)
        rows = run_set(path.stem, records, counts, args.seeds, app.routing, app.shipped, app.shrinkage)
        for row in rows:
            print(json.dumps(row), flush=True)
        out += rows
    if args.json:
        args.json.write_text("".join(json.dumps(row) + "\n" for row in out))
    if args.markdown:
        write_section(QUALITY, out, args.seeds)


if __name__ == "__main__":
    main()
