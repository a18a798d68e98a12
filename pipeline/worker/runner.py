"""Running a :class:`~pipeline.worker.app.PipelineWorker` as a process: logging, metrics, health, signals."""

from __future__ import annotations

import logging

from clickhouse_connect.driver.exceptions import ClickHouseError
from faust.worker import Worker
from flask import Flask

from pipeline.config.settings import Settings
from pipeline.sinks.clickhouse import ClickHouseUnreachable
from pipeline.ui.access import Access
from pipeline.ui.serve import UnmigratedDatabase, keep_address, keep_token, triage_app
from pipeline.worker.app import PipelineWorker
from pipeline.worker.health import HEALTH_PATH, WorkerEndpoint
from pipeline.worker.topics import create_missing_topics

logger = logging.getLogger(__name__)


def faust_worker(pipeline_worker: PipelineWorker) -> Worker:
    """A faust worker (signal handling, graceful SIGTERM) around ``pipeline_worker``'s app."""
    # Logging stays as the command configured it (pipeline/config/logs.py, in the chosen format):
    # mode would replace the root handlers with its own. stdout stays ours: faust would
    # otherwise turn every print into a log line.
    worker = Worker(pipeline_worker.app, quiet=True, redirect_stdouts=False, override_logging=False)
    worker.spinner = None  # terminal escape codes in a log are noise
    return worker


def _triage_pages(settings: Settings) -> tuple[Flask | None, Access | None]:
    """The triage pages for the worker's endpoint, or none: they must never keep it from consuming."""
    if not settings.ui.serve_in_worker:
        return None, None
    try:
        return triage_app(settings)
    except (ClickHouseError, ClickHouseUnreachable, UnmigratedDatabase) as exc:
        logger.error("triage pages not served (metrics and health are): %s", exc)
        return None, None


def run_worker(settings: Settings) -> None:
    """Run the worker until SIGTERM/SIGINT; returns after a graceful shutdown."""
    pipeline_worker = PipelineWorker(settings)
    endpoint = None
    if settings.metrics_port is not None:
        pages, access = _triage_pages(settings)
        endpoint = WorkerEndpoint(pipeline_worker.app, settings.metrics_host, settings.metrics_port, pages)
        base_url = f"http://{settings.metrics_host}:{endpoint.port}"
        logger.info("metrics on %s/metrics, health on %s", base_url, HEALTH_PATH)
        if access is not None:
            # The log goes to shippers and dashboards: a made-up token goes to a file, not to it.
            token_file = keep_token(access, settings.data_dir)
            keep_address(base_url, settings.data_dir)
            sign_in = f"; sign in with the token in {token_file}" if token_file else ""
            logger.info("triage pages on %s/%s", settings.alerting.ui_base_url.rstrip("/") or base_url, sign_in)
    create_missing_topics(settings)  # before the group join: its first assignment must see them all
    try:
        faust_worker(pipeline_worker).execute_from_commandline()
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise
    finally:
        if endpoint is not None:
            endpoint.close()
