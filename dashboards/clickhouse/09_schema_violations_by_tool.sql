-- title: Schema and tool-call violations by tool
-- chart: table
-- description: Which tools the models get wrong, and how: unknown tool, unknown or missing parameter, wrong type, out of range, not in enum; answers that break the JSON Schema registered for their operation show as "(answer of OPERATION)", truncated JSON named as such.
SELECT
    if(JSONExtractString(violation, 'tool') = '', concat('(answer of ', operation, ')'), JSONExtractString(violation, 'tool')) AS tool,
    JSONExtractString(violation, 'kind') AS kind,
    count() AS violations,
    uniqExact(trace_id, span_id) AS calls,
    any(JSONExtractString(violation, 'message')) AS example
FROM halluwatch.findings FINAL
ARRAY JOIN JSONExtractArrayRaw(evidence, 'violations') AS violation
WHERE detector = 'schema_violation' AND flagged
    AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY tool, kind
ORDER BY violations DESC, tool, kind
