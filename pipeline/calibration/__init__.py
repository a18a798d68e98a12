"""Calibration the worker and the review page share with the offline commands: fitting maps, ECE, route targets.

An application's own map of p_hallucination is proposed and applied where its verdicts are given
(the review page) as well as by ``halluwatch calibrate --app``, so what both need lives here and
imports nothing from ``pipeline/offline/``.
"""
