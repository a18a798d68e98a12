// The Vercel AI SDK's experimental_telemetry spans of the five scenarios, as OTLP protobuf bytes.
//
// Usage: node record.mjs BASE_URL SCRIPT_JSON OUTPUT_FILE, run by
// `python -m tests.instrumented.run_frameworks vercel_ai OUTPUT_DIR`, which starts the scripted
// model server and passes the scenarios (questions, prompts, the book_table tool) as SCRIPT_JSON.
import { writeFileSync } from "node:fs";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";

const [baseUrl, scriptJson, output] = process.argv.slice(2);
const script = JSON.parse(scriptJson);

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({
  resource: resourceFromAttributes({ "service.name": "app-vercel-ai" }),
  spanProcessors: [new SimpleSpanProcessor({ exporter })],
});
const tracer = provider.getTracer("app");
const telemetry = { isEnabled: true, tracer };

const openai = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "test-key" });
const model = openai.chat("gpt-4o-mini");
const tools = {
  book_table: tool({
    description: script.book_table_description,
    inputSchema: jsonSchema(script.book_table_schema),
    execute: async ({ people, time }) =>
      time === "19:30" ? { error: script.booking_error } : { status: "confirmed", people, time },
  }),
};

for (const [scenario, question] of Object.entries(script.questions)) {
  await tracer.startActiveSpan(`chat ${scenario}`, async (span) => {
    try {
      if (script.rag_scenarios.includes(scenario)) {
        await generateText({ model, system: script.system_prompt, prompt: question, experimental_telemetry: telemetry });
      } else {
        await generateText({
          model,
          system: script.booking_instructions,
          prompt: question,
          tools,
          stopWhen: stepCountIs(5),
          experimental_telemetry: telemetry,
        });
      }
    } catch (error) {
      console.error(`vercel_ai ${scenario}: ${error}`);
    } finally {
      span.end();
    }
  });
}
await provider.forceFlush();
writeFileSync(output, ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans()));
