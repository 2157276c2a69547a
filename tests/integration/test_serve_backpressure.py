"""A failing or slow downstream: `tracehound serve` pushes back with retryable statuses once its
queue is full, recovers when the downstream does, and loses nothing it accepted meanwhile."""

from __future__ import annotations

import http.client
import os
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from _serve import Serve
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracehound.server._grpc import encode_health_request, parse_health_response
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
FAST_RETRIES = {
    "TRACEHOUND_FORWARD_RETRY_INITIAL": "0.05",
    "TRACEHOUND_FORWARD_RETRY_MAX_INTERVAL": "0.2",
    "TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED": "120",
    "TRACEHOUND_METRICS": "false",
}


def request_of(count: int, pad: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    ss = request.resource_spans.add().scope_spans.add()
    ss.scope.name = "backpressure.test"
    trace_id = os.urandom(16)
    for i in range(count):
        span = ss.spans.add(trace_id=trace_id, span_id=os.urandom(8), name=f"GET /item/{i}", kind=2)
        span.attributes.add(key="http.route").value.string_value = "/item/{id}" + "x" * pad
    return request


def span_ids(request: ExportTraceServiceRequest) -> set[bytes]:
    return {
        bytes(s.span_id) for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
    }


def health(channel: grpc.Channel) -> int:
    call = channel.unary_unary("/grpc.health.v1.Health/Check")
    return parse_health_response(call(encode_health_request(""), timeout=5))


def readyz(serve: Serve) -> int:
    host, port = serve.http.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def test_failing_downstream_backpressure_and_recovery(sink: OTLPSink) -> None:
    sink.refuse_with(grpc.StatusCode.UNAVAILABLE)
    serve = Serve.start(
        ["--forward", sink.url, "--max-queue-bytes", "64KiB", "--evaluators", "loops"],
        env=FAST_RETRIES,
    )
    accepted: set[bytes] = set()
    try:
        with grpc.insecure_channel(serve.grpc) as channel:
            call = channel.unary_unary(TRACES)
            refusal: grpc.RpcError | None = None
            for _ in range(50):  # bounded: 50 × 10 KiB > 64 KiB
                request = request_of(20, 500)
                try:
                    call(request.SerializeToString(), timeout=5)
                except grpc.RpcError as error:
                    refusal = error
                    break
                accepted |= span_ids(request)
            assert accepted, "nothing was accepted before the queue filled"
            assert refusal is not None, "the receiver never pushed back"
            # UNAVAILABLE (retryable) with RetryInfo ≤ 5 s, never RESOURCE_EXHAUSTED.
            assert refusal.code() == grpc.StatusCode.UNAVAILABLE
            trailers = dict(refusal.trailing_metadata() or ())
            info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
            assert 0 < info.retry_delay.seconds <= 5
            status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
            assert status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)
            # HTTP says the same with 503 + Retry-After; health and readiness report it.
            host, port = serve.http.removeprefix("http://").rsplit(":", 1)
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            conn.request(
                "POST",
                "/v1/traces",
                body=request_of(20, 500).SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            response = conn.getresponse()
            response.read()
            conn.close()
            assert response.status == 503
            assert 1 <= int(response.getheader("Retry-After") or "0") <= 5
            assert health(channel) == 2  # NOT_SERVING
            assert readyz(serve) == 503
            assert sink.refused > 0 and not sink.spans()

            sink.refuse_with(None)  # the downstream is back
            assert sink.wait_for(
                lambda: accepted <= {bytes(s.span.span_id) for s in sink.spans()}, 20
            )
            deadline = time.monotonic() + 10
            while readyz(serve) != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert readyz(serve) == 200
            assert health(channel) == 1  # SERVING
            later = request_of(5, 10)
            call(later.SerializeToString(), timeout=5)
            assert sink.wait_for(
                lambda: span_ids(later) <= {bytes(s.span.span_id) for s in sink.spans()}, 10
            )
            accepted |= span_ids(later)
    finally:
        assert serve.stop() == 0
    received = [bytes(s.span.span_id) for s in sink.spans()]
    assert set(received) == accepted  # everything accepted, nothing refused, nothing twice
    assert len(received) == len(accepted)
    stopped = serve.stopped_record()
    assert stopped["refused_requests"] >= 2
    assert stopped["dropped"]["traces"] == 0


class SlowTraces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.span_ids: list[bytes] = []

    def Export(self, request: Any, context: Any) -> Any:
        time.sleep(self.delay)
        with self.lock:
            self.span_ids.extend(span_ids(request))
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_slow_downstream_sdk_exporter_retries_until_accepted(transport: str) -> None:
    """The real SDK exporters get UNAVAILABLE + RetryInfo (gRPC) or 503 + Retry-After (HTTP)
    while the queue is full, retry as they are told, and every batch ends up accepted and
    delivered."""
    slow = SlowTraces(0.25)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(slow, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    serve = Serve.start(
        [
            "--forward",
            f"http://127.0.0.1:{port}",
            "--max-queue-bytes",
            "40KiB",
            "--evaluators",
            "loops",
        ],
        env=FAST_RETRIES,
    )
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "slow-test"}))
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("slow.test")
        batches = []
        for b in range(6):
            for i in range(60):
                with tracer.start_as_current_span(f"job {b}.{i}") as span:
                    span.set_attribute("payload", "y" * 200)
            batches.append(memory.get_finished_spans())
            memory.clear()
        exporters: list[Any] = [
            OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=20)
            if transport == "grpc"
            else HttpSpans(endpoint=serve.http + "/v1/traces", timeout=20)
            for _ in batches
        ]
        with futures.ThreadPoolExecutor(max_workers=len(batches)) as pool:
            results = list(
                pool.map(lambda pair: pair[0].export(pair[1]), zip(exporters, batches, strict=True))
            )
        for exporter in exporters:
            exporter.shutdown()
        assert results == [SpanExportResult.SUCCESS] * len(batches)
        wanted = {span.context.span_id.to_bytes(8, "big") for batch in batches for span in batch}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not wanted <= set(slow.span_ids):
            time.sleep(0.05)
        assert wanted <= set(slow.span_ids)
        assert len(slow.span_ids) == len(wanted)
    finally:
        assert serve.stop() == 0
        server.stop(0).wait(5)
    stopped = serve.stopped_record()
    assert stopped["refused_requests"] >= 1  # it did push back
    assert stopped["dropped"]["traces"] == 0
