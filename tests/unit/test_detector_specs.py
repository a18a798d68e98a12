"""Every detector of the registry, real: start, a batch with one poisoned call, render, close.

And what is written about each detector elsewhere agrees with its ``DETECTOR``: its settings
section, its built-in threshold, its rendering in alerts, its structural evidence keys.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from detectors.base import VERDICT_DETECTORS, DetectorResult, DetectorStatus, SampledDetector
from detectors.build import build_sampled, build_suite
from detectors.claims import DETECTOR as CLAIMS
from detectors.claims import ClaimsConfig
from detectors.config import EmbeddingConfig
from detectors.contradiction import DETECTOR as CONTRADICTION
from detectors.grounding import DETECTOR as GROUNDING
from detectors.llm_call import Message, Source, TokenLogprob, ToolCall, ToolDefinition
from detectors.models.embeddings import Embedder, Vectors
from detectors.registry import DETECTORS
from detectors.self_consistency import SelfConsistencyConfig
from detectors.settings import DetectorSettings
from detectors.span_model import SpanModelConfig
from detectors.thresholds import load_thresholds
from pipeline.alerting.alert import DetectorEvidence
from pipeline.alerting.render import evidence_lines
from pipeline.config.content_policy import ContentPolicy, structural_keys
from pipeline.config.sampled import ConsistencySettings, LLMEndpointConfig
from pipeline.config.settings import ConfigError, Settings, load_settings
from pipeline.sampled.llm_client import LLMClient
from tests.calls import make_llm_call
from tests.openai_server import OpenAIServer
from tests.unit import tiny_models

SOURCE = Source("1", "The Eiffel Tower in Paris was built between 1887 and 1889. It is 330 m tall.")
QUESTION = "When was the Eiffel Tower built, and how tall is it?"
CLEAN = make_llm_call("The Eiffel Tower was built between 1887 and 1889 and is 330 m tall.", QUESTION, [SOURCE])
WRONG = make_llm_call(
    "The Eiffel Tower was completed in 1950 and is 500 m tall, the tallest structure in Europe.",
    QUESTION,
    [SOURCE],
    output_messages=(
        Message("assistant", "The Eiffel Tower was completed in 1950 and is 500 m tall."),
        Message("assistant", "", tool_calls=(ToolCall("search_documents", '{"q": "tower"}', "c1"),)),
    ),
    tool_definitions=(ToolDefinition("search_docs"),),
)
# Hostile everything: NUL and U+FFFD (what lone surrogates become before any detector sees them),
# a 5,000-digit run, arguments that are not JSON, NaN logprobs, an empty source.
POISONED = make_llm_call(
    "\ufffd poison \x00 " + "9" * 5000 + " [7] 【" + "é" * 300,
    "\ufffd" * 3,
    [Source("", ""), Source("1", "\x00" * 50)],
    output_messages=(Message("assistant", "\ufffd", tool_calls=(ToolCall("", "{not json", None),)),),
    logprobs=(TokenLogprob("x", math.nan), TokenLogprob("", -math.inf)),
)
BATCH = [CLEAN, WRONG, POISONED]
SPAN_LEVEL = [spec for spec in DETECTORS if spec.kind != "sampled"]
SAMPLED = [spec for spec in DETECTORS if spec.kind == "sampled"]
DROP = ContentPolicy("drop")


def check_result(name: str, result: DetectorResult) -> None:
    """A result a sink can store and a person can read, under every content mode."""
    spec = next(spec for spec in DETECTORS if spec.name == name)
    assert result.detector == name
    assert result.status in set(DetectorStatus)
    assert 0.0 <= result.score <= 1.0
    json.dumps(result.evidence, default=str)
    for evidence in (result.evidence, DROP.evidence(result.evidence)):
        assert all(isinstance(line, str) for line in evidence_lines(as_alert(result, evidence)))
        assert all(isinstance(line, str) for line in spec.render(evidence))
    kept = DROP.evidence(result.evidence)
    for key in spec.structural_keys & set(result.evidence):
        if isinstance(result.evidence[key], str):
            assert kept[key] == result.evidence[key], f"{name}: structural key {key!r} withheld"


def as_alert(result: DetectorResult, evidence: Mapping[str, Any]) -> DetectorEvidence:
    """The result as an alert carries it."""
    return DetectorEvidence(
        result.detector, result.score, result.threshold, result.severity, result.summary, "", evidence
    )


@pytest.fixture(scope="module")
def span_model(tmp_path_factory: pytest.TempPathFactory) -> SpanModelConfig:
    root = tmp_path_factory.mktemp("span_model")
    tiny_models.write_tokenizer(root / "tokenizer.json")
    tiny_models.write_span_model(root / "span.onnx")
    return SpanModelConfig(model_path=root / "span.onnx", tokenizer_path=root / "tokenizer.json")


def test_every_span_level_detector_starts_survives_a_poisoned_call_renders_and_closes(
    model_cache_dir: Path, span_model: SpanModelConfig
) -> None:
    settings = DetectorSettings(embeddings=EmbeddingConfig(cache_dir=model_cache_dir), span_model=span_model)
    suite = build_suite(settings, load_thresholds(), {})
    assert [d.name for d in suite.detectors] == [spec.name for spec in SPAN_LEVEL]  # each built, in list order
    suite.start()
    try:
        runs = suite.run(BATCH)
    finally:
        suite.close()
    by_name = {run.detector: run.results for run in runs}
    assert set(by_name) == {spec.name for spec in SPAN_LEVEL}
    for name, results in by_name.items():
        assert len(results) == len(BATCH)
        for result in results:
            check_result(name, result)
    flagged_wrong = {name for name, results in by_name.items() if results[1].flagged}
    assert {"contradiction", "schema_violation"} <= flagged_wrong
    assert not any(by_name[name][0].flagged for name in ("contradiction", "schema_violation", "grounding"))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def test_every_sampled_detector_judges_a_call_and_an_unusable_answer_then_closes(
    model_cache_dir: Path, server: OpenAIServer
) -> None:
    sampled = ConsistencySettings(self_consistency=SelfConsistencyConfig(samples=2), claims=ClaimsConfig(enabled=True))
    embedder = Embedder(EmbeddingConfig(cache_dir=model_cache_dir))
    claims = json.dumps({"claims": ["The tower was completed in 1950."]})
    verdicts = json.dumps({"verdicts": [{"claim": "The tower was completed in 1950.", "verdict": "contradicted"}]})
    # self_consistency twice (two samples), claims (claims, verdicts); then the same for the poisoned call,
    # whose claims answer is unusable.
    server.answer(WRONG.answer, "Bananas grow in the tropics.", claims, verdicts)
    server.answer(POISONED.answer, POISONED.answer, "not json at all")

    async def run() -> dict[str, list[DetectorResult]]:
        client = LLMClient(LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("test")))
        with ThreadPoolExecutor(1) as pool:

            async def embed(texts: Sequence[str]) -> Vectors:
                return await asyncio.get_running_loop().run_in_executor(pool, embedder.encode, list(texts))

            detectors: list[SampledDetector] = build_sampled(
                DetectorSettings(), sampled, load_thresholds(), client, embed
            )
            assert [d.name for d in detectors] == [spec.name for spec in SAMPLED]
            try:
                results: dict[str, list[DetectorResult]] = {d.name: [] for d in detectors}
                for call in (WRONG, POISONED):
                    for detector in detectors:
                        results[detector.name].append(await detector.evaluate(replace(call, model="gpt-4o-mini")))
                return results
            finally:
                await client.close()

    results = asyncio.run(run())
    for name, judged in results.items():
        for result in judged:
            check_result(name, result)
    assert results["self_consistency"][0].flagged
    assert results["claims"][0].flagged
    assert results["claims"][1].status is DetectorStatus.ERROR


def test_settings_thresholds_and_renderings_agree_with_the_registry(tmp_path: Path) -> None:
    names = [spec.name for spec in DETECTORS]
    assert len(names) == len(set(names))
    # Each detector's settings are the section named like it, in the section of its kind, with
    # its own defaults; nothing else is there but what detectors share.
    settings = Settings()
    for spec in DETECTORS:
        section = settings.consistency if spec.kind == "sampled" else settings.detectors
        assert type(section).model_fields[spec.name].annotation is spec.config
        assert spec.config_in(section) == spec.config()
    shared = {"embeddings", "reading", "verdict_model", "flag_probability"}
    assert set(DetectorSettings.model_fields) == shared | {s.name for s in SPAN_LEVEL}
    assert {s.name for s in SAMPLED} <= set(ConsistencySettings.model_fields)
    # Every detector has a built-in threshold, its descriptor's unless the built-in file calibrated
    # it, and nothing else has one; a file that names none of them inherits every one.
    builtin = load_thresholds()
    assert set(builtin.by_detector) == set(names)
    assert all(0.0 <= spec.threshold <= 1.0 for spec in DETECTORS)
    assert {name: builtin.by_detector[name] for name in names} == {spec.name: spec.threshold for spec in DETECTORS}
    empty_file = tmp_path / "thresholds.yaml"
    empty_file.write_text("version: v1\ndetectors: {}\n")
    assert load_thresholds(empty_file).by_detector == builtin.by_detector
    # Structural keys reach the content policy; every detector renders (maybe nothing) in alerts.
    assert frozenset().union(*(spec.structural_keys for spec in DETECTORS)) <= structural_keys()
    empty: Mapping[str, Any] = {}
    for spec in DETECTORS:
        assert spec.render(empty) == []
        assert evidence_lines(as_alert(DetectorResult(spec.name, "1", 0.0, False, 0.5), empty)) == []
    # Policies name detectors by the same list.
    Settings(policies={"p": {"match": {"service": "s"}, "disabled_detectors": [names[-1]]}})


def test_a_detector_section_reads_from_the_settings_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "halluwatch.yaml"
    config.write_text("detectors:\n  grounding:\n    min_claim_words: 7\nconsistency:\n  claims:\n    max_claims: 3\n")
    monkeypatch.setenv("HALLUWATCH_DETECTORS__CONTRADICTION__MAX_COUNT", "4")
    settings = load_settings(config)
    assert GROUNDING.config_in(settings.detectors).min_claim_words == 7
    assert CONTRADICTION.config_in(settings.detectors).max_count == 4
    assert CLAIMS.config_in(settings.consistency).max_claims == 3
    with pytest.raises(ConfigError, match=r"detectors\.no_such_detector"):
        load_settings(config, detectors={"no_such_detector": {}})


def test_the_verdict_and_the_alert_rules_name_detectors_the_registry_knows() -> None:
    kinds = {spec.name: spec.kind for spec in DETECTORS}
    assert set(VERDICT_DETECTORS) <= {name for name, kind in kinds.items() if kind in ("structural", "content")}
