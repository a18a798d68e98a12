-- ZSTD for the alerts' text, as migration 023 for llm_calls (bench/storage.py).
ALTER TABLE {database}.alerts
    MODIFY COLUMN summary CODEC(ZSTD(3)),
    MODIFY COLUMN evidence CODEC(ZSTD(3))
