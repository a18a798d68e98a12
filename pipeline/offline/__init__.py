"""The offline quality loop: ``halluwatch eval``, calibration and plots, baselines, human labels.

May import anything in ``pipeline`` and ``detectors``; nothing in the worker imports it.
"""
