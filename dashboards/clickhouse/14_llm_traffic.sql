-- title: LLM traffic by instrumentation
-- chart: table
-- description: What the instrumentations feed halluwatch: calls per convention, provider and model, where their content came from (span attributes or log records), tokens and mean duration.
SELECT
    convention,
    provider,
    model,
    content_source,
    count() AS calls,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    round(avg(duration_ms), 1) AS avg_duration_ms
FROM halluwatch.llm_calls FINAL
WHERE $__timeFilter(start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
GROUP BY convention, provider, model, content_source
ORDER BY calls DESC, convention, provider, model
