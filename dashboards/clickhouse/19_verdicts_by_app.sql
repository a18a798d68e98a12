-- title: Human verdicts by app
-- chart: table
-- description: What people said of each application's flagged calls, by when they said it: each call's verdict is its labellers' majority (a tie going to the newest), counted once however many detectors flagged it. Confirmed hallucinations, false alarms, and the share confirmed: the app's precision as people judged it, what `halluwatch calibrate` fits each policy's thresholds to.
SELECT
    flagged.policy AS app,
    countIf(verdicts.hallucinated) AS confirmed,
    countIf(NOT verdicts.hallucinated) AS false_alarms,
    round(confirmed / count(), 4) AS judged_precision
FROM
(
    SELECT trace_id, span_id,
           countIf(label) AS yes, countIf(NOT label) AS no,
           if(yes = no, argMax(label, (labelled_at, labeller)), yes > no) AS hallucinated
    FROM halluwatch.labels FINAL
    WHERE $__timeFilter(labelled_at) AND NOT withdrawn
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
