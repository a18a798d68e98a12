"""An application's calibration loop on real engines: verdicts in Chromium recalibrate the running worker.

A `halluwatch worker` (Tansu, embedded ClickHouse) scores the demo's traffic and serves the
review page; a reviewer judges the calls it draws in headless Chromium, has the application's
map fitted from those verdicts (Propose: a proposal) and applies it with the button, and the
same traffic sent again is scored through the new map, without a restart: each call stamped
with the map's version, its p_hallucination the shipped one through the map.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from detectors.verdict import PlattScaling
from pipeline.config.alerting import ROUTE_PROBABILITY, default_rules
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLES, example_traces
from tests.chromium import chromium_path
from tests.integration.support import WorkerProcess, produce

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("exported_model")]

TOKEN = "loop-test-token-0123"
APP = "default"


def _send(worker: WorkerProcess, bootstrap: str) -> dict[str, bool]:
    """The demo's traces under fresh trace ids, through the running worker; trace id -> hallucinated."""
    traces = example_traces()
    keyed = [(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
             for t in traces]  # fmt: skip
    done = worker.metric("halluwatch_messages_done_total")
    produce(bootstrap, worker.input_topic, keyed)
    worker.wait_for("halluwatch_messages_done_total", done + len(keyed))
    return {key.decode(): example.hallucinated for (key, _), example in zip(keyed, EXAMPLES, strict=True)}


def _wait_for_line(worker: WorkerProcess, text: str, after: int, timeout_seconds: float = 90) -> None:
    """Until the worker's log holds ``text`` past its first ``after`` bytes (this run's lines)."""
    deadline = time.monotonic() + timeout_seconds
    while text not in worker.log_path.read_bytes()[after:].decode(errors="replace"):
        assert worker.process is not None and worker.process.poll() is None, worker.log()
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{worker.log()}"
        time.sleep(0.2)


def test_verdicts_in_the_review_page_recalibrate_the_app_and_the_running_worker_takes_the_map(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
):
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", ui__token=TOKEN,
                           ui__token_user="reviewer", review__map_refresh_seconds="1")  # fmt: skip
    base = f"http://127.0.0.1:{worker.metrics_port}"
    worker.start()
    try:
        first = _send(worker, tansu.bootstrap)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"{base}/review?app={APP}&token={TOKEN}")
            assert "the shipped calibration" in page.inner_text("p.applied")
            judged: list[str] = []
            while page.locator("section.review").count() and len(judged) < 12:
                trace = page.locator("section.review p.meta code").nth(0).inner_text()
                with page.expect_navigation():  # the verdict's post, then the judged page
                    page.keyboard.press("h" if first[trace] else "f")
                assert "Recorded: " in page.inner_text(".flash")
                assert page.locator("section.found").count()  # blind review: what the detectors found, after it
                judged.append(trace)
                with page.expect_navigation():  # the next call (both pages show the estimate: wait for the load)
                    page.keyboard.press("n")
            assert len(judged) >= 8
            # A proposal from the verdicts, while the worker runs (and holds the embedded store).
            with page.expect_navigation():
                page.click("button.propose")
            version = page.inner_text("code.proposal-version")
            assert re.search(rf"Proposed map {version} for {APP} from \d+ verdicts", page.inner_text(".flash"))
            # Each gated route's false alarms on the app's traffic, measured by the verdicts so far.
            routes = page.locator("ul.route-false-alarms li").all_inner_texts()
            assert [line.split(":")[0] for line in routes] == ["page", "slack"], routes
            assert all("target" in line for line in routes), routes
            assert re.fullmatch(r"\d\.\d{3}", page.inner_text("strong.ece-after"))
            assert page.locator("table.routes tr.route-slack").count() == 1
            with page.expect_navigation():
                page.click("button.apply")
            assert f"Applied map {version} to {APP}" in page.inner_text(".flash")
            assert page.inner_text("code.applied-version") == version
            browser.close()
        _wait_for_line(worker, f"application {APP}: p_hallucination through map {version}", 0)
        delivered = worker.metric("halluwatch_alert_deliveries_total")  # the first traffic's, long done
        second = _send(worker, tansu.bootstrap)
        worker.wait_for("halluwatch_alert_deliveries_total", 2 * delivered)
    finally:
        assert worker.stop() == 0, worker.log()

    # The map is fitted on the verdicts whose call has a probability (one no detector the verdict weighs has none).
    probability = dict(worker.query("SELECT trace_id, p_hallucination FROM halluwatch.llm_calls FINAL"))
    fitted_on = sum(probability[trace] is not None for trace in judged)
    (slope, intercept, verdicts) = worker.query(
        f"SELECT slope, intercept, verdicts FROM halluwatch.calibration_maps WHERE version = '{version}' LIMIT 1"
    )[0]
    assert verdicts == fitted_on
    alerts = worker.query("SELECT trace_id, rule, route FROM halluwatch.alerts FINAL")
    first_alerts = [a for a in alerts if a[0] in first]
    assert first_alerts, "the demo's hallucinations alert"
    rows = worker.query("SELECT trace_id, p_hallucination, calibration_version FROM halluwatch.llm_calls FINAL")
    by_trace = {t: (p, v) for t, p, v in rows}
    assert {by_trace[t][1] for t in first} == {""}  # before: the shipped calibration alone
    assert {by_trace[t][1] for t in second if by_trace[t][0] is not None} == {version}
    # Each example's new probability is its old one through the applied map.
    mapped = PlattScaling(float(slope), float(intercept))
    pairs = [(by_trace[a][0], by_trace[b][0]) for a, b in zip(first, second, strict=True) if by_trace[a][0] is not None]
    assert pairs and all(new == pytest.approx(mapped.apply_one(old), abs=2e-3) for old, new in pairs)
    applied = worker.query("SELECT by, minimums FROM halluwatch.calibration_maps WHERE event = 'applied'")
    assert [by for by, _ in applied] == ["reviewer"]
    # The agreement stage gates the second traffic's alerts on the map's route minimums, on the map's scale of p:
    # with a dozen verdicts they are the shipped gates carried through the map, so the same examples alert.
    minimums = dict(applied[0][1])
    gated = {rule.name for rule in default_rules() if rule.min_probability == ROUTE_PROBABILITY}
    again = [a for a in alerts if a[0] in second]
    assert all(by_trace[trace][0] >= minimums[route] for trace, rule, route in again if rule in gated)
    example = {trace: index for traffic in (first, second) for index, trace in enumerate(traffic)}
    assert sorted((example[t], r) for t, r, _ in again) == sorted((example[t], r) for t, r, _ in first_alerts)
