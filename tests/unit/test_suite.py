from __future__ import annotations

from collections.abc import Sequence

from detectors.base import Detector, DetectorResult, DetectorStatus, SentinelVerdict
from detectors.llm_call import LLMCall, Source
from detectors.suite import DetectorSuite
from tests.calls import make_llm_call


class Recording(Detector):
    version = "1"

    def __init__(self, name: str) -> None:
        self.name = name
        self.batches: list[list[str]] = []

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        self.batches.append([c.span_id for c in calls])
        return [DetectorResult(self.name, self.version, 1.0, True, 0.5) for _ in calls]


class PromptSentinel(Detector):
    """Factual when the prompt ends with '?'; context when the prompt has more than one line."""

    name = "sentinel"
    version = "1"

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        return [
            DetectorResult(
                self.name,
                self.version,
                0.0,
                False,
                0.5,
                sentinel=SentinelVerdict(
                    label="factual" if c.prompt.endswith("?") else "creative",
                    confidence=0.9,
                    needs_fact_check=c.prompt.endswith("?"),
                    has_context="\n" in c.prompt,
                ),
            )
            for c in calls
        ]


def _call(span_id: str, prompt: str, sources: tuple[Source, ...] = ()) -> LLMCall:
    return make_llm_call("x", prompt, sources, span_id=span_id)


def test_content_detectors_see_only_calls_that_need_checking_in_one_batch():
    structural, content = Recording("schema"), Recording("grounding")
    suite = DetectorSuite([structural], [content], PromptSentinel())
    calls = [
        _call("1", "It was built in 1889.\nWhen was it built?"),
        _call("2", "Write a poem"),
        _call("3", "Write a poem about these docs", (Source("d", "doc text"),)),
    ]
    runs = {run.detector: run.results for run in suite.run(calls)}
    assert structural.batches == [["1", "2", "3"]]
    assert content.batches == [["1", "3"]]  # the poem without sources is skipped, in one batch
    assert [r.status for r in runs["grounding"]] == [DetectorStatus.OK, DetectorStatus.SKIPPED, DetectorStatus.OK]
    assert "creative" in runs["grounding"][1].summary
    assert list(runs) == ["schema", "sentinel", "grounding"]


def test_without_sentinel_every_call_is_checked_and_empty_batches_do_nothing():
    content = Recording("grounding")
    suite = DetectorSuite([], [content])
    assert suite.run([]) == []
    runs = suite.run([_call("1", "Write a poem")])
    assert content.batches == [["1"]] and runs[0].results[0].flagged


class ContextFree(Recording):
    needs_context = False


def test_a_bare_factual_question_gets_only_context_free_detectors():
    grounding, confidence = Recording("grounding"), ContextFree("confidence")
    suite = DetectorSuite([], [grounding, confidence], PromptSentinel())
    calls = [
        _call("1", "When was the tower built?"),
        _call("2", "The tower was built in 1889 and is 330 m tall.\nWhen was it built?"),
        _call("3", "Write a poem"),
    ]
    runs = {run.detector: run.results for run in suite.run(calls)}
    assert grounding.batches == [["2"]]
    assert confidence.batches == [["1", "2"]]
    assert "no context beyond the question" in runs["grounding"][0].summary
    assert "creative prompt" in runs["grounding"][2].summary


class Started(Recording):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.starts = self.closes = 0

    def start(self) -> None:
        self.starts += 1

    def close(self) -> None:
        self.closes += 1


def test_the_first_run_starts_every_detector_once_and_close_lets_the_next_run_start_again():
    structural, content = Started("schema"), Started("grounding")
    suite = DetectorSuite([structural], [content])
    suite.run([_call("1", "Write a poem")])
    suite.run([_call("2", "Write a poem")])
    assert (structural.starts, content.starts) == (1, 1)
    suite.close()
    suite.run([_call("3", "Write a poem")])
    assert (structural.starts, structural.closes) == (2, 1)


def test_each_detectors_time_goes_to_the_observer():
    timings: list[tuple[str, float]] = []
    suite = DetectorSuite([Recording("schema")], [Recording("grounding")], on_timing=lambda *t: timings.append(t))
    suite.run([_call("1", "Write a poem")])
    assert [name for name, _ in timings] == ["schema", "grounding"]
    assert all(seconds >= 0.0 for _, seconds in timings)
