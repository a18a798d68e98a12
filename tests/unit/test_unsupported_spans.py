"""The unsupported-spans detector on the real MiniLM and the shipped model file."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from detectors.base import DetectorStatus
from detectors.config import EmbeddingConfig, ReadingConfig
from detectors.grounding import GroundingConfig
from detectors.grounding.detector import GroundingDetector
from detectors.llm_call import Message, Source
from detectors.models.embeddings import Embedder
from detectors.support_features import WORD_FEATURES
from detectors.text.reading import parts_of
from detectors.unsupported_spans import UnsupportedSpansConfig
from detectors.unsupported_spans.detector import (
    SupportModelError,
    UnsupportedSpansDetector,
    load_support_model,
    render_evidence,
    support_texts,
)
from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.render import evidence_lines, pagerduty_event, slack_blocks
from pipeline.config.alerting import AlertingSettings
from tests.calls import demo_call, make_llm_call, whole_words

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It was built from "
    "1887 to 1889 as the entrance to the 1889 World's Fair, and is 330 metres tall."
)
FAITHFUL = "The Eiffel Tower in Paris was built from 1887 to 1889 and is 330 metres tall."
INVENTED = "The Eiffel Tower in Paris was built in 1950 by Gustave Klimt and is 500 metres tall."


@pytest.fixture
def detector(tmp_path_factory: pytest.TempPathFactory) -> UnsupportedSpansDetector:
    embedder = Embedder(EmbeddingConfig(cache_dir=tmp_path_factory.getbasetemp() / "models"))
    detector = UnsupportedSpansDetector(UnsupportedSpansConfig(), 0.5, embedder)
    detector.start()
    return detector


def call(answer: str, context: str = EIFFEL, question: str = "Tell me about the Eiffel Tower."):
    return make_llm_call(answer, question, [Source("doc-1", context)])


def test_invented_facts_score_higher_and_are_pointed_at_with_offsets(detector: UnsupportedSpansDetector):
    faithful, invented = detector.detect_batch([call(FAITHFUL), call(INVENTED)])
    assert faithful.status is DetectorStatus.OK and invented.status is DetectorStatus.OK
    assert invented.score > faithful.score
    spans = invented.evidence["spans"]
    flagged_text = " ".join(INVENTED[s["start"] : s["end"]] for s in spans)
    assert "1950" in flagged_text and "Klimt" in flagged_text
    assert all(s["text"] == INVENTED[s["start"] : s["end"]] for s in spans)  # offsets into the answer
    assert all(s["source_id"] == "doc-1" and s["source_text"] in EIFFEL for s in spans)
    assert not any("Eiffel" in s["text"] for s in spans)


def test_nothing_to_compare_is_skipped(detector: UnsupportedSpansDetector):
    structured = call('{"name": "Eiffel Tower", "height_m": 500}')
    empty_answer, no_context, json_answer = detector.detect_batch([call(""), make_llm_call("It is tall."), structured])
    assert empty_answer.status is DetectorStatus.SKIPPED and no_context.status is DetectorStatus.SKIPPED
    assert json_answer.status is DetectorStatus.SKIPPED and "JSON" in json_answer.summary
    cut = '{"name": "Eiffel Tower", "height_m": 500, "architect": "Gustave Eif'
    (truncated,) = detector.detect_batch(
        [
            make_llm_call(
                cut, "", [Source("doc-1", EIFFEL)], output_messages=(Message("assistant", cut, finish_reason="length"),)
            )
        ]
    )
    assert truncated.status is DetectorStatus.SKIPPED and "JSON" in truncated.summary  # its keys are not claims


def test_close_releases_the_model_and_start_reads_it_again(detector: UnsupportedSpansDetector):
    detector.close()
    assert detector.detect_batch([call(FAITHFUL)])[0].status is DetectorStatus.OK


def test_a_bad_model_file_is_named(tmp_path: Path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"version": "x", "span_thresholds": {}, "word_models": {}, "call_model": {}}))
    with pytest.raises(SupportModelError, match=re.escape(str(path))):
        load_support_model(path)
    with pytest.raises(SupportModelError, match=r"absent\.json"):
        load_support_model(tmp_path / "absent.json")


def test_the_shipped_model_records_how_it_was_made():
    shipped = json.loads(
        Path(__file__).resolve().parents[2].joinpath("detectors/data/unsupported_spans.json").read_text()
    )
    training = shipped["training"]
    assert set(training["data"]) == {"ragtruth", "begin", "faithdial_audit", "wice"}
    assert all(len(d["sha256"]) == 64 and d["held_out"] > 0 for d in training["data"].values())
    assert training["metrics"]["ragtruth"]["held_out"]["auroc"] > 0.7
    assert load_support_model(None).version == shipped["version"]


def test_grounding_and_unsupported_spans_share_one_pass_over_the_answer(tmp_path_factory: pytest.TempPathFactory):
    embedder = Embedder(EmbeddingConfig(cache_dir=tmp_path_factory.getbasetemp() / "models"))
    grounding = GroundingDetector(GroundingConfig(), 0.5, embedder)
    spans = UnsupportedSpansDetector(UnsupportedSpansConfig(), 0.5, embedder)
    calls = [call(INVENTED), call(FAITHFUL + " " + INVENTED)]
    grounding.detect_batch(calls)
    before = embedder.texts_encoded
    results = spans.detect_batch(calls)
    assert embedder.texts_encoded - before == 1  # the question alone: grounding's windows came from the source's pass
    assert "1950" in " ".join(s["text"] for s in results[0].evidence["spans"])


def test_a_long_source_is_read_where_the_answer_is_about_and_the_rest_is_stated(
    tmp_path_factory: pytest.TempPathFactory,
):
    embedder = Embedder(EmbeddingConfig(cache_dir=tmp_path_factory.getbasetemp() / "models"))
    grounding = GroundingDetector(GroundingConfig(), 0.5, embedder)
    spans = UnsupportedSpansDetector(UnsupportedSpansConfig(), 0.5, embedder)
    filler = " ".join(
        f"Shipment {i} left warehouse {i % 13} on a rainy morning with {i * 7} crates." for i in range(150)
    )
    source = filler + " " + EIFFEL + " " + filler
    calls = [call(INVENTED, context=source)]
    (grounded,) = grounding.detect_batch(calls)
    read_by_grounding = embedder.texts_encoded
    (result,) = spans.detect_batch(calls)
    assert embedder.texts_encoded - read_by_grounding == 1  # the question: the same parts of the source, once
    parts = len(parts_of(source, ReadingConfig().part_chars))
    assert read_by_grounding - 1 < parts / 2  # (one: the answer's sentence)
    for evidence in (grounded.evidence, result.evidence):
        assert 0 < evidence["read_chars"] < 14_000 and evidence["read_chars"] + evidence["unread_chars"] == len(source)
    assert "1950" in " ".join(s["text"] for s in result.evidence["spans"])  # the part about the tower was read
    assert any("not read by the model" in line for line in render_evidence(result.evidence))
    (unasked,) = spans.detect_batch([call(INVENTED, context=source, question="")])  # no question to read
    assert unasked.status is DetectorStatus.OK and unasked.evidence["unread_chars"] > 0


def test_list_markers_are_not_words_of_a_claim(detector: UnsupportedSpansDetector):
    (result,) = detector.detect_batch([call(f"1. {FAITHFUL}\n2. {INVENTED}")])
    flagged = [s["text"] for s in result.evidence["spans"]]
    assert flagged and not any(text in {"1", "2"} for text in flagged)


def test_answers_written_from_json_records_are_read_by_the_json_model(detector: UnsupportedSpansDetector):
    record = json.dumps({"name": "Eiffel Tower", "city": "Paris", "built": "1887-1889", "height_m": 330})
    from_record, from_prose = detector.detect_batch([call(INVENTED, context=record), call(INVENTED)])
    assert from_record.evidence["support"] == "json" and from_prose.evidence["support"] == "prose"
    assert "1950" in " ".join(s["text"] for s in from_record.evidence["spans"])


def test_citation_markers_are_not_words_of_a_claim(detector: UnsupportedSpansDetector):
    cited = INVENTED.replace(" and is", " [1] and is").replace("tall.", "tall [2].")
    (result,) = detector.detect_batch([call(cited)])
    spans = [s["text"] for s in result.evidence["spans"]]
    assert "1950" in " ".join(spans)
    # A span may run across a marker, but never starts or ends on one (it was "... company [3").
    assert not any(re.match(r"\W*\d\b", text) or re.search(r"\[\d$", text) for text in spans), spans


def test_values_are_marked_stated_or_unstated_after_normalisation(detector: UnsupportedSpansDetector):
    hours = json.dumps({"name": "Del Pueblo Cafe", "hours": {"Monday": "9:0-21:0"}, "stars": 4.5})
    answer = "Del Pueblo Cafe is open from 9 am to 9 pm on Mondays and has 3.5 stars."
    support = detector.support(call(answer, context=hours))
    assert support is not None
    stated = support.features[:, WORD_FEATURES.index("value_stated")] == 1
    unstated = support.features[:, WORD_FEATURES.index("value_unstated")] == 1
    words = [w.text for w in support.words]
    assert [w for w, s in zip(words, stated, strict=True) if s] == ["9", "am", "to", "9", "pm"]
    assert [w for w, u in zip(words, unstated, strict=True) if u] == ["3.5"]


def test_a_flagged_value_is_shown_beside_the_source_sentence_stating_its_kind(detector: UnsupportedSpansDetector):
    # The demo's travel-guide answer: its "1950" once matched "1930" in the height sentence, cut mid-word.
    travel = demo_call("completed in 1950")
    (result,) = detector.detect_batch([travel])
    spans = result.evidence["spans"]
    (year,) = [span for span in spans if "1950" in span["text"]]
    assert "built between 1887 and 1889" in year["source_text"]
    # The model flags the whole invented clause as one span; asked alone, the height meets its sentence.
    height_only = replace(travel, output_messages=(Message("assistant", "The Eiffel Tower is 500 m tall."),))
    (height,) = [span for span in detector.detect_batch([height_only])[0].evidence["spans"] if "500" in span["text"]]
    assert "330 m tall" in height["source_text"]
    support = support_texts(travel, UnsupportedSpansConfig().max_support_chars)
    texts = dict(zip(support.ids, support.texts, strict=True))
    for span in spans:
        source = texts[span["source_id"]]
        assert whole_words(span["source_text"], source), span["source_text"]
        assert span["source_text"].endswith(".")  # the whole sentence


def test_a_word_is_shown_beside_the_whole_sentence_of_its_best_match(detector: UnsupportedSpansDetector):
    filler = " ".join(f"Record {n} lists a shipment to warehouse {n}." for n in range(40))
    (result,) = detector.detect_batch([call(INVENTED, context=f"{filler} {EIFFEL} {filler}")])
    (klimt,) = [span for span in result.evidence["spans"] if "Klimt" in span["text"]]
    assert klimt["source_text"].endswith(".") and whole_words(klimt["source_text"], f"{filler} {EIFFEL}")


def test_alerts_quote_the_top_spans_beside_their_source_passage(detector: UnsupportedSpansDetector):
    (result,) = detector.detect_batch([demo_call("completed in 1950")])
    finding = DetectorEvidence("unsupported_spans", result.score, 0.6, 2, result.summary, evidence=result.evidence)
    alert = Alert("0" * 32, "contradiction-and-spans", "page", 4, "travel-guide", "gpt-4o-mini", "chat", (finding,),
                  datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    lines = evidence_lines(finding)
    said = [line for line in lines if line.startswith("unsupported ") and "1950" in line.split("; closest")[0]]
    assert said and "1887 and 1889" in said[0], lines
    slack = json.dumps(slack_blocks(alert, AlertingSettings()), ensure_ascii=False)
    pagerduty = pagerduty_event(alert, AlertingSettings(), "key")["payload"]["custom_details"]["evidence"]
    assert all(line.replace('"', '\\"') in slack for line in lines) and pagerduty["unsupported_spans"][1:] == lines
