"""Content modes (store / hash / redact / drop) and the per-call content cap."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from detectors.base import DetectorResult
from detectors.confidence.detector import position_entropy
from detectors.llm_call import LLMCall, Message, Source, TokenLogprob, TopLogprob
from detectors.text.evidence import WITHHELD
from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.render import console_text, pagerduty_event, slack_blocks
from pipeline.config.alerting import AlertingSettings
from pipeline.config.content_policy import (
    HASH_PREFIX,
    ContentLimits,
    ContentPolicies,
    ContentPolicy,
    luhn_valid,
    redact,
)
from pipeline.config.settings import ConfigError, load_settings
from pipeline.sinks.rows import LLM_CALL_COLUMNS, finding_record, finding_row, llm_call_row

KEY = SecretStr("unit-test-key")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail jane.doe+hr@mail.example.co.uk today", "mail [email] today"),
        ("call (415) 555-2671 or +44 20 7946 0958.", "call [phone] or [phone]."),
        ("card 4111 1111 1111 1111 and 4111-1111-1111-1111", "card [card] and [card]"),
        ("openai sk-proj-AbCdEfGhIjKlMnOpQrStUvWx01", "openai [secret]"),
        ("slack xoxb-123456789012-abcdefABCDEF", "slack [secret]"),
        ("gh ghp_" + "a1B2" * 9 + " done", "gh [secret] done"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "aws [secret] key"),
        ("google AIza" + "x" * 35, "google [secret]"),
        ("Authorization: Bearer abcdefghijklmnop.qrstuvwx", "Authorization: [secret]"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVl ok", "jwt [secret] ok"),
        ('password = "hunter2hunter2"', 'password = "[secret]"'),
        ("api_key: 9f8e7d6c5b4a", "api_key: [secret]"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- after", "[secret] after"),
    ],
)
def test_redact_masks_pii_and_secrets(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The tower was built 1887-1889 and is 330 m tall; it cost $1.5 million [1].",
        "Order 4111 1111 1111 1112 is not a card (Luhn fails).",
        "Revenue grew 12% in 2024, to 3,215,000 units; call back in 15 minutes.",
        "Version 10.2.3, port 8443, SKU PAP-A4-500, ratio 24/7.",
        "tokens are fine as words, and so is a secret mentioned in prose",
    ],
)
def test_redact_keeps_text_without_pii(text):
    assert redact(text) == text


def test_luhn():
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112")


def test_phone_numbers_without_country_code_follow_the_region():
    assert redact("ring 020 7946 0958", phone_region="GB") == "ring [phone]"
    assert redact("ring 020 7946 0958", phone_region="US") == "ring 020 7946 0958"


def test_hash_is_keyed_deterministic_and_idempotent():
    policy = ContentPolicy("hash", KEY)
    hashed = policy.text("Jane's salary is 5000")
    assert hashed.startswith(HASH_PREFIX) and len(hashed) == len(HASH_PREFIX) + 64
    assert policy.text("Jane's salary is 5000") == hashed  # joins and dedupes still work
    assert ContentPolicy("hash", SecretStr("other key")).text("Jane's salary is 5000") != hashed
    assert policy.text(hashed) == hashed  # a finding's hash reaching an alert stays the same
    assert policy.text("") == ""
    assert policy.text("lone \ud800 surrogate").startswith(HASH_PREFIX)  # JSON can carry them


def test_hash_needs_a_key_and_never_shows_it():
    with pytest.raises(ValueError, match="content_hmac_key"):
        ContentPolicy("hash")
    assert "unit-test-key" not in repr(ContentPolicy("hash", KEY))
    assert "unit-test-key" not in repr(ContentPolicies.of("hash", hmac_key=KEY))


EVIDENCE = {
    "sentences": [
        {"text": "Paid out at 150% every December.", "similarity": 0.31, "grounded": False, "source_id": "hr-4"},
    ],
    "claims": [{"kind": "percent", "text": "150%", "verdict": "conflict", "context_text": "100%", "start": 3}],
    "violations": [
        {
            "kind": "wrong_type",
            "message": "quantity 'two' is not an integer",
            "tool": "order",
            "path": "$.quantity",
            "value": "two",
        }
    ],
    "missing_source_ids": ["7"],
    "checked": {"output_schema": True},
}


@pytest.mark.parametrize("mode", ["hash", "drop"])
def test_evidence_keeps_structure_and_numbers_and_withholds_text(mode):
    policy = ContentPolicy(mode, KEY)
    out = policy.evidence(EVIDENCE)
    blob = json.dumps(out)
    for text in ("Paid out", "150%", "100%", "'two'", '"two"'):
        assert text not in blob
    sentence, claim, violation = out["sentences"][0], out["claims"][0], out["violations"][0]
    assert (sentence["similarity"], sentence["grounded"], sentence["source_id"]) == (0.31, False, "hr-4")
    assert (claim["kind"], claim["verdict"], claim["start"]) == ("percent", "conflict", 3)
    assert (violation["kind"], violation["tool"], violation["path"]) == ("wrong_type", "order", "$.quantity")
    assert out["missing_source_ids"] == ["7"] and out["checked"] == {"output_schema": True}
    assert policy.summary("answer says 150%, context says 100%") == ""


def test_redacted_evidence_keeps_text_but_not_pii():
    out = ContentPolicy("redact").evidence({"sentences": [{"text": "Write to jane@corp.example for 150%."}]})
    assert out == {"sentences": [{"text": "Write to [email] for 150%."}]}


def test_per_table_modes_override_the_default():
    policies = ContentPolicies.of("drop", {"findings": "redact", "alerts": "hash"}, KEY)
    assert (policies.llm_calls.mode, policies.findings.mode, policies.alerts.mode) == ("drop", "redact", "hash")


def test_settings_read_modes_legacy_names_and_require_the_key(monkeypatch):
    assert load_settings(content_mode="full").content_mode == "store"
    assert load_settings(content_mode="none").content_mode == "drop"
    monkeypatch.setenv("HALLUWATCH_CONTENT_MODES", '{"alerts": "redact"}')
    monkeypatch.setenv("HALLUWATCH_CONTENT_HMAC_KEY", "env-key-canary-5f0e91")
    settings = load_settings(content_mode="hash")
    assert settings.content_policies().alerts.mode == "redact"
    assert settings.content_policies().llm_calls.mode == "hash"
    assert "env-key-canary-5f0e91" not in repr(settings)
    monkeypatch.delenv("HALLUWATCH_CONTENT_HMAC_KEY")
    with pytest.raises(ConfigError, match="content_hmac_key"):
        load_settings(content_mode="hash")


PROMPT, ANSWER, SOURCE = "Canary-prompt-Q", "Canary-answer-A sentence.", "Canary-source-S text."
CALL = LLMCall(
    trace_id="ab" * 16,
    span_id="cd" * 8,
    parent_span_id=None,
    service="svc",
    span_name="chat",
    start_time_unix_nano=1_700_000_000_000_000_000,
    end_time_unix_nano=1_700_000_000_500_000_000,
    convention="gen_ai",
    input_messages=(Message("user", PROMPT),),
    output_messages=(Message("assistant", ANSWER),),
    sources=(Source("1", SOURCE),),
    logprobs=(TokenLogprob("Canary", -0.5, (TopLogprob("Canary", -0.5),)),),
    attributes={"app.domain": "medical", "enduser.email": "jane@corp.example"},
)
RESULT = DetectorResult(
    "grounding", "1", 0.9, True, 0.5, severity=2, summary=f"ungrounded: {ANSWER}",
    evidence={"sentences": [{"text": ANSWER, "best_window": SOURCE, "similarity": 0.2, "grounded": False}]},
)  # fmt: skip


@pytest.mark.parametrize("mode", ["hash", "drop"])
def test_no_content_reaches_rows_or_records(mode):
    policy = ContentPolicy(mode, KEY)
    record = finding_record(CALL, RESULT, "v1", policy)
    outputs = [json.dumps(record.to_json()), repr(finding_row(record, NOW)), repr(llm_call_row(CALL, policy, NOW))]
    assert not any("Canary" in output or "jane@" in output for output in outputs)
    row = llm_call_row(CALL, policy, NOW)
    assert row[LLM_CALL_COLUMNS.index("attributes")] == {
        "app.domain": "medical",
        "enduser.email": "[email]",
    }  # routing attributes kept, PII masked
    assert record.score == 0.9 and record.flagged is True


def test_erasable_attributes_are_kept_as_given_in_every_mode_and_only_those_named():
    """Erasure must find a user's calls whatever the content mode did to ``attributes``."""
    call = dataclasses.replace(CALL, attributes={**CALL.attributes, "user.id": "u-42"})
    for mode in ("store", "hash", "redact", "drop"):
        row = llm_call_row(call, ContentPolicy(mode, KEY), NOW, erasable_keys=("user.id", "session.id"))
        assert row[LLM_CALL_COLUMNS.index("erasable")] == {"user.id": "u-42"}, mode
    assert llm_call_row(call, ContentPolicy("store"), NOW)[LLM_CALL_COLUMNS.index("erasable")] == {}


