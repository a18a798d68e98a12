-- title: Detector latency (span end to finding written)
-- chart: table
-- unit: s
-- description: Seconds from the end of the LLM span to its finding being written, per detector: collector batching, Kafka, the worker's batch and the detector itself. Sampled detectors run later by design. Compute time per batch alone is the Prometheus histogram halluwatch_detector_seconds.
SELECT
    f.detector AS detector,
    count() AS findings,
    round(quantile(0.5)(dateDiff('millisecond', c.end_time, f.created_at) / 1000), 3) AS p50_seconds,
    round(quantile(0.99)(dateDiff('millisecond', c.end_time, f.created_at) / 1000), 3) AS p99_seconds,
    round(max(dateDiff('millisecond', c.end_time, f.created_at) / 1000), 3) AS max_seconds
FROM halluwatch.findings AS f FINAL
INNER JOIN (SELECT trace_id, span_id, end_time FROM halluwatch.llm_calls FINAL) AS c
    ON c.trace_id = f.trace_id AND c.span_id = f.span_id
WHERE $__timeFilter(f.span_start_time) AND $__conditionalAll(f.service IN (${service:singlequote}), $service)
    AND $__conditionalAll(f.policy IN (${app:singlequote}), $app)
GROUP BY detector
ORDER BY p99_seconds DESC
