"""What a stage does with a record it cannot handle: one dead letter that always fits, and it goes on."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

import pytest

from pipeline.spans.processor import LETTER_HEAD_BYTES, MAX_KEY_BYTES, DeadLetter, InboundMessage
from pipeline.stream.plumbing import isolating_failures, retrying


def test_a_letter_of_a_message_too_large_to_copy_keeps_its_head_size_and_digest():
    small = DeadLetter(InboundMessage(b"k", b"x" * 100, "spans", 1, 7), "undecodable", "why")
    assert small.fitted(1000) == (b"x" * 100, small.headers())

    value = bytes(range(256)) * 40_000  # 10 MB, over an 8 MiB limit
    letter = DeadLetter(InboundMessage(b"k" * 5000, value, "spans", 1, 8), "too_large", "too big")
    cut, headers = letter.fitted(8 * 1024 * 1024)
    named = dict(headers)
    assert cut == value[:LETTER_HEAD_BYTES]
    assert named["halluwatch.truncated"] == b"head" and named["halluwatch.source"] == b"spans/1/8"
    assert int(named["halluwatch.original_size"]) == len(value)
    assert named["halluwatch.original_sha256"] == hashlib.sha256(value).hexdigest().encode()
    assert len(named["halluwatch.original_key"]) == MAX_KEY_BYTES  # a huge key cannot overflow the letter either


class _Stage:
    """A batch handler that fails on one poisoned record, and what it handled and dead-lettered."""

    def __init__(self, poison: bytes, error: Exception) -> None:
        self.poison, self.error = poison, error
        self.handled: list[bytes] = []
        self.letters: list[tuple[bytes, str, str]] = []

    async def handle(self, messages: Sequence[InboundMessage]) -> None:
        if any(message.value == self.poison for message in messages):
            raise self.error
        self.handled += [message.value for message in messages]

    async def dead_letter(self, message: InboundMessage, kind: str, reason: str) -> None:
        self.letters.append((message.value, kind, reason))


def _batch(*values: bytes) -> list[InboundMessage]:
    return [InboundMessage(None, value, "findings", 0, offset) for offset, value in enumerate(values)]


def test_a_record_that_fails_in_its_batch_and_alone_is_dead_lettered_and_the_rest_handled():
    stage = _Stage(b"bad", OverflowError("int too large to convert to float"))
    asyncio.run(isolating_failures(_batch(b"a", b"bad", b"c"), stage.handle, stage.dead_letter, "agreement"))
    assert stage.handled == [b"a", b"c"]
    assert stage.letters == [
        (b"bad", "internal_error", "agreement failed: OverflowError: int too large to convert to float")
    ]

    fine = _Stage(b"never", ValueError())
    asyncio.run(isolating_failures(_batch(b"a", b"b"), fine.handle, fine.dead_letter, "agreement"))
    assert fine.handled == [b"a", b"b"] and fine.letters == []


def test_a_stages_own_control_flow_passes_through():
    class Interrupted(Exception):
        pass

    stage = _Stage(b"bad", Interrupted())
    with pytest.raises(Interrupted):
        asyncio.run(isolating_failures(_batch(b"bad"), stage.handle, stage.dead_letter, "router", (Interrupted,)))
    assert stage.letters == []


def test_retrying_gives_up_when_told_and_never_otherwise():
    attempts = []

    async def refused() -> None:
        attempts.append(1)
        raise ConnectionError("broker says no")

    assert asyncio.run(retrying("publish", refused, 0.2, give_up_after_seconds=1.2)) is False
    assert 2 <= len(attempts) <= 6  # at 0, 0.5, 0.7, 0.9 and 1.1 s on an idle machine: backing off, then given up

    async def accepted() -> None:
        attempts.append(2)

    assert asyncio.run(retrying("publish", accepted, 0.01)) is True
