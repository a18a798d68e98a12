"""``python -m tests.stack.build``: build the collector and fetch Kafka into the cache now, with progress.

`make test` runs it before pytest so the one-time build shows on the terminal; the fixtures
call the same functions, which return at once from the cache.
"""

from __future__ import annotations

from tests.stack.cache import say
from tests.stack.collector import collector_binary
from tests.stack.collector import version as collector_version
from tests.stack.kafka import kafka_jars
from tests.stack.kafka import version as kafka_version

if __name__ == "__main__":
    say(f"Apache Kafka {kafka_version()}: {kafka_jars()}")
    say(f"collector-contrib {collector_version()}: {collector_binary()}")
