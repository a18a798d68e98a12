-- title: Calls, flags and agreement by service / model / operation
-- chart: table
-- description: Per service, model and operation: LLM calls checked, calls flagged (p_hallucination at the policy's list threshold, or a fact detector's flag), and calls two or more independent detectors flagged (the agreement the alert rules build on; grounding and unsupported_spans read one signal and count once).
SELECT
    call_service AS service,
    call_model AS model,
    call_operation AS operation,
    count() AS calls,
    countIf(call_flagged) AS flagged_calls,
    countIf(flagging_detectors >= 2) AS agreed_calls,
    round(flagged_calls / calls, 4) AS flag_rate,
    round(agreed_calls / calls, 4) AS agreement_rate
FROM
(
    SELECT
        any(service) AS call_service,
        any(model) AS call_model,
        any(operation) AS call_operation,
        uniqExactIf(if(detector = 'unsupported_spans', 'grounding', detector), flagged AND status = 'ok' AND detector NOT IN ('sentinel')) AS flagging_detectors,
        (trace_id, span_id) IN (SELECT trace_id, span_id FROM halluwatch.llm_calls WHERE flagged AND $__timeFilter(start_time)) AS call_flagged
    FROM halluwatch.findings FINAL
    WHERE $__timeFilter(span_start_time) AND $__conditionalAll(service IN (${service:singlequote}), $service)
        AND $__conditionalAll(policy IN (${app:singlequote}), $app)
    GROUP BY trace_id, span_id
)
GROUP BY service, model, operation
ORDER BY flag_rate DESC, calls DESC
