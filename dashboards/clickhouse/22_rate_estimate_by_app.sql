-- title: Hallucination rate by app: model-based and verdict-corrected
-- chart: timeseries
-- unit: percentunit
-- description: Per application policy and interval: "APP / model-based", the mean p_hallucination of the calls the detectors could check; "APP / verdict-corrected", the review queue's verdicts on that interval's calls, each audit stratum's share hallucinated weighted by its share of the calls (the strata of the default review.strata, 0.1 / 0.5 / 0.9, and the alerted calls); empty while a stratum holding calls has no verdict in the interval; `halluwatch rate` gives the same estimate with its 95 % interval; "APP / unverified", the share of calls the detectors could not check (no sources for a factual prompt, text cut, an uncovered language, an error), which neither rate counts.
SELECT
    time,
    concat(app, ' / ', share.1) AS series,
    share.2 AS rate
FROM
(
    SELECT
        time,
        app,
        round(sum(p_sum) / nullIf(sum(p_calls), 0), 4) AS model_based,
        if(countIf(checked_calls > 0 AND judged_calls = 0) > 0, NULL,
           round(sumIf(checked_calls * hallucinated_calls / judged_calls, judged_calls > 0)
                 / nullIf(sum(checked_calls), 0), 4)) AS verdict_corrected,
        round(sum(unverified_calls) / (sum(checked_calls) + sum(unverified_calls)), 4) AS unverified_share
    FROM
    (
        SELECT
            $__timeInterval(call_start) AS time,
            app,
            stratum,
            countIf(empty(reasons)) AS checked_calls,
            countIf(notEmpty(reasons)) AS unverified_calls,
            sumIf(p, empty(reasons) AND p IS NOT NULL) AS p_sum,
            countIf(empty(reasons) AND p IS NOT NULL) AS p_calls,
            countIf(empty(reasons) AND judged) AS judged_calls,
            countIf(empty(reasons) AND judged AND hallucinated) AS hallucinated_calls
        FROM
        (
            SELECT call_start, app, reasons, p, judged, hallucinated,
                   multiIf(alerted, 'alerted', p IS NULL, 'none', toString(arrayCount(e -> p >= e, [0.1, 0.5, 0.9])))
                       AS stratum
            FROM
            (
                SELECT trace_id, span_id, max(p_hallucination) AS p
                FROM halluwatch.llm_calls
                WHERE $__timeFilter(start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
                GROUP BY trace_id, span_id
            ) AS calls
            INNER JOIN
            (
                SELECT trace_id, span_id, any(policy) AS app, min(span_start_time) AS call_start,
                       {{unverified_reasons}} AS reasons
                FROM halluwatch.findings FINAL
                WHERE $__timeFilter(span_start_time) AND $__conditionalAll(policy IN (${app:singlequote}), $app)
                GROUP BY trace_id, span_id
            ) AS found USING (trace_id, span_id)
            LEFT JOIN
            (
                SELECT trace_id, span_id, true AS judged, argMax(label, labelled_at) AS hallucinated
                FROM halluwatch.labels FINAL
                WHERE inclusion_probability > 0 AND NOT withdrawn
                GROUP BY trace_id, span_id
            ) AS audit USING (trace_id, span_id)
            LEFT JOIN
            (
                SELECT DISTINCT trace_id, true AS alerted FROM halluwatch.alerts
            ) AS raised USING (trace_id)
        )
        GROUP BY time, app, stratum
    )
    GROUP BY time, app
)
ARRAY JOIN [('model-based', model_based), ('verdict-corrected', verdict_corrected), ('unverified', unverified_share)]
    AS share
ORDER BY time, series
