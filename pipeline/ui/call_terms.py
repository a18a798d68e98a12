"""What a call is held to that the call itself does not say: the end user it acts for, its output schema.

The tool facts detector's permissions registry reads who a call acts for from the span
attributes it names (``enduser.id`` and ``enduser.role`` unless configured otherwise); the
schema & tool-call detector holds the JSON Schema each operation's answer must meet.  A person
judging the call needs both, blind review included: they are what decides whether a tool call
was allowed or an answer complete, facts about the call, not what a detector concluded of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from detectors.schema_violation import DETECTOR as SCHEMA_VIOLATION
from detectors.settings import DetectorSettings
from detectors.tool_facts import DETECTOR as TOOL_FACTS
from pipeline.ui.queries import CallView


@dataclass(frozen=True, slots=True)
class CallTerms:
    """One call's end user and output schema, as the pages show them.

    ``identity``: (attribute, value) of each identity attribute the registries check that the
    call carries; ``unrecorded``: those it does not carry.  ``output_schema`` is indented JSON
    ("" when the call's operation has none), ``schema_of`` the operation or span name it is for.
    """

    identity: tuple[tuple[str, str], ...] = ()
    unrecorded: tuple[str, ...] = ()
    output_schema: str = ""
    schema_of: str = ""
    required: tuple[str, ...] = ()  # the schema's required top-level properties


@dataclass(frozen=True, slots=True)
class Contracts:
    """The settings a call's terms come from: the identity attributes checked, the output schemas by operation."""

    identity_attributes: tuple[str, ...] = ()  # none: no permissions registry is configured
    output_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def configured(cls, detectors: DetectorSettings) -> Contracts:
        """The contracts of the settings' ``detectors:`` section."""
        permissions = TOOL_FACTS.config_in(detectors).permissions
        checked = (permissions.user_attribute, permissions.role_attribute) if permissions is not None else ()
        return cls(checked, SCHEMA_VIOLATION.config_in(detectors).output_schemas)

    def of(self, call: CallView) -> CallTerms:
        """``call``'s terms: its schema matched on operation first, then span name, as the detector matches it."""
        identity = tuple((key, call.attributes[key]) for key in self.identity_attributes if call.attributes.get(key))
        unrecorded = tuple(key for key in self.identity_attributes if not call.attributes.get(key))
        schema_of = next((name for name in (call.operation, call.span_name) if name in self.output_schemas), "")
        if not schema_of:
            return CallTerms(identity, unrecorded)
        schema = self.output_schemas[schema_of]
        required = schema.get("required")
        return CallTerms(
            identity,
            unrecorded,
            json.dumps(schema, indent=2, ensure_ascii=False),
            schema_of,
            tuple(str(name) for name in required) if isinstance(required, list) else (),
        )


NO_TERMS = CallTerms()  # a call held to nothing the pages know of
NO_CONTRACTS = Contracts()  # settings without a permissions registry or output schemas
