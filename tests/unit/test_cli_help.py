"""`halluwatch --help` and the pages' commands' help, as a newcomer reads them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.cli import main


@pytest.mark.parametrize(
    "group", [[], ["label"], ["policy"], ["silence"]], ids=["halluwatch", "label", "policy", "silence"]
)
def test_every_command_summary_is_whole(group: list[str]):
    result = CliRunner().invoke(main, [*group, "--help"], terminal_width=100)
    assert result.exit_code == 0
    listed = result.output.split("Commands:", 1)[1]
    assert "…" not in listed and "..." not in listed
    commands = main.commands if not group else main.commands[group[0]].commands  # type: ignore[attr-defined]
    for name, command in commands.items():
        first_sentence = " ".join((command.help or "").split("\n\n", 1)[0].split()).split(". ", 1)[0].rstrip(".")
        assert " ".join(first_sentence.split()[:4]) in " ".join(listed.split()), name


def test_ui_and_rate_help_say_how_to_sign_in_and_where_the_demo_keeps_its_data():
    for command in ("ui", "rate"):
        output = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "halluwatch --data-dir .halluwatch/demo" in output, command
        assert "sign in" in output, command
