-- title: Rate monitor incidents
-- chart: table
-- description: The rate monitors' incidents that were open at some point of the range, open ones first: each monitor group's flag rate in its window as last measured against its baseline, the calls behind it, when it opened and resolved. Monitors that do not group by service or policy show whatever service or app is selected.
SELECT
    monitor,
    arrayStringConcat(arrayMap((field, value) -> concat(field, '=', value), group_by, group_values), ', ') AS monitor_group,
    status,
    round(rate, 4) AS rate,
    round(baseline_rate, 4) AS baseline_rate,
    if(baseline_rate > 0, round(rate / baseline_rate, 2), NULL) AS times_baseline,
    calls,
    flagged,
    route,
    opened_at,
    resolved_at
FROM halluwatch.incidents FINAL
WHERE opened_at <= $__toTime AND (resolved_at IS NULL OR resolved_at >= $__fromTime)
    AND $__conditionalAll(NOT has(group_by, 'service') OR group_values[indexOf(group_by, 'service')] IN (${service:singlequote}), $service)
    AND $__conditionalAll(NOT has(group_by, 'policy') OR group_values[indexOf(group_by, 'policy')] IN (${app:singlequote}), $app)
ORDER BY status = 'open' DESC, opened_at DESC
