-- Tool execution spans (GenAI `execute_tool`, OpenInference TOOL): what an agent's tool was called
-- with and what it returned or the error it ended with.  The triage pages show a model's tool call
-- beside the run that answered it (by call id), also when the run came after the LLM call, in a
-- span the call's own row cannot hold.  Arguments, result and error are content, as the llm_calls
-- table's content mode allows.  One row per span; a replayed span merges away.
CREATE TABLE IF NOT EXISTS {database}.tool_runs
(
    trace_id      String,
    span_id       String,
    name          String,
    call_id       String,
    arguments     String,
    result        String,
    failed        Bool,
    error         String,
    end_time      DateTime64(6, 'UTC'),
    content_mode  LowCardinality(String),
    ingested_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(end_time)
ORDER BY (trace_id, span_id)
