"""faust plumbing the stages share: topics, trace tables, durable batches, retries, credentials.

Also the work-around for faust-streaming 0.15 dropping stream records (``dropped_records``).

Imports faust, ``sinks`` (to recognize an unavailable sink) and ``config``; no stage.
"""
