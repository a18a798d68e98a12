-- title: Detector outcomes and scores
-- chart: table
-- description: Per detector, version and thresholds file: how often it ran, skipped (nothing to check) or failed, how often it flagged, its threshold and score quantiles of the calls it judged.
SELECT
    detector,
    detector_version,
    thresholds_version,
    countIf(status = 'ok') AS ok,
    countIf(status = 'skipped') AS skipped,
    countIf(status = 'error') AS errors,
    countIf(flagged) AS flagged,
    round(maxIf(threshold, status = 'ok'), 4) AS threshold,
    round(quantileIfOrNull(0.5)(score, status = 'ok'), 4) AS score_p50,
    round(quantileIfOrNull(0.9)(score, status = 'ok'), 4) AS score_p90,
    round(quantileIfOrNull(0.99)(score, status = 'ok'), 4) AS score_p99
FROM halluwatch.findings FINAL
WHERE $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY detector, detector_version, thresholds_version
ORDER BY detector, detector_version
