"""From the collector's Kafka payloads to ``LLMCall``s: OTLP decoding, conventions, normalization.

Pure functions: imports ``detectors.llm_call`` and nothing else of halluwatch's; never faust.
"""
