"""Running a :class:`~pipeline.worker.PipelineWorker` as a process: logging, metrics, signals."""

from __future__ import annotations

import logging

from faust.worker import Worker
from prometheus_client import start_http_server

from pipeline.settings import Settings
from pipeline.worker import PipelineWorker

_FAUST_LOG_LEVELS = {"debug": "debug", "info": "info", "warn": "warn", "error": "error"}


def faust_worker(pipeline_worker: PipelineWorker) -> Worker:
    """A faust worker (signal handling, graceful SIGTERM) around ``pipeline_worker``'s app."""
    settings = pipeline_worker.settings
    if settings.metrics_port is not None:
        start_http_server(settings.metrics_port, addr=settings.metrics_host)
        logging.getLogger(__name__).info(
            "metrics on http://%s:%d/metrics", settings.metrics_host, settings.metrics_port
        )
    # stdout stays ours: faust would otherwise turn every print into a log line.
    worker = Worker(
        pipeline_worker.app, loglevel=_FAUST_LOG_LEVELS[settings.log_level], quiet=True, redirect_stdouts=False
    )
    worker.spinner = None  # terminal escape codes in a log are noise
    return worker


def run_worker(settings: Settings) -> None:
    """Run the worker until SIGTERM/SIGINT; returns after a graceful shutdown."""
    try:
        faust_worker(PipelineWorker(settings)).execute_from_commandline()
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise
