"""The worker is configured by HALLUWATCH_* alone: faust's own unprefixed variables change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.settings import load_settings
from pipeline.worker.app import PipelineWorker


def test_faust_environment_variables_do_not_override_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BROKER_URL", "kafka://elsewhere.invalid:1")
    monkeypatch.setenv("TOPIC_PARTITIONS", "1")
    monkeypatch.setenv("PRODUCER_ACKS", "0")
    settings = load_settings(data_dir=tmp_path, kafka_bootstrap="127.0.0.1:19092", kafka_topic_partitions=4)
    conf = PipelineWorker(settings).app.conf
    assert [str(url) for url in conf.broker] == ["kafka://127.0.0.1:19092"]
    assert conf.topic_partitions == 4 and conf.producer_acks == -1
