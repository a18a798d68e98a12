"""The triage pages: flagged calls, their evidence, and people's verdicts on them (docs/operations.md)."""
