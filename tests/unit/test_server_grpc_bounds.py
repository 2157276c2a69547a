"""The gRPC receiver's size limit holds after decompression: a small gzip-compressed request that
inflates past `--max-request-bytes` is RESOURCE_EXHAUSTED (never read whole), one under it is
accepted; oversized metadata is refused by grpc before the handler runs."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracehound.evaluators.loops import LoopEvaluator
from tracehound.server import ServeSettings, Sidecar

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "127.0.0.1:0", "otlp_http": "none", "forward": "none"},
        environ={"TRACEHOUND_MAX_REQUEST_BYTES": "64KiB", "TRACEHOUND_METRICS": "false"},
    )
    car = Sidecar(settings, evaluators=[LoopEvaluator()]).start()
    assert car.grpc_address is not None
    yield str(car.grpc_address)
    car.shutdown(5)


def request_of(size: int) -> bytes:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="big")
    )
    span.attributes.add(key="k").value.string_value = "a" * size  # compresses ~1000:1
    return request.SerializeToString()


def test_a_compressed_request_that_inflates_past_the_limit_is_resource_exhausted(
    target: str,
) -> None:
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(TRACES)
        with pytest.raises(grpc.RpcError) as caught:
            call(request_of(8 * 1024 * 1024), timeout=10, compression=grpc.Compression.Gzip)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        call(request_of(16 * 1024), timeout=10, compression=grpc.Compression.Gzip)  # under it


def test_oversized_metadata_is_refused(target: str) -> None:
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(TRACES)
        with pytest.raises(grpc.RpcError) as caught:
            call(request_of(10), timeout=10, metadata=[("x-big", "v" * 64 * 1024)])
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # grpc's 16 KiB cap
