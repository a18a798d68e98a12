"""The grounding detector on the real bundled MiniLM (int8), exported once per session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from detectors.base import DetectorStatus, run_detector
from detectors.config import EmbeddingConfig, ReadingConfig
from detectors.grounding import GroundingConfig
from detectors.grounding.detector import CONTEXT_SOURCE_ID, GroundingDetector, missing_sources, render_evidence
from detectors.llm_call import LLMCall, Message, Source
from detectors.models.embeddings import Embedder, Vectors
from detectors.text.reading import parts_of
from tests.calls import make_llm_call, whole_words

PARAGRAPH = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower. "
    "Locally nicknamed La dame de fer, it was constructed from 1887 to 1889 as the centerpiece of the "
    "1889 World's Fair. Although initially criticised by some of France's leading artists and intellectuals "
    "for its design, it has since become a global cultural icon of France. The tower is 330 metres tall, "
    "about the same height as an 81-storey building, and the tallest structure in Paris."
)
SUPPORTED = "The tower was constructed between 1887 and 1889 for the World's Fair."
INVENTED = "The tower's elevators were designed by a Swedish company that also builds submarines."


class CountingEmbedder(Embedder):
    """The real embedder, recording each encode call's size and cache flag."""

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        self.calls: list[tuple[int, bool]] = []

    def encode(self, texts: Sequence[str], *, cache: bool = False, keep_tokens: bool = False) -> Vectors:
        self.calls.append((len(texts), cache))
        return super().encode(texts, cache=cache, keep_tokens=keep_tokens)


@pytest.fixture
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CountingEmbedder:
    """A fresh (cold-cache) embedder on the session's exported model."""
    return CountingEmbedder(EmbeddingConfig(cache_dir=tmp_path_factory.getbasetemp() / "models"))


@pytest.fixture
def detector(embedder: CountingEmbedder) -> GroundingDetector:
    # The worst sentence decides: these tests pin per-sentence behaviour (the default is "mean").
    return GroundingDetector(GroundingConfig(aggregate="min"), threshold=0.5, embedder=embedder)


def llm_call(answer: str, sources: Sequence[Source] = (), prompt: str = "") -> LLMCall:
    return make_llm_call(answer, prompt, sources)


def rows(evidence: Any) -> dict[str, dict[str, Any]]:
    return {row["text"]: row for row in evidence["sentences"]}


def test_supported_sentence_scores_higher_than_invented(detector: GroundingDetector) -> None:
    answer = f"{SUPPORTED} {INVENTED}"
    (result,) = detector.detect_batch([llm_call(answer, [Source("1", PARAGRAPH)])])
    by_text = rows(result.evidence)
    assert by_text[SUPPORTED]["similarity"] > by_text[INVENTED]["similarity"] + 0.2
    assert "1887 to 1889" in by_text[SUPPORTED]["best_window"]
    assert result.evidence["min_similarity"] == by_text[INVENTED]["similarity"]
    assert result.score == pytest.approx(1 - by_text[INVENTED]["similarity"], abs=1e-3)
    for span in result.evidence["spans"]:
        assert answer[span["start"] : span["end"]] == span["text"]


def test_missing_cited_source_is_ungrounded_with_severity_4(detector: GroundingDetector) -> None:
    answer = f"{SUPPORTED} [1] It is 330 metres tall and the tallest structure in Paris [7]."
    (result,) = detector.detect_batch([llm_call(answer, [Source("1", PARAGRAPH)])])
    assert result.flagged and result.score == 1.0 and result.severity == 4
    assert result.evidence["missing_source_ids"] == ["7"]
    assert result.summary == "cites source 7, which the call does not include"
    missing = [row for row in result.evidence["sentences"] if row["source_id"] == "7"]
    assert missing == [
        {
            "start": answer.index("It is"),
            "end": len(answer),
            "text": answer[answer.index("It is") :],
            "similarity": 0.0,
            "best_window": None,
            "source_id": "7",
            "grounded": False,
            "cited": True,
        }
    ]


