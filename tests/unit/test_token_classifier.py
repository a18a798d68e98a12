from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnxruntime as ort
import pytest
from pydantic import ValidationError

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Source
from detectors.models.onnx_models import ModelLoadError
from detectors.span_model import SpanModelConfig
from detectors.span_model.detector import TokenClassifierDetector, build_token_classifier_detector
from tests.calls import make_llm_call
from tests.unit import tiny_models
from tests.unit.tiny_models import probability

CONTEXT = "The tower is in Paris."
QUESTION = "Where is the tower?"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """span.onnx + tokenizer.json, and nli/nli.onnx + nli/tokenizer.json, built here."""
    root = tmp_path_factory.mktemp("models")
    tiny_models.write_tokenizer(root / "tokenizer.json")
    tiny_models.write_span_model(root / "span.onnx")
    tiny_models.write_span_model(root / "blind" / "span.onnx", token_types=False)
    tiny_models.write_tokenizer(root / "nli" / "tokenizer.json")
    tiny_models.write_nli_model(root / "nli" / "nli.onnx")
    return root


Make = Callable[..., TokenClassifierDetector]


@pytest.fixture
def make(models: Path) -> Make:
    def build(threshold: float = 0.5, **config: Any) -> TokenClassifierDetector:
        config.setdefault("model_path", models / "span.onnx")
        config.setdefault("tokenizer_path", models / "tokenizer.json")
        detector = TokenClassifierDetector(SpanModelConfig(**config), threshold)
        detector.start()
        return detector

    return build


@pytest.fixture
def with_nli(models: Path) -> dict[str, Any]:
    return {"nli_model_path": models / "nli" / "nli.onnx"}


