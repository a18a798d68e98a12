-- Where a call's prompt and answer came from: "span" (its attributes/events), "logs"
-- (OpenTelemetry log records joined to the span), or "absent" (a content-free span whose
-- log records never came within the join window: only content-free checks judged it).
ALTER TABLE {database}.llm_calls ADD COLUMN IF NOT EXISTS content_source LowCardinality(String) DEFAULT 'span' AFTER content_mode