def test_the_missing_sources_headline_reads_plainly() -> None:
    assert missing_sources(["3"]) == "cites source 3, which the call does not include"
    assert missing_sources(["3", "4", "doc-9"]) == "cites sources 3, 4 and doc-9, which the call does not include"


def test_quoted_texts_are_cut_on_word_boundaries_in_evidence_and_alerts(embedder: CountingEmbedder) -> None:
    detector = GroundingDetector(GroundingConfig(aggregate="min", max_evidence_chars=60), 0.5, embedder)
    answer = f"{SUPPORTED} {INVENTED}"
    (result,) = detector.detect_batch([llm_call(answer, [Source("1", PARAGRAPH)])])
    sentences = result.evidence["sentences"]
    assert len(sentences) == 2
    for row in sentences:
        assert row["best_window"].endswith("…") and len(row["best_window"]) <= 60
        assert whole_words(row["best_window"], PARAGRAPH) and whole_words(row["text"], answer)
    invented = next(row for row in sentences if row["text"].startswith("The tower's elevators"))
    assert f'best source window: "{invented["best_window"]}"' in render_evidence(result.evidence)


def test_citations_resolve_by_position_when_ids_are_not_numbers(detector: GroundingDetector) -> None:
    sources = [Source("doc-a", "Bananas are rich in potassium."), Source("doc-b", PARAGRAPH)]
    (result,) = detector.detect_batch([llm_call(f"{SUPPORTED} [2]", sources)])
    (row,) = result.evidence["sentences"]
    assert row["source_id"] == "doc-b" and row["grounded"] and row["cited"]


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (llm_call("", [Source("1", PARAGRAPH)]), "empty answer"),
        (llm_call(SUPPORTED), "no sources"),
        (llm_call(SUPPORTED, [Source("1", "   ")]), "sources are empty"),
        (llm_call("Yes. Is it? Fine, thanks.", [Source("1", PARAGRAPH)]), "no sentence"),
    ],
)
def test_nothing_to_check_is_skipped(detector: GroundingDetector, call: LLMCall, reason: str) -> None:
    (result,) = detector.detect_batch([call])
    assert result.status is DetectorStatus.SKIPPED and not result.flagged and reason in result.summary


def test_without_sources_the_prompt_is_the_context(detector: GroundingDetector) -> None:
    (result,) = detector.detect_batch([llm_call(f"{SUPPORTED} [1]", prompt=PARAGRAPH)])
    (row,) = result.evidence["sentences"]
    assert result.status is DetectorStatus.OK and row["source_id"] == CONTEXT_SOURCE_ID and row["grounded"]


def test_non_english_text(detector: GroundingDetector) -> None:
    sources = [
        Source("1", "埃菲尔铁塔位于法国巴黎。它建于1887年至1889年。"),
        Source("2", "Эйфелева башня находится в Париже."),
    ]
    answer = "埃菲尔铁塔建于1887年至1889年。Эйфелева башня находится в Париже, во Франции."
    (result,) = detector.detect_batch([llm_call(answer, sources)])
    assert result.status is DetectorStatus.OK and result.evidence["checked_sentences"] == 2


def test_huge_context_is_read_up_to_max_source_chars(embedder: CountingEmbedder) -> None:
    config = GroundingConfig(max_source_chars=len(PARAGRAPH) + 200)
    detector = GroundingDetector(config, threshold=0.5, embedder=embedder)
    filler = " ".join(f"Record {i} describes shipment number {i * 7} to warehouse {i % 13}." for i in range(3000))
    (result,) = detector.detect_batch([llm_call(f"{SUPPORTED} {INVENTED}", [Source("1", PARAGRAPH + " " + filler)])])
    assert result.status is DetectorStatus.OK
    read = parts_of((PARAGRAPH + " " + filler)[: config.max_source_chars], ReadingConfig().part_chars)
    assert embedder.texts_encoded == 2 + len(read)  # the claims, and the parts of the source's first characters
    supported = rows(result.evidence)[SUPPORTED]
    assert supported["grounded"] and "1887 to 1889" in supported["best_window"]
    # Nothing past the cut was read: the 3,000 records would need dozens of model windows.
    assert read[-1][1] <= config.max_source_chars and "unread_chars" not in result.evidence


