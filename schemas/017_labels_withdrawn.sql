-- A person taking their verdict back (the triage page's undo): a newer row for the same call and
-- person with withdrawn = true, so ReplacingMergeTree keeps it as their current row and the
-- withdrawn verdict stays on record in `label`.  Readers skip withdrawn rows: the call counts as
-- not labelled by that person.
ALTER TABLE {database}.labels ADD COLUMN IF NOT EXISTS withdrawn Bool DEFAULT false AFTER source
