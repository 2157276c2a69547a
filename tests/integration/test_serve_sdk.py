"""`tracehound serve` between real OTel SDK exporters and a real OTLP/gRPC downstream.

The clients are the SDK's own `OTLPSpanExporter` and `OTLPLogExporter` (gRPC and HTTP/protobuf),
exporting real captures (openai-v2 instrumentation: content only in log events; pydantic-ai: a
looping agent). The downstream is `tracehound.testing.OTLPSink`. Assertions are on the protobuf
it received: enriched spans, `gen_ai.evaluation.result` log records parented to them, the
sidecar's metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _serve import Serve, emit_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk.trace.export import SpanExportResult

from helpers import fixture_logs_request, fixture_request, readable_spans_from_request
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def exporters(serve: Serve, transport: str) -> tuple[Any, Any]:
    if transport == "grpc":
        return (
            GrpcSpans(endpoint=serve.grpc, insecure=True, timeout=10),
            GrpcLogs(endpoint=serve.grpc, insecure=True, timeout=10),
        )
    return (
        HttpSpans(endpoint=serve.http + "/v1/traces", timeout=10),
        HttpLogs(endpoint=serve.http + "/v1/logs", timeout=10),
    )


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_sdk_exporters_through_the_sidecar(sink: OTLPSink, transport: str) -> None:
    """openai-v2 capture: the messages are only in log events, which must reach the engine."""
    serve = Serve.start(
        ["--forward", sink.url, "--quiet-period", "0.3", "--evaluators", "evidence,loops"],
        env={"OTEL_METRIC_EXPORT_INTERVAL": "300"},
    )
    span_exporter, log_exporter = exporters(serve, transport)
    try:
        logs = fixture_logs_request("openai_v2_latest")
        assert emit_logs(logs, log_exporter) > 0
        spans = readable_spans_from_request(fixture_request("openai_v2_latest"))
        assert span_exporter.export(spans) is SpanExportResult.SUCCESS
        root = next(s for s in spans if s.parent is None)
        root_id = format(root.context.span_id, "016x")

        def root_enriched() -> bool:
            return any(
                s.span_id == root_id and "tracehound.evidence.survival_ratio" in s.attributes
                for s in sink.spans()
            )

        assert sink.wait_for(root_enriched, 15), [s.name for s in sink.spans()]
        assert sink.wait_for(lambda: len(sink.spans()) == len(spans), 10)
        received = {s.span_id: s for s in sink.spans()}
        assert set(received) == {format(s.context.span_id, "016x") for s in spans}
        enriched_root = received[root_id]
        attrs = enriched_root.attributes
        # The evidence evaluator saw the tool results that are only in the log events.
        assert attrs["tracehound.evidence.sources"] >= 1
        assert "tracehound.loops.detected" in attrs
        # Original attributes and resource travel unchanged; the ids are the client's.
        original = dict(root.attributes or {})
        for key, value in original.items():
            got = attrs[key]
            assert (list(got) if isinstance(got, list) else got) == (
                list(value) if isinstance(value, tuple) else value
            )
        assert enriched_root.resource.attributes
        # Evaluation events: log records parented to evaluated spans of this trace.
        assert sink.wait_for(
            lambda: any(
                e.span_id == root_id
                and e.attributes["gen_ai.evaluation.name"] == "tracehound.evidence.final_survival"
                for e in sink.evaluation_events()
            ),
            10,
        )
        for event in sink.evaluation_events():
            assert event.trace_id == enriched_root.trace_id
            assert event.span_id in received
            assert event.scope.name == "tracehound"
            assert event.record.severity_number in (9, 13)
        # The application's own log records were forwarded too (pass-through).
        forwarded = [r for r in sink.log_records() if r.event_name != "gen_ai.evaluation.result"]
        assert len(forwarded) == sum(
            len(sl.log_records) for rl in logs.resource_logs for sl in rl.scope_logs
        )
        # Self-metrics over OTLP to the same downstream.
        assert sink.wait_for(
            lambda: (
                {"tracehound.server.requests", "tracehound.forward.items"} <= sink.metric_names()
            ),
            10,
        )
    finally:
        span_exporter.shutdown()
        log_exporter.shutdown()
        assert serve.stop() == 0
    stopped = serve.stopped_record()
    assert stopped["clean"] is True
    assert stopped["dropped"] == {"traces": 0, "logs": 0, "metrics": 0}


def test_hold_mode_forwards_whole_traces_with_final_results(sink: OTLPSink) -> None:
    """hold: nothing of an evaluated trace leaves before finalization; then every span does,
    the looping LLM/tool spans with their per-span results, the root with the trace results."""
    serve = Serve.start(
        ["--forward", sink.url, "--mode", "hold", "--quiet-period", "1.0", "--evaluators", "loops"],
    )
    exporter = GrpcSpans(endpoint=serve.grpc, insecure=True, timeout=10)
    try:
        spans = readable_spans_from_request(fixture_request("pydantic_ai_v2"))
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        assert sink.spans() == []  # held until the quiet period has passed
        assert sink.wait_for(lambda: len(sink.spans()) == len(spans), 15)
        root = next(s for s in sink.spans() if not s.span.parent_span_id)
        assert root.attributes["tracehound.loops.detected"] in (True, False)
        assert "tracehound.loops.score" in root.attributes
        assert len(sink.trace_requests) == 1  # one forward for the whole finalized trace
    finally:
        exporter.shutdown()
        assert serve.stop() == 0
