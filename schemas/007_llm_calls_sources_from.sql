-- Where a call's grounding text came from: "span" (structured sources on its own span),
-- "trace" (documents of retriever spans that preceded it in the same trace) or "prompt"
-- (no structured sources: the system prompt and user turns are the context).
ALTER TABLE {database}.llm_calls ADD COLUMN IF NOT EXISTS sources_from LowCardinality(String) DEFAULT 'prompt' AFTER sources
