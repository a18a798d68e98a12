"""Joining content-free LLM spans with the GenAI log records that carry their content.

``join`` is the pure state machine; ``stage`` keeps its state in a faust table and feeds it.
"""
