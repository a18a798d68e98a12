"""What `halluwatch conventions` and `doctor` say about the calls of each instrumentation scope."""

from __future__ import annotations

from pipeline.tools.instrumentation_gaps import ScopeGaps, summary, table_lines

WHOLE = ScopeGaps("pydantic-ai", ("gen_ai",), calls=8, no_content=0, no_tools=0, no_model=0)
BLIND = ScopeGaps("opentelemetry.instrumentation.google_genai", ("gen_ai",), 5, no_content=5, no_tools=2, no_model=0)


def test_whole_traffic_is_ok_and_counted() -> None:
    assert summary([WHOLE]) == (True, "8 model calls from 1 instrumentation scope(s), all with content and model")
    assert summary([]) == (True, "no model calls in the window yet")


def test_a_scope_with_gaps_is_named_with_its_counts() -> None:
    whole, detail = summary([WHOLE, BLIND])
    assert not whole
    assert detail.startswith(
        "opentelemetry.instrumentation.google_genai (gen_ai): of 5 calls, 5 without content, "
        "2 with tool calls but no tool definitions, 0 without a model"
    )
    assert "pydantic-ai" not in detail


def test_the_table_has_one_row_per_scope_under_its_header() -> None:
    header, first, second = table_lines([BLIND, WHOLE])
    assert header.startswith("instrumentation scope (conventions)") and header.endswith("no tools    no model")
    assert first.split()[-4:] == ["5", "5", "2", "0"] and first.startswith(BLIND.scope)
    assert second.split()[-4:] == ["8", "0", "0", "0"] and second.startswith("pydantic-ai (gen_ai)")
