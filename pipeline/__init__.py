"""halluwatch's pipeline: LLM spans from Kafka to ClickHouse and alerts, in rooms a span visits in order.

``ingest`` (decode, normalize) -> ``spans`` (detect; content-free calls wait in ``log_join``)
-> ``sinks`` (ClickHouse, findings export) and the findings topic -> ``agreement`` (two
detectors agree) -> ``alerting`` (Slack, PagerDuty, log); ``sampled`` judges a share of calls
with an LLM off the hot path.  ``stream`` is the faust plumbing the stages share, ``worker``
assembles them into one process, ``config`` is read by all.  ``offline`` (eval, calibration,
baselines, labels) and ``tools`` (doctor, report, replay, demo) serve operators and never run
inside the worker.  ``metrics`` are the worker's Prometheus metrics; ``cli`` is the command
line.  Detectors themselves live in the ``detectors`` package, which imports nothing from
here.  The layering is checked by ``lint-imports`` (pyproject's ``[tool.importlinter]``).
"""
