-- ClickHouse SQL for the questions an on-call engineer asks first (SPEC §8).
-- Run from clickhouse-client or the ClickHouse web UI; Grafana panels come with the
-- deployment issue.  FINAL collapses rows a replay after a crash may have re-inserted.
-- Each query is separated by a line holding only ";" so tools and tests can split them.

-- name: flag_rate_by_service_model_operation (last 24 hours, per hour)
SELECT
    toStartOfHour(span_start_time) AS hour,
    service,
    model,
    operation,
    countIf(flagged) AS flagged,
    count() AS checked,
    round(flagged / checked, 4) AS flag_rate
FROM halluwatch.findings FINAL
WHERE status = 'ok' AND span_start_time >= now() - INTERVAL 1 DAY
GROUP BY hour, service, model, operation
ORDER BY hour DESC, flag_rate DESC
;
-- name: detector_health (status mix and score distribution per detector)
SELECT
    detector,
    detector_version,
    thresholds_version,
    countIf(status = 'ok') AS ok,
    countIf(status = 'skipped') AS skipped,
    countIf(status = 'error') AS errors,
    countIf(flagged) AS flagged,
    quantiles(0.5, 0.9, 0.99)(score) AS score_p50_p90_p99
FROM halluwatch.findings FINAL
GROUP BY detector, detector_version, thresholds_version
ORDER BY detector
;
-- name: schema_violations_by_tool (which tools the models get wrong, and how)
SELECT
    JSONExtractString(violation, 'tool') AS tool,
    JSONExtractString(violation, 'kind') AS kind,
    count() AS violations,
    any(JSONExtractString(violation, 'message')) AS example
FROM halluwatch.findings FINAL
ARRAY JOIN JSONExtractArrayRaw(evidence, 'violations') AS violation
WHERE detector = 'schema_violation' AND flagged
GROUP BY tool, kind
ORDER BY violations DESC
;
-- name: latest_flagged (the newest flagged calls with their answer)
SELECT
    f.span_start_time,
    f.service,
    f.model,
    f.operation,
    f.detector,
    f.summary,
    f.trace_id,
    c.answer
FROM halluwatch.findings AS f FINAL
LEFT JOIN (SELECT trace_id, span_id, answer FROM halluwatch.llm_calls FINAL) AS c
    ON c.trace_id = f.trace_id AND c.span_id = f.span_id
WHERE f.flagged
ORDER BY f.span_start_time DESC
LIMIT 50
;
-- name: llm_traffic_by_convention (what instrumentations feed halluwatch)
SELECT convention, provider, model, count() AS calls, sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens, round(avg(duration_ms), 1) AS avg_duration_ms
FROM halluwatch.llm_calls FINAL
GROUP BY convention, provider, model
ORDER BY calls DESC
;
-- name: alerts_by_route_and_rule (last 7 days: what went out, where, and how delivery went)
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
WHERE created_at >= now() - INTERVAL 7 DAY
GROUP BY route, rule, destination
ORDER BY alerts DESC
