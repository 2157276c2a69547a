"""An OpenAI-client agent, instrumented by opentelemetry-instrumentation-openai-v2, evaluated
in-process by tracehound.

The `openai` client talks to a scripted local stand-in for the Chat Completions API
(`tests/integration/fake_openai.py`, 127.0.0.1, no API key): the model asks for a `search` call,
the agent runs it, and the model answers quoting the search result. Message content is captured
as *log events only* (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only`): the spans
carry no text, so tracehound's companion log processor joins the
`gen_ai.client.inference.operation.details` events to their spans before evaluating.

Everything is exported over OTLP/gRPC to a local sink (`tracehound.testing.OTLPSink`) and printed
from what it received.

Run: python examples/openai_agent.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# Content capture must be configured before the instrumentor is created.
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "event_only")

import openai
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tracehound import EngineConfig
from tracehound.processor import TracehoundSpanProcessor
from tracehound.testing import OTLPSink

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from fake_openai import FakeOpenAI, Script

SEARCH_RESULT = (
    "Tool executions are 'execute_tool' spans carrying gen_ai.tool.call.id, "
    "gen_ai.tool.call.arguments and gen_ai.tool.call.result."
)
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the knowledge base.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def search(query: str) -> str:
    return SEARCH_RESULT


def run_agent(tracer_provider: TracerProvider, base_url: str) -> str:
    """A hand-written tool loop: call the model, run the tool it asks for, call it again."""
    tracer = tracer_provider.get_tracer("examples.openai_agent")
    with (
        openai.OpenAI(base_url=base_url, api_key="sk-example", max_retries=0) as client,
        tracer.start_as_current_span("research_agent"),
    ):
        messages: list[Any] = [
            {"role": "system", "content": "You are a research assistant. Use the search tool."},
            {"role": "user", "content": "How do the GenAI conventions describe tool spans?"},
        ]
        while True:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=[SEARCH_TOOL]
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = search(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def main() -> None:
    with (
        OTLPSink() as sink,
        FakeOpenAI(Script(tool_name="search", tool_arguments={"query": "GenAI tool spans"})) as api,
    ):
        resource = Resource.create({"service.name": "example-openai"})
        logger_provider = LoggerProvider(resource=resource)
        tracer_provider = TracerProvider(resource=resource)
        processor = TracehoundSpanProcessor(
            OTLPSpanExporter(endpoint=sink.endpoint, insecure=True),
            engine_config=EngineConfig(quiet_period=0.2),
            logger_provider=logger_provider,
            emit_metrics=False,
        )
        tracer_provider.add_span_processor(processor)
        # The companion first, so it sees the GenAI log events; then the logs exporter.
        logger_provider.add_log_record_processor(processor.log_processor)
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=sink.endpoint, insecure=True))
        )
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            meter_provider=NoOpMeterProvider(),
        )
        try:
            answer = run_agent(tracer_provider, api.base_url)
            print(f"agent answer: {answer}")
            assert tracer_provider.force_flush(10_000), "tracehound did not flush in time"
            sink.wait_for(sink.evaluation_events, timeout=10)
            report(sink)
        finally:
            instrumentor.uninstrument()
            tracer_provider.shutdown()
            logger_provider.shutdown()


def report(sink: OTLPSink) -> None:
    names = {s.span_id: s.name for s in sink.spans()}
    details = [
        r for r in sink.log_records() if r.event_name == "gen_ai.client.inference.operation.details"
    ]
    print(f"spans received: {len(sink.spans())}; GenAI detail events: {len(details)}")
    print("evaluations (gen_ai.evaluation.result log records):")
    for event in sink.evaluation_events():
        a: dict[str, Any] = event.attributes
        score = a.get("gen_ai.evaluation.score.value")
        print(
            f"  {a['gen_ai.evaluation.name']:<34} score={score!s:<6} "
            f"label={a.get('gen_ai.evaluation.score.label')!s:<12} "
            f"span={names.get(event.span_id, event.span_id)}"
        )
    root = next(s for s in sink.spans() if not s.span.parent_span_id)
    print(f"root span {root.name!r} attributes:")
    for key, value in sorted(root.attributes.items()):
        if key.startswith("tracehound.") and not key.endswith("per_tool"):
            print(f"  {key} = {value}")


if __name__ == "__main__":
    main()
