"""The sampled detectors' stage: a share of high-risk calls judged by an LLM, off the hot path.

``sampling`` picks the calls, ``llm_client`` talks to the endpoint within its budget, ``stage``
runs the ``detectors.self_consistency`` and ``detectors.claims`` judges on the sampled topic.
"""
