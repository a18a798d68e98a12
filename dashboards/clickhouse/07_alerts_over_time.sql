-- title: Alerts over time by route and rule
-- chart: timeseries
-- description: Alerts fired per interval (each alert once, whatever its destinations).
SELECT
    $__timeInterval(created_at) AS time,
    concat(route, ' / ', rule) AS series,
    uniqExact(alert_id) AS alerts
FROM halluwatch.alerts FINAL
WHERE $__timeFilter(created_at) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY time, series
ORDER BY time, series
