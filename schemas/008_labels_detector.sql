-- Which finding a verdict was given on: a detector's name when the person judged from that
-- detector's evidence (the triage page, a Slack button), empty for a verdict on the whole
-- call (label files).  The verdict itself stays about the call, one current row per person.
ALTER TABLE {database}.labels ADD COLUMN IF NOT EXISTS detector LowCardinality(String) DEFAULT '' AFTER label
