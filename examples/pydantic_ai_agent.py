"""A pydantic-ai agent that loops on a tool and ignores what it returns, evaluated in-process.

No network and no API key: the model is a pydantic-ai `FunctionModel` that asks for the same
`check_status` call four times, then answers without using anything the tool said. tracehound
wraps the OTLP span exporter (`TracehoundSpanProcessor` in place of `BatchSpanProcessor`), so the
exported spans carry its attributes; the `gen_ai.evaluation.result` events go out through the OTLP
logs exporter and the metrics through the OTLP metrics exporter. Everything is sent to a local
OTLP/gRPC sink (`tracehound.testing.OTLPSink`, 127.0.0.1) and printed from what it received.

Run: python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tracehound import EngineConfig
from tracehound.processor import TracehoundSpanProcessor
from tracehound.testing import OTLPSink

STATUS = (
    "Build 42 failed in the integration stage: the database migration 0042_add_index timed out "
    "after 300 seconds. The unit stage passed with 1,204 tests."
)


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls check_status with the same arguments four times, then ignores the answers."""
    returns = [
        p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)
    ]
    if len(returns) < 4:
        call = ToolCallPart(
            "check_status", {"job": "build-42"}, tool_call_id=f"call_{len(returns)}"
        )
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart("Everything looks fine, the build should be green soon.")])


def check_status(job: str) -> str:
    """Status of a CI job."""
    return STATUS


def main() -> None:
    with OTLPSink() as sink:
        resource = Resource.create({"service.name": "example-pydantic-ai"})
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=sink.endpoint, insecure=True))
        )
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=sink.endpoint, insecure=True), export_interval_millis=60_000
        )
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        tracer_provider = TracerProvider(resource=resource)
        # The one line: instead of BatchSpanProcessor(OTLPSpanExporter(...)).
        processor = TracehoundSpanProcessor(
            OTLPSpanExporter(endpoint=sink.endpoint, insecure=True),
            engine_config=EngineConfig(quiet_period=0.2),
            logger_provider=logger_provider,
            meter_provider=meter_provider,
        )
        tracer_provider.add_span_processor(processor)
        logger_provider.add_log_record_processor(processor.log_processor)

        agent = Agent(
            FunctionModel(model, model_name="scripted-model"),
            name="ci_agent",
            instructions="Answer questions about CI builds; use check_status.",
            tools=[Tool(check_status, takes_ctx=False)],
            capabilities=[
                Instrumentation(
                    settings=InstrumentationSettings(
                        tracer_provider=tracer_provider,
                        meter_provider=meter_provider,
                        include_content=True,
                    )
                )
            ],
        )
        try:
            answer = agent.run_sync("Did build 42 pass?").output
            print(f"agent answer: {answer}")
            # Evaluate what is queued, finalize the trace, export, flush events and metrics.
            assert tracer_provider.force_flush(10_000), "tracehound did not flush in time"
            meter_provider.force_flush(10_000)
            sink.wait_for(lambda: sink.evaluation_events() and sink.metric_requests, timeout=10)
            report(sink)
        finally:  # tracer first: its last evaluations go out through the logger provider
            tracer_provider.shutdown()
            logger_provider.shutdown()
            meter_provider.shutdown()


def report(sink: OTLPSink) -> None:
    """Print what the OTLP sink received: evaluations, the root span's attributes, metrics."""
    names = {s.span_id: s.name for s in sink.spans()}
    print(f"spans received: {len(sink.spans())}")
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
    print(
        "metrics: "
        + ", ".join(sorted(n for n in sink.metric_names() if n.startswith("tracehound")))
    )


if __name__ == "__main__":
    main()
