-- title: Human verdicts by app
-- chart: table
-- description: What people said of each application's flagged calls, by when they said it: each call's verdict is its labellers' majority (each person once, with their newest verdict, from the review queue or elsewhere) (a tie going to the newest), counted once however many detectors flagged it. Confirmed hallucinations, false alarms, and the share confirmed: the app's precision as people judged it, what `halluwatch calibrate` fits each policy's thresholds to.
SELECT
    flagged.policy AS app,
    countIf(verdicts.hallucinated) AS confirmed,
    countIf(NOT verdicts.hallucinated) AS false_alarms,
    round(confirmed / count(), 4) AS judged_precision
FROM
(
    SELECT trace_id, span_id,
           countIf(verdict) AS yes, countIf(NOT verdict) AS no,
           if(yes = no, argMax(verdict, (given_at, labeller)), yes > no) AS hallucinated
    FROM
    (
        SELECT trace_id, span_id, labeller, argMax(label, labelled_at) AS verdict, max(labelled_at) AS given_at
        FROM halluwatch.labels FINAL
        WHERE $__timeFilter(labelled_at) AND NOT withdrawn
        GROUP BY trace_id, span_id, labeller
    )
    GROUP BY trace_id, span_id
) AS verdicts
INNER JOIN
(
    SELECT DISTINCT trace_id, span_id, policy
    FROM halluwatch.findings
    WHERE flagged AND $__conditionalAll(service IN (${service:singlequote}), $service)
        AND $__conditionalAll(policy IN (${app:singlequote}), $app)
) AS flagged USING (trace_id, span_id)
GROUP BY app
ORDER BY app
