"""Who is asking: an authenticating proxy's header, a bearer token, or the browser session it started.

A request from a trusted proxy address names its user in ``ui.identity_header``; anyone
else's copy of that header is ignored.  A token admits its holder as ``ui.token_user``:
sent as ``Authorization: Bearer`` by scripts (no cookie, so no cross-site risk), or once
as ``?token=`` / the sign-in form by a browser, which then keeps a signed session cookie.
"""

from __future__ import annotations

import getpass
import hmac
import secrets
from dataclasses import dataclass

from flask import Request, session

from pipeline.config.ui import UISettings

SESSION_USER = "user"
_BEARER = "Bearer "


@dataclass(frozen=True, slots=True)
class Identity:
    """The person a request acts for, and whether it came with a bearer token (no cookies involved)."""

    user: str
    bearer: bool = False


class Access:
    """Resolves identities under one UI configuration; makes up a token when none is configured."""

    def __init__(self, settings: UISettings) -> None:
        self._settings = settings
        configured = settings.token.get_secret_value() if settings.token else ""
        # Neither a proxy nor a token configured: a fresh token per process, never an open door.
        self.generated = not configured and not settings.identity_header
        self.token = configured or (secrets.token_urlsafe(24) if self.generated else "")
        self.token_user = settings.token_user or os_user()

    def identify(self, request: Request) -> Identity | None:
        """Who ``request`` acts for, or None when it brings no identity."""
        header = self._settings.identity_header
        if header and self._settings.trusts(request.remote_addr or ""):
            user = (request.headers.get(header) or "").strip()
            if user:
                return Identity(user)
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith(_BEARER):
            return Identity(self.token_user, bearer=True) if self.accepts(authorization[len(_BEARER) :]) else None
        signed_in: object = session.get(SESSION_USER)
        return Identity(signed_in) if isinstance(signed_in, str) and signed_in else None

    def accepts(self, token: str) -> bool:
        """Whether ``token`` is this UI's token (compared in constant time)."""
        return bool(self.token) and hmac.compare_digest(token.encode(), self.token.encode())

    def sign_in(self) -> str:
        """Start a browser session for the token's holder; returns the name it labels under."""
        session.clear()
        session[SESSION_USER] = self.token_user
        session.permanent = True
        return self.token_user


def os_user() -> str:
    """The operating-system user's name, for labels and for commands that sign in as themselves."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "token-holder"
