"""Wrap mode over real OTLP/gRPC: `OTLPSpanExporter` behind `TracehoundSpanProcessor` delivers the
enriched spans, and `OTLPLogExporter` the evaluation events, to a real gRPC OTLP server
(`tracehound.testing.OTLPSink`, 127.0.0.1). Assertions are on the protobuf it received.

The spans come live from pydantic-ai (FunctionModel, no network): an agent that calls the same
tool four times and then answers without using what it returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.processor import TracehoundSpanProcessor
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

STATUS = "Build 42 failed: the migration 0042_add_index timed out after 300 seconds."


def looping_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    done = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", ()))
    if done < 4:
        return ModelResponse(
            parts=[ToolCallPart("check_status", {"job": "build-42"}, tool_call_id=f"c{done}")]
        )
    return ModelResponse(parts=[TextPart("All good, it should pass soon.")])


def check_status(job: str) -> str:
    return STATUS


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def run(sink: OTLPSink, **processor_args: Any) -> tuple[TracerProvider, LoggerProvider]:
    resource = Resource.create({"service.name": "otlp-integration"})
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=sink.endpoint, insecure=True, timeout=5))
    )
    tracer_provider = TracerProvider(resource=resource)
    processor = TracehoundSpanProcessor(
        OTLPSpanExporter(endpoint=sink.endpoint, insecure=True, timeout=5),
        settings=ProcessorSettings(),
        engine_config=EngineConfig(quiet_period=60, trace_timeout=120),
        logger_provider=logger_provider,
        emit_metrics=False,
        **processor_args,
    )
    tracer_provider.add_span_processor(processor)
    logger_provider.add_log_record_processor(processor.log_processor)
    agent = Agent(
        FunctionModel(looping_model, model_name="scripted"),
        name="ci_agent",
        tools=[Tool(check_status, takes_ctx=False)],
        capabilities=[
            Instrumentation(
                settings=InstrumentationSettings(
                    tracer_provider=tracer_provider,
                    meter_provider=NoOpMeterProvider(),
                    include_content=True,
                )
            )
        ],
    )
    # not run_sync: it leaves its event loop open as the thread's loop, for a later test to collect
    answer = asyncio.run(agent.run("Did build 42 pass?")).output
    assert answer == "All good, it should pass soon."
    assert tracer_provider.force_flush(10_000)  # evaluates, exports, flushes the logger provider
    return tracer_provider, logger_provider


def test_enriched_spans_and_events_over_otlp_grpc(sink: OTLPSink) -> None:
    tracer_provider, logger_provider = run(sink)
    try:
        assert sink.wait_for(lambda: len(sink.spans()) == 10 and sink.evaluation_events(), 10)
        spans = {s.span_id: s for s in sink.spans()}
        root = sink.span_named("invoke_agent ci_agent")
        assert not root.span.parent_span_id
        attrs = root.attributes
        assert attrs["tracehound.loops.detected"] is True
        assert set(attrs["tracehound.loops.kinds"]) >= {"repeat", "consecutive", "no_progress"}
        assert attrs["tracehound.evidence.final_survival_ratio"] == 0.0
        assert attrs["tracehound.evidence.unused_sources"] == 4
        assert attrs["gen_ai.agent.name"] == "ci_agent"  # the span's own attributes travel too
        # protobuf types: a double stays a double, a string[] an array
        by_key = {kv.key: kv.value for kv in root.span.attributes}
        assert by_key["tracehound.loops.score"].WhichOneof("value") == "double_value"
        assert by_key["tracehound.loops.kinds"].WhichOneof("value") == "array_value"
        looped = [s for s in spans.values() if s.attributes.get("tracehound.loop.detected")]
        assert {s.name for s in looped} == {"chat scripted", "execute_tool check_status"}
        assert all(s.resource.attributes for s in spans.values())

        events = sink.evaluation_events()
        names = {e.attributes["gen_ai.evaluation.name"] for e in events}
        assert names >= {
            "tracehound.loop",
            "tracehound.loops",
            "tracehound.evidence.final_survival",
        }
        for event in events:
            assert event.trace_id == root.trace_id
            assert event.span_id in spans  # parented to an evaluated span
            assert event.scope.name == "tracehound"
            values = {kv.key: kv.value for kv in event.record.attributes}
            assert values["gen_ai.evaluation.score.value"].WhichOneof("value") == "double_value"
            assert values["tracehound.evaluator.name"].string_value in ("evidence", "loops")
        final = next(
            e
            for e in events
            if e.attributes["gen_ai.evaluation.name"] == "tracehound.evidence.final_survival"
        )
        assert final.span_id == root.span_id
        assert final.attributes["gen_ai.evaluation.score.label"] == "ungrounded"
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()


def test_redacted_copies_over_otlp_grpc(sink: OTLPSink) -> None:
    tracer_provider, logger_provider = run(sink, redact=True, span_events=True)
    try:
        assert sink.wait_for(lambda: len(sink.spans()) == 10, 10)
        content = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.result")
        for span in sink.spans():
            assert not any(key in span.attributes for key in content)
        root = sink.span_named("invoke_agent ci_agent")
        assert root.attributes["tracehound.loops.detected"] is True
        assert any(e.name == "gen_ai.evaluation.result" for e in root.span.events)
        assert sum(int(s.attributes.get("tracehound.redacted", 0)) for s in sink.spans()) > 5
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()
