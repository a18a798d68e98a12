"""The house rules of docs/architecture.md: layering contracts and a settings import that stays light."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_RUNTIMES = {"onnxruntime", "tokenizers", "torch", "transformers", "numpy", "jsonschema", "re2", "faust"}


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def loaded_top_level_modules(statement: str) -> set[str]:
    probe = f"import sys; {statement}; print('\\n'.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return set(done.stdout.split())


def test_reading_settings_loads_no_model_runtime_or_stream_library():
    loaded = loaded_top_level_modules("from pipeline.config.settings import load_settings; load_settings()")
    assert "pipeline" in loaded  # the probe really imported the settings
    assert not loaded & MODEL_RUNTIMES


def test_command_line_stays_lazy_until_a_command_runs():
    loaded = loaded_top_level_modules("import pipeline.cli")
    assert not loaded & (MODEL_RUNTIMES | {"chdb", "clickhouse_connect", "confluent_kafka"})


@pytest.mark.parametrize(
    "stage",
    ["spans.stage.SpansStage", "log_join.stage.LogJoinStage", "sampled.stage.ConsistencyStage",
     "agreement.stage.AgreementStage", "alerting.stage.AlertRouter", "monitors.stage.MonitorStage"],
)  # fmt: skip
def test_each_stage_takes_its_own_settings_sections_not_the_whole_settings(stage: str):
    module, name = f"pipeline.{stage}".rsplit(".", 1)
    parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters.values()
    assert "Settings" not in {str(p.annotation) for p in parameters}
