"""Escalation to the application's own model: which uncertain calls it judges, within what budget, with what weight."""
