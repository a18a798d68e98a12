-- Human labels for calibration (docs/operations.md): was this LLM span a hallucination?
-- One current label per (trace, span) per labeller: the key leaves the labeller in, so
-- several people can label the same span (calibration resolves them by majority), and
-- ReplacingMergeTree(labelled_at) keeps each person's newest label, so a correction
-- replaces the earlier one even when an older file is imported after it, and re-importing
-- a file changes nothing.  Read with FINAL.
CREATE TABLE IF NOT EXISTS {database}.labels
(
    trace_id     String,
    span_id      String,
    label        Bool,
    labeller     LowCardinality(String),
    labelled_at  DateTime64(3, 'UTC'),
    note         String,
    source       LowCardinality(String)
)
ENGINE = ReplacingMergeTree(labelled_at)
ORDER BY (trace_id, span_id, labeller)
