"""The rate of one scope, estimated twice, with the alert rule's precision and recall, and what it could not see.

(a) The model-based rate: the mean ``p_hallucination`` of the verified calls that have one.
(b) The verdict-corrected rate: the stratified estimate over the audit verdicts
(:mod:`pipeline.rate.estimator`), each application's strata a frame of their own.
(c) The alert rule's precision (hallucinated among alerted calls) and recall (alerted among
hallucinated calls) from the same verdicts.  Unverified calls are named apart, never counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.rate.estimator import NO_DENOMINATOR, Estimate, Judged, estimate_ratio
from pipeline.rate.sampler import ALERTED, NO_PROBABILITY
from pipeline.rate.store import AuditVerdict, RateStore, Scope, ScopeCounts
from pipeline.words import counted


@dataclass(frozen=True, slots=True)
class RateReport:
    """Everything ``halluwatch rate`` and the pages say about one scope."""

    scope: Scope
    counts: ScopeCounts
    rate: Estimate
    precision: Estimate
    recall: Estimate
    verdicts: int  # audit verdicts on the scope's verified calls


def rate_report(store: RateStore, scope: Scope, target_half_width: float = 0.02) -> RateReport:
    """Read ``scope``'s calls and audit verdicts and estimate its rate, precision and recall."""
    return report_of(scope, store.counts(scope), store.verdicts(scope), target_half_width)


def report_of(
    scope: Scope, counts: ScopeCounts, verdicts: Sequence[AuditVerdict], target_half_width: float = 0.02
) -> RateReport:
    """The rate, precision and recall of ``scope`` from its calls' counts and audit verdicts, already read."""

    def estimate(part: Callable[[AuditVerdict], tuple[bool, bool]]) -> Estimate:
        judged: dict[str, list[Judged]] = {}
        for verdict in verdicts:
            y, x = part(verdict)
            judged.setdefault(verdict.frame, []).append(Judged(float(y), float(x)))
        return estimate_ratio(
            counts.population, judged, target_half_width=target_half_width, planning_value=counts.mean_probability
        )

    return RateReport(
        scope,
        counts,
        rate=estimate(lambda v: (v.hallucinated, True)),
        precision=estimate(lambda v: (v.hallucinated and v.alerted, v.alerted)),
        recall=estimate(lambda v: (v.hallucinated and v.alerted, v.hallucinated)),
        verdicts=len(verdicts),
    )


def percent(value: float) -> str:
    """A share as people read it: ``6.1 %``."""
    return f"{100 * value:.1f} %"


# One sentence on strata, printed where a line names one.
STRATA_WORDS = (
    "  (a stratum is a group of calls the review queue draws from separately: the alerted calls, the calls "
    "without a probability, and the others by their range of p_hallucination; each needs two verdicts "
    "before the rate has an interval)"
)


def estimate_words(
    estimate: Estimate, target_half_width: float, drawable: Mapping[str, int] | None = None, name_strata: bool = True
) -> str:
    """``8.1 % ± 3.2 (95 % CI 5.0-11.3 %)``, or what it still needs; with the verdicts that would narrow it.

    ``drawable``: per stratum, the calls the queue can still serve (nobody judged or skipped them):
    no line asks for more verdicts than those.  ``name_strata`` False says how many verdicts it
    needs but not where: beside a blind call, a stratum's name would say what was drawn next.
    """
    target = f"±{100 * target_half_width:g} points"
    left = sum(drawable.values()) if drawable is not None else None
    more = estimate.more_for_target if left is None else min(estimate.more_for_target, left)
    if estimate.bounds is None:
        if not estimate.short:
            return estimate.shortfall
        if not name_strata:
            return (
                f"needs {counted(sum(count for _, count in estimate.short), 'more verdict')} before it has an interval"
            )
        several_apps = len({frame.partition(" / ")[0] for frame, _ in estimate.short}) > 1
        needs = [_needs(frame, count, drawable, several_apps) for frame, count in estimate.short]
        return "needs " + (f"{', '.join(needs[:-1])} and {needs[-1]}" if len(needs) > 1 else needs[0])
    value, low, high = estimate.bounds
    if estimate.census:
        return f"{percent(value)}, every call judged ({counted(estimate.verdicts, 'verdict')}): exact, no interval"
    words = (f"{percent(value)} ± {50 * (high - low):.1f} (95 % CI {_interval(low, high)}), "
             f"from {counted(estimate.verdicts, 'verdict')}")  # fmt: skip
    if more:
        return f"{words}; {counted(more, 'more verdict')} would give {target}"
    if estimate.more_for_target:
        return f"{words}; no call left to narrow it: every other one was skipped"
    return f"{words}; within {target}"


def report_lines(report: RateReport, target_half_width: float) -> list[str]:
    """The report as ``halluwatch rate`` prints it."""
    counts = report.counts
    scope = report.scope
    lines = [f"{scope.describe()}, {scope.window()}: {counted(counts.calls, 'call')}"]
    if counts.calls:
        share = percent(counts.unverified_calls / counts.calls)
        reasons = "; ".join(f"{reason}: {count}" for reason, count in counts.unverified.items())
        lines.append(f"  unverified (the detectors could not check them; not counted below): "
                     f"{counts.unverified_calls} ({share}){': ' + reasons if reasons else ''}")  # fmt: skip
    model = (f"{percent(counts.mean_probability)} (mean p_hallucination of {counted(counts.with_probability, 'call')})"
             if counts.mean_probability is not None else "no call has a probability")  # fmt: skip
    lines.append(f"  model-based rate: {model}")
    lines.append(f"  verdict-corrected rate: {estimate_words(report.rate, target_half_width, counts.drawable)}")
    lines.append(f"  alert rule precision: {_ratio_words(report.precision, 'no alerted call judged yet')}")
    lines.append(f"  alert rule recall: {_ratio_words(report.recall, 'no hallucination judged yet')}")
    if counts.skipped:
        lines.append(f"  {counted(counts.skipped, 'call')} skipped in the review queue and not judged since")
    if report.rate.short:
        lines.append(STRATA_WORDS)
    return lines


def _needs(frame: str, count: int, drawable: Mapping[str, int] | None, name_app: bool) -> str:
    """``2 more verdicts among alerted calls``, and whether the queue can still serve them."""
    app, _, stratum = frame.partition(" / ")
    among = f"among {app}'s {_stratum_words(stratum)}" if name_app else f"among {_stratum_words(stratum)}"
    words = f"{counted(count, 'more verdict')} {among}"
    left = drawable.get(frame) if drawable is not None else None
    if left is None or left >= count:
        return words
    if left == 0:
        return f"{words} (every call left there was skipped; the queue serves it to other reviewers only)"
    return f"{words} (only {left} not skipped {'is' if left == 1 else 'are'} left)"


def _stratum_words(stratum: str) -> str:
    if stratum == ALERTED:
        return "alerted calls"
    if stratum == NO_PROBABILITY:
        return "calls without a probability"
    return f"calls with {stratum.replace('p ', 'p_hallucination ', 1)}"


def _interval(low: float, high: float) -> str:
    """``5.0-11.3 %``."""
    return f"{100 * low:.1f}-{percent(high)}"


def _ratio_words(estimate: Estimate, none_judged: str) -> str:
    if estimate.bounds is None:
        # The rate's line names the strata short of verdicts.
        return none_judged if estimate.shortfall == NO_DENOMINATOR else "too few verdicts"
    value, low, high = estimate.bounds
    return f"{percent(value)} (95 % CI {_interval(low, high)}), from {counted(estimate.verdicts, 'verdict')}"
