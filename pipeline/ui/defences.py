"""What every page response carries to defend the person reading it, whichever server sends it.

Both servers (``halluwatch ui`` and the worker's metrics port, which mounts the same pages)
wrap their WSGI application in :func:`with_security_headers`.  The pages load scripts and
styles from their own ``/static`` only, so the policy allows nothing inline: injected markup
that slipped past escaping still could not run.  Text from spans (service names, prompts,
answers) is shown with its bidirectional controls replaced (:func:`without_bidi_controls`),
so a right-to-left override cannot make ``gpt-4o`` read as something else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from markupsafe import Markup

SECURITY_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    # The sign-in link carries the token once; nothing of an address goes to another site.
    # (Not no-referrer: under it browsers send "Origin: null" with the pages' own forms.)
    ("Referrer-Policy", "same-origin"),
)
_HEADER_NAMES = {name.lower() for name, _ in SECURITY_HEADERS}

# Embeddings, overrides and isolates of Unicode's bidirectional algorithm, and the marks.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SHOWN_AS = str.maketrans(dict.fromkeys(BIDI_CONTROLS, "\ufffd"))


def with_security_headers(app: WSGIApplication) -> WSGIApplication:
    """``app`` with :data:`SECURITY_HEADERS` on every response (replacing any it set itself)."""

    def secured(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(name, value) for name, value in headers if name.lower() not in _HEADER_NAMES]
            return start_response(status, kept + list(SECURITY_HEADERS), exc_info)

        return app(environ, start)

    return secured


def without_bidi_controls(value: Any) -> Any:
    """A template value as shown: its bidirectional controls replaced by U+FFFD (visibly, not silently)."""
    if isinstance(value, Markup):
        return Markup(str(value).translate(_SHOWN_AS))  # noqa: S704 - already safe markup; only controls are replaced
    if isinstance(value, str):
        return value.translate(_SHOWN_AS)
    return value
