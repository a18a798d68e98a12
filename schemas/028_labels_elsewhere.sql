-- A verdict given elsewhere than the review queue (a trace page, an alert's Slack buttons, a label
-- file) is kept apart from the same person's review-queue verdict on the call: `elsewhere` joins the
-- sorting key, so ReplacingMergeTree keeps one current row per person and call of each kind, and a
-- second look with the findings in view neither replaces nor withdraws the audit sample's verdict.
-- Rows stored before it read false: they keep the place they had.
ALTER TABLE {database}.labels
    ADD COLUMN IF NOT EXISTS elsewhere Bool AFTER blind,
    MODIFY ORDER BY (trace_id, span_id, labeller, elsewhere)
