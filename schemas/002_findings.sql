-- One row per detector result, flagged or not (docs/detectors.md).
-- Identity is (detector, trace_id, span_id): the same detector on the same span after a
-- replay replaces the earlier row instead of adding one.  Partitioned by the span's own
-- start time (deterministic) so duplicates always meet in one partition.
CREATE TABLE IF NOT EXISTS {database}.findings
(
    trace_id            String,
    span_id             String,
    service             LowCardinality(String),
    model               LowCardinality(String),
    operation           LowCardinality(String),
    detector            LowCardinality(String),
    detector_version    LowCardinality(String),
    thresholds_version  LowCardinality(String),
    status              LowCardinality(String),
    score               Float32,
    threshold           Float32,
    flagged             Bool,
    severity            UInt8,
    summary             String,
    evidence            String,
    span_start_time     DateTime64(6, 'UTC'),
    created_at          DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(created_at)
PARTITION BY toYYYYMM(span_start_time)
ORDER BY (detector, trace_id, span_id)
