"""`tracehound serve`'s gRPC health `Watch`, over a real channel to the real sidecar process.

The stream follows the sidecar's readiness: SERVING once listening, NOT_SERVING while the traces
queue is full (a refusing downstream), SERVING again once it drains, and on SIGTERM NOT_SERVING
then the end of the stream (OK), without holding the shutdown.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator

import grpc
import pytest
from _serve import Serve
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracehound.server._grpc import encode_health_request, parse_health_response
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

SERVING, NOT_SERVING = 1, 2
WATCH = "/grpc.health.v1.Health/Watch"
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ENDED = object()


def watch(channel: grpc.Channel, service: str = "") -> tuple[grpc.Call, queue.Queue[object]]:
    """A Watch call read on a thread: its statuses, then ENDED, in a queue."""
    call = channel.unary_stream(WATCH)(encode_health_request(service), timeout=120)
    items: queue.Queue[object] = queue.Queue()

    def read() -> None:
        try:
            for message in call:
                items.put(parse_health_response(message))
        except grpc.RpcError:
            pass
        items.put(ENDED)

    threading.Thread(target=read, daemon=True).start()
    return call, items


def padded_request(pad: int) -> bytes:
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.scope.name = "health.watch.test"
    trace_id = os.urandom(16)
    for i in range(20):
        span = scope_spans.spans.add(trace_id=trace_id, span_id=os.urandom(8), name=f"op {i}")
        span.attributes.add(key="pad").value.string_value = "x" * pad
    return request.SerializeToString()


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def test_watch_follows_the_queue_and_ends_on_sigterm(sink: OTLPSink) -> None:
    sink.refuse_with(grpc.StatusCode.UNAVAILABLE)
    serve = Serve.start(
        ["--forward", sink.url, "--max-queue-bytes", "64KiB", "--evaluators", "loops"],
        env={
            "TRACEHOUND_FORWARD_RETRY_INITIAL": "0.05",
            "TRACEHOUND_FORWARD_RETRY_MAX_INTERVAL": "0.2",
            "TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED": "120",
            "TRACEHOUND_METRICS": "false",
            "TRACEHOUND_SHUTDOWN_TIMEOUT": "10",
        },
    )
    try:
        with grpc.insecure_channel(serve.grpc) as channel:
            call, statuses = watch(channel)
            assert statuses.get(timeout=10) == SERVING
            export = channel.unary_unary(TRACES)
            for _ in range(50):  # bounded: 50 × 10 KiB > 64 KiB
                try:
                    export(padded_request(500), timeout=5)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE
                    break
            else:
                raise AssertionError("the receiver never pushed back")
            assert statuses.get(timeout=10) == NOT_SERVING  # queue full: nothing reports it
            sink.refuse_with(None)  # the downstream is back: the queue drains
            assert statuses.get(timeout=30) == SERVING

            serve.process.terminate()  # SIGTERM
            assert statuses.get(timeout=10) == NOT_SERVING
            assert statuses.get(timeout=10) is ENDED
            assert call.code() == grpc.StatusCode.OK  # ended by the sidecar, not cancelled
    finally:
        assert serve.stop() == 0
    assert serve.stopped_record()["clean"] is True
