"""``halluwatch doctor``: checks that this configuration works here (docs/operations.md).

Each check reaches the real thing with the worker's own settings and says what it found,
or what to change: configuration, the broker (reach it, then create a scratch topic,
write to it, read it back, delete it; the input topics, which must be neither compacted nor
written in transactions), ClickHouse (reach it, then create a scratch table,
insert, select, drop; are the migrations applied; did the last day's model calls arrive with
content, tool definitions and model, per instrumentation), the embedding model, and the alert
credentials (Slack's ``auth.test``). Nothing here prints a secret: details pass through
:func:`~pipeline.config.secrets.scrub` with every configured secret value.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.alerting.routes import usable_types, wanted_types
from pipeline.config.alerting import AlertingSettings
from pipeline.config.connections import redacted_dsn
from pipeline.config.secrets import scrub, secret_values
from pipeline.config.settings import Settings
from pipeline.tools.demo_broker import BROKER_LOG
from pipeline.tools.instrumentation_gaps import scope_gaps, summary
from pipeline.tools.kafka_clients import ConnectionReasons, client_config


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome: ``ok``, or ``detail`` says what failed and what to do."""

    name: str
    ok: bool
    detail: str
    warning: bool = False  # works, but something needs attention

    def line(self) -> str:
        """The check as one line of the report."""
        status = "ok  " if self.ok and not self.warning else "warn" if self.ok else "FAIL"
        return f"{status}  {self.name}: {self.detail}"


class _Failed(Exception):
    """A step of a check failed; the message says what to do."""


def run_checks(settings: Settings, timeout_seconds: float = 10.0) -> list[Check]:
    """Run every check (a failed one does not stop the others); details carry no secret."""
    secrets = secret_values(settings)
    checks = [_config(settings)]
    for name, check in (
        ("kafka", _kafka),
        ("clickhouse", _clickhouse),
        ("embedding model", _model),
        ("tool facts registries", _registries),
        ("alerting", _alerting),
    ):
        try:
            checks += list(check(settings, timeout_seconds))
        except _Failed as failure:
            checks.append(Check(name, False, str(failure)))
        except Exception as exc:  # a check must report, never crash the report
            checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"))
    return [Check(c.name, c.ok, scrub(c.detail, secrets), c.warning) for c in checks]


def _config(settings: Settings) -> Check:
    policies = settings.content_policies()
    modes = ", ".join(f"{table} {getattr(policies, table).mode}" for table in ("llm_calls", "findings", "alerts"))
    apps = ", ".join(f"{name} ({policy.match.describe()})" for name, policy in settings.policies.items())
    detail = f"valid; content modes: {modes}; max_call_chars {settings.max_call_chars}"
    return Check("config", True, detail + (f"; policies: {apps}" if apps else "; no application policies"))


# --- Kafka ---------------------------------------------------------------------------------------


def _kafka_config(settings: Settings, timeout_seconds: float) -> dict[str, Any]:
    return client_config(
        settings.kafka_bootstrap,
        {"socket.timeout.ms": int(timeout_seconds * 1000)},
        settings.kafka_security.confluent_config(),
    )


def _kafka_hint(settings: Settings) -> str:
    security = settings.kafka_security
    return (
        f"check kafka_bootstrap ({settings.kafka_bootstrap}), that the brokers listen there, and "
        f"kafka_security (protocol {security.protocol}"
        + (f", SASL {security.sasl_mechanism} user {security.sasl_username!r}" if security.sasl else "")
        + ")"
    )


