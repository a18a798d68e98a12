-- title: Detector mix by app
-- chart: bars
-- pivot: app, detector, flagged_calls
-- description: Which detectors flag in each application: per policy, the calls each detector flagged (status ok; the sentinel's "unverified factual" flag shows too). A detector the policy turned off has no bar; one that dominates a single app is where that app's thresholds matter most.
SELECT
    policy AS app,
    toString(detector) AS detector,
    uniqExact(trace_id, span_id) AS flagged_calls
FROM halluwatch.findings
WHERE flagged AND status = 'ok'
    AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY app, detector
ORDER BY app, detector
