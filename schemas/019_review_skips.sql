-- Calls a reviewer skipped in the review queue: the queue serves them that person no more.  The
-- rate estimate counts them (calls drawn but not judged), so a queue people skip through says so.
-- One row per call and reviewer; a replayed skip merges away.
CREATE TABLE IF NOT EXISTS {database}.review_skips
(
    trace_id    String,
    span_id     String,
    reviewer    LowCardinality(String),
    skipped_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(skipped_at)
ORDER BY (trace_id, span_id, reviewer)
