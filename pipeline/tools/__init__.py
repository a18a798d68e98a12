"""Operator tools: ``doctor``, ``report``, ``replay``, and ``demo`` with its broker and example traces.

May import anything in ``pipeline`` and ``detectors``; nothing in the worker imports it.
"""
