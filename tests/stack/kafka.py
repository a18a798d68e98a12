"""Apache Kafka from Maven Central's jars, run in KRaft mode with the broker settings of the compose file.

infra/kafka/pom.xml names the version; ``mvn dependency:copy-dependencies`` copies the broker
jar and its runtime dependencies into the cache once. The broker's settings are the kafka
service's ``KAFKA_*`` variables, turned into ``server.properties`` as the apache/kafka image
does, with only its listeners (moved to free loopback ports) and log directory replaced.
"""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from types import TracebackType

import yaml
from confluent_kafka.admin import AdminClient

from pipeline.tools.demo_broker import free_port
from tests.orphans import die_with_parent
from tests.stack.cache import built_once, cached, require, run_step

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "infra" / "kafka" / "pom.xml"
COMPOSE = REPO / "infra" / "docker-compose.yml"
# Settings that name places of the container: replaced here (listeners by port, logs by directory).
PLACES = ("listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs")
JVM = ["-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


def version() -> str:
    """The Kafka version the pom fetches."""
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = ET.parse(POM).getroot().find("m:properties/m:kafka.version", namespace)  # noqa: S314 - our own file
    assert node is not None and node.text
    return node.text


def _build_inputs() -> dict[str, str]:
    return {"pom": POM.read_text()}


def kafka_jars() -> Path:
    """The directory of the broker's jars, fetched with Maven (a minute, once) when the cache has none."""
    return built_once("kafka", _build_inputs(), _fetch)


def kafka_cached() -> bool:
    return cached("kafka", _build_inputs()).is_dir()


def _fetch(out: Path) -> None:
    mvn = require("mvn", "the tests fetch Apache Kafka's jars from Maven Central with Maven (and run them on Java 17+)")
    require("java", "Apache Kafka runs on a JVM (Java 17 or newer)")
    run_step([mvn, "-B", "-ntp", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
              f"-DoutputDirectory={out / 'libs'}"])  # fmt: skip


def _property(variable: str) -> str:
    # The apache/kafka image's rule: ``___`` is ``-``, ``__`` is ``_``, ``_`` is ``.``.
    name = variable.removeprefix("KAFKA_").lower().replace("___", "-").replace("__", "\0")
    return name.replace("_", ".").replace("\0", "_")


def compose_properties() -> dict[str, str]:
    """The kafka service's ``KAFKA_*`` variables as broker properties."""
    environment = yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]["environment"]
    return {_property(name): str(value) for name, value in environment.items() if name.startswith("KAFKA_")}


def cluster_id() -> str:
    """A random KRaft cluster id, as ``kafka-storage random-uuid`` makes one.

    Like Kafka's own ``Uuid.randomUuid``, it never starts with ``-``: the storage tool would read
    such an id after ``-t`` as an option and refuse to format (one start in 64).
    """
    while True:
        encoded = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not encoded.startswith("-"):
            return encoded


class KafkaBroker:
    """One KRaft node (broker and controller), formatted on first start, stopped on exit; no JVM outlives it."""

    def __init__(self, jars: Path, data_dir: Path) -> None:
        self.jars, self.data_dir = jars, data_dir
        self.log_path = data_dir / "kafka.log"
        self.properties = compose_properties()
        listeners = re.findall(r"(\w+)://[^:,]*:(\d+)", self.properties["listeners"])
        self.ports = {name: free_port() for name, _ in listeners}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The inter-broker listener's address: where the collector and the workers connect, as in compose."""
        return f"127.0.0.1:{self.ports[self.properties['inter.broker.listener.name']]}"

    def _server_properties(self) -> Path:
        local = dict(self.properties)
        local["listeners"] = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        advertised = re.findall(r"(\w+)://", self.properties["advertised.listeners"])
        local["advertised.listeners"] = ",".join(f"{name}://127.0.0.1:{self.ports[name]}" for name in advertised)
        node, _ = self.properties["controller.quorum.voters"].split("@")
        controller = self.properties["controller.listener.names"]
        local["controller.quorum.voters"] = f"{node}@127.0.0.1:{self.ports[controller]}"
        local["log.dirs"] = str(self.data_dir / "data")
        assert {name for name in local if local[name] != self.properties[name]} == set(PLACES)
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{name}={value}\n" for name, value in local.items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_path))
        return path

    def _java(self, main: str, *args: str, jvm: list[str]) -> list[str]:
        logging = f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}"
        return [require("java", "Apache Kafka runs on a JVM"), *jvm, logging, "-cp", f"{self.jars / 'libs'}/*", main,
                *args]  # fmt: skip

    def __enter__(self) -> KafkaBroker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self._server_properties()
        cluster = cluster_id()
        # A short-lived JVM: the client compiler alone starts it faster.
        fast = ["-XX:TieredStopAtLevel=1", "-Xmx256m"]
        format_command = self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config), jvm=fast)
        subprocess.run(format_command, check=True, capture_output=True, timeout=120)
        self.start()
        return self

    def start(self) -> None:
        """Start the JVM on the formatted log directory; return once it answers metadata requests."""
        with open(self.log_path.with_suffix(".out"), "ab") as out:
            command = self._java("kafka.Kafka", str(self.data_dir / "server.properties"), jvm=JVM)
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        # Quiet: until the broker listens, every probe would log "Connection refused" to stderr.
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})
        deadline = time.monotonic() + 120
        while True:
            assert self.process.poll() is None, f"kafka exited {self.process.returncode}:\n{self.log()}"
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: S110 - not up yet: any client error means wait
                pass
            assert time.monotonic() < deadline, f"kafka did not come up in 120 s:\n{self.log()}"
            time.sleep(0.5)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the JVM (a controlled shutdown on SIGTERM) and wait for it to exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
