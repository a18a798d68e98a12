"""Where results go besides Kafka: ClickHouse (rows, migrations, sink) and OTLP findings export.

Findings are exported, optionally, as ``gen_ai.evaluation.result`` log records.

Imports ``config``, ``detectors`` and the alert record; no stage, no faust.
"""
