"""The command group, the --config option and what every command parses the same way."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from pydantic import SecretStr

from pipeline.config.logs import configure_logging
from pipeline.config.secrets import install_scrubber, secret_values
from pipeline.config.settings import Settings, load_settings

CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML settings file (default: $HALLUWATCH_CONFIG). HALLUWATCH_* variables override it.",
)


def configured(config_path: Path | None) -> Settings:
    """The settings of this run (ConfigError names the bad value's source), with logging set up and secrets masked."""
    ctx = click.get_current_context(silent=True)
    data_dir = ctx.find_root().params.get("data_dir") if ctx else None
    # --data-dir names the embedded store itself: an exported HALLUWATCH_CLICKHOUSE_DSN cannot divert it.
    store = {"data_dir": data_dir, "clickhouse_dsn": SecretStr("")} if data_dir else {}
    settings = load_settings(config_path, store, "--data-dir")
    configure_logging(settings.log_level, settings.log_format)
    install_scrubber(secret_values(settings))  # client errors may quote a token or a DSN password
    if ctx:
        ctx.meta[_SETTINGS] = settings  # for the failure's words: sources and secrets
    return settings


_SETTINGS = "halluwatch.settings"


class Commands(click.Group):
    """The command group: a failure ends a command with a few plain lines and exit status 1 (failures.py)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; what it lets through becomes plain lines, or one line on a fault of ours."""
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            from pipeline.cli.failures import explain, fault_line

            settings = ctx.meta.get(_SETTINGS)
            explained = explain(exc, settings)
            if explained is not None:
                raise click.ClickException(explained) from exc
            if ctx.find_root().params.get("debug"):
                raise
            logging.getLogger("pipeline.cli").debug("fault of ours", exc_info=exc)
            command = " ".join(filter(None, [ctx.command_path.partition(" ")[2], ctx.invoked_subcommand]))
            raise click.ClickException(fault_line(exc, command, settings)) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole first sentence: click's default cuts them at 45 characters with "…"."""
        commands = [(name, self.get_command(ctx, name)) for name in self.list_commands(ctx)]
        rows = [(name, command.get_short_help_str(limit=_SUMMARY_CHARS)) for name, command in commands
                if command is not None and not command.hidden]  # fmt: skip
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_SUMMARY_CHARS = 400  # longer than any command's first sentence: --help lists each whole


@click.group(cls=Commands)
@click.version_option(package_name="halluwatch")
@click.option("--debug", is_flag=True, help="On a fault of halluwatch's own, show its traceback.")
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path),
    help="Use the embedded store of this data directory (the demo's: .halluwatch/demo), whatever "
    "HALLUWATCH_DATA_DIR or HALLUWATCH_CLICKHOUSE_DSN say.",
)  # fmt: skip
def main(debug: bool, data_dir: Path | None) -> None:
    """Trace-layer hallucination detection: OTLP spans from Kafka -> detectors -> ClickHouse."""


def attribute_values(attributes: tuple[str, ...], option: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a mapping; a usage error naming ``option`` for one without ``=``."""
    pairs = [attribute.partition("=") for attribute in attributes]
    if any(not equals or not key for key, equals, _ in pairs):
        raise click.BadParameter("expected KEY=VALUE", param_hint=option)
    return {key: value for key, _, value in pairs}


def ago(text: str, option: str) -> datetime:
    """The moment ``text`` (a duration: 7d, 12h; 0 for now) before now."""
    from pipeline.config.durations import parse_duration

    duration = timedelta(0) if text.strip() == "0" else parse_duration(text)
    if duration is None:
        raise click.BadParameter(f"{text!r}: a duration such as 7d, 36h or 90m (0: now)", param_hint=option)
    return datetime.now(UTC) - duration
