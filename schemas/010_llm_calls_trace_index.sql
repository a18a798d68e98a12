-- The trace page reads one trace's calls (`WHERE trace_id = ...`, FINAL), but llm_calls is
-- ordered by service first: a bloom filter per granule on trace_id opens only the granules
-- holding the trace (bench/ui_pages.py).  MATERIALIZE builds it for parts written before.
ALTER TABLE {database}.llm_calls
    ADD INDEX IF NOT EXISTS trace_id_bloom trace_id TYPE bloom_filter(0.01) GRANULARITY 1,
    MATERIALIZE INDEX trace_id_bloom
