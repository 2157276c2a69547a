"""gzip responses of the OTLP/HTTP receiver and `/metrics`, over real sockets (`http.client`).

A body over `GZIP_THRESHOLD` bytes is gzipped when the request's `Accept-Encoding` allows gzip
(`Content-Encoding: gzip`, and `Vary: Accept-Encoding` on every body that size); small bodies and
clients that do not accept gzip get the identity encoding.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from helpers import fixture_request
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.server import ServeSettings, Sidecar
from tracehound.server._http import GZIP_THRESHOLD, OTLPHTTPServer, accepts_gzip, encode_body
from tracehound.server._otlp import OTLPError, Signal
from tracehound.server._pipeline import Submitted

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
# A partial_success message long enough to cross the threshold (the pipeline's own are capped
# below it; the receiver does not know that).
LONG = " ".join(f"span {i:04d} rejected: invalid span id" for i in range(80))


class Answer:
    """What the fake pipeline answers to every export."""

    def __init__(self) -> None:
        self.submitted = Submitted()

    def __call__(self, signal: Signal, message: Any, raw: bytes | None, size: int, how: str) -> Any:
        return self.submitted


@pytest.fixture
def answer() -> Answer:
    return Answer()


@pytest.fixture
def receiver(answer: Answer) -> Iterator[tuple[str, int]]:
    def on_error(signal: Signal, error: OTLPError) -> None:
        return None

    server = OTLPHTTPServer(
        ("127.0.0.1", 0),
        answer,
        live=lambda: True,
        ready=lambda: True,
        on_error=on_error,
        max_request_bytes=1024 * 1024,
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield "127.0.0.1", server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(5)


def request(
    address: tuple[str, int], method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        # http.client sends `Accept-Encoding: identity` unless told otherwise: the headers say.
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        found = {k.lower(): v for k, v in response.getheaders()}
        assert int(found["content-length"]) == len(payload)
        return response.status, found, payload
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("accept_encoding", "allowed"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("deflate, GZIP;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        ("br;q=1.0, *;q=0.1", True),
        ("", False),
        ("identity", False),
        ("deflate, br", False),
        ("gzip;q=0", False),
        ("gzip;q=0.000", False),
        ("*, gzip;q=0", False),
        ("gzip;q=soon", False),
    ],
)
def test_accept_encoding_values(accept_encoding: str, allowed: bool) -> None:
    assert accepts_gzip(accept_encoding) is allowed


def test_small_and_incompressible_bodies_stay_as_they_are() -> None:
    small = b"x" * GZIP_THRESHOLD
    assert encode_body(small, "gzip") == (small, {})
    dense = os.urandom(4 * GZIP_THRESHOLD)  # gzip only adds to random bytes
    body, headers = encode_body(dense, "gzip")
    assert body == dense and headers == {"Vary": "Accept-Encoding"}


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_long_partial_success_is_gzipped_when_accepted(
    receiver: tuple[str, int], answer: Answer, content_type: dict[str, str]
) -> None:
    answer.submitted = Submitted(rejected=3, message=LONG)
    body = b"{}" if content_type is JSON else b""
    headers = {**content_type, "Accept-Encoding": "gzip, deflate"}
    status, found, payload = request(receiver, "POST", "/v1/traces", headers, body)
    assert status == 200
    assert found["content-encoding"] == "gzip"
    assert found["vary"] == "Accept-Encoding"
    assert found["content-type"] == content_type["Content-Type"]
    plain = gzip.decompress(payload)
    assert len(payload) < len(plain)
    if content_type is JSON:
        partial = json.loads(plain)["partialSuccess"]
        assert (int(partial["rejectedSpans"]), partial["errorMessage"]) == (3, LONG)
    else:
        response = ExportTraceServiceResponse.FromString(plain)
        assert response.partial_success.rejected_spans == 3
        assert response.partial_success.error_message == LONG


@pytest.mark.parametrize("accept_encoding", [None, "identity", "deflate", "gzip;q=0"])
def test_long_partial_success_is_plain_when_gzip_is_not_accepted(
    receiver: tuple[str, int], answer: Answer, accept_encoding: str | None
) -> None:
    answer.submitted = Submitted(rejected=3, message=LONG)
    headers = dict(PROTOBUF)
    if accept_encoding is not None:
        headers["Accept-Encoding"] = accept_encoding
    status, found, payload = request(receiver, "POST", "/v1/traces", headers)
    assert status == 200
    assert "content-encoding" not in found
    assert found["vary"] == "Accept-Encoding"  # a client that accepts gzip would get it
    assert ExportTraceServiceResponse.FromString(payload).partial_success.error_message == LONG


def test_small_responses_are_never_gzipped(receiver: tuple[str, int]) -> None:
    headers = {**PROTOBUF, "Accept-Encoding": "gzip"}
    status, found, payload = request(receiver, "POST", "/v1/traces", headers)
    assert (status, payload) == (200, b"")  # a full success: an empty response
    assert "content-encoding" not in found and "vary" not in found
    status, found, payload = request(receiver, "GET", "/readyz", {"Accept-Encoding": "gzip"})
    assert (status, payload) == (200, b"ready\n")
    assert "content-encoding" not in found


def test_long_error_status_is_gzipped(receiver: tuple[str, int]) -> None:
    # A malformed request whose parse error quotes the offending value: a long 400 Status.
    body = json.dumps({"resourceSpans": "r" * 3000}).encode()
    headers = {**JSON, "Accept-Encoding": "gzip"}
    status, found, payload = request(receiver, "POST", "/v1/traces", headers, body)
    assert status == 400
    assert found["content-encoding"] == "gzip"
    plain = json.loads(gzip.decompress(payload))
    assert plain["code"] == 3  # INVALID_ARGUMENT
    assert plain["message"].startswith("malformed OTLP/JSON")


def test_prometheus_metrics_are_gzipped_when_accepted() -> None:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none"},
        environ={"TRACEHOUND_PROMETHEUS": "127.0.0.1:0", "TRACEHOUND_QUIET_PERIOD": "0.05"},
    )
    car = Sidecar(settings, evaluators=[LoopEvaluator()]).start()
    try:
        assert car.http_address is not None and car.prometheus_address is not None
        otlp = (car.http_address.host, car.http_address.port)
        traces = fixture_request("pydantic_ai_v2").SerializeToString()
        assert request(otlp, "POST", "/v1/traces", PROTOBUF, traces)[0] == 200
        address = (car.prometheus_address.host, car.prometheus_address.port)
        # Once the trace is evaluated, the text (duration histograms) is well over the threshold.
        deadline = time.monotonic() + 10
        while "tracehound_evaluation_duration_seconds_bucket" not in car.render_prometheus():
            assert time.monotonic() < deadline, car.render_prometheus()
            time.sleep(0.05)
        status, found, payload = request(address, "GET", "/metrics", {"Accept-Encoding": "gzip"})
        assert status == 200
        assert found["content-type"].startswith("text/plain; version=0.0.4")
        assert found["content-encoding"] == "gzip" and found["vary"] == "Accept-Encoding"
        text = gzip.decompress(payload).decode()
        assert "# TYPE tracehound_server_queue_size_bytes gauge" in text
        assert len(payload) < len(text)
        status, found, payload = request(address, "GET", "/metrics", {})
        assert status == 200 and "content-encoding" not in found
        assert "# TYPE tracehound_server_queue_size_bytes gauge" in payload.decode()
    finally:
        car.shutdown(timeout=5)
