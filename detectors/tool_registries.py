"""Fact registries for tool arguments (seed 003): what really exists, read from files or URLs, kept fresh.

Three kinds, each a plain value the tool facts detector (:mod:`detectors.tool_facts`) checks
arguments against:

- :class:`OpenAPIDocument`: the operations (method, path template, query parameters) of an
  OpenAPI 3 document, JSON or YAML, from a file or an http(s) URL.  Local ``$ref`` s to
  shared parameters are followed; remote ones are not fetched;
- known values: the values of one column of a CSV file, the items of a YAML/JSON list, or the
  first column of a ClickHouse query's rows;
- :class:`Permissions`: the tools each role and each user may call, from YAML.

:class:`Refreshing` holds one loaded registry: it loads on first use, reloads every
``refresh_seconds`` (a changed file is picked up, a failed load is tried again), keeps the
last good value when a reload fails, and reports why there is none when there never was.
"""

from __future__ import annotations

import csv
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import requests
import yaml

T = TypeVar("T")
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_TEMPLATE_PART = re.compile(r"\{[^}/]+\}")


class RegistryError(ValueError):
    """A registry that cannot be loaded; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of an API: ``GET /orders/{order_id}`` and the query parameters it declares."""

    method: str  # upper case
    template: str
    query: frozenset[str]
    pattern: re.Pattern[str]

    @property
    def label(self) -> str:
        """``METHOD /path/{template}``."""
        return f"{self.method} {self.template}"


@dataclass(frozen=True, slots=True)
class OpenAPIDocument:
    """The operations of a document, and the path prefixes of its servers (``/v1``)."""

    operations: tuple[Operation, ...]
    base_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Permissions:
    """Tools per role and per user (``*``: any tool)."""

    roles: Mapping[str, frozenset[str]]
    users: Mapping[str, frozenset[str]]


def read_location(location: str, timeout: float) -> str:
    """An http(s) URL's body, or a file's text."""
    if not location.startswith(("http://", "https://")):
        return read_file(Path(location))
    try:
        response = requests.get(location, timeout=timeout)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise RegistryError(f"cannot fetch {location}: {exc}") from exc
    return response.text


def read_file(path: Path) -> str:
    """A file's text; a registry error naming it when it cannot be read."""
    try:
        return path.read_text("utf-8")
    except OSError as exc:
        raise RegistryError(f"cannot read {path}: {exc}") from exc


def parse_openapi(text: str, where: str) -> OpenAPIDocument:
    """The operations of an OpenAPI 3 document (JSON is YAML, so one parser reads both)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{where}: not JSON or YAML ({exc})") from exc
    paths = document.get("paths") if isinstance(document, dict) else None
    if not isinstance(paths, dict) or not paths:
        raise RegistryError(f"{where}: no 'paths' in the document")
    operations = []
    for template, item in paths.items():
        if not isinstance(item, dict) or not isinstance(template, str):
            continue
        shared = _query_names(item.get("parameters"), document)
        for method in HTTP_METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                query = shared | _query_names(operation.get("parameters"), document)
                operations.append(Operation(method.upper(), template, query, _template_pattern(template)))
    if not operations:
        raise RegistryError(f"{where}: no operations under 'paths'")
    servers = document.get("servers") if isinstance(document.get("servers"), list) else []
    bases = {_url_path(server.get("url", "")) for server in servers if isinstance(server, dict)}
    return OpenAPIDocument(tuple(operations), tuple(sorted(base for base in bases if base not in ("", "/"))))


def read_known_values(path: Path, argument: str, column: str | None) -> frozenset[str]:
    """The values of ``column`` (default: ``argument``) of a CSV file, or the items of a YAML/JSON list."""
    text = read_file(path)
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        name = column or argument
        if name not in (reader.fieldnames or ()):
            raise RegistryError(f"{path}: no column {name!r} (columns: {', '.join(reader.fieldnames or ())})")
        return frozenset(row[name].strip() for row in reader if row.get(name, "").strip())
    try:
        items = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not JSON or YAML ({exc})") from exc
    if not isinstance(items, list):
        raise RegistryError(f"{path}: expected a list of values")
    return frozenset(str(item) for item in items if isinstance(item, str | int))


def query_known_values(dsn: str, query: str, timeout: float) -> frozenset[str]:
    """The first column of ``query``'s rows on the ClickHouse at ``dsn``."""
    import clickhouse_connect  # here: only a worker with such a registry pays for the client

    try:
        client = clickhouse_connect.get_client(dsn=dsn, connect_timeout=timeout, send_receive_timeout=timeout)
        try:
            rows = client.query(query).result_rows
        finally:
            client.close()
    except Exception as exc:  # any driver or server error: the registry is unavailable, the worker goes on
        raise RegistryError(f"known values query failed: {type(exc).__name__}: {exc}") from exc
    return frozenset(str(row[0]) for row in rows if row and row[0] is not None)


def read_permissions(path: Path) -> Permissions:
    """``{roles: {role: [tool, ...]}, users: {user: [tool, ...]}}`` from YAML."""
    try:
        document = yaml.safe_load(read_file(path)) or {}
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not YAML ({exc})") from exc
    if not isinstance(document, dict) or not set(document) <= {"roles", "users"}:
        raise RegistryError(f"{path}: expected a mapping with 'roles' and/or 'users'")

    def grants(section: str) -> dict[str, frozenset[str]]:
        entries = document.get(section) or {}
        if not isinstance(entries, dict) or not all(isinstance(tools, list) for tools in entries.values()):
            raise RegistryError(f"{path}: '{section}' must map names to lists of tools")
        return {str(name): frozenset(map(str, tools)) for name, tools in entries.items()}

    return Permissions(grants("roles"), grants("users"))


class Refreshing(Generic[T]):
    """One registry, loaded on first use and again every ``refresh_seconds``; safe across threads."""

    def __init__(
        self, name: str, load: Callable[[], T], refresh_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self._load = load
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._error = ""
        self._loaded_at: float | None = None

    def get(self) -> tuple[T | None, str]:
        """The registry (the last good one if a reload failed), or ``None`` and why."""
        with self._lock:
            now = self._clock()
            if self._loaded_at is None or now - self._loaded_at >= self._refresh_seconds:
                self._loaded_at = now
                try:
                    self._value, self._error = self._load(), ""
                except RegistryError as exc:
                    self._error = str(exc)
            return self._value, "" if self._value is not None else self._error


def _query_names(parameters: Any, document: Mapping[str, Any]) -> frozenset[str]:
    names = set()
    for parameter in parameters if isinstance(parameters, list) else ():
        resolved = _local_ref(parameter, document)
        if isinstance(resolved, dict) and resolved.get("in") == "query" and isinstance(resolved.get("name"), str):
            names.add(resolved["name"])
    return frozenset(names)


def _local_ref(node: Any, document: Mapping[str, Any]) -> Any:
    """Follow ``{"$ref": "#/components/parameters/x"}`` within the document; anything else as it is."""
    reference = node.get("$ref") if isinstance(node, dict) else None
    if not isinstance(reference, str) or not reference.startswith("#/"):
        return node
    target: Any = document
    for part in reference[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    return target


def _template_pattern(template: str) -> re.Pattern[str]:
    parts = _TEMPLATE_PART.split(template)
    return re.compile("".join(re.escape(part) + "[^/]+" for part in parts[:-1]) + re.escape(parts[-1]) + "/?")


def _url_path(url: str) -> str:
    """The path of a server URL (``https://api.example.com/v1`` -> ``/v1``), without a trailing slash."""
    path = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", "", url.strip())
    return "/" + path.strip("/") if path.strip("/") else ""
