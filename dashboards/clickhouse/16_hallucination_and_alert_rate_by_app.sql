-- title: Flag and alert rate by app
-- chart: timeseries
-- unit: percentunit
-- description: Per application policy and interval, the share of its LLM calls flagged ("APP / flagged": p_hallucination at the policy's list threshold, or a fact detector's flag) and the share whose trace raised an alert ("APP / alerted"). A wide gap is agreement and the alert probability doing their job; an app whose flag rate jumps alone is what the rate monitors open incidents for.
SELECT
    time,
    concat(app, ' / ', share.1) AS series,
    share.2 AS rate
FROM
(
    SELECT
        $__timeInterval(call_start) AS time,
        call_policy AS app,
        round(countIf(hallucinated) / count(), 4) AS flagged,
        round(countIf(alerted) / count(), 4) AS alerted
    FROM
    (
        SELECT
            any(span_start_time) AS call_start,
            any(policy) AS call_policy,
            (trace_id, span_id) IN (SELECT trace_id, span_id FROM halluwatch.llm_calls WHERE flagged AND $__timeFilter(start_time)) AS hallucinated,
            trace_id IN (SELECT trace_id FROM halluwatch.alerts WHERE created_at >= $__fromTime) AS alerted
        FROM halluwatch.findings FINAL
        WHERE $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
            AND $__conditionalAll(policy IN (${app:singlequote}), $app)
        GROUP BY trace_id, span_id
    )
    GROUP BY time, app
)
ARRAY JOIN [('flagged', flagged), ('alerted', alerted)] AS share
ORDER BY time, series
