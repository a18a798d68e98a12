"""What a run of the real stack did, counted from what was sent, stored and received (`make stack`).

Counts, not assertions: `make stack` prints them and fails when :meth:`StackSummary.problems`
lists any; the end-to-end test asserts the same facts one by one.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.alerting.alert import DeliveryStatus
from tests.integration.faults import llm_span_ids, read_topic, rules_called_for
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, Request
from tests.stack.cache import say
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
    """One run's counts; ``alert_latency_ms`` is from the SDK's export to the Slack request, over the timed traces."""

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
    alerts_digested: int  # of those, traces a route sent inside a digest (over its rate limit)
    alerts_unexpected: int  # traces that reached Slack or PagerDuty without a rule calling for it
    alert_repeats: int  # requests beyond the first per trace and destination
    faults: list[str]
    # Partitions the dropped-records watchdog re-read, in the steady traffic and through the faults.
    partitions_reread: dict[str, int] = field(default_factory=dict)
    alert_latency_ms: dict[str, float | int] = field(default_factory=dict)
    # The same, split where the trace's first record reached each topic (Kafka's CreateTime), p50 each.
    alert_stages_ms: dict[str, float] = field(default_factory=dict)

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
    rereads_in_steady_traffic: int,
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
    first_post = _first_requests(requests[SLACK_POST_PATH], expected & set(exported))
    latencies = _stages(stack, exported, first_post)
    sent_traces = {trace for trace, _ in calls_sent}
    named = {path: _per_trace(found, sent_traces) for path, found in requests.items()}
    reached = {trace for counts in named.values() for trace in counts}
    repeats = sum(count - 1 for counts in named.values() for count in counts.values())
    repeated = {trace for counts in named.values() for trace, count in counts.items() if count > 1}
    for path, found in requests.items():  # what each repeated trace's requests looked like, to tell why
        for request in found:
            for trace in traces_named(request, repeated):
                others = len(traces_named(request, sent_traces)) - 1
                at = f"{request.received_at:.1f} s (monotonic)"
                say(f"repeated: {trace} to {path} at {at}, naming {others} other traces")
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
        alerts_digested=len({trace for trace, _, status in stack.deliveries() if status == DeliveryStatus.DIGESTED}),
        alerts_unexpected=len(reached - expected),
        alert_repeats=repeats,
        faults=list(stack.faults),
        partitions_reread={
            "steady traffic": rereads_in_steady_traffic,
            "through faults": sum(len(w.rereads()) for w in stack.workers) - rereads_in_steady_traffic,
        },
        alert_latency_ms=_percentiles(latencies.get("end to end", [])),
        alert_stages_ms={stage: round(statistics.median(ms)) for stage, ms in latencies.items() if ms},
    )


def _per_trace(requests: Iterable[Request], traces: set[str]) -> Counter[str]:
    return Counter(trace for request in requests for trace in traces_named(request, traces))


def _first_requests(posts: Sequence[Request], traces: set[str]) -> dict[str, float]:
    """Trace id -> when the first request naming it arrived, wall clock."""
    to_wall = time.time() - time.monotonic()  # one machine: the two clocks differ by a constant
    first: dict[str, float] = {}
    for post in sorted(posts, key=lambda request: request.received_at):
        for trace in traces_named(post, traces):
            first.setdefault(trace, post.received_at + to_wall)
    return first


def _first_records(stack: Stack, topic_setting: str) -> dict[str, float]:
    """Trace id (the record key) -> the CreateTime of its first record on the topic, wall clock."""
    first: dict[str, float] = {}
    for message in read_topic(stack.kafka.bootstrap, stack.topic(topic_setting)):
        key = message.key() or b""
        trace = key.hex() if len(key) == 16 else key.decode(errors="replace")  # collector-contrib: raw id bytes
        first[trace] = min(first.get(trace, math.inf), message.timestamp()[1] / 1000)
    return first


def _stages(stack: Stack, exported: Mapping[str, float], first_post: Mapping[str, float]) -> dict[str, list[float]]:
    """Per alerted trace, ms: end to end, and each hop (the collector, the spans stage, agreement, the router)."""
    marks = [exported] + [
        _first_records(stack, name) for name in ("kafka_input_topic", "kafka_findings_topic", "kafka_alerts_topic")
    ] + [first_post]  # fmt: skip
    names = ["SDK export -> otlp_spans", "-> findings", "-> alert", "-> Slack request"]
    stages: dict[str, list[float]] = {"end to end": [], **{name: [] for name in names}}
    for trace in first_post:
        times = [mark.get(trace) for mark in marks]
        stages["end to end"].append(1000 * (first_post[trace] - exported[trace]))
        if all(t is not None for t in times):
            for name, start, end in zip(names, times, times[1:], strict=False):
                stages[name].append(1000 * (end - start))  # type: ignore[operator]
    return stages


def _percentiles(latencies: Sequence[float]) -> dict[str, float | int]:
    if not latencies:
        return {"traces": 0}
    return {"p50": round(percentile(latencies, 50)), "p99": round(percentile(latencies, 99)), "traces": len(latencies)}
