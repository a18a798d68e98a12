-- title: False alarms by app and route, from the review verdicts
-- chart: table
-- unit: percentunit
-- description: Per application policy and alert route: the share of the app's faithful calls an alert on that route was raised on, from the review queue's verdicts (each audit stratum's judged calls weighted by the stratum's share of the calls, the strata of the default review.strata and the alerted calls); "any route" counts every alert, against the 3 % target of all alerts; precision, the share of the route's judged alerted calls that were hallucinated. Empty while a stratum holding calls has no verdict; `halluwatch rate` gives each route's 95 % interval against its target, and a `false_alarms` monitor opens an incident when it lies above.
SELECT
    app,
    route,
    if(countIf(n_calls > 0 AND n_judged = 0) > 0, NULL,
       round(sumIf(n_calls * n_faithful_alerted / n_judged, n_judged > 0)
             / nullIf(sumIf(n_calls * n_faithful / n_judged, n_judged > 0), 0), 4)) AS false_alarms,
    sum(n_faithful) AS faithful_verdicts,
    round(sumIf(n_calls * n_hallucinated_alerted / n_judged, n_judged > 0)
          / nullIf(sumIf(n_calls * n_alerted / n_judged, n_judged > 0), 0), 4) AS precision
FROM
(
    SELECT
        app,
        route,
        stratum,
        count() AS n_calls,
        countIf(judged) AS n_judged,
        countIf(judged AND NOT hallucinated) AS n_faithful,
        countIf(judged AND NOT hallucinated AND on_route) AS n_faithful_alerted,
        countIf(judged AND on_route) AS n_alerted,
        countIf(judged AND hallucinated AND on_route) AS n_hallucinated_alerted
    FROM
    (
        SELECT app, stratum, judged, hallucinated, route,
               if(route = 'any route', notEmpty(routes), has(routes, route)) AS on_route
        FROM
        (
            SELECT app, judged, hallucinated, routes,
                   multiIf(notEmpty(routes), 'alerted', p IS NULL, 'none', toString(arrayCount(e -> p >= e, [0.1, 0.5, 0.9])))
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
                SELECT trace_id, span_id, any(policy) AS app
                FROM halluwatch.findings FINAL
                WHERE $__timeFilter(span_start_time) AND $__conditionalAll(policy IN (${app:singlequote}), $app)
                GROUP BY trace_id, span_id
                HAVING empty({{unverified_reasons}})
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
                SELECT trace_id, groupUniqArray(route) AS routes FROM halluwatch.alerts GROUP BY trace_id
            ) AS raised USING (trace_id)
        )
        ARRAY JOIN arrayConcat(['any route'], (SELECT groupUniqArray(route) FROM halluwatch.alerts)) AS route
    )
    GROUP BY app, route, stratum
)
GROUP BY app, route
ORDER BY app, route
