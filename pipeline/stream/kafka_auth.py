"""Kafka security settings as faust's ``broker_credentials``."""

from __future__ import annotations

import faust
from faust.types.auth import CredentialsT

from pipeline.config.connections import KafkaSecurity


def faust_credentials(security: KafkaSecurity) -> CredentialsT | None:
    """SASL (over TLS for SASL_SSL), TLS alone, or None for a plaintext broker."""
    if security.sasl:
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.password(),
            ssl_context=security.ssl_context(),
            mechanism=security.sasl_mechanism,
        )
    context = security.ssl_context()
    return faust.SSLCredentials(context) if context is not None else None
