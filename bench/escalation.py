"""What escalating uncertain calls to a judge of stated accuracy does to the alerts, within a budget, per route.

Each labelled file is one application's traffic, scored as `halluwatch eval` scores it
(bench/recalibration.py's scoring; ``--scored DIR`` reads the scores an earlier run kept there).
Records are split by source document (``halluwatch train``'s split): the documents the verdict-model
side kept are the traffic so far, where the review queue's sampler draws ``--verdicts`` of them, as
bench/recalibration.py draws them, and their labels answer for the reviewer; the application's
map and route minimums are refitted from them and the judge's weight from the judge's answers on
the same calls.  Everything is then measured on the calls to come, the held-out documents, which
no verdict and no fit saw.

The judge is simulated: on each record it answers the record's label with probability
``--judge-accuracy`` and the other label otherwise.  The budget is ``--judge-share`` of the
calls, given per minute of traffic (``--window`` calls a minute, in a random order) through
:class:`pipeline.judge.budget.JudgeBudget`; each minute the band's most valuable calls go
to the judge (:mod:`pipeline.escalation.band`), and the route is decided again with the answer.
"Before" is the map and minimums chosen without the judge's answers, with no judge; ``*_unjudged``
is "after"'s rules with its answers left out (what the answers alone add).  Means over ``--seeds`` draws.

The judge's answers are part of the application's traffic so far: it answered every drawn call
and, within the same budget, the band's most valuable calls of each minute there.  The route
minimums are chosen as Propose chooses them (:mod:`pipeline.calibration.operating_point`), on that
traffic with the judged p included (a "hallucinated" answer one more flag), so that each route's
target holds with the judge on; "before" chooses them on the same verdicts and traffic without the
judge's answers.  A proposal that changes nothing keeps the shipped map and minimums either way.

``--real-judge`` asks the application's own model instead (bench/real_judge.py): Gemma 3 270M on
llama-cpp-python's server as ``make test-llm`` runs it, or the endpoint of ``--judge-endpoint``,
about ``--records`` held-out records of each set, half hallucinated and half faithful, the calls a
judge would be asked about (the band before any verdicts) first.  Its rows carry its sensitivity,
specificity, share of "unknown", tokens and seconds a call; ``judge_accuracy`` is null.

The probabilities come from the shipped verdict model, which was fitted on every document of
RAGTruth, SummEdits, BEGIN, FaithDial and WiCE (FaithBench and HaluEval were never trained on):
for those sets they are in sample.  bench/QUALITY.md measures what that flatters, cross-fitted by
document: on RAGTruth AUROC 0.827 in sample against 0.822 out of fold, recall of alerts 0.287
against 0.279.  Each row says which it is (``verdict_in_sample``).

    .venv/bin/python bench/escalation.py [FILE.jsonl ...] [--scored DIR] [--judge-accuracy 0.85]
        [--judge-share 0.01,0.05,0.1,1] [--verdicts 0,100] [--seeds 5] [--window 100] [--json]
        [--real-judge --records 20 [--judge-endpoint URL --judge-model NAME] [--deadline 180]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from real_judge import ask, picked, standing_in, tally
from recalibration import Application, Record, draw, shared_sets

from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.app_map import JudgedCall, Proposal, propose
from pipeline.calibration.operating_point import TrafficCall
from pipeline.calibration.proposals import held_back
from pipeline.config.settings import load_settings
from pipeline.escalation.band import Escalation, decided_route, escalation, most_valuable
from pipeline.judge.budget import BudgetLimits, JudgeBudget, LocalCounter
from pipeline.judge.weight import SHIPPED_PRIOR, JudgeWeight, Judgment
from pipeline.offline.evaluate import read_records
from pipeline.offline.train import VERDICT_SETS, held_out
from pipeline.tools.local_model import MODEL_ALIAS, LlamaServer, assemble_model

ROUTES = ("page", "slack")


@dataclass(frozen=True, slots=True)
class Fitted:
    """What the application runs with after its verdicts: the map, the routes' rules, the judge's weight.

    ``without_judge``: the rules "before" runs under (the minimums chosen on the detectors' p).
    """

    calibration: PlattScaling
    agreement: AgreementRule
    weight: JudgeWeight
    judged_verdicts: int
    without_judge: AgreementRule
    minimums: Mapping[str, float]


def simulated_judgments(records: Sequence[Record], accuracy: float, seed: int) -> dict[str, Judgment]:
    """The judge's answer on every record: its label with probability ``accuracy``, the other otherwise."""
    right = np.random.default_rng([seed, 1]).random(len(records)) < accuracy
    return {r.key: Judgment.HALLUCINATED if r.hallucinated == bool(ok) else Judgment.FAITHFUL
            for r, ok in zip(records, right, strict=True)}  # fmt: skip


def fitted(
    name: str, fitting: Sequence[Record], verdicts: int, seed: int, judgments: dict[str, Judgment],
    routing: RouteTargets, shipped: dict[str, float], shrinkage: float, share: float, window: int,
) -> Fitted:  # fmt: skip
    """The map, minimums and judge weight after ``verdicts`` drawn by the review queue's sampler (0: shipped).

    The application's traffic so far is ``fitting``: the judge answered each drawn call and, within
    ``share`` of the budget, the band's most valuable calls of each minute (under the minimums chosen
    without it).
    Its minimums are chosen on that traffic with the judged p included (the judge's "hallucinated"
    one more flag), as Propose chooses them; "before" chooses them on the same verdicts and traffic
    without the judge's answers.
    """
    if not verdicts:
        shipped_rules = routing.agreement(shipped)
        return Fitted(PlattScaling(), shipped_rules, SHIPPED_PRIOR, 0, shipped_rules, shipped)
    population: dict[str, int] = {}
    for r in fitting:
        population[r.stratum] = population.get(r.stratum, 0) + 1
    drawn = draw(fitting, verdicts, seed)
    reviewed = {r.key for r, _ in drawn}
    with_p = [r for r in fitting if r.probability is not None]

    def proposed(judged: set[str]) -> Proposal:
        calls = [JudgedCall(r.key, r.stratum, r.probability, r.hallucinated, pi, r.flags,
                            judgments[r.key] if r.key in judged else None)
                 for r, pi in drawn if r.probability is not None]  # fmt: skip
        traffic = [TrafficCall(r.probability, r.flags, judgments[r.key] if r.key in judged else None) for r in with_p]
        return propose(name, calls, population, routing, shipped, shrinkage=shrinkage, traffic=traffic)

    before = proposed(set())
    # The judge's band on the traffic so far as it runs once the minimums chosen without it are applied.
    rules = routing.agreement(before.minimums)
    band = [escalation(rules, r.flags, None if r.probability is None else before.calibration.apply_one(r.probability),
                       before.judge) for r in fitting]  # fmt: skip
    order = list(np.random.default_rng([seed, 3]).permutation(len(fitting)))
    after = proposed({fitting[i].key for i in escalated(name, band, share, window, order)} | reviewed)
    if held_back(after):
        shipped_rules = routing.agreement(shipped)
        return Fitted(PlattScaling(), shipped_rules, after.judge, len(drawn), shipped_rules, shipped)
    return Fitted(after.calibration, routing.agreement(after.minimums), after.judge, len(drawn),
                  routing.agreement(before.minimums), after.minimums)  # fmt: skip


def escalated(
    name: str, candidates: Sequence[Escalation | None], share: float, window: int, order: Sequence[int]
) -> set[int]:
    """The records the judge answers: each minute's most valuable band calls, as many as its budget grants."""
    clock = [0.0]
    budget = JudgeBudget({name: BudgetLimits(calls_per_minute=share * window)}, LocalCounter(), lambda: clock[0])
    chosen: set[int] = set()
    for first in range(0, len(order), window):
        minute = [(i, e) for i in order[first : first + window] if (e := candidates[i]) is not None]
        granted = budget.grant(name, len(minute), tokens_each=0)
        chosen |= {i for i, _ in most_valuable(minute, granted)}
        clock[0] += 60.0
    return chosen


def rates(records: Sequence[Record], routes: Sequence[str | None]) -> dict[str, float]:
    """Recall and faithful share alerted, on any route and on each route alone."""
    faithful = [route for route, r in zip(routes, records, strict=True) if not r.hallucinated]
    hallucinated = [route for route, r in zip(routes, records, strict=True) if r.hallucinated]
    out = {"recall": _share(hallucinated, None), "alerted_faithful": _share(faithful, None)}
    for route in ROUTES:
        out[f"{route}_recall"] = _share(hallucinated, route)
        out[f"{route}_faithful"] = _share(faithful, route)
    return out


def _share(routes: Sequence[str | None], route: str | None) -> float:
    hits = sum(r is not None for r in routes) if route is None else sum(r == route for r in routes)
    return hits / len(routes) if routes else 0.0


def run_set(
    name: str, records: list[Record], held: set[str], args: argparse.Namespace, routing: RouteTargets,
    shipped: dict[str, float], shrinkage: float, judge: Callable[[int], dict[str, Judgment]],
    described: dict[str, object],
) -> list[dict[str, object]]:  # fmt: skip
    """One row per verdict count and judge share: before and after on the held-out documents, means over seeds.

    ``judge`` gives each seed's judgments of every record; ``described`` says which judge that is.
    """
    fitting = [r for r in records if r.key not in held]
    measured = [r for r in records if r.key in held]
    results: dict[tuple[int, float], dict[str, list[float]]] = {}
    for seed in range(args.seeds):
        judgments = judge(seed)
        order = list(np.random.default_rng([seed, 2]).permutation(len(measured)))
        for verdicts in args.verdicts:
            for share in args.judge_share:
                fit = fitted(name, fitting, verdicts, seed, judgments, routing, shipped, shrinkage, share, args.window)
                p = [None if r.probability is None else fit.calibration.apply_one(r.probability) for r in measured]
                calls = list(zip(measured, p, strict=True))
                before = [decided_route(fit.without_judge, r.flags, q, fit.weight) for r, q in calls]
                unjudged = [decided_route(fit.agreement, r.flags, q, fit.weight) for r, q in calls]
                band = [escalation(fit.agreement, r.flags, q, fit.weight) for r, q in calls]
                judged = escalated(name, band, share, args.window, order)
                after = [decided_route(fit.agreement, r.flags, q, fit.weight, judgments[r.key]) if i in judged
                         else now for i, (r, q, now) in enumerate(zip(measured, p, unjudged, strict=True))]  # fmt: skip
                values = {f"{k}_before": v for k, v in rates(measured, before).items()}
                values |= {f"{k}_after": v for k, v in rates(measured, after).items()}
                # The same rules without the judge's answers: what its answers alone add.
                values |= {f"{k}_unjudged": v for k, v in rates(measured, unjudged).items()}
                values |= {"judge_calls": len(judged), "band": sum(e is not None for e in band),
                           "judged_verdicts": fit.judged_verdicts,
                           "weight_hallucinated": fit.weight.shift(Judgment.HALLUCINATED),
                           "weight_faithful": fit.weight.shift(Judgment.FAITHFUL),
                           **{f"{route}_minimum": m for route, m in fit.minimums.items()}}  # fmt: skip
                for key, value in values.items():
                    results.setdefault((verdicts, share), {}).setdefault(key, []).append(value)
    return [
        {"set": name, **described, "judge_share": share, "verdicts": verdicts,
         "verdict_in_sample": name in VERDICT_SETS, "records": len(measured),
         "faithful": sum(not r.hallucinated for r in measured),
         **{k: round(statistics.mean(v), 4) for k, v in values.items()}}
        for (verdicts, share), values in results.items()
    ]  # fmt: skip


def band_keys(records: Sequence[Record], routing: RouteTargets, shipped: dict[str, float]) -> set[str]:
    """The records a judge would be asked about before any verdicts: the shipped map, minimums and prior."""
    agreement = routing.agreement(shipped)
    return {r.key for r in records if escalation(agreement, r.flags, r.probability, SHIPPED_PRIOR) is not None}


def simulated_judge_rows(
    path: Path, records: list[Record], held: set[str], args: argparse.Namespace, app: Application
) -> list[dict[str, object]]:
    """:func:`run_set` with the simulated judge of ``--judge-accuracy``."""
    return run_set(path.stem, records, held, args, app.routing, app.shipped, app.shrinkage,
                   lambda seed: simulated_judgments(records, args.judge_accuracy, seed),
                   {"judge_accuracy": args.judge_accuracy})  # fmt: skip


def real_judge_rows(
    path: Path, records: list[Record], held: set[str], args: argparse.Namespace, app: Application, endpoint: str
) -> list[dict[str, object]]:
    """:func:`run_set` with the real judge's answers on ``--records`` of the held-out records."""
    measured = [r for r in records if r.key in held]
    asked_about = picked(measured, args.records, band_keys(measured, app.routing, app.shipped), seed=0)
    asked = ask(endpoint, args.judge_model, path, asked_about, args.deadline)
    described: dict[str, object] = {"judge": args.judge_model, "judge_accuracy": None, **tally(asked)}
    return run_set(path.stem, records, held, args, app.routing, app.shipped, app.shrinkage,
                   lambda seed: standing_in(asked, records, held, seed), described)  # fmt: skip


def markdown(rows: Sequence[dict[str, object]]) -> list[str]:
    """The rows as bench/README.md's table (the real judge's with its rates and cost)."""
    columns = ["set", "judge_accuracy", "verdicts", "judge_share", "judge_calls", "band", "recall_before",
               "recall_after", "alerted_faithful_before", "alerted_faithful_after", "page_faithful_after",
               "weight_hallucinated", "weight_faithful"]  # fmt: skip
    if rows and "sensitivity" in rows[0]:
        columns[1:2] = ["judged", "sensitivity", "specificity", "unknown_share", "tokens_per_call", "seconds_per_call"]
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="labelled JSONL files (default: the shared sets)")
    parser.add_argument("--scored", type=Path, metavar="DIR", help="each set's scores kept by bench/recalibration.py")
    parser.add_argument("--judge-accuracy", type=float, default=0.85)
    parser.add_argument("--judge-share", type=_floats, default=[0.01, 0.05, 0.1, 1.0], help="budget, share of calls")
    parser.add_argument("--verdicts", type=_ints, default=[0, 100], help="review verdicts before measuring")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--window", type=int, default=100, help="calls a minute: the budget is granted per minute")
    parser.add_argument("--workers", type=int, default=1, help="scoring workers, where a set is not kept")
    parser.add_argument("--json", action="store_true", help="one JSON object per setting (else a markdown table)")
    parser.add_argument("--real-judge", action="store_true", help="ask the application's own model, not a simulation")
    parser.add_argument("--records", type=int, default=20, help="real judge: held-out records asked per set")
    parser.add_argument("--judge-endpoint", help="real judge: an OpenAI-compatible base URL (default: local Gemma)")
    parser.add_argument("--judge-model", default=MODEL_ALIAS, help="real judge: the model the endpoint is asked for")
    parser.add_argument("--deadline", type=float, default=load_settings().escalation.deadline_seconds,
                        help="real judge: seconds each call may take (the worker's escalation deadline)")  # fmt: skip
    args = parser.parse_args()
    app = Application.configured()
    rows = []
    with contextlib.ExitStack() as stack:
        endpoint = args.judge_endpoint or (stack.enter_context(local_model()).base_url if args.real_judge else "")
        for path in args.files or shared_sets():
            records = app.scored(path, args.scored, args.workers)
            held = {r.id for r in read_records(path) if held_out(r)}
            if args.real_judge:
                found = real_judge_rows(path, records, held, args, app, endpoint)
            else:
                found = simulated_judge_rows(path, records, held, args, app)
            for row in found:
                if args.json:
                    print(json.dumps(row), flush=True)
                rows.append(row)
    if not args.json:
        print("\n".join(markdown(rows)))


@contextlib.contextmanager
def local_model() -> Iterator[LlamaServer]:
    """Gemma 3 270M on llama-cpp-python's server, as ``make test-llm`` runs it (the llm-test extra)."""
    with tempfile.TemporaryDirectory(prefix="escalation-gemma-") as name:
        folder = Path(name)
        with LlamaServer(assemble_model(folder), folder / "server.log", chat_format="gemma") as server:
            yield server


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


if __name__ == "__main__":
    main()
