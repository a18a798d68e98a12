-- title: Latest flagged calls
-- chart: table
-- description: The newest calls a detector flagged, with its one-line summary and the answer (as the content mode stored it).
SELECT
    f.span_start_time AS time,
    f.service AS service,
    f.model AS model,
    f.operation AS operation,
    f.detector AS detector,
    f.summary AS summary,
    f.trace_id AS trace_id,
    c.answer AS answer
FROM halluwatch.findings AS f FINAL
LEFT JOIN (SELECT trace_id, span_id, answer FROM halluwatch.llm_calls FINAL) AS c
    ON c.trace_id = f.trace_id AND c.span_id = f.span_id
WHERE f.flagged
    AND $__timeFilter(f.span_start_time) AND $__conditionalAll(f.service IN (${service:singlequote}), $service)
    AND $__conditionalAll(f.policy IN (${app:singlequote}), $app)
ORDER BY time DESC, trace_id, detector
LIMIT 50
