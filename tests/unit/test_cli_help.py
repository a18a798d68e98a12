"""`halluwatch --help` and the pages' commands' help, as a newcomer reads them."""

from __future__ import annotations

from click.testing import CliRunner

from pipeline.cli import main


def test_every_command_summary_is_whole():
    result = CliRunner().invoke(main, ["--help"], terminal_width=100)
    assert result.exit_code == 0
    listed = result.output.split("Commands:", 1)[1]
    assert "…" not in listed and "..." not in listed
    for name, command in main.commands.items():
        first_sentence = " ".join((command.help or "").split("\n\n", 1)[0].split()).split(". ", 1)[0].rstrip(".")
        assert " ".join(first_sentence.split()[:4]) in " ".join(listed.split()), name


def test_ui_and_rate_help_say_how_to_sign_in_and_where_the_demo_keeps_its_data():
    for command in ("ui", "rate"):
        output = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "HALLUWATCH_DATA_DIR=.halluwatch/demo" in output, command
        assert "sign in" in output, command
