"""The worker process: one faust app assembling every stage, run with metrics, health and signals.

May import every stage room, ``stream``, ``sinks``, ``config`` and ``detectors``; never
``offline`` or ``tools``.
"""
