"""Record one agent framework or provider SDK under its own instrumentation; write OTLP bytes.

Usage: ``python -m tests.instrumented.run_frameworks SETUP OUTPUT_DIR``, in the recording
venv (``make record-instrumentations``; never in CI: the libraries are not halluwatch's
dependencies).  Each setup runs in its own process, since instrumentors patch their library
for good.  The library plays the five scenarios of :mod:`tests.instrumented.scripted_model`
against the local scripted model server, each scenario as one trace under an application
span ``chat <scenario>``.  ``OUTPUT_DIR`` gets ``spans.bin`` (``ExportTraceServiceRequest``),
``logs.bin`` (``ExportLogsServiceRequest``, when the library logged anything) and
``versions.json`` (the versions of the packages that made the recording).

Where a library decides by itself what to do with a call to an undefined tool or a wrongly
typed argument (an error sent back to the model, an exception), it does so; the scenario's
exception, if any, is part of the recording (the app span ends in error).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tests.instrumented.scripted_model import (
    BOOK_TABLE_SCHEMA,
    BOOKING_ERROR,
    BOOKING_INSTRUCTIONS,
    CONTEXT,
    QUESTIONS,
    SYSTEM_PROMPT,
    ScriptedModelServer,
    book_table,
)

RAG_SCENARIOS = ("faithful", "contradicted")
AGENT_SCENARIOS = ("failed_tool", "undefined_tool", "wrong_type")
BOOK_TABLE_DESCRIPTION = "Reserve a table at the restaurant."
# What each setup needs of the environment before its library is imported.
ENVIRONMENT: dict[str, dict[str, str]] = {
    "google_genai_auto": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
    },
    "litellm": {"USE_OTEL_LITELLM_REQUEST_SPAN": "true"},
}
ENVIRONMENT["google_genai_manual"] = ENVIRONMENT["google_genai_auto"]
# Content only in log records (gen_ai.client.inference.operation.details), none on the spans.
ENVIRONMENT["google_genai_events"] = ENVIRONMENT["google_genai_auto"] | {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"
}

Play = Callable[[str, str], None]  # (scenario, question) -> None, one call of the app


def run_tool(name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
    """What an app's own tool loop does with a call: the result as text, and whether it is an error."""
    if name != "book_table":
        return f"Error: unknown tool {name!r}", True
    return json.dumps(book_table(**arguments)), False


# --- the setups ---------------------------------------------------------------------------------


def pydantic_ai(url: str) -> Play:
    """pydantic-ai's own instrumentation (``Agent.instrument_all()``), OpenAI chat model."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    Agent.instrument_all()
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="test-key"))
    rag = Agent(model, instructions=SYSTEM_PROMPT)
    concierge = Agent(model, instructions=BOOKING_INSTRUCTIONS, tools=[book_table])
    return lambda scenario, question: (rag if scenario in RAG_SCENARIOS else concierge).run_sync(question) and None


def llama_index(url: str) -> Play:
    """LlamaIndex under OpenInference: a query engine over a vector index, and a ``FunctionAgent``."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument()
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model="gpt-4o-mini", api_base=f"{url}/v1", api_key="test-key", max_retries=0)
    index = VectorStoreIndex.from_documents([Document(text=CONTEXT)], embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=llm)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(book_table)], llm=llm, system_prompt=BOOKING_INSTRUCTIONS)

    def play(scenario: str, question: str) -> None:
        if scenario in RAG_SCENARIOS:
            engine.query(question)
        else:
            asyncio.run(_run_agent(agent, question))

    return play


async def _run_agent(agent: Any, question: str) -> Any:
    return await agent.run(question)  # the workflow needs the running loop when it starts


def openai_agents(url: str) -> Play:
    """The OpenAI Agents SDK under OpenInference, on its default (Responses) API."""
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument()
    import agents
    from openai import AsyncOpenAI

    agents.set_default_openai_client(AsyncOpenAI(base_url=f"{url}/v1", api_key="test-key", max_retries=0), False)
    rag = agents.Agent(name="docs", instructions=SYSTEM_PROMPT, model="gpt-4o-mini")
    concierge = agents.Agent(
        name="concierge",
        instructions=BOOKING_INSTRUCTIONS,
        model="gpt-4o-mini",
        tools=[agents.function_tool(book_table)],
    )
    return lambda scenario, question: (
        agents.Runner.run_sync(rag if scenario in RAG_SCENARIOS else concierge, question) and None
    )


