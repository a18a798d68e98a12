"""Secrets that guard a door must be random: placeholders and short values are refused at start-up.

The triage token and session key, the Slack and PagerDuty signing secrets and the content HMAC
key each let whoever knows them in (or undo the hashing); a value copied from an example file
(``change-me``) or short enough to guess is as good as none, so a process refuses to start
with one, naming the setting.  Empty is no value (the setting is off, or the process makes up
its own); the message never quotes the value.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, SecretStr

MIN_SECRET_CHARS = 16
# Example-file words, compared with case, spaces and punctuation gone: "change-me", "CHANGE_ME", "<your token>".
_PLACEHOLDER = re.compile(r"changeme|changethis|changeit|replaceme|placeholder|yoursecret|yourtoken|yourkey|example")
_MIN_DISTINCT_CHARS = 4  # "xxxxxxxxxxxxxxxx", "................": long, and no secret
_ADVICE = f"set a random value of {MIN_SECRET_CHARS} characters or more (e.g. `openssl rand -hex 24`)"


def strong(secret: SecretStr | None) -> SecretStr | None:
    """``secret``, unless it is a placeholder or too short (ValueError saying which rule, not the value)."""
    value = secret.get_secret_value() if secret is not None else ""
    if not value:
        return secret
    if _PLACEHOLDER.search(re.sub(r"[^a-z0-9]", "", value.lower())) or len(set(value)) < _MIN_DISTINCT_CHARS:
        raise ValueError(f"a placeholder, not a secret: {_ADVICE}")
    if len(value) < MIN_SECRET_CHARS:
        raise ValueError(f"shorter than {MIN_SECRET_CHARS} characters: {_ADVICE}")
    return secret


StrongSecret = Annotated[SecretStr | None, AfterValidator(strong)]
