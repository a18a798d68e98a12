-- The trace page reads one trace's findings (`WHERE trace_id = ...`, FINAL), but the table is
-- ordered by detector first, so while a month is in several parts the primary key narrows
-- little and the page read nearly every granule (bench/ui_pages.py, 1M findings: 122 of 131).
-- A bloom filter per granule on trace_id leaves only the granules holding the trace (9).
-- MATERIALIZE builds it for parts written before this migration (a background mutation;
-- new parts get it on insert).
ALTER TABLE {database}.findings
    ADD INDEX IF NOT EXISTS trace_id_bloom trace_id TYPE bloom_filter(0.01) GRANULARITY 1,
    MATERIALIZE INDEX trace_id_bloom
