"""The worker's triage pages are an extra: when they cannot be set up, the worker still consumes."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from pipeline.config.settings import load_settings
from pipeline.worker.runner import _triage_pages


def test_pages_that_cannot_reach_clickhouse_are_left_out_with_the_reason(caplog, tmp_path):
    settings = load_settings(data_dir=tmp_path, clickhouse_dsn=SecretStr("http://127.0.0.1:9"))
    with caplog.at_level(logging.ERROR, logger="pipeline.worker.runner"):
        assert _triage_pages(settings) == (None, None)
    (record,) = caplog.records
    assert record.getMessage().startswith("triage pages not served (metrics and health are): ClickHouse at ")
    assert record.exc_info is None  # a handled fault: one line, no traceback


def test_pages_switched_off_are_not_built(tmp_path):
    settings = load_settings(data_dir=tmp_path, ui={"serve_in_worker": False})
    assert _triage_pages(settings) == (None, None)
