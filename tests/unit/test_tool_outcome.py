"""Tool outcome detector: claims of success after a failed or missing tool run, failures left unsaid."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Message, ToolCall, ToolSpan
from detectors.tool_outcome import ToolOutcomeConfig
from detectors.tool_outcome.detector import ToolOutcomeDetector, past_forms
from detectors.tool_runs import Outcome, failure_reason, tool_runs
from tests.calls import make_llm_call

BOOK = ToolCall("book_flight", '{"flight": "TP1351", "date": "2026-03-12"}', "call_1")
DECLINED = json.dumps({"status": "error", "error": {"code": "card_declined", "message": "Card was declined"}})
CONFIRMED = json.dumps({"status": "confirmed", "booking_reference": "QX7K2P"})


def agent_call(answer: str, *results: tuple[str | None, str], calls: tuple[ToolCall, ...] = (BOOK,)) -> LLMCall:
    """A final agent call: the user's request, the assistant's tool calls, their results, the answer."""
    messages = [
        Message("system", "You book flights."),
        Message("user", "Book me TP1351 to Lisbon on 12 March."),
        Message("assistant", "", tool_calls=calls),
        *(Message("tool", text, tool_call_id=call_id) for call_id, text in results),
    ]
    return make_llm_call(answer, input_messages=tuple(messages))


@pytest.fixture
def detector() -> ToolOutcomeDetector:
    return ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5)


def detect(detector: ToolOutcomeDetector, call: LLMCall) -> DetectorResult:
    (result,) = detector.detect_batch([call])
    return result


def test_a_success_claimed_after_the_tool_failed_is_a_severe_finding(detector: ToolOutcomeDetector) -> None:
    answer = "Great news! Your flight TP1351 to Lisbon on 12 March is booked. Have a nice trip."
    result = detect(detector, agent_call(answer, ("call_1", DECLINED)))
    assert result.flagged and result.score == 1.0 and result.severity == 4
    assert result.summary == "answer claims book_flight succeeded; the tool returned error: Card was declined"
    (span,) = result.evidence["spans"]
    assert answer[span["start"] : span["end"]] == "Your flight TP1351 to Lisbon on 12 March is booked."
    assert result.evidence["runs"] == [
        {"tool": "book_flight", "outcome": "failed", "call_id": "call_1", "reason": "error: Card was declined"}
    ]
    assert result.evidence["failed"] == 1 and result.evidence["failure_reported"] is False


def test_the_same_claim_after_a_successful_run_is_not_flagged(detector: ToolOutcomeDetector) -> None:
    result = detect(detector, agent_call("Your flight is booked, reference QX7K2P.", ("call_1", CONFIRMED)))
    assert result.status is DetectorStatus.OK and not result.flagged and result.score == 0.0
    assert result.evidence["runs"][0]["outcome"] == "ok"


@pytest.mark.parametrize(
    "answer",
    [
        "Unfortunately the booking did not go through: your card was declined.",
        "I couldn't book the flight because the payment failed. Shall I try another card?",
        "There was an error with the payment, so nothing has been reserved yet.",
        "Your card was declined.",
    ],
)
def test_an_answer_that_reports_the_failure_is_not_flagged(detector: ToolOutcomeDetector, answer: str) -> None:
    result = detect(detector, agent_call(answer, ("call_1", DECLINED)))
    assert not result.flagged and result.score == 0.0
    assert result.evidence["failure_reported"] is True
    assert result.summary == "the answer reports that book_flight did not succeed"


def test_an_answer_passing_on_what_the_error_said_reports_it_and_a_claim_repeating_the_request_does_not(
    detector: ToolOutcomeDetector,
) -> None:
    table = ToolCall("book_table", '{"restaurant": "Casa Lisboa", "people": 2, "time": "19:30"}', "t1")
    full = '{"error": "No table free at 19:30; next free slot 21:15"}'
    offered = agent_call("Sorry, 19:30 is taken. Shall I take 21:15 instead?", ("t1", full), calls=(table,))
    assert not detect(detector, offered).flagged
    claimed = agent_call("Your table for two at Casa Lisboa is booked for 19:30.", ("t1", full), calls=(table,))
    assert detect(detector, claimed).score == 1.0


def test_an_error_value_passed_on_as_people_write_it_reports_the_failure(detector: ToolOutcomeDetector) -> None:
    table = ToolCall("book_table", '{"restaurant": "Casa Lisboa", "people": 2, "time": "19:30"}', "t1")
    full = '{"error": "No table free at 19:30; next free slot 21:15"}'
    offered = agent_call("The earliest is 9.15pm. Shall I take that?", ("t1", full), calls=(table,))
    assert not detect(detector, offered).flagged
    repeated = agent_call("Your table is set for 7.30pm.", ("t1", full), calls=(table,))  # the request's 19:30
    assert detect(detector, repeated).flagged


def test_a_failure_the_answer_leaves_unsaid_is_flagged_below_a_claim(detector: ToolOutcomeDetector) -> None:
    weather = ToolCall("get_weather", '{"city": "Paris"}', "w1")
    call = agent_call("It is 18 degrees and sunny in Paris.", ("w1", "Error: upstream timeout"), calls=(weather,))
    result = detect(detector, call)
    assert result.flagged and result.score == 0.6 and result.severity == 2
    assert result.summary == "answer does not say that get_weather failed (Error: upstream timeout)"
    assert result.evidence["spans"] == []


def test_a_claim_for_a_tool_that_never_returned(detector: ToolOutcomeDetector) -> None:
    cancel = ToolCall("cancelOrder", '{"order": "A-17"}', "c1")
    result = detect(detector, agent_call("Order A-17 has been cancelled.", calls=(cancel,)))
    assert result.flagged and result.score == 0.8
    assert result.evidence["runs"] == [{"tool": "cancelOrder", "outcome": "not_run", "call_id": "c1"}]
    assert result.summary == "answer claims cancelOrder done, but no result of it is recorded"


def test_a_claim_beside_the_tool_call_that_is_only_being_made_now(detector: ToolOutcomeDetector) -> None:
    send = (ToolCall("send_invoice", "{}", "s1"),)
    output = Message("assistant", "I've sent the invoice to your email.", tool_calls=send)
    call = make_llm_call(input_messages=(Message("user", "Send me the invoice"),), output_messages=(output,))
    result = detect(detector, call)
    assert result.flagged and result.score == 0.8
    # Announcing the call is no claim.
    future = Message("assistant", "I'll send the invoice now.", tool_calls=send)
    assert not detect(detector, make_llm_call(output_messages=(future,))).flagged


def test_a_failed_call_retried_with_success_is_forgiven(detector: ToolOutcomeDetector) -> None:
    retry = ToolCall("book_flight", '{"flight": "TP1351", "card": "2"}', "call_2")
    call = agent_call("Your flight is booked.", ("call_1", DECLINED), ("call_2", CONFIRMED), calls=(BOOK, retry))
    result = detect(detector, call)
    assert not result.flagged
    assert [run["outcome"] for run in result.evidence["runs"]] == ["ok", "ok"]


def test_only_the_current_turn_counts(detector: ToolOutcomeDetector) -> None:
    earlier = agent_call("", ("call_1", DECLINED)).input_messages
    later = (
        *earlier,
        Message("assistant", "Sorry, the card was declined."),
        Message("user", "Thanks, what is the baggage allowance?"),
    )
    call = make_llm_call("You may bring one 23 kg bag, which is all set in your booking.", input_messages=later)
    result = detect(detector, call)
    assert result.status is DetectorStatus.SKIPPED and result.summary == "no tool calls in this turn"


@pytest.mark.parametrize("call_id", ["call_1", None])
def test_a_failed_tool_span_fails_its_run_whatever_the_message_says(call_id: str | None) -> None:
    span = ToolSpan("5e11", "book_flight", call_id, failed=True, error="payment service timed out")
    (run,) = tool_runs(agent_call("", ("call_1", '{"status": "submitted"}')).input_messages, (span,))
    assert (run.outcome, run.reason, run.span_id) == (Outcome.FAILED, "payment service timed out", "5e11")


def test_tool_spans_in_the_detector(detector: ToolOutcomeDetector) -> None:
    failed = ToolSpan("5e11", "book_flight", "call_1", failed=True, error="payment service timed out")
    call = replace(agent_call("Your flight is booked.", ("call_1", '{"status": "submitted"}')), tool_spans=(failed,))
    result = detect(detector, call)
    assert result.score == 1.0 and result.evidence["runs"][0]["span_id"] == "5e11"
    # A run whose result the conversation lacks, but whose span ended well, did run.
    ran = ToolSpan("5e12", "book_flight", "call_1")
    assert not detect(detector, replace(agent_call("Your flight is booked."), tool_spans=(ran,))).flagged
    # A failed tool span no request names is a failed run of its own.
    orphan = ToolSpan("5e13", "charge_card", "c9", failed=True, error="card declined")
    plain = make_llm_call("Payment done, your flight is booked.", "Book TP1351")
    result = detect(detector, replace(plain, tool_spans=(orphan,)))
    assert (
        result.score == 1.0 and result.summary == "answer claims charge_card succeeded; the tool returned card declined"
    )


def test_calls_without_tools_or_answer_are_skipped(detector: ToolOutcomeDetector) -> None:
    assert detect(detector, make_llm_call("Paris.", "Capital of France?")).status is DetectorStatus.SKIPPED
    no_text = make_llm_call(input_messages=agent_call("", ("call_1", DECLINED)).input_messages)
    assert detect(detector, no_text).summary == "no answer text to check"


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ('{"error": "Card was declined"}', "error: Card was declined"),
        ('{"success": false, "message": "seat taken"}', "success: false (seat taken)"),
        ('{"status": 503, "detail": "maintenance"}', "status: 503 (maintenance)"),
        ('{"state": "Timed Out"}', "state: Timed Out"),
        ("Traceback (most recent call last):\n  File ...", "Traceback (most recent call last):"),
        ("requests.exceptions.HTTPError: 500 Server Error", "requests.exceptions.HTTPError: 500 Server Error"),
        ("HTTP/1.1 404 Not Found", "HTTP/1.1 404 Not Found"),
        ('{"content": [{"type": "text", "text": "Slot taken"}], "isError": true}', "isError: true (Slot taken)"),
        (
            "An error occurred while running the tool. Please try again. Error: timeout",
            "An error occurred while running the tool. Please try again. Error: timeout",
        ),
        ('{"content": [{"type": "text", "text": "Booked"}], "isError": false}', None),
        ('{"error": null, "results": []}', None),
        ('{"status": "confirmed", "code": 404}', None),  # a product code, not an HTTP status
        ('{"success": true, "errors": []}', None),
        ("Errands for today: buy milk", None),
        ("The error rate fell to 2% after the fix.", None),
    ],
)
def test_failure_reasons(result: str, reason: str | None) -> None:
    assert failure_reason(result) == reason


def test_results_without_ids_pair_in_order_and_unrequested_results_still_count() -> None:
    search, book = ToolCall("search_flights", "{}"), ToolCall("book_flight", "{}")
    messages = [
        Message("user", "book it"),
        Message("assistant", "", tool_calls=(search, book)),
        Message("tool", '{"flights": ["TP1351"]}'),
        Message("tool", DECLINED),
        Message("tool", "Error: quota exceeded", tool_call_id="zz9"),
    ]
    runs = tool_runs(messages)
    assert [(run.name, run.outcome) for run in runs] == [
        ("search_flights", Outcome.OK),
        ("book_flight", Outcome.FAILED),
        ("", Outcome.FAILED),
    ]
    assert runs[2].call_id == "zz9"


def test_configured_failure_statuses(detector: ToolOutcomeDetector) -> None:
    result = ('{"status": "NSF", "message": "insufficient funds"}',)
    call = agent_call("Payment done, your flight is booked.", ("call_1", result[0]))
    assert not detect(detector, call).flagged
    custom = ToolOutcomeDetector(ToolOutcomeConfig(extra_failure_statuses=["nsf"]), threshold=0.5)
    assert detect(custom, call).score == 1.0


@pytest.mark.parametrize(
    ("verb", "forms"),
    [
        ("book", ("booked",)),
        ("cancel", ("canceled", "cancelled")),
        ("create", ("created",)),
        ("send", ("sent",)),
        ("apply", ("applied",)),
        ("ship", ("shipped",)),
    ],
)
def test_past_forms(verb: str, forms: tuple[str, ...]) -> None:
    assert set(forms) <= set(past_forms(verb))
