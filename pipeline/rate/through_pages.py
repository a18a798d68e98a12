"""The rate report read through running triage pages, for when another process holds the embedded store.

Embedded chDB admits one process per data directory: while ``halluwatch ui`` (or a worker
serving the pages) has it open, ``halluwatch rate`` cannot.  That process answers
``GET /review/rate`` with the report's lines for a scope given as query parameters
(:func:`scope_query` writes them, :func:`scope_from_query` reads them back), to a caller the
pages admit: with their token, or, behind an authenticating proxy, with the header it sets.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import urlencode, urlsplit

from pipeline.rate.store import Scope

RATE_PATH = "/review/rate"
TIMEOUT_SECONDS = 60.0


class PagesUnreachable(RuntimeError):
    """The pages did not answer (stopped, or a stale address file); the message says where it tried."""


class PagesRefused(PagesUnreachable):
    """The pages answered with their sign-in page, not the report: the credentials sent did not admit the caller."""


def scope_query(scope: Scope) -> str:
    """``scope`` as a query string for :data:`RATE_PATH`."""
    pairs = [("since", scope.since.isoformat()), ("until", scope.until.isoformat())]
    pairs += [(name, value) for name in ("app", "service", "operation", "model") if (value := getattr(scope, name))]
    pairs += [("attr", f"{key}={value}") for key, value in scope.attributes]
    return urlencode(pairs)


def scope_from_query(args: Mapping[str, str], attributes: Sequence[str]) -> Scope:
    """The scope :func:`scope_query` wrote; ValueError on a bad time or attribute."""
    pairs = [attribute.partition("=") for attribute in attributes]
    if any(not key or not equals for key, equals, _ in pairs):
        raise ValueError("attr: KEY=VALUE")
    return Scope(
        datetime.fromisoformat(args.get("since", "")), datetime.fromisoformat(args.get("until", "")),
        args.get("app", ""), args.get("service", ""), args.get("operation", ""), args.get("model", ""),
        tuple(sorted((key, value) for key, _, value in pairs)),
    )  # fmt: skip


def report_lines_through(base_url: str, headers: Mapping[str, str], scope: Scope) -> list[str]:
    """The report's lines as the pages at ``base_url`` compute them for ``scope``, asked with ``headers``."""
    url = f"{base_url.rstrip('/')}{RATE_PATH}?{scope_query(scope)}"
    if not url.startswith(("http://", "https://")):
        raise PagesUnreachable(f"not an http(s) address: {base_url!r}")
    request = urllib.request.Request(url, headers=dict(headers))  # noqa: S310 - scheme checked
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - scheme checked
            # Not signed in, the pages redirect to /login, which answers HTML.
            if response.headers.get_content_type() != "application/json":
                answered = urlsplit(response.url).path
                raise PagesRefused(f"the triage pages at {base_url} did not sign this command in "
                                   f"(they answered {answered} with their sign-in page)")  # fmt: skip
            answer = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PagesUnreachable(f"the triage pages at {base_url} did not answer: {exc}") from exc
    return [str(line) for line in answer["lines"]]
