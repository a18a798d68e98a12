"""One declarative table per instrumentation convention, and the engine that applies them.

GenAI, OpenLLMetry, OpenInference and the seed's layout; GenAI log records merged into a call.
"""
