"""Secrets that let people in must be random: placeholders and short values stop start-up, naming the setting."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config.settings import ConfigError, load_settings
from pipeline.ui.access import Access

# Each guarded secret: the variable a deployment sets, and the setting the message names.
GUARDED = {
    "HALLUWATCH_UI__TOKEN": "ui.token",
    "HALLUWATCH_UI__SESSION_SECRET": "ui.session_secret",
    "HALLUWATCH_UI__SLACK_SIGNING_SECRET": "ui.slack_signing_secret",
    "HALLUWATCH_UI__PAGERDUTY_WEBHOOK_SECRET": "ui.pagerduty_webhook_secret",
    "HALLUWATCH_CONTENT_HMAC_KEY": "content_hmac_key",
}
ADVICE = "set a random value of 16 characters or more (e.g. `openssl rand -hex 24`)"
PLACEHOLDERS = ["change-me", "CHANGE_ME", "changeme-before-going-live", "<your-token-here-please>",
                "replace-me-with-a-real-one", "xxxxxxxxxxxxxxxxxxxxxxxx"]  # fmt: skip


@pytest.mark.parametrize("value", PLACEHOLDERS)
@pytest.mark.parametrize("variable", sorted(GUARDED))
def test_a_placeholder_is_refused_in_one_line_naming_the_setting(monkeypatch, variable: str, value: str):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert (
        str(error.value)
        == f"invalid configuration: {GUARDED[variable]} (from {variable}): a placeholder, not a secret: {ADVICE}"
    )


@pytest.mark.parametrize("variable", sorted(GUARDED))
def test_a_short_secret_is_refused_and_a_random_one_taken(monkeypatch, variable: str):
    monkeypatch.setenv(variable, "s3cr3t-K3y-q9")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert (
        str(error.value)
        == f"invalid configuration: {GUARDED[variable]} (from {variable}): shorter than 16 characters: {ADVICE}"
    )
    assert "s3cr3t" not in str(error.value)
    monkeypatch.setenv(variable, secrets.token_hex(16))
    load_settings()


def test_an_empty_secret_is_no_secret(monkeypatch):
    monkeypatch.setenv("HALLUWATCH_UI__TOKEN", "")
    assert Access(load_settings().ui).generated  # the process makes up its own token, as when unset


@pytest.mark.parametrize("command", [["ui", "--port", "0"], ["worker"]])
def test_the_ui_and_the_worker_do_not_start_with_the_example_files_placeholders(tmp_path: Path, command):
    """infra/.env.example shipped HALLUWATCH_UI__TOKEN=change-me: `Authorization: Bearer change-me` was served."""
    env = {**os.environ, "HALLUWATCH_DATA_DIR": str(tmp_path), "HALLUWATCH_UI__TOKEN": "change-me",
           "HALLUWATCH_UI__SESSION_SECRET": "change-me"}  # fmt: skip
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", *command], env=env, capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        "Error: invalid configuration:",
        f"  ui.token (from HALLUWATCH_UI__TOKEN): a placeholder, not a secret: {ADVICE}",
        f"  ui.session_secret (from HALLUWATCH_UI__SESSION_SECRET): a placeholder, not a secret: {ADVICE}",
    ]
