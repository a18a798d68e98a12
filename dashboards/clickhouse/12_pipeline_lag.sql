-- title: Pipeline lag (span end to LLM call stored)
-- chart: timeseries
-- unit: s
-- description: Seconds from the end of an LLM span to its llm_calls row, per interval (p50, p99, max). Rising lag means the workers fall behind; consumer lag in messages and dead-letter rates are in the worker dashboard (Prometheus).
SELECT
    time,
    q.1 AS series,
    q.2 AS lag_seconds
FROM
(
    SELECT
        $__timeInterval(end_time) AS time,
        quantiles(0.5, 0.99)(dateDiff('millisecond', end_time, ingested_at) / 1000) AS lags,
        max(dateDiff('millisecond', end_time, ingested_at) / 1000) AS worst
    FROM halluwatch.llm_calls FINAL
    WHERE $__timeFilter(end_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    GROUP BY time
)
ARRAY JOIN [('p50', lags[1]), ('p99', lags[2]), ('max', worst)] AS q
ORDER BY time, series
