-- What PagerDuty's people did with an alert's incident (its V3 webhooks, issue 17), on the
-- alert's PagerDuty row (destination `pagerduty`, or `pagerduty:<route>`).  A lifecycle change is written as a new version of that row: a
-- copy of its delivery facts with these columns set, its state_version above every delivery
-- version (pipeline/sinks/alert_lifecycle.py), so a late delivery retry cannot undo an
-- acknowledgement and the acknowledgement keeps what the delivery recorded.  Empty / NULL:
-- PagerDuty has told us nothing of it.
ALTER TABLE {database}.alerts
    ADD COLUMN IF NOT EXISTS incident_status LowCardinality(String) DEFAULT '',
    ADD COLUMN IF NOT EXISTS incident_url String DEFAULT '',
    ADD COLUMN IF NOT EXISTS incident_changed_at Nullable(DateTime64(3, 'UTC')),
    ADD COLUMN IF NOT EXISTS acknowledged_at Nullable(DateTime64(3, 'UTC')),
    ADD COLUMN IF NOT EXISTS acknowledged_by String DEFAULT '',
    ADD COLUMN IF NOT EXISTS resolved_at Nullable(DateTime64(3, 'UTC')),
    ADD COLUMN IF NOT EXISTS resolved_by String DEFAULT ''
