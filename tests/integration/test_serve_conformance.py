"""Conformance of `tracehound serve` to `otlp-receiver.md`, row by row, over real sockets.

One sidecar subprocess (request limit 256 KiB) forwards to an in-test OTLP/gRPC sink. Raw gRPC
calls (bytes in, bytes out) and raw HTTP/1.1 requests (`http.client`) let each test craft
exactly the request a row is about and read exactly what the receiver answered.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import zlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from _serve import Serve
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

LIMIT = 256 * 1024
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
METRICS = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


@pytest.fixture(scope="module")
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


@pytest.fixture(scope="module")
def serve(sink: OTLPSink) -> Iterator[Serve]:
    process = Serve.start(
        [
            "--forward",
            sink.url,
            "--max-request-bytes",
            str(LIMIT),
            "--quiet-period",
            "0.2",
            "--evaluators",
            "loops",
        ]
    )
    yield process
    assert process.stop() == 0


@pytest.fixture(scope="module")
def channel(serve: Serve) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(serve.grpc, options=[("grpc.max_send_message_length", -1)]) as ch:
        yield ch


def ids() -> tuple[bytes, bytes]:
    return os.urandom(16), os.urandom(8)


def traces_request(
    count: int = 3, *, trace_id: bytes | None = None, pad: int = 0
) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "conformance"
    ss = rs.scope_spans.add()
    ss.scope.name = "conformance.test"
    trace_id = trace_id or os.urandom(16)
    for i in range(count):
        span = ss.spans.add(trace_id=trace_id, span_id=os.urandom(8), name=f"op {i}", kind=2)
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + i
        span.end_time_unix_nano = span.start_time_unix_nano + 1000
        if pad:
            span.attributes.add(key="pad").value.string_value = "x" * pad
    return request


def received_span_ids(sink: OTLPSink) -> set[bytes]:
    return {bytes(s.span.span_id) for s in sink.spans()}


def grpc_call(channel: grpc.Channel, method: str, payload: bytes, **kwargs: Any) -> bytes:
    call = channel.unary_unary(method)
    result: bytes = call(payload, timeout=10, **kwargs)
    return result


def http_post(
    serve: Serve, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    host, port = serve.http.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


# --- endpoint: every signal, both transports ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "request_class", "response_class"),
    [
        (TRACES, ExportTraceServiceRequest, ExportTraceServiceResponse),
        (LOGS, ExportLogsServiceRequest, ExportLogsServiceResponse),
        (METRICS, ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    ],
)
def test_grpc_export_of_every_signal_and_empty_request(
    channel: grpc.Channel, method: str, request_class: Any, response_class: Any
) -> None:
    # An empty request succeeds, with partial_success unset.
    response = response_class.FromString(
        grpc_call(channel, method, request_class().SerializeToString())
    )
    assert not response.HasField("partial_success")


def test_grpc_traces_logs_metrics_are_forwarded(channel: grpc.Channel, sink: OTLPSink) -> None:
    request = traces_request()
    grpc_call(channel, TRACES, request.SerializeToString())
    logs = ExportLogsServiceRequest()
    record = logs.resource_logs.add().scope_logs.add().log_records.add()
    record.body.string_value = "conformance log line"
    grpc_call(channel, LOGS, logs.SerializeToString())
    metrics = ExportMetricsServiceRequest()
    metric = (
        metrics.resource_metrics.add().scope_metrics.add().metrics.add(name="conformance.gauge")
    )
    metric.gauge.data_points.add(as_int=7)
    grpc_call(channel, METRICS, metrics.SerializeToString())
    wanted = {s.span_id for s in request.resource_spans[0].scope_spans[0].spans}
    assert sink.wait_for(lambda: wanted <= received_span_ids(sink), 10)
    assert sink.wait_for(
        lambda: any(
            r.record.body.string_value == "conformance log line" for r in sink.log_records()
        ),
        10,
    )
    assert sink.wait_for(lambda: "conformance.gauge" in sink.metric_names(), 10)


@pytest.mark.parametrize("path", ["/v1/traces", "/v1/logs", "/v1/metrics"])
@pytest.mark.parametrize("headers", [PB, JS], ids=["protobuf", "json"])
def test_http_empty_request_succeeds_with_the_request_content_type(
    serve: Serve, path: str, headers: dict[str, str]
) -> None:
    body = b"" if headers is PB else b"{}"
    status, response_headers, payload = http_post(serve, path, body, headers)
    assert status == 200
    assert response_headers["content-type"] == headers["Content-Type"]
    if headers is JS:
        assert json.loads(payload) == {}
    else:
        assert payload == b""  # an empty response message: partial_success unset


# --- compression --------------------------------------------------------------------------------


def test_grpc_gzip_request(channel: grpc.Channel, sink: OTLPSink) -> None:
    request = traces_request(pad=2000)
    grpc_call(channel, TRACES, request.SerializeToString(), compression=grpc.Compression.Gzip)
    wanted = {s.span_id for s in request.resource_spans[0].scope_spans[0].spans}
    assert sink.wait_for(lambda: wanted <= received_span_ids(sink), 10)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_http_compressed_request(serve: Serve, sink: OTLPSink, encoding: str) -> None:
    request = traces_request(pad=2000)
    raw = request.SerializeToString()
    body = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    status, _, payload = http_post(serve, "/v1/traces", body, {**PB, "Content-Encoding": encoding})
    assert status == 200, payload
    wanted = {s.span_id for s in request.resource_spans[0].scope_spans[0].spans}
    assert sink.wait_for(lambda: wanted <= received_span_ids(sink), 10)


# --- size limit, including after decompression --------------------------------------------------


def bomb() -> ExportTraceServiceRequest:
    return traces_request(count=1, pad=LIMIT * 4)  # ~1 MiB of one letter: gzips to ~1 KiB


def test_grpc_oversize_is_resource_exhausted_without_retry_info(channel: grpc.Channel) -> None:
    data = bomb().SerializeToString()
    assert len(gzip.compress(data)) < LIMIT // 50
    for compression in (grpc.Compression.NoCompression, grpc.Compression.Gzip):
        with pytest.raises(grpc.RpcError) as caught:
            grpc_call(channel, TRACES, data, compression=compression)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "google.rpc.retryinfo-bin" not in dict(caught.value.trailing_metadata() or ())


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_http_oversize_is_413(serve: Serve, encoding: str) -> None:
    data = bomb().SerializeToString()
    body = gzip.compress(data) if encoding == "gzip" else data
    status, headers, payload = http_post(
        serve, "/v1/traces", body, {**PB, "Content-Encoding": encoding}
    )
    assert status == 413
    assert "retry-after" not in headers
    assert status_pb2.Status.FromString(payload).code == code_pb2.RESOURCE_EXHAUSTED


# --- bad data -----------------------------------------------------------------------------------


def test_grpc_malformed_is_invalid_argument_with_bad_request(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        grpc_call(channel, TRACES, b"\x0a\xff\xff\xff\x0f garbage")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = dict(caught.value.trailing_metadata() or ())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(details)
    assert status.code == code_pb2.INVALID_ARGUMENT
    assert status.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR)


@pytest.mark.parametrize(
    ("headers", "body"),
    [(PB, b"\x0a\xff\xff\xff\x0f garbage"), (JS, b'{"resourceSpans": [{'), (JS, b"[1, 2]")],
    ids=["protobuf", "json-syntax", "json-shape"],
)
def test_http_malformed_is_400_with_status_like_the_request(
    serve: Serve, headers: dict[str, str], body: bytes
) -> None:
    status, response_headers, payload = http_post(serve, "/v1/traces", body, headers)
    assert status == 400
    assert response_headers["content-type"] == headers["Content-Type"]
    if headers is JS:
        decoded = json.loads(payload)
        assert decoded["code"] == code_pb2.INVALID_ARGUMENT
        assert decoded["details"][0]["@type"].endswith("google.rpc.BadRequest")
    else:
        decoded_pb = status_pb2.Status.FromString(payload)
        assert decoded_pb.code == code_pb2.INVALID_ARGUMENT
        assert decoded_pb.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR)


def test_http_unsupported_content_type_and_methods(serve: Serve) -> None:
    status, _, _ = http_post(serve, "/v1/traces", b"x", {"Content-Type": "text/plain"})
    assert status == 415
    status, _, _ = http_post(serve, "/v1/nothing", b"", PB)
    assert status == 404
    host, port = serve.http.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/v1/traces")
        response = conn.getresponse()
        response.read()
        assert response.status == 405
        assert response.getheader("Allow") == "POST"
    finally:
        conn.close()
    status, _, _ = http_post(serve, "/v1/traces", b"\x00", {**PB, "Content-Encoding": "br"})
    assert status == 400


# --- partial success ----------------------------------------------------------------------------


def test_grpc_partial_success_rejects_bad_ids_and_processes_the_rest(
    channel: grpc.Channel, sink: OTLPSink, serve: Serve
) -> None:
    request = traces_request(count=4)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[1].trace_id = b"\x01" * 8  # wrong size
    spans[2].span_id = bytes(8)  # all-zero span id
    response = ExportTraceServiceResponse.FromString(
        grpc_call(channel, TRACES, request.SerializeToString())
    )
    assert response.partial_success.rejected_spans == 2
    assert "rejected" in response.partial_success.error_message
    good = {spans[0].span_id, spans[3].span_id}
    assert sink.wait_for(lambda: good <= received_span_ids(sink), 10)
    assert spans[2].span_id not in received_span_ids(sink)
    # The SDK exporters ignore partial_success: the sidecar logs it (and counts it in metrics).
    logged = serve.wait_record(lambda r: r.get("rejected") == 2 and r.get("signal") == "traces", 5)
    assert logged is not None and logged["level"] == "warning"


def test_http_partial_success_json_and_capped_message(serve: Serve, sink: OTLPSink) -> None:
    request = traces_request(count=1)
    good = request.resource_spans[0].scope_spans[0].spans[0].span_id
    document = json.loads(to_json(request))
    bad_span = dict(document["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    bad_span["spanId"] = "0123"  # 2 bytes
    document["resourceSpans"][0]["scopeSpans"][0]["spans"].extend([bad_span] * 500)
    status, _, payload = http_post(serve, "/v1/traces", json.dumps(document).encode(), JS)
    assert status == 200
    partial = json.loads(payload)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 500  # int64 as a decimal string in JSON
    assert len(partial["errorMessage"]) < 1000  # the response stays small
    assert sink.wait_for(lambda: good in received_span_ids(sink), 10)


# --- JSON encoding ------------------------------------------------------------------------------


def to_json(request: ExportTraceServiceRequest) -> str:
    from google.protobuf import json_format

    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in document.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document)


def test_json_hex_ids_enums_camel_case_unknown_fields_and_int64(
    serve: Serve, sink: OTLPSink
) -> None:
    trace_id, span_id = ids()
    parent = os.urandom(8)
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "json"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "json.test"},
                        "spans": [
                            {
                                "traceId": trace_id.hex().upper(),  # case-insensitive hex
                                "spanId": span_id.hex(),
                                "parentSpanId": parent.hex().upper(),
                                "name": "json span",
                                "kind": 3,  # enums are integers
                                "startTimeUnixNano": "1700000000000000000",  # int64 as string
                                "endTimeUnixNano": 1700000000000001000,  # ... or as number
                                "droppedAttributesCount": 3,
                                "dropped_events_count": 9,  # not lowerCamelCase: ignored
                                "someFutureField": {"x": 1},  # unknown: ignored
                                "links": [{"traceId": trace_id.hex(), "spanId": parent.hex()}],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    status, headers, payload = http_post(serve, "/v1/traces", json.dumps(document).encode(), JS)
    assert status == 200, payload
    assert headers["content-type"] == "application/json"
    assert sink.wait_for(lambda: span_id in received_span_ids(sink), 10)
    span = next(s.span for s in sink.spans() if bytes(s.span.span_id) == span_id)
    assert bytes(span.trace_id) == trace_id
    assert bytes(span.parent_span_id) == parent
    assert span.kind == 3
    assert span.start_time_unix_nano == 1_700_000_000_000_000_000
    assert span.end_time_unix_nano == 1_700_000_000_000_001_000
    assert span.dropped_attributes_count == 3
    assert span.dropped_events_count == 0
    assert bytes(span.links[0].span_id) == parent


def test_protobuf_and_json_logs_on_the_same_port(serve: Serve, sink: OTLPSink) -> None:
    trace_id, span_id = ids()
    document = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "traceId": trace_id.hex(),
                                "spanId": span_id.hex(),
                                "body": {"stringValue": "json log"},
                                "severityNumber": 9,
                            }
                        ]
                    }
                ]
            }
        ]
    }
    status, _, _ = http_post(serve, "/v1/logs", json.dumps(document).encode(), JS)
    assert status == 200
    assert sink.wait_for(
        lambda: any(bytes(r.record.span_id) == span_id for r in sink.log_records()), 10
    )


# --- duplicates (at-least-once delivery) --------------------------------------------------------


def test_duplicate_spans_are_forwarded_once(channel: grpc.Channel, sink: OTLPSink) -> None:
    request = traces_request(count=3)
    payload = request.SerializeToString()
    for _ in range(3):  # the client retried twice after losing our answer
        grpc_call(channel, TRACES, payload)
    wanted = [s.span_id for s in request.resource_spans[0].scope_spans[0].spans]
    assert sink.wait_for(lambda: set(wanted) <= received_span_ids(sink), 10)
    sink.wait_for(lambda: False, 0.5)  # let any (wrong) duplicate arrive
    received = [bytes(s.span.span_id) for s in sink.spans()]
    assert all(received.count(span_id) == 1 for span_id in wanted)
