"""How often calls hallucinate, and the review queue's digest: rate, review-digest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.cli.group import CONFIG_OPTION, ago, attribute_values, configured, main
from pipeline.cli.store import held_store, open_client
from pipeline.config.settings import Settings

if TYPE_CHECKING:
    from pipeline.rate.store import Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse


@main.command()
@CONFIG_OPTION
@click.option("--app", default="", help="An application policy's name.")
@click.option("--service", default="", help="Only calls of this service.name.")
@click.option("--operation", default="", help="Only calls of this operation.")
@click.option("--model", default="", help="Only calls of this model.")
@click.option("--attr", "attributes", multiple=True, metavar="KEY=VALUE", help="Only calls with this attribute value.")
@click.option("--since", default="7d", show_default=True, help="The window starts this long ago (7d, 36h).")
@click.option("--until", default="0", show_default=True, help="The window ends this long ago (0: now).")
@click.option("--baseline-since", default="", help="Compare with the same calls in this window instead (its start).")
@click.option("--baseline-until", default="", help="The baseline window's end (default: where --since starts).")
@click.option(
    "--baseline-attr", "baseline_attributes", multiple=True, metavar="KEY=VALUE",
    help="Compare with the calls that have this attribute value instead (same window).",
)  # fmt: skip
def rate(
    config_path: Path | None, app: str, service: str, operation: str, model: str, attributes: tuple[str, ...],
    since: str, until: str, baseline_since: str, baseline_until: str, baseline_attributes: tuple[str, ...],
) -> None:  # fmt: skip
    """How often the calls hallucinate: model-based and verdict-corrected rates, the alert rule's precision and recall.

    The verdict-corrected rate comes from the verdicts given in the review queue (`halluwatch ui`,
    Review; sign in with the address `ui` prints); with too few it says how many more it needs.
    The same verdicts measure each alert route's false alarms (faithful calls alerted, 95 %
    interval, against the route's target). With a --baseline-* option it also compares the two
    scopes: the difference of their rates with its interval.

    While `halluwatch ui` holds the embedded ClickHouse (one process per data directory), rate
    reads through it: the address and token it left in DATA_DIR.

    The demo's data: halluwatch --data-dir .halluwatch/demo rate --app default.
    """
    from dataclasses import replace

    from pipeline.calibration.app_map import operating_point_lines
    from pipeline.config.alert_routes import AlertRoutes
    from pipeline.rate.compare import comparison_sentence
    from pipeline.rate.false_alarms import false_alarm_lines, rate_with_false_alarms
    from pipeline.rate.maps import MapStore
    from pipeline.rate.report import rate_report, report_lines
    from pipeline.rate.sampler import Strata
    from pipeline.rate.store import RateStore, Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse, open_clickhouse

    settings = configured(config_path)
    review = settings.review
    values = attribute_values(attributes, "--attr")
    scope = Scope(ago(since, "--since"), ago(until, "--until"), app, service, operation, model,
                  tuple(sorted(values.items())))  # fmt: skip
    if scope.since >= scope.until:
        raise click.BadParameter("the window must start before it ends", param_hint="--since")
    comparing = bool(baseline_since or baseline_until or baseline_attributes)
    try:
        client = open_clickhouse(settings, create=False)
    except EmbeddedInUse as exc:
        for line in _rate_through_pages(settings, exc, scope, comparing):
            click.echo(line)
        return
    store = RateStore(client, settings.clickhouse_database, Strata.configured(review))
    alert_routes = AlertRoutes.configured(settings.alerting, settings.policies)
    report, routes = rate_with_false_alarms(store, scope, alert_routes, review.target_half_width)
    for line in report_lines(report, review.target_half_width) + false_alarm_lines(routes, app):
        click.echo(line)
    if app:
        for line in operating_point_lines(app, MapStore(client, settings.clickhouse_database).proposal(app)):
            click.echo(line)
    if not comparing:
        return
    baseline_values = {**values, **attribute_values(baseline_attributes, "--baseline-attr")}
    baseline = replace(
        scope,
        since=ago(baseline_since, "--baseline-since") if baseline_since else scope.since,
        until=ago(baseline_until, "--baseline-until") if baseline_until else scope.since,
        attributes=tuple(sorted(baseline_values.items())),
    )
    if baseline_attributes and not (baseline_since or baseline_until):
        baseline = replace(baseline, until=scope.until)  # the same window, another attribute value
    if baseline.since >= baseline.until:
        raise click.BadParameter("the baseline window must start before it ends", param_hint="--baseline-since")
    before = rate_report(store, baseline, review.target_half_width)
    click.echo("baseline:")
    for line in report_lines(before, review.target_half_width):
        click.echo(line)
    # Each side named by what differs: its window, or its attribute values.
    if baseline_since or baseline_until:
        after, earlier = f"in {scope.window()}", f"in {baseline.window()}"
    else:
        after, earlier = f"for {scope.describe()}", f"for {baseline.describe()}"
    click.echo(comparison_sentence(app or service or "every app", (after, report.rate), (earlier, before.rate)))


def _rate_through_pages(settings: Settings, in_use: EmbeddedInUse, scope: Scope, comparing: bool) -> list[str]:
    """The report read through the triage pages of the process holding the embedded store, or what to do."""
    from pipeline.rate.through_pages import PagesRefused, PagesUnreachable, report_lines_through
    from pipeline.ui.serve import running_pages

    if comparing:
        raise click.ClickException(held_store(in_use, settings, "a comparison (--baseline-*) is not read through "
                                               "its pages: stop it, run this again, then start it again"))  # fmt: skip
    pages = running_pages(settings.data_dir, settings.ui)
    if pages is None:
        instead = ("its pages left no address or token here (DATA_DIR/ui_address, ui_token): set HALLUWATCH_UI__TOKEN "
                   "to the token they accept, or stop it and run this again")  # fmt: skip
        raise click.ClickException(held_store(in_use, settings, instead))
    try:
        return report_lines_through(*pages, scope)
    except PagesRefused as exc:
        sign_in = (f"they believe {settings.ui.identity_header} only from ui.trusted_proxies, which must include "
                   "this machine's address" if settings.ui.identity_header and not settings.ui.token
                   else "the token sent is not theirs")  # fmt: skip
        instead = f"{exc}: {sign_in}; set HALLUWATCH_UI__TOKEN to a token both use, or stop it and run this again"
        raise click.ClickException(held_store(in_use, settings, instead)) from exc
    except PagesUnreachable as exc:
        raise click.ClickException(held_store(in_use, settings, f"{exc}; stop it and run this again")) from exc


@main.command(name="review-digest")
@CONFIG_OPTION
@click.option("--app", required=True, help="The application policy whose calls to draw.")
@click.option("--channel", required=True, help="The Slack channel to post to (#name or its id).")
@click.option("--calls", "count", type=click.IntRange(1, 20), default=5, show_default=True, help="Calls to post.")
def review_digest(config_path: Path | None, app: str, channel: str, count: int) -> None:
    """Post the review queue's next calls of an application to Slack, with verdict buttons (run it daily).

    The calls are the ones the review page would serve next; a click on their buttons reaches
    the pages' Slack endpoint (ui.slack_signing_secret) and joins the audit sample.
    """
    from slack_sdk import WebClient

    from pipeline.rate.digest import digest_message
    from pipeline.rate.queue import draw
    from pipeline.rate.sampler import Strata
    from pipeline.rate.store import RateStore, Scope

    settings = configured(config_path)
    token = settings.alerting.slack_bot_token
    if token is None:
        raise click.ClickException("alerting.slack_bot_token is not set (HALLUWATCH_ALERTING__SLACK_BOT_TOKEN)")
    review = settings.review
    store = RateStore(open_client(settings), settings.clickhouse_database, Strata.configured(review))
    now = datetime.now(UTC)
    calls = draw(store, Scope(now - timedelta(days=review.window_days), now, app=app), "", review.seed, count)
    if not calls:
        click.echo(f"nothing to review for {app}: every call of the last {review.window_days} days is judged")
        return
    text, blocks = digest_message(app, calls, settings.alerting.ui_base_url)
    client = WebClient(token=token.get_secret_value(), base_url=settings.alerting.slack_base_url)
    client.chat_postMessage(channel=channel, text=text, blocks=blocks)
    click.echo(f"posted {text} to {channel}")
