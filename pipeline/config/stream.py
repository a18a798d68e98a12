"""What the worker's stages read of the settings besides their own section.

The worker builds these once (:meth:`Settings.stream`, :meth:`Settings.log_join`) and hands each
stage the views it needs beside its own section (``alerting``, ``consistency``, ``monitors``), so
no stage reaches back into the whole :class:`~pipeline.config.settings.Settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pipeline.config.content_policy import ContentPolicies


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """What every stage's Kafka loop shares: batching, the write backoff, partitions, content policies."""

    batch_max_messages: int
    batch_max_wait_seconds: float
    write_retry_max_seconds: float  # backoff while ClickHouse or the broker refuses writes
    topic_partitions: int  # of the topics and changelog tables a stage creates
    content: ContentPolicies  # dead letters' reasons and logged errors follow them too
    erasable_keys: tuple[str, ...] = ()  # call attributes stored apart for `halluwatch erase` (settings retention)


@dataclass(frozen=True, slots=True)
class JoinConfig:
    """Wait window and state bounds (settings ``log_join_*``)."""

    window_seconds: float = 5.0
    max_entries: int = 50_000
    max_age_seconds: float = 600.0
    max_records_per_span: int = 256
    facts_window_seconds: float = 2.0  # how long a call without sources waits for its trace's facts


@dataclass(frozen=True, slots=True)
class LogJoinSettings:
    """The log join stage's settings: its topics, the input it decodes, and the join's bounds."""

    logs_topic: str
    join_topic: str
    input_encoding: Literal["auto", "otlp_proto", "otlp_json"]
    max_message_bytes: int
    join: JoinConfig