def anthropic_openinference(url: str) -> Play:
    """The ``anthropic`` client under OpenInference, with the app's own tool loop."""
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument()
    return _anthropic_app(url)


def anthropic_openllmetry(url: str) -> Play:
    """The ``anthropic`` client under OpenLLMetry (``opentelemetry-instrumentation-anthropic``)."""
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument()
    return _anthropic_app(url)


def _anthropic_app(url: str) -> Play:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="test-key", max_retries=0)
    tools: Any = [{"name": "book_table", "description": BOOK_TABLE_DESCRIPTION, "input_schema": BOOK_TABLE_SCHEMA}]

    def play(scenario: str, question: str) -> None:
        if scenario in RAG_SCENARIOS:
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=300,
                system=SYSTEM_PROMPT,
                messages=[{"role": "user", "content": question}],
            )
            return
        messages: list[Any] = [{"role": "user", "content": question}]
        while True:
            reply = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=300, system=BOOKING_INSTRUCTIONS, messages=messages, tools=tools
            )
            if reply.stop_reason != "tool_use":
                return
            messages.append({"role": "assistant", "content": [block.model_dump() for block in reply.content]})
            results = []
            for block in reply.content:
                if block.type == "tool_use":
                    text, is_error = run_tool(block.name, block.input)
                    results.append(
                        {"type": "tool_result", "tool_use_id": block.id, "content": text, "is_error": is_error}
                    )
            messages.append({"role": "user", "content": results})

    return play


def google_genai_auto(url: str) -> Play:
    """Google GenAI with automatic function calling (the SDK runs the tool loop), OTel's instrumentation."""
    client, types = _google_genai(url)

    def play(scenario: str, question: str) -> None:
        tools = [] if scenario in RAG_SCENARIOS else [book_table]
        instructions = SYSTEM_PROMPT if scenario in RAG_SCENARIOS else BOOKING_INSTRUCTIONS
        config = types.GenerateContentConfig(system_instruction=instructions, tools=tools)
        client.models.generate_content(model="gemini-2.5-flash", contents=question, config=config)

    return play


def google_genai_manual(url: str) -> Play:
    """Google GenAI with declared functions and the app's own tool loop, OTel's instrumentation."""
    client, types = _google_genai(url)
    declaration = types.FunctionDeclaration(
        name="book_table", description=BOOK_TABLE_DESCRIPTION, parameters_json_schema=BOOK_TABLE_SCHEMA
    )

    def play(scenario: str, question: str) -> None:
        if scenario in RAG_SCENARIOS:
            config = types.GenerateContentConfig(system_instruction=SYSTEM_PROMPT)
            client.models.generate_content(model="gemini-2.5-flash", contents=question, config=config)
            return
        config = types.GenerateContentConfig(
            system_instruction=BOOKING_INSTRUCTIONS,
            tools=[types.Tool(function_declarations=[declaration])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        contents: list[Any] = [types.Content(role="user", parts=[types.Part.from_text(text=question)])]
        while True:
            reply = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
            calls = reply.function_calls or []
            if not calls:
                return
            contents.append(reply.candidates[0].content)
            parts = []
            for call in calls:
                text, is_error = run_tool(call.name, call.args or {})
                response = {"error": text} if is_error else json.loads(text)
                parts.append(types.Part.from_function_response(name=call.name, response=response))
            contents.append(types.Content(role="user", parts=parts))

    return play


def _google_genai(url: str) -> tuple[Any, Any]:
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    GoogleGenAiSdkInstrumentor().instrument()
    from google import genai
    from google.genai import types

    return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=url)), types


def litellm(url: str) -> Play:
    """LiteLLM's OpenTelemetry callback (``callbacks=["otel"]``), with the app's own tool loop."""
    import litellm as library
    from litellm.litellm_core_utils.thread_pool_executor import executor

    library.callbacks = ["otel"]
    tools: Any = [
        {
            "type": "function",
            "function": {"name": "book_table", "description": BOOK_TABLE_DESCRIPTION, "parameters": BOOK_TABLE_SCHEMA},
        }
    ]
    options = {"model": "openai/gpt-4o-mini", "api_base": f"{url}/v1", "api_key": "test-key"}

    def play(scenario: str, question: str) -> None:
        converse(scenario, question)
        executor.submit(lambda: None).result()  # the callback logs the last call in this pool: let it

    def converse(scenario: str, question: str) -> None:
        if scenario in RAG_SCENARIOS:
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
            library.completion(messages=messages, **options)
            return
        messages = [{"role": "system", "content": BOOKING_INSTRUCTIONS}, {"role": "user", "content": question}]
        while True:
            reply = library.completion(messages=messages, tools=tools, **options)
            message = reply.choices[0].message
            if not message.tool_calls:
                return
            messages.append(message.model_dump())
            for call in message.tool_calls:
                text, _ = run_tool(call.function.name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})

    return play


