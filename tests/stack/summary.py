"""What a run of the real stack did, counted from what was sent, stored and received (`make stack`).

Counts, not assertions: `make stack` prints them and fails when :meth:`StackSummary.problems`
lists any; the end-to-end test asserts the same facts one by one.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from tests.integration.faults import llm_span_ids, rules_called_for
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, Request
from tests.stack.topology import Stack
from tests.stack.traffic import span_count


def traces_named(request: Request, traces: set[str]) -> set[str]:
    """The trace ids of ``traces`` that a Slack or PagerDuty request's body names."""
    return set(re.findall(r"[0-9a-f]{32}", json.dumps(request.body))) & traces


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear between order statistics."""
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1])


@dataclass(frozen=True)
class StackSummary:
    """One run's counts; ``alert_latency_ms`` is from the SDK's export to the Slack request."""

    collector: dict[str, str]
    kafka: dict[str, str]
    spans_sent: int
    llm_calls_sent: int
    llm_calls_stored: int  # sent calls found in llm_calls, each counted once
    calls_not_sent: int  # stored calls nobody sent (a non-LLM span stored, say)
    duplicates: int  # llm_calls rows beyond one per call once the table is merged
    redelivered_rows: int  # rows beyond one per call before merging: redeliveries the merge absorbs
    alerts_expected: int  # traces whose stored findings satisfy an alert rule
    alerts_delivered: int  # of those, traces that reached Slack or PagerDuty
    alerts_unexpected: int  # traces that reached Slack or PagerDuty without a rule calling for it
    alert_repeats: int  # requests beyond the first per trace and destination
    faults: list[str]
    alert_latency_ms: dict[str, float | int] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What went wrong, in words; empty when the run kept every promise."""
        lost = self.llm_calls_sent - self.llm_calls_stored
        checks = {
            f"{lost} LLM calls lost": lost > 0,
            f"{self.calls_not_sent} calls stored that were never sent": self.calls_not_sent > 0,
            f"{self.duplicates} duplicate rows after merging": self.duplicates > 0,
            f"{self.alerts_expected - self.alerts_delivered} alerts not delivered": (
                self.alerts_delivered < self.alerts_expected
            ),
            f"{self.alerts_unexpected} traces alerted that no rule calls for": self.alerts_unexpected > 0,
            f"{self.alert_repeats} repeated alert requests": self.alert_repeats > 0,
            "no alert at all": self.alerts_expected == 0,
        }
        return [problem for problem, failed in checks.items() if failed]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    stack: Stack,
    sent: Mapping[str, Sequence[TracesData]],
    exported: Mapping[str, float],
    collector: dict[str, str],
    kafka: dict[str, str],
) -> StackSummary:
    """Count what ``stack`` stored and delivered of ``sent``; latency over the traces in ``exported``.

    Merges ``llm_calls`` (``OPTIMIZE ... FINAL``) to count duplicates, so call it once, at the end.
    """
    everything = [trace for traces in sent.values() for trace in traces]
    calls_sent = set(llm_span_ids(everything))
    table = f"{stack.database}.llm_calls"
    rows = stack.query(f"SELECT count() FROM {table}")[0][0]
    stored = set(stack.query(f"SELECT trace_id, span_id FROM {table} FINAL"))
    stack.query(f"OPTIMIZE TABLE {table} FINAL")
    merged = stack.query(f"SELECT count() FROM {table}")[0][0]

    expected = set(rules_called_for(stack.query, stack.database))
    requests = {path: stack.alerting.requests(path) for path in (SLACK_POST_PATH, PAGERDUTY_PATH)}
    sent_traces = {trace for trace, _ in calls_sent}
    named = {path: _per_trace(found, sent_traces) for path, found in requests.items()}
    reached = {trace for counts in named.values() for trace in counts}
    repeats = sum(count - 1 for counts in named.values() for count in counts.values())
    return StackSummary(
        collector=collector,
        kafka=kafka,
        spans_sent=span_count(everything),
        llm_calls_sent=len(calls_sent),
        llm_calls_stored=len(stored & calls_sent),
        calls_not_sent=len(stored - calls_sent),
        duplicates=merged - len(stored),
        redelivered_rows=rows - len(stored),
        alerts_expected=len(expected),
        alerts_delivered=len(reached & expected),
        alerts_unexpected=len(reached - expected),
        alert_repeats=repeats,
        faults=list(stack.faults),
        alert_latency_ms=_latency(requests[SLACK_POST_PATH], exported, expected),
    )


def _per_trace(requests: Iterable[Request], traces: set[str]) -> Counter[str]:
    return Counter(trace for request in requests for trace in traces_named(request, traces))


def _latency(posts: Sequence[Request], exported: Mapping[str, float], alerted: set[str]) -> dict[str, float | int]:
    """p50 and p99 of first Slack request minus SDK export, over the alerted traces whose export was timed."""
    first: dict[str, float] = {}
    for post in sorted(posts, key=lambda request: request.received_at):
        for trace in traces_named(post, alerted & set(exported)):
            first.setdefault(trace, post.received_at)
    latencies = [1000 * (first[trace] - exported[trace]) for trace in first]
    if not latencies:
        return {"traces": 0}
    return {"p50": round(percentile(latencies, 50)), "p99": round(percentile(latencies, 99)), "traces": len(latencies)}
