-- title: Alerts by route and rule
-- chart: table
-- description: What went out, where, and how delivery went: each alert counts once per destination with its current status (a final status outranks retries). Failed alerts sit in the alerts dead-letter topic.
SELECT
    route,
    rule,
    destination,
    count() AS alerts,
    countIf(status IN ('delivered', 'digested')) AS delivered,
    countIf(status = 'retrying') AS retrying,
    countIf(status = 'failed') AS failed,
    max(attempts) AS max_attempts
FROM halluwatch.alerts FINAL
WHERE $__timeFilter(created_at) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY route, rule, destination
ORDER BY alerts DESC, route, rule, destination
