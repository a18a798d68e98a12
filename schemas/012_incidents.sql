-- Rate-monitor incidents (docs/operations.md): one incident per monitor and group while its flag rate is up.
-- Every event (open, update, resolve) writes the incident's whole row with a higher version;
-- ReplacingMergeTree keeps the newest, so FINAL reads show each incident once, as it stands.
-- group_by names the monitor's fields and group_values this group's values, in that order.
CREATE TABLE IF NOT EXISTS {database}.incidents
(
    incident_id         String,
    monitor             LowCardinality(String),
    route               LowCardinality(String),
    group_by            Array(LowCardinality(String)),
    group_values        Array(String),
    status              LowCardinality(String),
    opened_at           DateTime64(3, 'UTC'),
    updated_at          DateTime64(3, 'UTC'),
    resolved_at         Nullable(DateTime64(3, 'UTC')),
    rate                Float64,
    baseline_rate       Float64,
    calls               UInt64,
    flagged             UInt64,
    slack_channel       String,
    slack_ts            String,
    pagerduty_dedup_key String,
    delivered           Bool,
    version             UInt32
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(opened_at)
ORDER BY (monitor, incident_id)
