"""Keeping secrets out of logs and messages (docs/operations.md).

Secrets are ``SecretStr`` settings (from ``HALLUWATCH_*`` variables or secret files), so
they never show in ``repr``. Client libraries do not know that: an error text may quote
a URL with its password, a header or a token. :class:`SecretScrubber` masks every
configured secret value in every log record, and :func:`scrub` does the same for text
printed by commands.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretStr

MASK = "***"
# Shorter values are not masked: "on" or "1" would blank half a log line, and are no secrets.
_MIN_SECRET_CHARS = 4


def secret_values(model: BaseModel) -> list[str]:
    """Every ``SecretStr`` value in ``model`` and its nested models, longest first."""
    found = {value for value in _walk(model) if len(value) >= _MIN_SECRET_CHARS}
    return sorted(found, key=len, reverse=True)


def _walk(value: Any) -> Iterator[str]:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        yield secret
        yield from _url_password(secret)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk(item)


def _url_password(secret: str) -> Iterator[str]:
    """The password inside a secret URL (a DSN): errors may quote it without the rest."""
    if "://" in secret:
        try:
            password = urlsplit(secret).password
        except ValueError:  # not a URL after all
            return
        if password:
            yield password
            yield unquote(password)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value masked."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def install_scrubber(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in every log record from now on, whatever handlers are configured later.

    Records are scrubbed as they are made (message, arguments and traceback rendered and
    masked), so handlers that faust or a library installs after this see clean records too.
    """
    values = list(secrets)
    if not values:
        return
    make_record = logging.getLogRecordFactory()

    def scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        # Empty args, not None: formatters such as mode's wrap None into (None,) and format again.
        record.msg, record.args = scrub(record.getMessage(), values), ()
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:  # also a traceback an earlier-installed scrubber already rendered
            record.exc_text = scrub(record.exc_text, values)
        return record

    logging.setLogRecordFactory(scrubbed_record)
