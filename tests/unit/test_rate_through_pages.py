"""`halluwatch rate` reads through the running pages: the scope travels as query parameters and comes back whole."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qsl

import pytest

from pipeline.rate.store import Scope
from pipeline.rate.through_pages import PagesUnreachable, report_lines_through, scope_from_query, scope_query


def test_a_scope_survives_the_query_string():
    scope = Scope(
        datetime(2026, 11, 1, 9, 30, tzinfo=UTC), datetime(2026, 11, 8, tzinfo=UTC), "hr", "hr-assistant", "chat",
        "gpt-4o", (("deployment.environment", "prod"), ("service.version", "v=42")),
    )  # fmt: skip
    pairs = parse_qsl(scope_query(scope))
    args = dict(pairs)
    assert scope_from_query(args, [value for key, value in pairs if key == "attr"]) == scope


def test_a_bad_scope_and_unreachable_pages_are_named():
    with pytest.raises(ValueError, match="attr"):
        scope_from_query({"since": "2026-11-01T00:00:00+00:00", "until": "2026-11-02T00:00:00+00:00"}, ["novalue"])
    scope = Scope(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    with pytest.raises(PagesUnreachable, match="did not answer"):
        report_lines_through("http://127.0.0.1:9", {"Authorization": "Bearer token"}, scope)
    with pytest.raises(PagesUnreachable, match="not an http"):
        report_lines_through("file:///etc", {}, scope)
