"""The triage pages' settings (the settings file's ``ui:`` section): who may open them, who is judging.

Every page needs an identity.  Behind a company proxy that authenticates people, the proxy
names them in ``identity_header``, trusted only from ``trusted_proxies``.  Standalone, a
bearer ``token`` (sent as ``Authorization: Bearer``, or once as ``?token=`` to start a
browser session) admits whoever holds it, recorded as ``token_user``.  With neither
configured, each process makes up a token and says where to find it.  Every secret here must
be random (pipeline/config/strong_secrets.py): a placeholder stops the process at start-up.
"""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.config.strong_secrets import StrongSecret


class UISettings(BaseModel):
    """Access to the triage pages, and the Slack and PagerDuty endpoints."""

    model_config = ConfigDict(extra="forbid")

    # The worker serves the pages on its metrics port (metrics_port); `halluwatch ui` serves them alone.
    serve_in_worker: bool = True
    # A header set by an authenticating proxy (X-Forwarded-Email, X-Auth-Request-User...); empty: none.
    identity_header: str = ""
    # Addresses the identity header is believed from: the proxy's, never the whole internet.
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1/32", "::1/128"])
    token: StrongSecret = None
    token_user: str = ""  # the name a token holder's labels carry; empty: the operating-system user
    # Signs session cookies; empty: a new key per process (sessions end when it restarts).
    session_secret: StrongSecret = None
    # Slack app's signing secret: verifies the "confirmed" / "false alarm" button clicks.
    slack_signing_secret: StrongSecret = None
    # A PagerDuty V3 webhook subscription's signing secret: verifies its incident events
    # (POST /pagerduty/webhook), which mark alerts acknowledged or resolved. None: endpoint off.
    pagerduty_webhook_secret: StrongSecret = None
    page_size: int = Field(default=50, ge=1, le=500)
    # Who may post verdicts (and undo them); everyone else signed in can read. Empty: everyone
    # signed in may, as with one shared token.
    reviewers: list[str] = Field(default_factory=list)
    # Origins besides the pages' own address that a signed-in browser may post from (the public
    # https://... address when a proxy rewrites Host). Scripts with a bearer token are not asked.
    origins: list[str] = Field(default_factory=list)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # ValueError names the bad one
        return value

    def may_judge(self, user: str) -> bool:
        """Whether ``user`` may post verdicts: a reviewer, or anyone when no reviewers are named."""
        return not self.reviewers or user in self.reviewers

    def trusts(self, address: str) -> bool:
        """Whether a request from ``address`` may name its user in ``identity_header``."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in ipaddress.ip_network(network, strict=False) for network in self.trusted_proxies)
