-- title: Top ungrounded sentences
-- chart: table
-- description: Answer sentences the grounding detector found no support for, most frequent first, with the best source window it compared them to (empty when a cited source was missing) and one trace to open.
SELECT
    JSONExtractString(sentence, 'text') AS ungrounded_sentence,
    count() AS occurrences,
    round(min(JSONExtractFloat(sentence, 'similarity')), 4) AS min_similarity,
    argMin(JSONExtractString(sentence, 'best_window'), JSONExtractFloat(sentence, 'similarity')) AS best_source_window,
    argMin(JSONExtractString(sentence, 'source_id'), JSONExtractFloat(sentence, 'similarity')) AS source_id,
    arrayStringConcat(groupUniqArray(3)(service), ', ') AS services,
    argMin(trace_id, JSONExtractFloat(sentence, 'similarity')) AS trace_id
FROM halluwatch.findings FINAL
ARRAY JOIN JSONExtractArrayRaw(evidence, 'sentences') AS sentence
WHERE detector = 'grounding' AND status = 'ok' AND NOT JSONExtractBool(sentence, 'grounded')
    AND $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
    AND $__conditionalAll(policy IN (${app:singlequote}), $app)
GROUP BY ungrounded_sentence
ORDER BY occurrences DESC, min_similarity ASC
LIMIT 20
