-- What the call gave the model and what the model did, for the people who judge it on the triage
-- pages: the instructions, the messages (tool calls with their arguments, tool results), the sources
-- with their ids, the tool definitions (pipeline/sinks/transcript.py).  One JSON object, its texts as
-- the table's content mode allows; '' under hash and drop, and in rows written before this column.
ALTER TABLE {database}.llm_calls ADD COLUMN IF NOT EXISTS transcript String DEFAULT '' AFTER grounding
