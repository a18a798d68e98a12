"""What of the prompts, answers and context text leaves the worker, per sink (docs/operations.md).

``content_mode`` (every table) and ``content_modes`` (per table) choose one of:

* ``store``: the text as it came;
* ``hash``: HMAC-SHA256 under the secret ``content_hmac_key``. Equal texts still match
  across rows and alerts (join, dedupe, "the same sentence as in that alert"), but nobody
  without the key can test guesses against them, as anyone could against a plain hash of
  a short e-mail address or name;
* ``redact``: the text with e-mail addresses, phone numbers, payment card numbers (Luhn
  checked), API keys, tokens and private keys masked;
* ``drop``: nothing.

Tables: ``llm_calls`` (prompt, answer, grounding, logprob tokens), ``findings`` (summary and
evidence, both in ClickHouse and on the findings topic, built by
:func:`pipeline.sinks.rows.finding_record`) and ``alerts`` (applied when the agreement stage
builds an alert, so the alerts topics, the ``alerts`` table and the Slack, PagerDuty and
log messages carry the same). Alerts are built from findings, so an alert never holds
more than its findings did.

Messages for people that may quote content, :meth:`ContentPolicy.reason`: a dead letter's
reason (its headers and log line) follows ``llm_calls`` (it is about an input message, as
those rows are), a failed alert delivery's error (retry and dead-letter topics, ``alerts``
rows, log lines) follows ``alerts``. Decoders and libraries quote what they could not take
(``Couldn't parse integer: "<the prompt>"``), and a server's reply may echo what it got.

Internal topics carry the input as it came, a deliberate exception with its reasons in
``infra/README.md`` ("Content on internal topics", with the ACLs that close them to
everyone but the worker): the re-keyed spans (the collector's own bytes, split per trace;
the spans stage must read them to judge them), the log join's records and its table's
changelog (the content the join merges back into its calls), the consistency samples (the
sampled detectors ask the model the same prompt again and compare answers: they need the
text; only what they read travels, see :func:`pipeline.sampled.stage.consistency_call`),
and the dead letters' values (the message as it came, kept so an operator can fix and
replay it). Each is as sensitive as the collector's own topic and protected like it.

Evidence is walked whole: every string in it is content unless its key is one of the
structural names of :func:`structural_keys`, so a field a detector adds later is withheld
until someone decides it is safe. Summaries quote the answer, so ``hash`` and ``drop``
leave them empty (a hash of generated prose matches nothing worth matching).

Also here: :class:`ContentLimits`, the cap on the text one call brings to the detectors,
which bounds the CPU time a message can cost whatever it holds.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

import phonenumbers
from pydantic import SecretStr

from detectors.llm_call import LLMCall, Message
from detectors.registry import structural_evidence_keys

ContentMode = Literal["store", "hash", "redact", "drop"]
ContentTable = Literal["llm_calls", "findings", "alerts"]
CONTENT_TABLES: tuple[ContentTable, ...] = get_args(ContentTable)
# Names of earlier releases, still accepted in configuration.
LEGACY_MODES: Mapping[str, ContentMode] = {"full": "store", "none": "drop"}

HASH_PREFIX = "hmac-sha256:"
_HASHED = re.compile(rf"{HASH_PREFIX}[0-9a-f]{{64}}")

# Evidence keys whose string values name things of the application or of halluwatch, not
# user content: kinds, verdicts, tool and parameter names, JSON paths, source ids, labels.
# Evidence keys of the call rather than its detector: what was cut from it, and whose verdict.
_CALL_EVIDENCE_KEYS = frozenset({"truncated", "detector"})


@functools.cache
def structural_keys() -> frozenset[str]:
    """Evidence keys that hold no content: the call's own and each detector's (its ``DETECTOR.structural_keys``)."""
    return _CALL_EVIDENCE_KEYS | structural_evidence_keys()


# --- redaction patterns ---------------------------------------------------------------------
# Every pattern starts only where the preceding character cannot continue the token (a
# lookbehind) and bounds its repetitions, so the cost stays linear on hostile text.
_TOKEN_CHAR = r"[A-Za-z0-9_-]"  # noqa: S105 - a character class, not a password
_SECRETS = re.compile(
    "|".join(
        (
            r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----[\s\S]{0,20000}?-----END[A-Z ]{0,40}PRIVATE KEY-----",
            rf"(?<!{_TOKEN_CHAR})eyJ{_TOKEN_CHAR}{{8,}}\.{_TOKEN_CHAR}{{8,}}\.{_TOKEN_CHAR}{{8,}}",  # JWT
            rf"(?<!{_TOKEN_CHAR})sk-{_TOKEN_CHAR}{{20,}}",  # OpenAI, Anthropic
            rf"(?<!{_TOKEN_CHAR})[spr]k_(?:live|test)_[A-Za-z0-9]{{16,}}",  # Stripe
            rf"(?<!{_TOKEN_CHAR})(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_\w{{22,}}|glpat-{_TOKEN_CHAR}{{20,}})",
            rf"(?<!{_TOKEN_CHAR})xox[abeoprs]-[A-Za-z0-9-]{{10,}}",  # Slack tokens
            r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+",
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key ids
            rf"(?<!{_TOKEN_CHAR})AIza{_TOKEN_CHAR}{{35}}",  # Google API keys
            rf"(?<!{_TOKEN_CHAR})hf_[A-Za-z0-9]{{30,}}",  # Hugging Face
            r"(?<![A-Za-z])(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*",
        )
    )
)
# "api_key: ...", "password=..." and the like: the value is masked, the name kept.
_ASSIGNED = re.compile(
    r"(?i:\b(?:api[_-]?key|secret|token|password|passwd|pwd|access[_-]?key|client[_-]?secret)\b)"
    r"[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?(?P<value>[^\s\"',;]{8,})"
)
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,10}[A-Za-z]{2,63}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
# Candidates only: libphonenumber decides what is a valid number in them.
_PHONE_CANDIDATE = re.compile(r"(?<![\w+])\+?\(?\d[\d\s().-]{5,20}\d(?!\w)")
_PHONE_MIN_DIGITS = 7
# libphonenumber takes ~0.5 ms per candidate; past this many in one text, the rest are masked
# unchecked, so a text of digit groups costs bounded time and errs towards masking.
_PHONE_VALIDATIONS_PER_TEXT = 200


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum of payment card numbers."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def redact(text: str, phone_region: str = "US") -> str:
    """``text`` with secrets, e-mail addresses, card numbers and phone numbers masked.

    Phone numbers without a country code are read as numbers of ``phone_region``.
    """
    text = _SECRETS.sub("[secret]", text)
    text = _ASSIGNED.sub(lambda m: m[0][: m.start("value") - m.start()] + "[secret]", text)
    text = _EMAIL.sub("[email]", text)
    text = _CARD.sub(_mask_card, text)
    validations = itertools.count()

    def phones(match: re.Match[str]) -> str:
        candidate = match[0]
        if sum(char.isdigit() for char in candidate) < _PHONE_MIN_DIGITS:
            return candidate
        if next(validations) >= _PHONE_VALIDATIONS_PER_TEXT:
            return "[phone]"
        return _mask_phones(candidate, phone_region)

    return _PHONE_CANDIDATE.sub(phones, text)


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match[0])
    return "[card]" if luhn_valid(digits) else match[0]


def _mask_phones(candidate: str, region: str) -> str:
    found = list(phonenumbers.PhoneNumberMatcher(candidate, region, leniency=phonenumbers.Leniency.VALID))
    for match in reversed(found):
        candidate = candidate[: match.start] + "[phone]" + candidate[match.end :]
    return candidate


# --- the policy -------------------------------------------------------------------------------


class ContentPolicy:
    """How one sink treats content: :meth:`text` for a text, :meth:`evidence` for a detector's evidence."""

    def __init__(self, mode: ContentMode, hmac_key: SecretStr | None = None, phone_region: str = "US") -> None:
        if mode == "hash" and not (hmac_key and hmac_key.get_secret_value()):
            raise ValueError("content mode 'hash' needs content_hmac_key (HALLUWATCH_CONTENT_HMAC_KEY)")
        self.mode = mode
        self._key = hmac_key.get_secret_value().encode() if hmac_key else b""
        self._phone_region = phone_region
        self._text: Callable[[str], str] = {
            "store": lambda text: text,
            "hash": self._hash,
            "redact": lambda text: redact(text, phone_region),
            "drop": lambda text: "",
        }[mode]

    def __repr__(self) -> str:
        return f"ContentPolicy({self.mode!r})"  # never the key

    def text(self, value: str) -> str:
        """A content text as this sink may hold it."""
        return self._text(value) if value else value

    def summary(self, value: str) -> str:
        """A finding's one-line summary: it quotes the answer, so ``hash`` and ``drop`` leave none."""
        return self.text(value) if self.mode in ("store", "redact") else ""

    def evidence(self, evidence: Mapping[str, Any]) -> dict[str, Any]:
        """Evidence with every content string (anything not under a structural key) treated by :meth:`text`."""
        return {key: self._evidence_value(key, value) for key, value in evidence.items()}

    def reason(self, words: str, detail: str = "") -> str:
        """A message for people (a dead letter's reason, a delivery error) as this sink may hold it.

        ``words`` are the worker's own (what failed, where): kept, with secrets and PII masked
        unless the mode is ``store``. ``detail`` is what an exception or a server said, which
        may quote the input: content, treated by :meth:`text` (``drop`` says it was withheld).
        """
        words = self.attribute(words)
        if not detail:
            return words
        treated = self.text(detail) or "[withheld]"
        return f"{words}: {treated}" if words else treated

    def attribute(self, value: str) -> str:
        """A routing attribute value: kept (routing rules need it), with PII masked unless the mode is ``store``."""
        return value if self.mode == "store" else redact(value, self._phone_region)

    def _evidence_value(self, key: str, value: Any) -> Any:
        if isinstance(value, str):
            return value if key in structural_keys() else self.text(value)
        if isinstance(value, Mapping):
            return {str(k): self._evidence_value(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._evidence_value(key, item) for item in value]  # items are what their key says
        return value

    def _hash(self, text: str) -> str:
        if _HASHED.fullmatch(text):
            return text  # hashed already (a finding's evidence reaching the alert): the same value both places
        # surrogatepass: text decoded from JSON may hold lone surrogates, which strict UTF-8 refuses.
        digest = hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return HASH_PREFIX + digest


@dataclass(frozen=True, slots=True)
class ContentPolicies:
    """The policy of each table."""

    llm_calls: ContentPolicy
    findings: ContentPolicy
    alerts: ContentPolicy

    @classmethod
    def of(
        cls,
        default: ContentMode,
        per_table: Mapping[ContentTable, ContentMode] | None = None,
        hmac_key: SecretStr | None = None,
        phone_region: str = "US",
    ) -> ContentPolicies:
        """Policies from the default mode and per-table overrides."""
        modes = {table: (per_table or {}).get(table, default) for table in CONTENT_TABLES}
        return cls(**{table: ContentPolicy(mode, hmac_key, phone_region) for table, mode in modes.items()})


STORE_ALL = ContentPolicies.of("store")


def split_reason(reason: str) -> tuple[str, str]:
    """A free-form reason as (the worker's words, the detail): the words end at the first ``": "``.

    The worker writes its reasons as ``what failed: what the exception said`` (``malformed
    OTLP/JSON: Failed to parse ...``); a reason without ``": "`` is all its own words. Erring
    the other way costs a detail, never a leak: everything after the first ``": "`` is detail.
    """
    words, _, detail = reason.partition(": ")
    return words, detail


# --- the cap on one call's text ---------------------------------------------------------------


DEFAULT_MAX_CALL_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class ContentLimits:
    """At most ``max_call_chars`` of text per call reach the detectors.

    The budget goes to the answer first (what is judged), then the newest input messages,
    the system instructions, and the sources in order; texts past it are cut, and items
    left with no text are dropped. The call names what was cut in ``truncated``, which
    every finding of the call carries in its evidence.
    """

    max_call_chars: int

    def apply(self, call: LLMCall) -> LLMCall:
        """``call`` within the budget (the same object when it already fits)."""
        sizes = [len(m.text) for m in (*call.output_messages, *call.input_messages)]
        total = sum(sizes) + len(call.system_instructions) + sum(len(s.text) for s in call.sources)
        if total <= self.max_call_chars:
            return call
        budget = [self.max_call_chars]
        cut: list[str] = []

        def take(text: str, field: str) -> str:
            kept = text[: budget[0]]
            budget[0] -= len(kept)
            if len(kept) < len(text) and field not in cut:
                cut.append(field)
            return kept

        outputs = tuple(dataclasses.replace(m, text=take(m.text, "output_messages")) for m in call.output_messages)
        newest_first = [
            dataclasses.replace(m, text=take(m.text, "input_messages")) for m in reversed(call.input_messages)
        ]
        inputs = tuple(m for m in reversed(newest_first) if _kept(m))
        instructions = take(call.system_instructions, "system_instructions")
        cut_sources = (dataclasses.replace(source, text=take(source.text, "sources")) for source in call.sources)
        sources = tuple(source for source in cut_sources if source.text)
        return dataclasses.replace(
            call,
            output_messages=outputs,
            input_messages=inputs,
            system_instructions=instructions,
            sources=sources,
            truncated=tuple(cut),
        )


DEFAULT_LIMITS = ContentLimits(DEFAULT_MAX_CALL_CHARS)


def _kept(message: Message) -> bool:
    """A message still worth keeping: it has text, or tool calls, or answers one."""
    return bool(message.text or message.tool_calls or message.tool_call_id)
