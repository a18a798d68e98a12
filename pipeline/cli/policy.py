"""`halluwatch policy`: which application policy a call gets."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, Commands, attribute_values, configured, main


@main.group(cls=Commands)
def policy() -> None:
    """Per-application policies: which one a call gets, and what it sets."""


@policy.command(name="explain")
@CONFIG_OPTION
@click.option("--service", required=True, help="The call's service.name.")
@click.option("--operation", default="", help="The call's operation (gen_ai.operation.name).")
@click.option("--model", default="", help="The call's model.")
@click.option(
    "--attr", "attributes", multiple=True, metavar="KEY=VALUE", help="A span or resource attribute (repeatable)."
)
def policy_explain(
    config_path: Path | None, service: str, operation: str, model: str, attributes: tuple[str, ...]
) -> None:
    """Show the effective policy of a call and where each value came from."""
    from pipeline.tools.policy_explain import explain

    for line in explain(configured(config_path), service, operation, model, attribute_values(attributes, "--attr")):
        click.echo(line)
