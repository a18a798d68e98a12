"""The detectors: the detector contract, the LLM call they judge, and every detector.

Owns :class:`~detectors.llm_call.LLMCall` (one LLM call as the detectors see it), the
contract in :mod:`detectors.base` (a batch of calls in, one result per call out, models
loaded in ``start`` and released in ``close``), each span-level and sampled detector (a
package each: settings and descriptor, then its runtime), their ordered list
(:mod:`detectors.registry`) and what is derived from it, the suite that gates them
(:mod:`detectors.suite`), and their thresholds and data files.

Imports nothing from ``pipeline/``: the pipeline builds the detectors from its settings
and hands them what they need (configuration, baselines, a timing observer).
"""