def test_batch_embeds_claims_once_keeps_order_and_caches_windows(
    detector: GroundingDetector, embedder: CountingEmbedder
) -> None:
    calls = [
        llm_call(INVENTED, [Source("1", PARAGRAPH)]),
        llm_call("", [Source("1", PARAGRAPH)]),
        llm_call(SUPPORTED, [Source("1", PARAGRAPH)]),
    ]
    batch = detector.detect_batch(calls)
    # the claims once; every window is pooled from one (cached) token pass over the source
    parts = len(parts_of(PARAGRAPH, ReadingConfig().part_chars))
    assert embedder.calls == [(2, False)] and embedder.texts_encoded == 2 + parts
    assert [r.status for r in batch] == [DetectorStatus.OK, DetectorStatus.SKIPPED, DetectorStatus.OK]
    encoded = embedder.texts_encoded
    again = detector.detect_batch(calls[::-1])
    assert embedder.texts_encoded - encoded == 2  # only the two answer sentences: the source's tokens are cached
    assert [r.score for r in again[::-1]] == pytest.approx([r.score for r in batch], abs=0.02)
    assert batch[0].score > batch[2].score


def test_embedding_failure_becomes_error_results(tmp_path_factory: pytest.TempPathFactory) -> None:
    class Broken(Embedder):
        def encode(self, texts: Sequence[str], *, cache: bool = False, keep_tokens: bool = False) -> Vectors:
            raise RuntimeError("model gone")

    detector = GroundingDetector(GroundingConfig(), 0.5, Broken(EmbeddingConfig()))
    results = run_detector(detector, [llm_call(SUPPORTED, [Source("1", PARAGRAPH)])] * 2)
    assert [r.status for r in results] == [DetectorStatus.ERROR] * 2
    assert "model gone" in results[0].summary


def test_invalid_settings_are_named(embedder: CountingEmbedder) -> None:
    with pytest.raises(ValidationError, match="window_sizes"):
        GroundingConfig(window_sizes=())
    with pytest.raises(ValidationError, match="bogus"):
        GroundingConfig(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="threshold"):
        GroundingDetector(GroundingConfig(), 1.5, embedder)


def test_score_is_in_unit_interval_for_unrelated_text(detector: GroundingDetector) -> None:
    (result,) = detector.detect_batch(
        [llm_call("Quarterly revenue of the bakery grew by nine percent.", [Source("1", "ßßß ∑∑∑ ###")])]
    )
    assert 0.0 <= result.score <= 1.0 and np.isfinite(result.score)


def test_structured_json_answers_are_left_to_the_schema_detector(detector: GroundingDetector) -> None:
    (result,) = detector.detect_batch([llm_call('{"city": "Paris", "height_m": 330}', [Source("1", PARAGRAPH)])])
    assert result.status is DetectorStatus.SKIPPED and "JSON" in result.summary
    (prose,) = detector.detect_batch([llm_call("{Not JSON} but a sentence about the tower.", [Source("1", PARAGRAPH)])])
    assert prose.status is DetectorStatus.OK
    # Cut off at the token limit it is still structured output, not one ungrounded sentence.
    cut = '{"city": "Paris", "height_m": 330, "architect": "Gustave Eif'
    truncated, unfinished_prose = detector.detect_batch(
        [
            make_llm_call(
                cut, "", [Source("1", PARAGRAPH)], output_messages=(Message("assistant", cut, finish_reason="length"),)
            ),
            llm_call(cut, [Source("1", PARAGRAPH)]),
        ]
    )
    assert truncated.status is DetectorStatus.SKIPPED and "JSON" in truncated.summary
    assert unfinished_prose.status is DetectorStatus.OK  # a model that stopped on its own wrote this as text
