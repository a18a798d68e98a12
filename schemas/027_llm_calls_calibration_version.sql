-- The version of the application's map (`calibration_maps`) its p_hallucination went through; '' for
-- the shipped calibration alone.
ALTER TABLE {database}.llm_calls
    ADD COLUMN IF NOT EXISTS calibration_version LowCardinality(String) DEFAULT '' AFTER verdict_version
