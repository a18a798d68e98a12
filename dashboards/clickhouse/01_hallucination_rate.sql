-- title: Hallucination rate by service / model / operation
-- chart: timeseries
-- unit: percentunit
-- description: Share of LLM calls that at least one hallucination detector flagged, per interval. The sentinel's "unverified factual" flag is not hallucination evidence and does not count.
SELECT
    $__timeInterval(call_start) AS time,
    concat(call_service, ' / ', call_model, ' / ', call_operation) AS series,
    round(countIf(hallucinated) / count(), 4) AS hallucination_rate
FROM
(
    SELECT
        any(span_start_time) AS call_start,
        any(service) AS call_service,
        any(model) AS call_model,
        any(operation) AS call_operation,
        max(flagged AND status = 'ok' AND detector NOT IN ('sentinel')) AS hallucinated
    FROM halluwatch.findings FINAL
    WHERE $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
        AND $__conditionalAll(policy IN (${app:singlequote}), $app)
    GROUP BY trace_id, span_id
)
GROUP BY time, series
ORDER BY time, series
