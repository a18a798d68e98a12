-- The retention (settings retention.content_days and retention.days, in seconds) whose TTLs the
-- tables carry: `halluwatch migrate` changes the TTLs when the settings differ and adds a row.
CREATE TABLE IF NOT EXISTS {database}.retention_applied
(
    content_seconds  UInt64,
    row_seconds      UInt64,
    applied_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(applied_at)
ORDER BY tuple()
