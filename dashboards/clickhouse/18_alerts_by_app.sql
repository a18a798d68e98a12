-- title: Alerts by app and route
-- chart: table
-- description: Per application policy and the route its rules chose: alerts fired, then how their deliveries (one per destination, current status) went: sent (delivered or in a digest), grouped into an open rate-monitor incident instead of paging alone, held back by a silence, retrying, failed; and how many PagerDuty incidents people acknowledged or resolved.
SELECT
    policy AS app,
    route,
    uniqExact(alert_id) AS alerts,
    countIf(status IN ('delivered', 'digested')) AS sent,
    countIf(status = 'grouped') AS grouped,
    countIf(status = 'silenced') AS silenced,
    countIf(status = 'retrying') AS retrying,
    countIf(status = 'failed') AS failed,
    countIf(acknowledged_at IS NOT NULL) AS acknowledged,
    countIf(resolved_at IS NOT NULL) AS resolved
FROM halluwatch.alerts FINAL
WHERE $__timeFilter(created_at) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY app, route
ORDER BY app, alerts DESC, route
