"""docs/configuration.md is generated from the settings models and kept current."""

from __future__ import annotations

from pipeline.config.alerting import AlertingSettings
from pipeline.config.settings import Settings
from pipeline.tools.config_doc import DOC_PATH, field_notes, render


def test_the_committed_file_is_what_the_models_generate() -> None:
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run `python -m pipeline.tools.config_doc`"
    )


def test_every_setting_is_listed_with_its_environment_name_reachable() -> None:
    text = render()
    for name in Settings.model_fields:
        assert f"`{name}`" in text
    # Nested sections are written as YAML paths, a table keyed by your names as <name>.
    assert "| `alerting.routes.<name>.pagerduty_routing_key` | *secret* |" in text
    assert "| `alerting.rules[].min_severity` | int | `0` |" in text


def test_a_comment_above_a_run_of_fields_speaks_for_the_run() -> None:
    notes = field_notes(AlertingSettings)
    assert notes["slack_bot_token"].startswith("Credentials")
    assert notes["pagerduty_url"] == "As above."
    assert notes["request_retries"].startswith("Quick retries inside one delivery attempt")
