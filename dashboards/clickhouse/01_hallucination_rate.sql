-- title: Hallucination rate by service / model / operation
-- chart: timeseries
-- unit: percentunit
-- description: Share of LLM calls flagged, per interval: their calibrated p_hallucination reached their policy's list threshold, or a detector reporting a fact (schema, tool facts, tool outcome) flagged them. Each detector's own flag rate is the panel "Detector flag rate".
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
        (trace_id, span_id) IN (SELECT trace_id, span_id FROM halluwatch.llm_calls WHERE flagged AND $__timeFilter(start_time)) AS hallucinated
    FROM halluwatch.findings FINAL
    WHERE $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
        AND $__conditionalAll(policy IN (${app:singlequote}), $app)
    GROUP BY trace_id, span_id
)
GROUP BY time, series
ORDER BY time, series
