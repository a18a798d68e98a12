-- ZSTD for the findings' text and ids, as migration 023 for llm_calls (bench/storage.py).
ALTER TABLE {database}.findings
    MODIFY COLUMN trace_id CODEC(ZSTD(3)),
    MODIFY COLUMN span_id CODEC(ZSTD(3)),
    MODIFY COLUMN summary CODEC(ZSTD(3)),
    MODIFY COLUMN evidence CODEC(ZSTD(3))
