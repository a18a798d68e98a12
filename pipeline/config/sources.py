"""Where a setting's value came from: its ``HALLUWATCH_*`` variable, its secret file or the config file's key.

An error about a setting names that source, as the user spelled it, so that they fix the value
where it was given rather than look for it in a file that does not hold it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipeline.config.env_names import NESTED, PREFIX, takes_json

# Parts of a setting's name whose value is not quoted back (a token, a password, a DSN with one).
_SECRET_WORDS = ("token", "password", "secret", "key", "dsn")


@dataclass(frozen=True)
class Sources:
    """What the settings were read from: the environment, the secrets directory, the config file and options."""

    environ: Mapping[str, str]
    secrets_dir: Path | None = None
    config_path: Path | None = None
    file_values: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)  # setting -> the command-line option that set it

    def of(self, location: Sequence[str | int]) -> str:
        """The source of the setting at ``location`` (``("escalation", "enabled")``), in the user's words.

        The most specific variable first (``HALLUWATCH_ESCALATION__ENABLED``, then
        ``HALLUWATCH_ESCALATION`` as JSON), then a secret file, then the config file's key;
        "" for a default.
        """
        parts = [str(part) for part in location]
        if parts and parts[0] in self.options:
            return self.options[parts[0]]
        for depth in range(len(parts), 0, -1):
            name = PREFIX + NESTED.join(parts[:depth]).upper()
            given = self._variable(name)
            if given is not None:
                return given if depth == len(parts) else f"{given} (its key {'.'.join(parts[depth:])})"
            secret = self._secret_file(name)
            if secret is not None:
                return f"secret file {secret}"
        if self.config_path is not None and _holds(self.file_values, parts):
            return f"{'.'.join(parts)} in config file {self.config_path}"
        return ""

    def quoted(self, location: Sequence[str | int]) -> str:
        """``NAME=value`` for a variable that is no secret, else the source alone (values of secrets stay unsaid)."""
        source = self.of(location)
        value = self.environ.get(source)
        secret = any(word in str(part).lower() for part in location for word in _SECRET_WORDS)
        return f"{source}={value}" if value is not None and not secret else source

    def not_json(self, model: type[BaseModel], top_field: str) -> list[str]:
        """The variables below ``top_field`` that set a model, list or mapping with a value that is not JSON."""
        prefix = PREFIX + top_field.upper()
        names = [
            name for name in sorted(self.environ) if name.upper() == prefix or name.upper().startswith(prefix + NESTED)
        ]
        return [
            name
            for name in names
            if takes_json(model, name.upper()[len(PREFIX) :]) and not _is_json(self.environ[name])
        ]

    def _variable(self, upper: str) -> str | None:
        return next((name for name, value in self.environ.items() if name.upper() == upper and value != ""), None)

    def _secret_file(self, upper: str) -> Path | None:
        if self.secrets_dir is None or not self.secrets_dir.is_dir():
            return None
        return next((p for p in self.secrets_dir.iterdir() if p.name.upper() == upper and p.is_file()), None)


def _holds(values: Mapping[str, Any], parts: Sequence[str]) -> bool:
    node: Any = values
    for part in parts:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
