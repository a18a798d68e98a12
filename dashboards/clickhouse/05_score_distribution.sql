-- title: Score distribution relative to each detector's threshold
-- chart: bars
-- pivot: score_over_threshold, detector, results
-- description: Results (status ok) by score divided by the detector's threshold, in steps of 0.1: 1.0 is the threshold, everything from there right was flagged; 2.0 collects the rest. Mass piling up just below 1.0 is where calibration matters.
SELECT
    toDecimalString(floor(least(score / threshold, 2.0) * 10) / 10, 1) AS score_over_threshold,
    toString(detector) AS detector,
    count() AS results
FROM halluwatch.findings FINAL
WHERE status = 'ok' AND threshold > 0
    AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY score_over_threshold, detector
ORDER BY score_over_threshold, detector
