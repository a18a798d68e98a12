-- The application policy a call was judged under (pipeline/config/policy.py): which detectors
-- ran, at which thresholds.  "default" for calls no policy selects and rows from before policies.
ALTER TABLE {database}.findings ADD COLUMN IF NOT EXISTS policy LowCardinality(String) DEFAULT 'default' AFTER operation
