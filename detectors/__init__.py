"""The detectors: the detector contract, the LLM call they judge, and every detector.

Owns :class:`~detectors.llm_call.LLMCall` (one LLM call as the detectors see it), the
contract in :mod:`detectors.base` (a batch of calls in, one result per call out, models
loaded in ``start`` and released in ``close``), each span-level and sampled detector, the
suite that gates them (:mod:`detectors.suite`), their configuration models
(:mod:`detectors.config`) and their thresholds and data files.

Imports nothing from ``pipeline/``: the pipeline builds the detectors from its settings
and hands them what they need (configuration, baselines, a timing observer).
"""
