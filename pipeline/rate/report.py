"""The rate of one scope, estimated twice, with the alert rule's precision and recall, and what it could not see.

(a) The model-based rate: the mean ``p_hallucination`` of the verified calls that have one.
(b) The verdict-corrected rate: the stratified estimate over the audit verdicts
(:mod:`pipeline.rate.estimator`), each application's strata a frame of their own.
(c) The alert rule's precision (hallucinated among alerted calls) and recall (alerted among
hallucinated calls) from the same verdicts.  Unverified calls are named apart, never counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.rate.estimator import NO_DENOMINATOR, Estimate, Judged, estimate_ratio
from pipeline.rate.store import AuditVerdict, RateStore, Scope, ScopeCounts


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
    counts = store.counts(scope)
    verdicts = store.verdicts(scope)

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


def estimate_words(estimate: Estimate, target_half_width: float) -> str:
    """``8.1 % ± 3.2 (95 % CI 5.0-11.3 %)``, or why there is none; with the verdicts that would narrow it."""
    target = f"±{100 * target_half_width:g} points"
    if estimate.bounds is None:
        more = estimate.more_for_target
        return f"{estimate.shortfall}; about {more} more verdicts would give {target}" if more else estimate.shortfall
    value, low, high = estimate.bounds
    words = (f"{percent(value)} ± {50 * (high - low):.1f} (95 % CI {_interval(low, high)}), "
             f"from {estimate.verdicts} verdicts")  # fmt: skip
    if estimate.more_for_target:
        return f"{words}; {estimate.more_for_target} more verdicts would give {target}"
    return f"{words}; within {target}"


def report_lines(report: RateReport, target_half_width: float) -> list[str]:
    """The report as ``halluwatch rate`` prints it."""
    counts = report.counts
    scope = report.scope
    lines = [f"{scope.describe()}, {scope.window()}: {counts.calls} calls"]
    if counts.calls:
        share = percent(counts.unverified_calls / counts.calls)
        reasons = "; ".join(f"{reason}: {count}" for reason, count in counts.unverified.items())
        lines.append(f"  unverified (the detectors could not check them; not counted below): "
                     f"{counts.unverified_calls} ({share}){': ' + reasons if reasons else ''}")  # fmt: skip
    model = (f"{percent(counts.mean_probability)} (mean p_hallucination of {counts.with_probability} calls)"
             if counts.mean_probability is not None else "no call has a probability")  # fmt: skip
    lines.append(f"  model-based rate: {model}")
    lines.append(f"  verdict-corrected rate: {estimate_words(report.rate, target_half_width)}")
    lines.append(f"  alert rule precision: {_ratio_words(report.precision, 'no alerted call judged yet')}")
    lines.append(f"  alert rule recall: {_ratio_words(report.recall, 'no hallucination judged yet')}")
    if counts.skipped:
        lines.append(f"  {counts.skipped} calls skipped in the review queue and not judged since")
    return lines


def _interval(low: float, high: float) -> str:
    """``5.0-11.3 %``."""
    return f"{100 * low:.1f}-{percent(high)}"


def _ratio_words(estimate: Estimate, none_judged: str) -> str:
    if estimate.bounds is None:
        # The rate's line names the strata short of verdicts.
        return none_judged if estimate.shortfall == NO_DENOMINATOR else "too few verdicts"
    value, low, high = estimate.bounds
    return f"{percent(value)} (95 % CI {_interval(low, high)}), from {estimate.verdicts} verdicts"
