"""Prometheus metrics of the worker (docs/operations.md): what came in, what came out, what was dropped."""

from __future__ import annotations

from functools import cache

from prometheus_client import Counter, Gauge, Histogram

from detectors.base import DetectorResult, DetectorStatus

# Scores live on different scales: similarities and probabilities in [0, 1], |z| up to ~10.
SCORE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 2.0, 3.0, 5.0, 10.0)
# ClickHouse wants >= 1,000 rows per insert: this shows whether batches get there.
ROW_BUCKETS = (1, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000)

SPANS = Counter("halluwatch_spans", "Spans decoded from the input topics")
LLM_CALLS = Counter("halluwatch_llm_calls", "LLM spans normalized", ["convention"])
FINDINGS = Counter("halluwatch_findings", "Detector results", ["detector", "status", "flagged"])
DEAD_LETTERS = Counter("halluwatch_dead_letters", "Messages sent to the dead-letter topic", ["reason"])
DEAD_LETTERS_LOST = Counter(
    "halluwatch_dead_letters_lost", "Dead letters the broker would not take in dead_letter_timeout_seconds", ["reason"]
)
REKEYED = Counter("halluwatch_rekeyed_messages", "Per-trace messages split off unkeyed batches")
ROWS_WRITTEN = Counter("halluwatch_rows_written", "Rows durably written to ClickHouse", ["table"])
MESSAGES_DONE = Counter("halluwatch_messages_done", "Input messages fully processed and acked")
WRITE_RETRIES = Counter("halluwatch_write_retries", "Flushes retried after a sink or broker failure")
SKIPPED_RECORDS_REREAD = Counter(
    "halluwatch_skipped_records_reread", "Partitions re-read because faust fetched records it never delivered"
)
DETECTOR_SECONDS = Histogram("halluwatch_detector_seconds", "Detector time per batch", ["detector"])
BATCH_SECONDS = Histogram("halluwatch_batch_seconds", "Time from batch taken to batch acked")
BATCH_MESSAGES = Histogram("halluwatch_batch_messages", "Input messages per batch", buckets=ROW_BUCKETS)
SCORES = Histogram(
    "halluwatch_detector_score", "Scores of detector results (status ok)", ["detector"], buckets=SCORE_BUCKETS
)
CLICKHOUSE_INSERT_SECONDS = Histogram("halluwatch_clickhouse_insert_seconds", "Time per ClickHouse insert", ["table"])
CLICKHOUSE_INSERT_ROWS = Histogram(
    "halluwatch_clickhouse_insert_rows", "Rows per ClickHouse insert", ["table"], buckets=ROW_BUCKETS
)
# Source parts looked up in the passage store (docs/operations.md): hit rate = hits / (hits + misses).
PASSAGE_STORE_HITS = Counter("halluwatch_passage_store_hits", "Source parts read from the passage store, not encoded")
PASSAGE_STORE_MISSES = Counter("halluwatch_passage_store_misses", "Source parts the passage store did not hold")
PASSAGE_STORE_BYTES = Gauge("halluwatch_passage_store_bytes", "Size of the passage store's parts, after its last trim")
PASSAGE_STORE_PARTS = Gauge("halluwatch_passage_store_parts", "Source parts in the passage store, after its last trim")
WORKER_READY = Gauge("halluwatch_worker_ready", "1 while the worker consumes (group joined, not stopping)")
AGREEMENT_FINDINGS = Counter("halluwatch_agreement_findings", "Findings records handled by the agreement stage")
ALERTS = Counter("halluwatch_alerts", "Alerts fired by the agreement rule", ["rule", "route"])
ALERT_DELIVERIES = Counter("halluwatch_alert_deliveries", "Alert delivery outcomes", ["destination", "status"])
ALERT_DEAD_LETTERS = Counter("halluwatch_alert_dead_letters", "Alerts given up on, in the alerts dead-letter topic")
MONITOR_EVALUATIONS = Counter(
    "halluwatch_monitor_evaluations",
    "Rate monitor evaluations (outcome error: a ClickHouse query failed)",
    ["monitor", "outcome"],
)
MONITOR_INCIDENT_EVENTS = Counter(
    "halluwatch_monitor_incident_events", "Rate monitor incident events (open, update, resolve)", ["monitor", "event"]
)
SILENCE_READ_ERRORS = Counter(
    "halluwatch_silence_read_errors", "Failed reads of the silences table (the last known silences stay in force)"
)
TRACE_STATES = Gauge("halluwatch_agreement_traces", "Traces with flags held in the agreement window")
LOG_RECORDS = Counter(
    "halluwatch_log_records",
    "GenAI log records by what became of them (joined, late, orphaned, redundant, evicted, over_cap)",
    ["outcome"],
)
LOG_JOIN_SPANS = Counter(
    "halluwatch_log_join_spans",
    "LLM spans through the log join by outcome (span, logs, absent, evicted, duplicate)",
    ["outcome"],
)
TRACE_FACTS = Counter(
    "halluwatch_trace_facts",
    "Facts of other spans (retrievals, tool runs) stored by the join, and calls given sources from them",
    ["outcome"],
)
LOG_JOIN_ENTRIES = Gauge("halluwatch_log_join_entries", "Spans, log records and released markers held by the log join")
CONSISTENCY_SAMPLED = Counter(
    "halluwatch_consistency_sampled",
    "LLM calls sent to the sampled detectors, by the risk rule that chose them",
    ["rule"],
)
CONSISTENCY_SKIPPED = Counter(
    "halluwatch_consistency_skipped",
    "Sampled calls not judged: budget spent (requests_per_minute, tokens_per_day) or too_large",
    ["reason"],
)
CONSISTENCY_PAUSED = Gauge(
    "halluwatch_consistency_paused", "1 while sampling is paused because this budget limit is spent", ["limit"]
)
CONSISTENCY_DONE = Counter("halluwatch_consistency_done", "Sampled calls judged, their findings durable")
LLM_REQUESTS = Counter("halluwatch_llm_requests", "Requests to the sampled detectors' LLM endpoint", ["outcome"])
LLM_TOKENS = Counter("halluwatch_llm_tokens", "Tokens the LLM endpoint reported used", ["kind"])
ESCALATIONS = Counter(
    "halluwatch_escalations",
    "Calls whose route the judge's answer could change (or coverage left unverified): sent to the judge, or"
    " over_budget",
    ["app", "reason", "outcome"],
)
JUDGE_ANSWERS = Counter(
    "halluwatch_judge_answers", "The judge's answers on escalated calls (unknown: none usable)", ["app", "judgment"]
)
JUDGE_TOKENS = Counter("halluwatch_judge_tokens", "Tokens the judge's answers cost", ["app"])
JUDGE_SECONDS = Histogram("halluwatch_judge_seconds", "Time from a judge call's start to its answer")
JUDGE_BUDGET_LEFT = Gauge(
    "halluwatch_judge_budget_left",
    "What an application may still spend on the judge on this worker: calls this minute, tokens today",
    ["app", "kind"],
)
DECISIONS_HELD = Gauge("halluwatch_decisions_held", "Traces whose alert decision waits for a judgment")
FINDINGS_EXPORTED = Counter(
    "halluwatch_findings_exported",
    "Findings sent as OTLP evaluation events: sent, failed (endpoint refused or unreachable), dropped (queue full),"
    " invalid",
    ["outcome"],
)


def count_finding(result: DetectorResult) -> None:
    """Count one detector result by outcome, and its score when the detector ran."""
    _finding_counter(result.detector, result.status, result.flagged).inc()
    if result.status is DetectorStatus.OK:
        _score_histogram(result.detector).observe(result.score)


# A labelled child is looked up per result (about nine per LLM span): prometheus_client's
# lookup locks and validates every time, ~5 % of the spans stage; the label sets are few.
@cache
def _finding_counter(detector: str, status: DetectorStatus, flagged: bool) -> Counter:
    return FINDINGS.labels(detector, str(status), str(flagged).lower())


@cache
def _score_histogram(detector: str) -> Histogram:
    return SCORES.labels(detector)
