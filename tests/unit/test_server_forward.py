"""The forwarder: lanes (retries, backoff, server-given delays, drops, batching, budget) and the
gRPC / HTTP senders against stub servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracehound.server._forward import (
    Budget,
    GrpcSender,
    HttpSender,
    Lane,
    Outcome,
    RetryPolicy,
    retry_after_seconds,
)
from tracehound.server._otlp import TRACES, Overloaded, retry_info_trailers
from tracehound.server._settings import SignalTarget


class Scripted:
    """A sender answering from a script of outcomes (then success), recording payloads."""

    batches = True

    def __init__(self, *outcomes: Outcome) -> None:
        self.outcomes = list(outcomes)
        self.payloads: list[bytes] = []
        self.times: list[float] = []
        self.closed = False

    def send(self, payload: bytes) -> Outcome:
        self.payloads.append(payload)
        self.times.append(time.monotonic())
        return self.outcomes.pop(0) if self.outcomes else Outcome(True)

    def close(self) -> None:
        self.closed = True


def request_bytes(name: str) -> bytes:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name=name
    )
    return request.SerializeToString()


def lane_with(
    sender: Scripted, policy: RetryPolicy, capacity: int = 1 << 20
) -> tuple[Lane, list[tuple[str, str, str, int]]]:
    results: list[tuple[str, str, str, int]] = []
    lane = Lane(
        TRACES,
        sender,
        Budget(capacity),
        policy,
        on_result=lambda *a: results.append(a),
    )
    return lane, results


def put(lane: Lane, data: bytes, items: int = 1) -> None:
    assert lane.budget.try_acquire(len(data))
    lane.put(data, items, reserved=len(data))


def test_retries_until_success_and_releases_the_budget() -> None:
    sender = Scripted(Outcome(False, retryable=True), Outcome(False, retryable=True))
    lane, results = lane_with(sender, RetryPolicy(0.02, 0.05, 10))
    put(lane, request_bytes("a"), 3)
    assert lane.drain(time.monotonic() + 5)
    assert len(sender.payloads) == 3
    assert results == [("traces", "success", "", 3)]
    assert lane.budget.used == 0
    assert lane.retries == 2
    lane.close(time.monotonic() + 1)
    assert sender.closed


def test_server_given_delay_is_honoured() -> None:
    sender = Scripted(Outcome(False, retryable=True, retry_after=0.3))
    lane, _ = lane_with(sender, RetryPolicy(0.01, 0.01, 10))
    put(lane, request_bytes("a"))
    assert lane.drain(time.monotonic() + 5)
    assert sender.times[1] - sender.times[0] >= 0.29
    lane.close(time.monotonic() + 1)


def test_permanent_failure_is_dropped_and_counted() -> None:
    sender = Scripted(Outcome(False, retryable=False, message="INVALID_ARGUMENT"))
    lane, results = lane_with(sender, RetryPolicy(0.01, 0.01, 10))
    put(lane, request_bytes("a"), 5)
    assert lane.drain(time.monotonic() + 5)
    assert results == [("traces", "dropped", "rejected", 5)]
    assert lane.dropped_items == 5 and lane.budget.used == 0
    lane.close(time.monotonic() + 1)


def test_gives_up_after_max_elapsed() -> None:
    sender = Scripted(*[Outcome(False, retryable=True)] * 100)
    lane, results = lane_with(sender, RetryPolicy(0.05, 0.05, 0.2))
    put(lane, request_bytes("a"), 2)
    assert lane.drain(time.monotonic() + 5)
    assert results == [("traces", "dropped", "retries_exhausted", 2)]
    lane.close(time.monotonic() + 1)


def test_payloads_are_merged_into_one_valid_request() -> None:
    gate = threading.Event()

    class Blocking(Scripted):
        def send(self, payload: bytes) -> Outcome:
            gate.wait(5)
            return super().send(payload)

    sender = Blocking()
    lane, _ = lane_with(sender, RetryPolicy())
    for name in "abcd":
        put(lane, request_bytes(name))
    gate.set()
    assert lane.drain(time.monotonic() + 5)
    merged = [ExportTraceServiceRequest.FromString(p) for p in sender.payloads]
    names = [
        s.name for r in merged for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]
    assert names == list("abcd")
    assert len(sender.payloads) <= 2  # the first alone (it was taken before the others came)
    lane.close(time.monotonic() + 1)


def test_close_drops_what_the_deadline_did_not_allow() -> None:
    sender = Scripted(*[Outcome(False, retryable=True, retry_after=10.0)] * 3)
    lane, results = lane_with(sender, RetryPolicy())
    put(lane, request_bytes("a"), 4)
    put(lane, request_bytes("b"), 6)
    started = time.monotonic()
    lane.close(time.monotonic() + 0.3)
    assert time.monotonic() - started < 3
    assert sorted(r[2] for r in results) == ["shutdown"] * len(results)
    assert sum(r[3] for r in results) == 10
    assert lane.budget.used == 0


def test_budget_admission_and_full_flag() -> None:
    budget = Budget(100)
    assert budget.try_acquire(500)  # an empty pipeline takes any one request
    assert not budget.try_acquire(1)
    assert budget.full
    budget.release(500)
    assert not budget.full and budget.used == 0
    assert budget.try_acquire(60) and not budget.try_acquire(50)
    budget.release(20)
    assert not budget.full  # 40 + 50 fits now
    lane, results = lane_with(Scripted(), RetryPolicy(), capacity=10)
    assert lane.budget.try_acquire(10)
    assert not lane.offer(b"x" * 5, 2)  # produced data is dropped, not forced, when full
    assert results == [("traces", "dropped", "queue_full", 2)]
    lane.close(time.monotonic() + 1)


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    later = retry_after_seconds(formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 25 < later <= 31


# --- senders against stub servers -----------------------------------------------------------------


class Refusing(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.mode = "unavailable"

    def Export(self, request: Any, context: Any) -> Any:
        if self.mode == "unavailable":
            context.set_trailing_metadata(retry_info_trailers(Overloaded("busy", retry_after=1.5)))
            context.abort(grpc.StatusCode.UNAVAILABLE, "busy")
        if self.mode == "exhausted":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too big")
        if self.mode == "invalid":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")
        response = trace_service_pb2.ExportTraceServiceResponse()
        response.partial_success.rejected_spans = 2
        response.partial_success.error_message = "two bad"
        return response


@pytest.fixture
def grpc_stub() -> Iterator[tuple[Refusing, int]]:
    servicer = Refusing()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0).wait(5)


def test_grpc_sender_outcomes(grpc_stub: tuple[Refusing, int]) -> None:
    servicer, port = grpc_stub
    target = SignalTarget(
        protocol="grpc",
        endpoint=f"127.0.0.1:{port}",
        insecure=True,
        compression="gzip",
        timeout=5,
        headers=(("x-key", "v"),),
    )
    sender = GrpcSender(target, TRACES)
    try:
        outcome = sender.send(request_bytes("a"))
        assert (outcome.ok, outcome.retryable, outcome.retry_after) == (False, True, 1.5)
        servicer.mode = "exhausted"  # without RetryInfo: not retryable (spec)
        assert not sender.send(request_bytes("a")).retryable
        servicer.mode = "invalid"
        assert not sender.send(request_bytes("a")).retryable
        servicer.mode = "ok"
        outcome = sender.send(request_bytes("a"))
        assert (outcome.ok, outcome.rejected, outcome.message) == (True, 2, "two bad")
    finally:
        sender.close()


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: ClassVar[list[tuple[int, dict[str, str], bytes]]] = []
    seen: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Stub.seen.append((self.path, dict(self.headers), body))
        status, headers, payload = _Stub.answers.pop(0) if _Stub.answers else (200, {}, b"")
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_http_sender_outcomes() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    port = server.server_address[1]
    response = trace_service_pb2.ExportTraceServiceResponse()
    response.partial_success.rejected_spans = 1
    _Stub.answers[:] = [
        (503, {"Retry-After": "2"}, b""),
        (429, {}, b""),
        (400, {}, b"bad"),
        (500, {}, b""),
        (200, {"Content-Type": "application/x-protobuf"}, response.SerializeToString()),
    ]
    _Stub.seen[:] = []
    target = SignalTarget(
        protocol="http/protobuf",
        endpoint=f"http://127.0.0.1:{port}/v1/traces",
        insecure=True,
        compression="gzip",
        timeout=5,
        headers=(("authorization", "Bearer t"),),
    )
    sender = HttpSender(target, TRACES)
    try:
        first = sender.send(request_bytes("a"))
        assert (first.retryable, first.retry_after) == (True, 2.0)
        assert sender.send(request_bytes("a")).retryable  # 429
        assert not sender.send(request_bytes("a")).retryable  # 400
        assert not sender.send(request_bytes("a")).retryable  # 500: not in the retryable set
        last = sender.send(request_bytes("a"))
        assert (last.ok, last.rejected) == (True, 1)
        path, headers, body = _Stub.seen[0]
        assert path == "/v1/traces"
        assert headers["Content-Encoding"] == "gzip" and headers["authorization"] == "Bearer t"
        assert ExportTraceServiceRequest.FromString(gzip.decompress(body)).resource_spans
    finally:
        sender.close()
        server.shutdown()
        server.server_close()
    refused = HttpSender(target, TRACES).send(request_bytes("a"))  # nobody listens any more
    assert (refused.ok, refused.retryable) == (False, True)