SETUPS: dict[str, tuple[Callable[[str], Play], tuple[str, ...]]] = {
    "pydantic_ai": (pydantic_ai, ("pydantic-ai-slim", "openai")),
    "llama_index": (
        llama_index,
        ("llama-index-core", "llama-index-llms-openai", "openinference-instrumentation-llama-index"),
    ),
    "openai_agents": (openai_agents, ("openai-agents", "openai", "openinference-instrumentation-openai-agents")),
    "anthropic_openinference": (anthropic_openinference, ("anthropic", "openinference-instrumentation-anthropic")),
    "anthropic_openllmetry": (anthropic_openllmetry, ("anthropic", "opentelemetry-instrumentation-anthropic")),
    "google_genai_auto": (google_genai_auto, ("google-genai", "opentelemetry-instrumentation-google-genai")),
    "google_genai_manual": (google_genai_manual, ("google-genai", "opentelemetry-instrumentation-google-genai")),
    "google_genai_events": (google_genai_manual, ("google-genai", "opentelemetry-instrumentation-google-genai")),
    "litellm": (litellm, ("litellm", "openai")),
}


# --- recording ----------------------------------------------------------------------------------


@contextmanager
def _recording(setup: str, output: Path) -> Iterator[Any]:
    """Global tracer and logger providers into memory; on exit, the encoded spans and logs in ``output``."""
    from opentelemetry import trace
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    resource = Resource.create({"service.name": f"app-{setup.replace('_', '-')}"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    set_logger_provider(logger_provider)
    yield tracer_provider.get_tracer("app")
    tracer_provider.force_flush()
    logger_provider.force_flush()
    output.mkdir(parents=True, exist_ok=True)
    (output / "spans.bin").write_bytes(encode_spans(spans.get_finished_spans()).SerializeToString())
    finished_logs = logs.get_finished_logs()
    if finished_logs:
        (output / "logs.bin").write_bytes(encode_logs(finished_logs).SerializeToString())


VERCEL_DIR = Path(__file__).with_name("vercel")


def vercel_ai(output: Path) -> None:
    """The Vercel AI SDK (node, ``experimental_telemetry``): ``vercel/record.mjs`` plays the scenarios."""
    script = {
        "questions": QUESTIONS,
        "rag_scenarios": RAG_SCENARIOS,
        "system_prompt": SYSTEM_PROMPT,
        "booking_instructions": BOOKING_INSTRUCTIONS,
        "book_table_description": BOOK_TABLE_DESCRIPTION,
        "book_table_schema": BOOK_TABLE_SCHEMA,
        "booking_error": BOOKING_ERROR,
    }
    output.mkdir(parents=True, exist_ok=True)
    with ScriptedModelServer() as server:
        subprocess.run(
            ["node", "record.mjs", server.url, json.dumps(script), str((output / "spans.bin").resolve())],
            cwd=VERCEL_DIR,
            check=True,
        )
    lock = json.loads((VERCEL_DIR / "package-lock.json").read_text())["packages"]
    versions = {name: lock[f"node_modules/{name}"]["version"] for name in ("ai", "@ai-sdk/openai")}
    _write_versions(output, "vercel_ai", versions)


def _write_versions(output: Path, setup: str, versions: Mapping[str, str]) -> None:
    (output / "versions.json").write_text(json.dumps({"setup": setup, "versions": versions}, indent=2) + "\n")


def main(setup: str, output: Path) -> None:
    """Play the five scenarios under ``setup``'s instrumentation; write spans, logs and versions."""
    if setup == "vercel_ai":
        vercel_ai(output)
        return
    make_app, packages = SETUPS[setup]
    os.environ.update(ENVIRONMENT.get(setup, {}))
    with ScriptedModelServer() as server, _recording(setup, output) as tracer:
        play = make_app(server.url)
        for scenario, question in QUESTIONS.items():
            with tracer.start_as_current_span(f"chat {scenario}"):
                try:
                    play(scenario, question)
                except Exception as exc:  # the library's own verdict on the scenario; recorded on the app span
                    print(f"{setup} {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
    _write_versions(output, setup, {package: version(package) for package in packages})


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
