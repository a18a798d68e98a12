-- title: Flag rate per detector
-- chart: timeseries
-- unit: percentunit
-- description: Of the calls each detector judged (status ok), the share it flagged, per interval. A detector whose rate jumps alone is more likely miscalibrated than right.
SELECT
    $__timeInterval(span_start_time) AS time,
    toString(detector) AS series,
    round(countIf(flagged) / count(), 4) AS flag_rate
FROM halluwatch.findings FINAL
WHERE status = 'ok' AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY time, series
ORDER BY time, series
