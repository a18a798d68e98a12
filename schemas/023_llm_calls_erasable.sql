-- The values of the call's erasable attributes (settings retention.erasable_keys: user.id, session.id),
-- kept as given, apart from `attributes`, whose values have PII masked in every content mode but
-- "store" (a user id that is an email reads "[email]" there): `halluwatch erase --key user.id=U`
-- finds a user's calls here for as long as their rows live.
ALTER TABLE {database}.llm_calls ADD COLUMN IF NOT EXISTS erasable Map(LowCardinality(String), String) AFTER attributes