def _kafka(settings: Settings, timeout_seconds: float) -> Iterator[Check]:
    from confluent_kafka.admin import AdminClient

    if (settings.data_dir / BROKER_LOG).is_file() and "kafka_bootstrap" not in settings.model_fields_set:
        yield Check(
            "kafka", True, "the demo's broker (Tansu) runs only while `halluwatch demo` does: nothing to reach now; "
            "a worker of your own reads the brokers of kafka_bootstrap (HALLUWATCH_KAFKA_BOOTSTRAP)", warning=True,
        )  # fmt: skip
        return

    reasons = ConnectionReasons()
    config: dict[str, Any] = {**_kafka_config(settings, timeout_seconds), "error_cb": reasons}
    admin = AdminClient(config)
    try:
        metadata = admin.list_topics(timeout=timeout_seconds)
    except Exception as exc:
        said = reasons.said(admin, exc, quiet=False)  # logged too: a log shipper keeps librdkafka's line
        raise _Failed(f"cannot reach the brokers: {said}; {_kafka_hint(settings)}") from exc
    yield Check("kafka", True, f"reached {len(metadata.brokers)} broker(s) at {settings.kafka_bootstrap}")
    try:
        yield _kafka_permissions(settings, timeout_seconds)
    except _Failed as failure:
        yield Check("kafka permissions", False, str(failure))
    for label, topic, writer in (
        ("kafka input topic", settings.kafka_input_topic, "the collector's kafka exporter"),
        ("kafka logs topic", settings.kafka_logs_topic, "the kafka exporter of the collector's logs pipeline"),
    ):
        if topic not in metadata.topics:
            yield Check(
                label,
                True,
                f"{topic} does not exist yet: point {writer} at it (topic setting) or create it with the "
                "partitions you want",
                warning=True,
            )
            continue
        yield Check(label, True, f"{topic} exists")
        yield _cleanup_policy(admin, label, topic, timeout_seconds)
        yield _transaction_markers(settings, label, topic, sorted(metadata.topics[topic].partitions), timeout_seconds)


