"""Content modes on messages for people and on internal topics (see also tests/integration/test_sensitive_content.py).

Dead-letter reasons and alert delivery errors quote what they could not take: a decoder
its input, a server its reply (which may echo what it was sent). Under ``hash`` and
``drop`` a canary from that text reaches neither the reason nor the error; ``redact``
masks its PII; ``store`` keeps the message as it always was. The consistency topic
carries only what the sampled detectors read unless the mode is ``store``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace

import pytest
from faust.types import Message
from pydantic import SecretStr

from detectors.llm_call import Message as ChatMessage
from detectors.llm_call import TokenLogprob
from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.dispatch import Dispatcher, Outcome
from pipeline.alerting.routes import build_destinations
from pipeline.config.alerting import AlertingSettings
from pipeline.config.content_policy import HASH_PREFIX, ContentPolicy, split_reason
from pipeline.ingest.otlp_traces import UndecodableMessage, decode_traces
from pipeline.sampled.stage import consistency_call
from pipeline.stream.plumbing import withholding
from tests.calls import make_llm_call
from tests.servers import SLACK_POST_PATH, SLACK_WEBHOOK_PREFIX, AlertingServer, Reply
from tests.unit.test_alert_render import make_alert

CANARY = "qzcanary"
EMAIL = "canary.person@example.org"
TOKEN = "sk-proj-" + "Ab1" * 10
KEY = SecretStr("unit-test-key")


def policy(mode: str) -> ContentPolicy:
    return ContentPolicy(mode, KEY)  # type: ignore[arg-type]


def undecodable_reason() -> str:
    """The real reason the decoder gives for OTLP/JSON with text where a number belongs: it quotes the text."""
    attribute = {"key": "gen_ai.prompt", "value": {"intValue": f"the {CANARY} of {EMAIL}"}}
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat", "attributes": [attribute]}
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with pytest.raises(UndecodableMessage) as raised:
        decode_traces(json.dumps(document).encode())
    return raised.value.reason


def test_the_decoder_really_quotes_the_input():
    reason = undecodable_reason()
    assert CANARY in reason and EMAIL in reason and reason.startswith("malformed OTLP/JSON: ")


@pytest.mark.parametrize("mode", ["hash", "drop"])
def test_hash_and_drop_keep_the_workers_words_and_withhold_the_detail(mode):
    reason = policy(mode).reason(*split_reason(undecodable_reason()))
    assert CANARY not in reason and EMAIL not in reason
    assert reason.startswith("malformed OTLP/JSON: ")
    if mode == "hash":
        detail = reason.removeprefix("malformed OTLP/JSON: ")
        assert detail.startswith(HASH_PREFIX) and detail == policy("hash").text(split_reason(undecodable_reason())[1])
    else:
        assert reason == "malformed OTLP/JSON: [withheld]"


def test_redact_masks_pii_and_secrets_in_words_and_detail():
    reason = policy("redact").reason(f"span of {EMAIL}", f"token {TOKEN} for {EMAIL}, {CANARY}")
    assert reason == f"span of [email]: token [secret] for [email], {CANARY}"


def test_store_keeps_the_reason_as_it_was():
    original = undecodable_reason()
    assert policy("store").reason(*split_reason(original)) == original


@pytest.mark.parametrize(
    ("reason", "parts"),
    [
        ("message of 9 bytes exceeds max_message_bytes=4", ("message of 9 bytes exceeds max_message_bytes=4", "")),
        ("not a log-join record: KeyError('span')", ("not a log-join record", "KeyError('span')")),
        ("span 01: gen_ai span 'chat': ValueError('x: y')", ("span 01", "gen_ai span 'chat': ValueError('x: y')")),
    ],
)
def test_a_reasons_words_end_at_the_first_colon(reason, parts):
    assert split_reason(reason) == parts


@pytest.mark.parametrize("mode", ["hash", "drop"])
def test_dead_letter_senders_withhold_the_detail(mode):
    sent: list[tuple[str, str]] = []

    async def send(message: Message, kind: str, reason: str) -> None:
        sent.append((kind, reason))

    message = Message("topic", 0, 7, 0.0, 0, None, b"k", b"v", None)
    quoted = f"not a sampled call: ValueError('{CANARY} {EMAIL}')"
    asyncio.run(withholding(send, policy(mode))(message, "malformed_sampled_call", quoted))
    ((kind, reason),) = sent
    assert kind == "malformed_sampled_call" and reason.startswith("not a sampled call: ")
    assert CANARY not in reason and EMAIL not in reason


def failed_delivery(content: ContentPolicy, reply: Reply, webhook: bool = False, retries: int = 0) -> Outcome:
    """One alert to a Slack destination of a real local server that refuses it with ``reply`` (every time)."""
    with AlertingServer() as server:
        route = {"slack_webhook_url": server.webhook_url()} if webhook else {"slack_channel": "#c"}
        settings = AlertingSettings.model_validate(
            {
                "slack_bot_token": "xoxb-test",
                "slack_base_url": server.slack_base_url,
                "request_retries": retries,
                "routes": {"slack": route, "page": {}, "log": {}},
            }
        )
        server.script(SLACK_WEBHOOK_PREFIX if webhook else SLACK_POST_PATH, *[reply] * (retries + 1))
        dispatcher = Dispatcher(settings, build_destinations(settings), content=content)

        async def run() -> list[Outcome]:
            try:
                return await dispatcher.dispatch("slack", [replace(make_alert(), route="slack")], lambda a, d: False)
            finally:
                await dispatcher.close()

        (outcome,) = asyncio.run(run())
    return outcome


# A webhook (or a proxy before it) that answers with what it got: the reply echoes content.
ECHO = Reply(400, body=f"invalid_payload: the {CANARY} answer of {EMAIL}")


@pytest.mark.parametrize("mode", ["hash", "drop"])
def test_delivery_errors_withhold_what_the_server_said(mode):
    outcome = failed_delivery(policy(mode), ECHO, webhook=True)
    assert outcome.status is DeliveryStatus.FAILED
    assert CANARY not in outcome.error and EMAIL not in outcome.error
    assert outcome.error.startswith("DeliveryError: slack-webhook:slack: HTTP 400: ")  # what failed, and how


def test_quick_retries_log_no_server_detail(caplog):
    caplog.set_level(logging.INFO)  # slack_sdk logs whole requests and replies at DEBUG, off in the worker
    echo = replace(ECHO, status=503)
    outcome = failed_delivery(policy("hash"), echo, webhook=True, retries=1)
    assert outcome.status is DeliveryStatus.RETRYING
    assert "slack-webhook:slack: retrying (slack-webhook:slack: HTTP 503)" in caplog.text
    assert CANARY not in caplog.text and EMAIL not in caplog.text


def test_redacted_delivery_errors_keep_the_reply_without_pii():
    outcome = failed_delivery(policy("redact"), ECHO, webhook=True)
    expected = f"DeliveryError: slack-webhook:slack: HTTP 400: invalid_payload: the {CANARY} answer of [email]"
    assert outcome.error == expected


def test_stored_delivery_errors_are_as_they_were():
    refusal = Reply(200, body={"ok": False, "error": "invalid_auth"})
    outcome = failed_delivery(policy("store"), refusal)
    assert outcome.error == "DeliveryError: slack:#c: HTTP 200: invalid_auth"


def test_consistency_topic_carries_only_what_the_sampled_detectors_read():
    call = make_llm_call(
        f"The {CANARY} answer.",
        f"What is {CANARY}?",
        logprobs=(TokenLogprob(CANARY, -0.1),),
        attributes={"app.domain": "medical", "user.email": EMAIL, "app.tier": 2},
        output_messages=(ChatMessage("assistant", f"The {CANARY} answer."), ChatMessage("assistant", "Other")),
    )
    assert consistency_call(call, policy("store")) is call  # store: the call as it came
    for mode in ("hash", "redact", "drop"):
        sent = consistency_call(call, policy(mode))
        # What the detectors read travels as it came: they ask the prompt again and judge the answer.
        assert (sent.prompt, sent.answer, sent.input_messages) == (call.prompt, call.answer, call.input_messages)
        assert sent.logprobs == () and len(sent.output_messages) == 1
        assert sent.attributes == {"app.domain": "medical", "user.email": "[email]", "app.tier": "2"}
