"""tests/stack/summary.py: what `make stack` counts as a broken promise, and its percentiles."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.stack.summary import StackSummary, percentile

CLEAN = StackSummary(
    collector={"name": "otelcol-halluwatch", "version": "0.130.0"},
    kafka={"name": "Apache Kafka (KRaft)", "version": "4.1.1"},
    spans_sent=935,
    llm_calls_sent=323,
    llm_calls_stored=323,
    calls_not_sent=0,
    duplicates=0,
    redelivered_rows=4,  # redeliveries the merge absorbed: no broken promise
    alerts_expected=68,
    alerts_delivered=68,
    alerts_digested=8,
    alerts_unexpected=0,
    alert_repeats=0,
    faults=["worker SIGKILL mid-stream"],
)


def test_a_run_that_kept_every_promise_has_no_problems():
    assert CLEAN.problems() == []
    assert CLEAN.to_json()["alert_latency_ms"] == {}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"llm_calls_stored": 320}, "3 LLM calls lost"),
        ({"calls_not_sent": 1}, "1 calls stored that were never sent"),
        ({"duplicates": 2}, "2 duplicate rows after merging"),
        ({"alerts_delivered": 67}, "1 alerts not delivered"),
        ({"alerts_unexpected": 1}, "1 traces alerted that no rule calls for"),
        ({"alert_repeats": 3}, "3 repeated alert requests"),
        ({"alerts_expected": 0, "alerts_delivered": 0}, "no alert at all"),
    ],
)
def test_each_broken_promise_is_named(change, problem):
    assert replace(CLEAN, **change).problems() == [problem]


def test_percentiles_interpolate_between_order_statistics():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
