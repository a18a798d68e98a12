"""Reading the YAML files of this package, with the checks a hand-edited file needs.

A wrong type or a misspelt key fails at import, naming its place in the file, instead of
turning into a wrong span attribute that only a detector test would notice.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, TypeVar

import yaml

T = TypeVar("T")
D = TypeVar("D")


class ExampleDataError(ValueError):
    """A data file of the examples is malformed; the message names the file and the place."""


def read(name: str) -> Row:
    """The top-level mapping of the package's data file ``name``."""
    text = resources.files("pipeline.tools.example_traces").joinpath(name).read_text("utf-8")
    return Row(yaml.safe_load(text), name)


def typed(value: object, kind: type[T], where: str) -> T:
    """``value`` if it is a ``kind`` (YAML's true/false do not pass as numbers), else an error naming ``where``."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ExampleDataError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


class Row:
    """One mapping of a data file, read key by key inside ``with``; keys nobody read fail at the end."""

    def __init__(self, value: object, where: str) -> None:
        self._row: dict[str, Any] = typed(value, dict, where)
        self.where = where
        self._read: set[str] = set()

    def __enter__(self) -> Row:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        unknown = sorted(self._row.keys() - self._read)
        if kind is None and unknown:
            # A key nobody asked for is a typo or a field that does not exist.
            raise ExampleDataError(f"{self.where}: unknown keys {unknown}")

    def need(self, key: str, kind: type[T]) -> T:
        """The value of a required ``key``."""
        if key not in self._row:
            raise ExampleDataError(f"{self.where}: missing {key!r}")
        self._read.add(key)
        return typed(self._row[key], kind, f"{self.where}.{key}")

    def get(self, key: str, kind: type[T], default: D) -> T | D:
        """The value of an optional ``key``, ``default`` when it is absent."""
        return self.need(key, kind) if key in self._row else default
