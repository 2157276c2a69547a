"""`grpc.health.v1.Health/Watch` over a real channel against the real gRPC receiver.

`build_grpc_server` on 127.0.0.1 with a readiness flag the test flips: the current status at once,
one message per change (pushed by `changed()`, or seen at the re-check interval), SERVICE_UNKNOWN
for an unknown service with the stream kept open, every stream ended with OK by `close()`, and
open watches holding no worker thread (Check and Export still answer with more watches than
workers).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tracehound.server._grpc import HealthWatchers, build_grpc_server, encode_health_request
from tracehound.server._otlp import OTLPError, Signal
from tracehound.server._pipeline import Submitted

SERVING, NOT_SERVING, SERVICE_UNKNOWN = 1, 2, 3
WATCH = "/grpc.health.v1.Health/Watch"
CHECK = "/grpc.health.v1.Health/Check"
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
WAIT = 10.0
ENDED = object()


class Readiness:
    def __init__(self) -> None:
        self.value = True

    def __call__(self) -> bool:
        return self.value


class Receiver:
    """A gRPC receiver whose readiness the test sets; Export accepts everything."""

    def __init__(self, recheck_interval: float = 60.0, max_workers: int = 8) -> None:
        self.ready = Readiness()
        self.watchers = HealthWatchers(self.ready, recheck_interval=recheck_interval)

        def submit(signal: Signal, message: Any, raw: bytes | None, size: int, how: str) -> Any:
            return Submitted()

        def on_error(signal: Signal, error: OTLPError) -> None:
            return None

        self.server, port = build_grpc_server(
            "127.0.0.1",
            0,
            submit,
            ready=self.ready,
            on_error=on_error,
            max_request_bytes=1024 * 1024,
            max_workers=max_workers,
            watchers=self.watchers,
        )
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")

    def set_ready(self, value: bool, *, report: bool = True) -> None:
        self.ready.value = value
        if report:
            self.watchers.changed()

    def close(self) -> None:
        self.watchers.close()
        self.channel.close()
        self.server.stop(None).wait(5)


class Watch:
    """One Watch call, read on a thread: statuses (or ENDED) in a queue, so that a test can wait
    for the next one with a timeout, or check that none comes."""

    def __init__(self, channel: grpc.Channel, service: str = "") -> None:
        self.call = channel.unary_stream(WATCH)(encode_health_request(service), timeout=60)
        self.items: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for message in self.call:
                # HealthCheckResponse: field 1 (status), a one-byte varint here
                self.items.put(message[1] if message else 0)
        except grpc.RpcError:
            pass
        self.items.put(ENDED)

    def next(self, timeout: float = WAIT) -> object:
        return self.items.get(timeout=timeout)

    def nothing_within(self, seconds: float) -> bool:
        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rx = Receiver()
    yield rx
    rx.close()


def test_current_status_at_once_then_each_change(receiver: Receiver) -> None:
    watch = Watch(receiver.channel)
    service_watch = Watch(receiver.channel, TRACE_SERVICE)
    assert watch.next() == SERVING
    assert service_watch.next() == SERVING
    receiver.set_ready(False)
    assert watch.next() == NOT_SERVING
    assert service_watch.next() == NOT_SERVING
    receiver.watchers.changed()  # no change: nothing is sent
    receiver.watchers.changed()
    assert watch.nothing_within(0.3)
    receiver.set_ready(True)
    assert watch.next() == SERVING
    assert watch.call.is_active()


def test_unreported_changes_are_seen_at_the_recheck_interval() -> None:
    receiver = Receiver(recheck_interval=0.05)
    try:
        watch = Watch(receiver.channel)
        assert watch.next() == SERVING
        receiver.set_ready(False, report=False)  # e.g. the traces queue filled up
        assert watch.next() == NOT_SERVING
        receiver.set_ready(True, report=False)
        assert watch.next() == SERVING
    finally:
        receiver.close()


def test_unknown_service_gets_service_unknown_and_the_stream_stays_open(
    receiver: Receiver,
) -> None:
    watch = Watch(receiver.channel, "no.such.Service")
    assert watch.next() == SERVICE_UNKNOWN
    receiver.set_ready(False)
    assert watch.nothing_within(0.3)
    assert watch.call.is_active()
    receiver.watchers.close()
    assert watch.next() == ENDED
    assert watch.call.code() == grpc.StatusCode.OK


def test_close_sends_the_final_status_and_ends_every_stream_with_ok(receiver: Receiver) -> None:
    watches = [Watch(receiver.channel), Watch(receiver.channel, TRACE_SERVICE)]
    for watch in watches:
        assert watch.next() == SERVING
    assert receiver.watchers.open_streams == 2
    receiver.ready.value = False  # shutting down: not reported, close() sends it
    receiver.watchers.close()
    for watch in watches:
        assert watch.next() == NOT_SERVING
        assert watch.next() == ENDED
        assert watch.call.code() == grpc.StatusCode.OK
    assert receiver.watchers.open_streams == 0
    late = Watch(receiver.channel)  # after close: the status, then the end
    assert late.next() == NOT_SERVING
    assert late.next() == ENDED
    assert late.call.code() == grpc.StatusCode.OK


def test_a_cancelled_watch_is_forgotten(receiver: Receiver) -> None:
    watch = Watch(receiver.channel)
    assert watch.next() == SERVING
    assert receiver.watchers.open_streams == 1
    watch.call.cancel()
    deadline = time.monotonic() + WAIT
    while receiver.watchers.open_streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert receiver.watchers.open_streams == 0
    receiver.set_ready(False)  # nothing left to send to


def test_open_watches_hold_no_worker_thread() -> None:
    receiver = Receiver(max_workers=2)
    try:
        watches = [Watch(receiver.channel) for _ in range(6)]
        for watch in watches:
            assert watch.next() == SERVING
        check = receiver.channel.unary_unary(CHECK)
        assert check(encode_health_request(""), timeout=5) == b"\x08\x01"
        export = receiver.channel.unary_unary(TRACES)
        assert export(b"", timeout=5) == b""  # an empty ExportTraceServiceResponse
        receiver.set_ready(False)
        assert [watch.next() for watch in watches] == [NOT_SERVING] * 6
    finally:
        receiver.close()


def test_malformed_watch_request_is_invalid_argument(receiver: Receiver) -> None:
    bad = receiver.channel.unary_stream(WATCH)(b"\x0a\x05ab", timeout=5)  # truncated field
    with pytest.raises(grpc.RpcError) as caught:
        next(iter(bad))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
