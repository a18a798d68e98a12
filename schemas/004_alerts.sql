-- One row per alert delivery: an alert (one per trace per rule, docs/operations.md) to one destination.
-- The router writes a row on every outcome; the row with the highest state_version is the
-- current one: a final status (delivered, digested, failed) outranks every in-flight retry,
-- and a later retry outranks an earlier one.  ReplacingMergeTree keeps that row, so a
-- replayed alert or a re-written status never shows twice under FINAL.
CREATE TABLE IF NOT EXISTS {database}.alerts
(
    alert_id        String,
    trace_id        String,
    rule            LowCardinality(String),
    route           LowCardinality(String),
    destination     LowCardinality(String),
    service         LowCardinality(String),
    model           LowCardinality(String),
    operation       LowCardinality(String),
    severity        UInt8,
    detectors       Array(LowCardinality(String)),
    summary         String,
    evidence        String,
    status          LowCardinality(String),
    attempts        UInt16,
    error           String,
    state_version   UInt32,
    created_at      DateTime64(3, 'UTC'),
    updated_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(state_version)
PARTITION BY toYYYYMM(created_at)
ORDER BY (trace_id, rule, destination)
