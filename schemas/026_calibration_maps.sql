-- Each application's own map of p_hallucination (`halluwatch calibrate --app`), fitted on its
-- review-queue verdicts: a row per event.  A proposal ('proposed') keeps the map, the route minimums
-- and what they were measured to do (`report`, JSON); applying a version ('applied') copies its row,
-- with who applied it and when.  The newest applied row of an application is the map its calls are
-- scored with, so reverting is applying an earlier version, or 'shipped' (no map of its own).
CREATE TABLE IF NOT EXISTS {database}.calibration_maps
(
    app         LowCardinality(String),
    version     String,
    event       LowCardinality(String),
    at          DateTime64(3, 'UTC'),
    by          String,
    slope       Float64,
    intercept   Float64,
    minimums    Map(String, Float64),
    verdicts    UInt32,
    report      String
)
ENGINE = MergeTree
ORDER BY (app, at, version)
