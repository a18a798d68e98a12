-- Whether the person gave the verdict blind: the review page hid what the detectors found until
-- the verdict was in (review.blind, the default).  A verdict given with the findings in view
-- tends to confirm them, so the audit sample can be read with and without those.  false for
-- verdicts given elsewhere (an alert's trace page, Slack, label files): they saw the findings.
ALTER TABLE {database}.labels ADD COLUMN IF NOT EXISTS blind Bool DEFAULT false AFTER stratum
