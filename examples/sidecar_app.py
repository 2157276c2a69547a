"""An instrumented app that knows nothing about tracehound: point it at `tracehound serve`.

A pydantic-ai agent (no network, no API key: a `FunctionModel` that calls the same tool four
times, then answers without using what it returned) with the plain OTel SDK set-up —
`BatchSpanProcessor(OTLPSpanExporter())`. The exporter reads `OTEL_EXPORTER_OTLP_ENDPOINT` like
every OTel SDK exporter does, so the spans go wherever that points: at the sidecar, they come out
enriched on its other side.

Run (see the README's walkthrough):

    tracehound serve --forward file:enriched.jsonl --quiet-period 1 &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 python examples/sidecar_app.py
"""

from __future__ import annotations

import os

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

STATUS = "Build 42 failed: the database migration 0042_add_index timed out after 300 seconds."


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
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
    provider = TracerProvider(resource=Resource.create({"service.name": "ci-helper"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*
    agent = Agent(
        FunctionModel(model, model_name="scripted"),
        name="ci_agent",
        tools=[Tool(check_status, takes_ctx=False)],
        capabilities=[
            Instrumentation(
                settings=InstrumentationSettings(
                    tracer_provider=provider,
                    meter_provider=NoOpMeterProvider(),
                    include_content=True,
                )
            )
        ],
    )
    answer = agent.run_sync("Did build 42 pass?").output
    provider.shutdown()  # flushes the batch to the endpoint
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317")
    print(f"agent answered: {answer}")
    print(f"spans exported to {endpoint}")


if __name__ == "__main__":
    main()