def test_alerts_render_withheld_text_but_keep_the_numbers():
    policy = ContentPolicy("drop")
    evidence = DetectorEvidence.from_dict(finding_record(CALL, RESULT, "v1", ContentPolicy("store")).to_json())
    alert = Alert("ab" * 16, "two-detectors", "slack", 2, "svc", "m", "chat", (evidence, evidence), NOW).with_content(
        policy
    )
    config = AlertingSettings()
    texts = [console_text(alert, config), json.dumps(slack_blocks(alert, config)),
             json.dumps(pagerduty_event(alert, config, "k"))]  # fmt: skip
    assert not any("Canary" in text for text in texts)
    assert f"ungrounded sentence (similarity 0.20): {WITHHELD}" in texts[0]
    assert "grounding + grounding agree on svc chat" in texts[0]


def test_calls_within_the_cap_are_untouched():
    assert ContentLimits(10_000).apply(CALL) is CALL


def test_the_cap_keeps_the_answer_first_and_names_what_was_cut():
    call = dataclasses.replace(
        CALL,
        system_instructions="S" * 400,
        input_messages=(Message("user", "old" * 200), Message("user", "Q" * 300)),
        output_messages=(Message("assistant", "A" * 600),),
        sources=(Source("1", "D" * 500), Source("2", "E" * 500)),
    )
    capped = ContentLimits(1000).apply(call)
    assert capped.answer == "A" * 600  # the answer is what is judged: it comes first
    assert [m.text for m in capped.input_messages] == [("old" * 200)[:100], "Q" * 300]
    total = sum(len(m.text) for m in (*capped.input_messages, *capped.output_messages))
    total += len(capped.system_instructions) + sum(len(s.text) for s in capped.sources)
    assert total == 1000
    assert capped.prompt == "Q" * 300  # the newest question survives
    assert capped.sources == () and capped.system_instructions == ""
    assert capped.truncated == ("input_messages", "system_instructions", "sources")
    record = finding_record(capped, RESULT, "v1", ContentPolicy("store"))
    assert record.evidence["truncated"] == ["input_messages", "system_instructions", "sources"]
    assert LLMCall.from_dict(json.loads(json.dumps(capped.to_dict()))).truncated == capped.truncated


@pytest.mark.parametrize("mode", ["hash", "redact", "drop"])
def test_logprob_numbers_survive_without_tokens_and_keep_the_entropy(mode):
    top = (TopLogprob("Canary", -0.1), TopLogprob("Other", -2.4))
    call = dataclasses.replace(CALL, logprobs=(TokenLogprob("Canary", -0.1, top),))

    def entropy(policy: ContentPolicy) -> float | None:
        row = llm_call_row(call, policy, NOW)
        (position,) = json.loads(row[LLM_CALL_COLUMNS.index("logprobs_json")])
        alternatives = tuple(TopLogprob(a["token"], a["logprob"]) for a in position["top_logprobs"])
        return position_entropy(TokenLogprob(position["token"], position["logprob"], alternatives), 5)

    without_tokens = ContentPolicy(mode, KEY)
    assert "Canary" not in llm_call_row(call, without_tokens, NOW)[LLM_CALL_COLUMNS.index("logprobs_json")]
    assert entropy(without_tokens) == entropy(ContentPolicy("store")) > 0  # baselines work in every mode
