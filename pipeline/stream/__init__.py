"""faust plumbing the stages share: topics, trace tables, durable batches, retries, credentials.

Also the work-arounds for faust-streaming 0.15 dropping stream records (``dropped_records``) and
seeking aiokafka from the wrong thread (``consumer_seek``).

Imports faust, ``sinks`` (to recognize an unavailable sink) and ``config``; no stage.
"""
