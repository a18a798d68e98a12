-- Operators' silences (issue 17): alerts matching every entry of `matchers` are not sent
-- between starts_at and ends_at.  Expiring a silence early writes a new version of its row
-- with ends_at = now; ReplacingMergeTree(updated_at) keeps the newest, so read with FINAL.
-- The table stays small (silences are time-boxed and few): workers read the active ones
-- every few seconds.
CREATE TABLE IF NOT EXISTS {database}.silences
(
    silence_id  String,
    matchers    Map(LowCardinality(String), String),
    reason      String,
    created_by  LowCardinality(String),
    starts_at   DateTime64(3, 'UTC'),
    ends_at     DateTime64(3, 'UTC'),
    updated_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY silence_id
