-- Each call as a whole: its calibrated probability of being hallucinated (NULL where no detector
-- the verdict model weighs checked it), the verdict model's version, and whether it is flagged
-- (the probability reached its policy's list threshold, or a detector reporting a fact flagged it).
ALTER TABLE {database}.llm_calls
    ADD COLUMN IF NOT EXISTS p_hallucination Nullable(Float32) AFTER attributes,
    ADD COLUMN IF NOT EXISTS verdict_version LowCardinality(String) DEFAULT '' AFTER p_hallucination,
    ADD COLUMN IF NOT EXISTS flagged Bool DEFAULT false AFTER verdict_version
