-- The application policy whose rules fired the alert and chose its route (per-app alert rates).
ALTER TABLE {database}.alerts ADD COLUMN IF NOT EXISTS policy LowCardinality(String) DEFAULT 'default' AFTER operation
