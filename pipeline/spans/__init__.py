"""The spans stage: OTLP messages in, detected calls written and published.

``processor`` is the pure, synchronous core (decode, normalize, detect, rows); ``stage`` the
faust agent around it.  The core never imports faust or the stage.
"""
