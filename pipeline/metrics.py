"""Prometheus metrics of the worker (SPEC §8): what came in, what came out, what was dropped."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SPANS = Counter("halluwatch_spans", "Spans decoded from the input topics")
LLM_CALLS = Counter("halluwatch_llm_calls", "LLM spans normalized", ["convention"])
FINDINGS = Counter("halluwatch_findings", "Detector results", ["detector", "status", "flagged"])
DEAD_LETTERS = Counter("halluwatch_dead_letters", "Messages sent to the dead-letter topic", ["reason"])
REKEYED = Counter("halluwatch_rekeyed_messages", "Per-trace messages split off unkeyed batches")
ROWS_WRITTEN = Counter("halluwatch_rows_written", "Rows durably written to ClickHouse", ["table"])
MESSAGES_DONE = Counter("halluwatch_messages_done", "Input messages fully processed and acked")
WRITE_RETRIES = Counter("halluwatch_write_retries", "Flushes retried after a sink or broker failure")
DETECTOR_SECONDS = Histogram("halluwatch_detector_seconds", "Detector time per batch", ["detector"])
BATCH_SECONDS = Histogram("halluwatch_batch_seconds", "Time from batch taken to batch acked")
AGREEMENT_FINDINGS = Counter("halluwatch_agreement_findings", "Findings records handled by the agreement stage")
ALERTS = Counter("halluwatch_alerts", "Alerts fired by the agreement rule", ["rule", "route"])
ALERT_DELIVERIES = Counter("halluwatch_alert_deliveries", "Alert delivery outcomes", ["destination", "status"])
ALERT_DEAD_LETTERS = Counter("halluwatch_alert_dead_letters", "Alerts given up on, in the alerts dead-letter topic")
TRACE_STATES = Gauge("halluwatch_agreement_traces", "Traces with flags held in the agreement window")