def _kafka_permissions(settings: Settings, timeout_seconds: float) -> Check:
    """Create a scratch topic, produce to it, read it back, delete it: what the worker's principal must do."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    config = _kafka_config(settings, timeout_seconds)
    admin = AdminClient(config)
    topic = f"halluwatch.doctor.{uuid.uuid4().hex[:12]}"
    steps = "create topics"
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=timeout_seconds)
        steps = "write to topics"
        producer = Producer({**config, "message.timeout.ms": int(timeout_seconds * 1000)})
        producer.produce(topic, key=b"doctor", value=b"probe")
        if producer.flush(timeout_seconds) != 0:
            raise _Failed(f"a probe message to {topic} was not acknowledged in {timeout_seconds:.0f}s")
        steps = "read topics"
        consumer = Consumer({**config, "group.id": f"{settings.kafka_group_id}.doctor", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            if not _read_one(consumer.poll, timeout_seconds):
                raise _Failed(f"the probe message written to {topic} could not be read back")
        finally:
            consumer.close()
    except (KafkaException, TimeoutError) as exc:
        raise _Failed(
            f"cannot {steps} ({exc.args[0] if exc.args else exc}): grant the principal Create, Write and Read "
            f"on topics {settings.kafka_input_topic}, halluwatch.* and their changelogs, and Read on group "
            f"{settings.kafka_group_id}; {_kafka_hint(settings)}"
        ) from exc
    finally:
        _delete_quietly(admin, topic, timeout_seconds)
    return Check("kafka permissions", True, "created, wrote, read and deleted a scratch topic")


# The commit work-around of pipeline/stream/dropped_records.py takes every offset that holds no
# record for a record faust dropped: it never commits past one, and keeps reading it again.
# Compacted topics have such offsets (removed records), and so have transactionally written
# ones (each commit or abort marker takes an offset that no consumer receives).
_OFFSETS_WITHOUT_RECORDS = (
    "the worker's commit work-around (pipeline/stream/dropped_records.py) takes offsets without records "
    "for records faust dropped: it never commits past them and reads them again and again"
)
MARKER_SAMPLE_OFFSETS = 1000  # the newest offsets of each partition read looking for transaction markers


def _cleanup_policy(admin: Any, label: str, topic: str, timeout_seconds: float) -> Check:
    """Fails for a compacted input topic."""
    # Public names of confluent_kafka.admin, re-exported without __all__ (mypy's strict exports).
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    name = f"{label} cleanup.policy"
    try:
        (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        entry = future.result(timeout=timeout_seconds).get("cleanup.policy")
    except Exception as exc:
        return Check(name, True, f"could not check: {_kafka_error(exc)}; grant DescribeConfigs on topic {topic}",
                     warning=True)  # fmt: skip
    if entry is None or not entry.value:
        return Check(name, True, f"could not check: the broker reports no cleanup.policy for {topic}", warning=True)
    if "compact" in entry.value:
        return Check(
            name,
            False,
            f"{topic} is compacted (cleanup.policy={entry.value}); {_OFFSETS_WITHOUT_RECORDS}: "
            f"set cleanup.policy=delete on {topic}",
        )
    return Check(name, True, f"{entry.value} on {topic}")


def _transaction_markers(
    settings: Settings, label: str, topic: str, partitions: list[int], timeout_seconds: float
) -> Check:
    """Fails for an input topic written in transactions: an offset between records that none holds.

    Reads the newest offsets of each partition as they are (``read_uncommitted``: records of
    aborted transactions too), so an offset without a record is a transaction marker, or a
    record compaction removed.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    name = f"{label} transactions"
    consumer = Consumer(
        {
            **_kafka_config(settings, timeout_seconds),
            "group.id": f"{settings.kafka_group_id}.doctor",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        starts: dict[int, int] = {}
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_seconds)
            if high > low:  # (Tansu's high watermark here may lag: the end is the one the fetch reports)
                starts[partition] = max(low, high - MARKER_SAMPLE_OFFSETS)
        if not starts:
            return Check(name, True, f"could not check: {topic} holds no records yet", warning=True)
        consumer.assign([TopicPartition(topic, partition, offset) for partition, offset in starts.items()])
        expected = dict(starts)  # partition -> the offset of the next record, if none is missing
        missing: dict[int, int] = {}  # partition -> its first offset without a record
        ends: dict[int, int] = {}  # partition -> the end of its records at the time they were read
        deadline = time.monotonic() + timeout_seconds
        while len(ends) < len(starts) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            partition, offset, error = message.partition() or 0, message.offset() or 0, message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            if offset > expected[partition]:  # at the end of a partition too: a marker after the last record
                missing.setdefault(partition, expected[partition])
            if error is None:
                expected[partition] = offset + 1
            else:
                ends.setdefault(partition, offset)
    except Exception as exc:
        return Check(name, True, f"could not check: {_kafka_error(exc)}; grant Read on topic {topic}", warning=True)
    finally:
        consumer.close()
    if missing:
        where = ", ".join(f"partition {partition} offset {offset}" for partition, offset in sorted(missing.items()))
        return Check(
            name,
            False,
            f"{topic} is written in transactions: offsets without records (transaction markers) at {where}; "
            f"{_OFFSETS_WITHOUT_RECORDS}: have its producers write without transactions",
        )
    if len(ends) < len(starts):
        return Check(name, True, f"could not check: {topic}'s newest records were not all read in "
                     f"{timeout_seconds:.0f}s", warning=True)  # fmt: skip
    sampled = sum(end - starts[partition] for partition, end in ends.items())
    return Check(name, True, f"none seen in the newest {sampled} offsets of {topic} ({len(ends)} partition(s))")


def _kafka_error(exc: Exception) -> str:
    return str(exc.args[0] if exc.args else exc)


def _read_one(poll: Callable[[float], Any], timeout_seconds: float) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        message = poll(0.5)
        if message is not None and message.error() is None:
            return True
    return False


def _delete_quietly(admin: Any, topic: str, timeout_seconds: float) -> None:
    """Delete the scratch topic; a broker that refuses (or has none to delete) leaves a tiny topic behind."""
    with contextlib.suppress(Exception):
        admin.delete_topics([topic])[topic].result(timeout=timeout_seconds)


# --- ClickHouse ----------------------------------------------------------------------------------


def _clickhouse(settings: Settings, timeout_seconds: float) -> Iterator[Check]:
    from pipeline.sinks.clickhouse import (
        ClickHouseUnreachable,
        EmbeddedInUse,
        open_clickhouse,
        pending_migrations,
    )

    dsn = settings.resolved_clickhouse_dsn
    where = redacted_dsn(dsn)
    try:
        client = open_clickhouse(settings)  # as the worker would: it creates the store
        version = client.query("SELECT version()").result_rows[0][0]
    except EmbeddedInUse as exc:  # nothing to fix in the settings: the store is open elsewhere
        raise _Failed(
            f"{exc.where} is {exc.reason}: chDB admits one process per directory; check it while that process "
            "is stopped, or point HALLUWATCH_CLICKHOUSE_DSN at a ClickHouse server, which admits many"
        ) from exc
    except Exception as exc:
        reason = exc.reason if isinstance(exc, ClickHouseUnreachable) else exc
        raise _Failed(
            f"cannot connect to {where}: {reason}; check clickhouse_dsn (user, password, host, port) "
            "and clickhouse_tls (verify, ca_cert) for https"
        ) from exc
    database = settings.clickhouse_database
    try:
        yield Check("clickhouse", True, f"connected to {where} (ClickHouse {version})")
        pending = pending_migrations(client, database)
        # A migrated database needs rows only: a worker may sign in without the right to create tables.
        yield _clickhouse_permissions(client, database) if pending else _row_permissions(client, database)
        if pending:
            yield Check("clickhouse schema", True, f"{pending} migration(s) pending: run halluwatch migrate "
                        "(the worker also applies them at start)", warning=True)  # fmt: skip
        else:
            yield Check("clickhouse schema", True, f"database {database} is up to date")
            yield _instrumentations(client, database)
            if settings.policies:
                yield _policies_matched(client, database, list(settings.policies))
    finally:
        client.close()


def _policies_matched(client: Any, database: str, policies: list[str]) -> Check:
    """Whether each policy selected calls in the last day: a misspelt service makes one apply to nothing."""
    rows = client.query(
        f"SELECT policy, uniqExact(trace_id, span_id), groupUniqArray(5)(service) FROM {database}.findings "  # noqa: S608 - identifiers validated
        "WHERE span_start_time > now() - INTERVAL 1 DAY GROUP BY policy"
    ).result_rows
    calls = {policy: count for policy, count, _ in rows}
    if not calls:
        return Check("policies", True, "no calls in the last 24 h yet: cannot tell whether the policies match any")
    idle = [name for name in policies if not calls.get(name)]
    if idle:
        services = sorted({service for *_, seen in rows for service in seen})
        return Check("policies", True, f"{', '.join(idle)} matched no call in the last 24 h: check their match "
                     f"(services seen: {', '.join(services)})", warning=True)  # fmt: skip
    return Check("policies", True, "calls in the last 24 h: " + ", ".join(f"{n} {calls[n]}" for n in policies))


def _instrumentations(client: Any, database: str) -> Check:
    """Whether the last day's model calls arrived whole, per instrumentation scope."""
    whole, detail = summary(scope_gaps(client, database, datetime.now(UTC) - timedelta(days=1)))
    return Check("instrumentations", True, f"last 24 h: {detail}", warning=not whole)


def _clickhouse_permissions(client: Any, database: str) -> Check:
    table = f"{database}.halluwatch_doctor_{uuid.uuid4().hex[:8]}"
    step = f"CREATE DATABASE IF NOT EXISTS {database}"
    try:
        client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
        step = f"CREATE TABLE in {database}"
        client.command(f"CREATE TABLE {table} (id String) ENGINE = MergeTree ORDER BY id")
        try:
            step = f"INSERT into tables of {database}"
            client.insert(table, [["probe"]], column_names=["id"])
            step = f"SELECT from tables of {database}"
            rows = client.query(f"SELECT id FROM {table}").result_rows  # noqa: S608 - our own scratch table name
        finally:
            client.command(f"DROP TABLE IF EXISTS {table}")
    except Exception as exc:
        raise _Failed(
            f"{step} refused: {exc}; grant the user CREATE, INSERT, SELECT (and DROP) on {database}.*"
        ) from exc
    if rows != [("probe",)]:
        raise _Failed(f"a row inserted into {table} did not read back ({rows!r})")
    return Check(
        "clickhouse permissions", True, f"created, inserted into, selected from and dropped a table in {database}"
    )


def _row_permissions(client: Any, database: str) -> Check:
    """Whether the user may read and insert rows of ``database``'s tables, all a worker does once it is migrated."""
    if str(client.command(f"CHECK GRANT SELECT, INSERT ON {database}.*")).strip() != "1":
        raise _Failed(f"the user may not SELECT and INSERT on {database}.*: grant both (infra/README.md)")
    return Check("clickhouse permissions", True, f"may select from and insert into the tables of {database}")


# --- model and alerting --------------------------------------------------------------------------


def _model(settings: Settings, timeout_seconds: float) -> Iterator[Check]:
    from detectors.models.embeddings import EmbeddingError, model_source

    model = settings.detectors.embeddings.model
    try:
        source = model_source(settings.detectors.embeddings)
    except EmbeddingError as exc:
        raise _Failed(f"{exc}; set detectors.embeddings.model to an installed model or a model folder") from exc
    yield Check("embedding model", True, f"{model} found in {source} (made ready for onnxruntime on the first start)")


def _registries(settings: Settings, timeout_seconds: float) -> Iterator[Check]:
    """Each configured tool facts registry loads (a worker runs without one, skipping what it covers)."""
    from detectors.tool_facts import DETECTOR
    from detectors.tool_facts.detector import ToolFactsDetector

    for name, error in ToolFactsDetector(DETECTOR.config_in(settings.detectors), threshold=0.5).registries().items():
        if error:
            yield Check(name, True, f"cannot be loaded, the calls it covers are skipped: {error}", warning=True)
        else:
            yield Check(name, True, "loaded")


def _alerting(settings: Settings, timeout_seconds: float) -> Iterator[Check]:
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    config = settings.alerting
    if config.slack_bot_token is not None:
        client = WebClient(
            token=config.slack_bot_token.get_secret_value(),
            base_url=config.slack_base_url,
            timeout=int(timeout_seconds),
        )
        try:
            client.auth_test()
        except SlackApiError as exc:
            raise _Failed(
                f"Slack refused the bot token ({exc.response.get('error')}): set a valid "
                "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN with the chat:write scope"
            ) from exc
        except Exception as exc:
            raise _Failed(
                f"cannot reach Slack at {config.slack_base_url}: {exc}; check alerting.slack_base_url"
            ) from exc
        yield Check("slack", True, f"bot token accepted by {config.slack_base_url}")
    yield alert_routes(config)


def alert_routes(config: AlertingSettings) -> Check:
    """Where each route delivers now, and what the routes that ask for more still lack."""
    lines, lacking = [], []
    for name in config.routes:
        usable = usable_types(config, name)
        lines.append(f"{name} -> {', '.join(kind.describe(config, name) for kind in usable) or 'log'}")
        missing = [kind.lacks(config, name) for kind in wanted_types(config, name) if kind not in usable]
        if missing:
            lacking.append(f"{name} ({', '.join(dict.fromkeys(missing))})")
    detail = "; ".join(lines)
    if lacking:
        detail += (
            f" (routes lacking credentials: {'; '.join(lacking)}: set them, or those destinations are skipped"
            " and a route left with none logs its alerts)"
        )
    return Check("alert routes", True, detail, warning=bool(lacking))
