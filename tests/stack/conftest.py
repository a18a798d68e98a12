"""The real stack's parts, built or fetched once into ~/.cache/halluwatch/ and started by fixtures.

When a session collects stack tests and a part is not cached yet, its build starts at once in
the background, at the lowest CPU priority, while the tests before them run; the fixtures wait
for it (the build's lock) when they get there. The build's output goes to ``BUILD_LOG``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.orphans import die_with_parent
from tests.stack.cache import CACHE_ROOT, MissingTool, require, say
from tests.stack.collector import collector_binary, collector_cached
from tests.stack.kafka import KafkaBroker, kafka_cached, kafka_jars

STACK = Path(__file__).resolve().parent
BUILD_LOG = CACHE_ROOT / "stack-build.log"
_background: list[subprocess.Popen[bytes]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if collector_cached() and kafka_cached():
        return
    if not any(Path(item.path).is_relative_to(STACK) for item in session.items):
        return
    try:
        for tool in ("go", "mvn", "java"):
            require(tool, "tests/stack builds collector-contrib with Go and runs Apache Kafka (Maven, Java 17+)")
    except MissingTool as missing:
        raise pytest.UsageError(f"{missing}; or deselect tests/stack") from None
    BUILD_LOG.parent.mkdir(parents=True, exist_ok=True)
    say(f"building the real stack's parts in the background for tests/stack (nice 19; log: {BUILD_LOG})")
    command = ["nice", "-n", "19", sys.executable, "-m", "tests.stack.build"]
    with open(BUILD_LOG, "wb") as log:
        build = subprocess.Popen(
            command, cwd=STACK.parents[1], stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
    _background.append(build)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for build in _background:
        if build.poll() is None:  # the session ended before the stack tests: nothing waits for it
            build.terminate()
            build.wait(timeout=30)


@pytest.fixture(scope="session")
def otelcol() -> Path:
    """collector-contrib built from infra/collector/builder.yaml (minutes the first time, then cached)."""
    return collector_binary()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka broker for the session, set up as compose's kafka service; stopped at the end."""
    with KafkaBroker(kafka_jars(), tmp_path_factory.mktemp("kafka")) as broker:
        yield broker
