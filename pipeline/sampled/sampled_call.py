"""A record of the consistency topic: one call the sampled detectors should judge, and under which policy."""

from __future__ import annotations

import json
from dataclasses import dataclass

from detectors.llm_call import LLMCall
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.untrusted import call_from_record, field_of, json_document


@dataclass(frozen=True, slots=True)
class SampledCall:
    """The call as it travels (pipeline.sampled.stage.consistency_call), the risk rule that chose it, its policy.

    The policy travels by name: under the hash or redact content modes, the attributes that
    select it do not.  A call escalated to the judge (rule ``escalation``) carries the deadline
    its alert waits until (unix seconds); the judge's answer after it is too late to count.
    """

    call: LLMCall
    rule: str
    policy: str = DEFAULT_POLICY
    deadline: float | None = None

    def to_json(self) -> bytes:
        """The Kafka value."""
        record = {"rule": self.rule, "policy": self.policy, "call": self.call.to_dict(), "deadline": self.deadline}
        return json.dumps(record, ensure_ascii=False, default=str).encode()

    @classmethod
    def from_json(cls, value: bytes) -> SampledCall:
        """Parse a Kafka value; raises :class:`~pipeline.untrusted.MalformedRecord` on a malformed one."""
        record = json_document(value)
        call = call_from_record(field_of(record, "call"))
        deadline = record.get("deadline")
        deadline = float(deadline) if isinstance(deadline, int | float) and not isinstance(deadline, bool) else None
        return cls(call, str(record.get("rule", "")), str(record.get("policy", DEFAULT_POLICY)), deadline)
