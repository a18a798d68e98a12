-- Per-token logprobs of the answer, for `halluwatch baseline` (per-model entropy
-- statistics from ClickHouse).  JSON list of {"token", "logprob", "top_logprobs":
-- [{"token", "logprob"}]}; empty when the span had none or content_mode is not "full".
ALTER TABLE {database}.llm_calls ADD COLUMN IF NOT EXISTS logprobs_json String DEFAULT '' AFTER grounding
