-- One row per `halluwatch erase` run (docs/operations.md, "Retention and erasure"): who ran it, its
-- selector, and how many rows it removed from each table; never any content.  Kept until deleted.
CREATE TABLE IF NOT EXISTS {database}.erasures
(
    erasure_id  String,
    erased_at   DateTime64(3, 'UTC'),
    erased_by   String,
    selector    String,
    before      Nullable(DateTime64(3, 'UTC')),
    traces      UInt64,
    removed     Map(LowCardinality(String), UInt64)
)
ENGINE = ReplacingMergeTree(erased_at)
ORDER BY erasure_id
