-- One row per normalized LLM span (docs/architecture.md).
-- ReplacingMergeTree keyed by (trace_id, span_id): a replay after a crash re-inserts
-- identical rows, which merge away; read with FINAL for exact counts before a merge.
CREATE TABLE IF NOT EXISTS {database}.llm_calls
(
    trace_id          String,
    span_id           String,
    parent_span_id    String,
    service           LowCardinality(String),
    span_name         String,
    convention        LowCardinality(String),
    provider          LowCardinality(String),
    model             LowCardinality(String),
    operation         LowCardinality(String),
    start_time        DateTime64(6, 'UTC'),
    end_time          DateTime64(6, 'UTC'),
    duration_ms       Float64,
    input_tokens      Nullable(UInt32),
    output_tokens     Nullable(UInt32),
    finish_reason     LowCardinality(String),
    input_messages    UInt16,
    output_messages   UInt16,
    tool_calls        UInt16,
    tool_definitions  UInt16,
    sources           UInt16,
    logprob_tokens    UInt32,
    content_mode      LowCardinality(String),
    prompt            String,
    answer            String,
    grounding         String,
    attributes        Map(String, String),
    ingested_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(start_time)
ORDER BY (service, trace_id, span_id)
