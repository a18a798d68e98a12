"""Escalation to the application's own model: which uncertain calls its judge (:mod:`pipeline.judge`) answers."""
