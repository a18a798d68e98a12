"""Two detectors agree: findings of a trace in, at most one alert per trace and rule out.

``rules`` is the pure state machine (docs/detectors.md); ``stage`` keeps per-trace state in a faust table.
"""