@pytest.fixture
def session_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Batch sizes of every ``InferenceSession.run`` call."""
    sizes: list[int] = []
    original = ort.InferenceSession.run

    def counting(self: ort.InferenceSession, output_names: Any, feeds: Any, *args: Any) -> Any:
        sizes.append(len(feeds["input_ids"]))
        return original(self, output_names, feeds, *args)

    monkeypatch.setattr(ort.InferenceSession, "run", counting)
    yield sizes


def make_call(answer: str, context: str = CONTEXT, question: str = QUESTION) -> LLMCall:
    return make_llm_call(answer, question, [Source("1", context)] if context else [])


def detect(detector: TokenClassifierDetector, answer: str, **kwargs: Any) -> DetectorResult:
    (result,) = detector.detect_batch([make_call(answer, **kwargs)])
    return result


def span_texts(result: DetectorResult) -> list[str]:
    return [span["text"] for span in result.evidence["spans"]]


# --- spans and scores ---------------------------------------------------------------


def test_supported_answer_is_not_flagged(make: Make) -> None:
    result = detect(make(), "The tower is in Paris.")
    assert result.status is DetectorStatus.OK
    assert (result.score, result.flagged, result.severity) == (0.0, False, 0)
    assert result.evidence == {
        "spans": [],
        "span_count": 0,
        "aggregation": "max_span",
        "chunks": 1,
        "answer_truncated": False,
        "context_truncated": False,
    }


def test_unsupported_word_becomes_a_span_with_exact_offsets(make: Make) -> None:
    answer = "The tower is in Rome, not Paris."
    result = detect(make(), answer)
    (span,) = result.evidence["spans"]
    assert answer[span["start"] : span["end"]] == span["text"] == "Rome"
    assert span["probability"] == pytest.approx(probability("rom"), abs=1e-4)
    assert span["severity"] == 2 and "nli" not in span
    assert result.score == pytest.approx(probability("rom"))
    assert result.flagged and result.severity == 2
    assert "'Rome'" in result.summary


def test_adjacent_tokens_merge_and_separate_ones_do_not(make: Make) -> None:
    answer = "It is big red and in Berlin."
    result = detect(make(), answer)
    assert span_texts(result) == ["big red", "Berlin"]
    assert result.evidence["span_count"] == 2


def test_a_flagged_subword_marks_its_whole_word(make: Make) -> None:
    # "Rome" tokenizes as "rom" (flagged) + "##e" (not); the span covers the word.
    answer = "It is in Rome."
    (span,) = detect(make(), answer).evidence["spans"]
    assert (span["start"], span["end"], span["text"]) == (9, 13, "Rome")
    assert span["probability"] == pytest.approx(probability("rom"), abs=1e-4)


def test_token_threshold_is_inclusive(make: Make) -> None:
    assert span_texts(detect(make(token_threshold=0.5), "It is maybe in Paris.")) == ["maybe"]
    assert span_texts(detect(make(token_threshold=0.6), "It is maybe in Paris.")) == []


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        ("max_span", probability("rom")),
        ("noisy_or", 1 - (1 - probability("rom")) * (1 - probability("bogus"))),
    ],
)
def test_aggregation(make: Make, aggregation: str, expected: float) -> None:
    result = detect(make(aggregation=aggregation), "It is in Rome and bogus.")
    assert span_texts(result) == ["Rome", "bogus"]
    assert result.score == pytest.approx(expected)
    assert result.evidence["aggregation"] == aggregation


def test_flagged_is_score_at_or_above_the_threshold(make: Make) -> None:
    answer = "It is bogus."
    assert detect(make(threshold=probability("bogus") - 1e-6), answer).flagged
    not_flagged = detect(make(threshold=probability("bogus") + 1e-6), answer)
    assert not not_flagged.flagged and not_flagged.severity == 0 and not_flagged.score > 0


def test_threshold_zero_flags_even_without_spans(make: Make) -> None:
    result = detect(make(threshold=0.0), "The tower is in Paris.")
    assert result.flagged and result.severity == 2 and result.evidence["spans"] == []


def test_question_is_part_of_the_first_segment(make: Make) -> None:
    # "berlin" occurs only in the question: the toy model counts it as support.
    assert span_texts(detect(make(), "It is in Berlin.", question="Is the tower in Berlin?")) == []


def test_model_without_token_type_ids_is_fed_only_its_inputs(make: Make, models: Path) -> None:
    # The context-blind model flags every content word, supported or not.
    result = detect(make(model_path=models / "blind" / "span.onnx"), "It is in Paris.")
    assert span_texts(result) == ["Paris"]


# --- long contexts ------------------------------------------------------------------


def filler(words: int) -> str:
    return " ".join(["lorem", "ipsum"] * (words // 2))


def long_config(**overrides: Any) -> dict[str, Any]:
    return {"max_length_tokens": 32, "min_context_tokens": 12, "stride_tokens": 4, **overrides}


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_word_supported_in_one_window_only_is_supported(make: Make, where: str) -> None:
    context = f"Paris {filler(60)}" if where == "first" else f"{filler(60)} Paris"
    result = detect(make(**long_config()), "It is Paris and Berlin.", context=context, question="")
    assert result.evidence["chunks"] > 2
    assert span_texts(result) == ["Berlin"]
    assert not result.evidence["context_truncated"]


def test_the_last_window_ends_at_the_context_end(make: Make) -> None:
    # 20 - 3 specials - 4 answer tokens: windows of 13 over 16 context tokens start at 0 and 3.
    detector = make(max_length_tokens=20, min_context_tokens=8, stride_tokens=3)
    context = " ".join(["lorem"] * 15 + ["paris"])
    result = detect(detector, "It is Paris.", context=context, question="")
    assert result.evidence["chunks"] == 2
    assert span_texts(result) == []


def test_context_beyond_max_chunks_is_dropped_and_reported(make: Make) -> None:
    context = f"{filler(60)} Paris"
    result = detect(make(**long_config(max_chunks=2)), "It is Paris.", context=context, question="")
    assert result.evidence["chunks"] == 2
    assert result.evidence["context_truncated"]
    assert span_texts(result) == ["Paris"]


def test_answer_longer_than_its_budget_is_truncated(make: Make) -> None:
    # 32 - 3 specials - 12 context tokens leaves 17 answer tokens: "rom", "##e" are the
    # 16th and 17th, "bogus" the 18th.
    answer = "It is in Paris. " * 3 + "Rome bogus."
    result = detect(make(**long_config()), answer, question="")
    assert result.evidence["answer_truncated"]
    assert span_texts(result) == ["Rome"]
    assert answer[result.evidence["spans"][0]["start"] :].startswith("Rome bogus")


# --- batching -----------------------------------------------------------------------


def test_one_session_run_for_all_windows_of_all_calls(make: Make, session_runs: list[int]) -> None:
    detector = make(**long_config(batch_size=64))
    calls = [
        make_call("It is in Rome."),
        make_call("It is Paris.", context=f"{filler(60)} Paris", question=""),
        make_call("It is bogus."),
    ]
    session_runs.clear()
    results = detector.detect_batch(calls)
    assert len(session_runs) == 1
    assert session_runs[0] == sum(result.evidence["chunks"] for result in results) > 3
    assert [span_texts(result) for result in results] == [["Rome"], [], ["bogus"]]


def test_batch_size_caps_sequences_per_run_and_keeps_call_order(make: Make, session_runs: list[int]) -> None:
    detector = make(batch_size=2)
    answers = ["It is in Rome.", "It is bogus.", "It is in Paris.", "It is big and in Berlin, maybe."]
    session_runs.clear()
    results = detector.detect_batch([make_call(answer) for answer in answers])
    assert session_runs == [2, 2]
    assert [span_texts(result) for result in results] == [["Rome"], ["bogus"], [], ["big", "Berlin", "maybe"]]


def test_skipped_calls_do_not_reach_the_model(make: Make, session_runs: list[int]) -> None:
    detector = make()
    session_runs.clear()
    results = detector.detect_batch(
        [make_call("  "), make_call("It is bogus.", context="", question=""), make_call("Rome.")]
    )
    assert [result.status for result in results] == [DetectorStatus.SKIPPED, DetectorStatus.SKIPPED, DetectorStatus.OK]
    assert results[0].summary == "empty answer" and not results[0].flagged
    assert "grounding" in results[1].summary
    assert session_runs == [1]


def test_empty_batch_runs_nothing(make: Make, session_runs: list[int]) -> None:
    detector = make()
    session_runs.clear()
    assert detector.detect_batch([]) == []
    assert session_runs == []


def test_answer_without_tokens_is_skipped(make: Make) -> None:
    result = detect(make(), "\u200b")  # zero-width space: text, but no token
    assert result.status is DetectorStatus.SKIPPED


# --- NLI explainer ------------------------------------------------------------------


def test_nli_drops_entailed_spans_and_marks_contradictions(make: Make, with_nli: dict[str, Any]) -> None:
    answer = "It is in Rome and fine. It is bogus and wrong. It is big."
    result = detect(make(**with_nli), answer)
    spans = result.evidence["spans"]
    assert [(span["text"], span["nli"], span["severity"]) for span in spans] == [
        ("bogus", "contradiction", 4),
        ("big", "neutral", 2),
    ]
    assert result.score == pytest.approx(probability("big"))
    assert result.flagged and result.severity == 4


def test_nli_dropping_every_span_clears_the_flag(make: Make, with_nli: dict[str, Any]) -> None:
    result = detect(make(**with_nli), "It is in Rome, fine.")
    assert result.evidence["spans"] == []
    assert (result.score, result.flagged, result.severity) == (0.0, False, 0)


def test_nli_label_order_is_configurable(make: Make, models: Path) -> None:
    order = ("entailment", "contradiction", "neutral")
    path = tiny_models.write_nli_model(models / "nli_reordered" / "nli.onnx", order)
    detector = make(
        nli_model_path=path,
        nli_tokenizer_path=models / "nli" / "tokenizer.json",
        nli_labels={"entailment": 0, "contradiction": 1, "neutral": 2},
    )
    (span,) = detect(detector, "It is bogus and wrong.").evidence["spans"]
    assert span["nli"] == "contradiction"


def test_nli_runs_all_spans_of_all_calls_in_one_batch(
    make: Make, with_nli: dict[str, Any], session_runs: list[int]
) -> None:
    detector = make(**with_nli)
    session_runs.clear()
    detector.detect_batch([make_call("It is in Rome and bogus."), make_call("It is big."), make_call("Paris.")])
    assert session_runs == [3, 3]  # three windows, then three spans


# --- construction -------------------------------------------------------------------


def test_no_model_path_means_no_detector() -> None:
    assert build_token_classifier_detector(SpanModelConfig(), 0.5) is None


def test_build_returns_a_detector_with_the_tokenizer_beside_the_model(models: Path) -> None:
    detector = build_token_classifier_detector(SpanModelConfig(model_path=models / "span.onnx"), 0.5)
    assert isinstance(detector, TokenClassifierDetector) and detector.name == "span_model"


def test_missing_model_names_the_path_when_started(models: Path, tmp_path: Path) -> None:
    missing = tmp_path / "absent.onnx"
    config = SpanModelConfig(model_path=missing, tokenizer_path=models / "tokenizer.json")
    detector = TokenClassifierDetector(config, 0.5)
    with pytest.raises(ModelLoadError, match=str(missing)):
        detector.start()


def test_missing_tokenizer_names_the_path(models: Path, tmp_path: Path) -> None:
    model = tiny_models.write_span_model(tmp_path / "span.onnx")  # no tokenizer.json beside it
    with pytest.raises(ModelLoadError, match=str(tmp_path / "tokenizer.json")):
        TokenClassifierDetector(SpanModelConfig(model_path=model), 0.5).start()


def test_close_releases_the_models_and_a_later_batch_loads_them_again(make: Make) -> None:
    detector = make()
    first = detector.detect_batch([make_call("It is in Rome.")])
    detector.close()
    assert detector._models is None
    assert detector.detect_batch([make_call("It is in Rome.")]) == first


def test_missing_nli_model_names_the_path(make: Make, tmp_path: Path, models: Path) -> None:
    missing = tmp_path / "nli.onnx"
    with pytest.raises(ModelLoadError, match=str(missing)):
        make(nli_model_path=missing, nli_tokenizer_path=models / "tokenizer.json")


def test_wrong_kind_of_model_is_rejected(make: Make, models: Path) -> None:
    with pytest.raises(ModelLoadError, match="expected rank 3"):
        make(model_path=models / "nli" / "nli.onnx")
    with pytest.raises(ModelLoadError, match="at least 3 labels"):
        make(hallucination_label_index=2)


def test_direct_construction_without_a_model_is_an_error() -> None:
    with pytest.raises(ValueError, match="model_path"):
        TokenClassifierDetector(SpanModelConfig(), 0.5)


def test_threshold_out_of_range(make: Make) -> None:
    with pytest.raises(ValueError, match="threshold"):
        make(threshold=1.5)


def test_max_length_must_leave_room_for_the_answer(make: Make) -> None:
    with pytest.raises(ValueError, match="max_length_tokens=16"):
        make(max_length_tokens=16, min_context_tokens=13, stride_tokens=0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stride_tokens": 128, "min_context_tokens": 128}, "stride_tokens"),
        ({"min_context_tokens": 512}, "min_context_tokens"),
        ({"nli_labels": {"contradiction": 1}}, "distinct"),
        ({"aggregation": "mean"}, "aggregation"),
        ({"max_length": 512}, "max_length"),
    ],
)
def test_config_validation_names_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SpanModelConfig(**fields)
