"""The application's own model as a judge: asking it, what its answer weighs, what it may spend, its findings.

``asking`` puts the claims detector's questions to it, ``weight`` says how far its answer moves
``p_hallucination``, ``budget`` what each application may spend, ``records`` its answers as
findings.  The calls it is asked about are chosen by :mod:`pipeline.escalation`.
"""
