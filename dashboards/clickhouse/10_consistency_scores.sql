-- title: Self-consistency and claims scores
-- chart: timeseries
-- description: Mean score of the sampled detectors per interval (self-consistency: 1 - mean pairwise similarity of re-asked answers; claims: share of hallucinated claims). Empty until an LLM endpoint is configured for them.
SELECT
    $__timeInterval(span_start_time) AS time,
    toString(detector) AS series,
    round(avg(score), 4) AS mean_score
FROM halluwatch.findings FINAL
WHERE detector IN ('self_consistency', 'claims') AND status = 'ok'
    AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY time, series
ORDER BY time, series
