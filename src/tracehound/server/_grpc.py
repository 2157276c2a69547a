"""OTLP/gRPC receiver (TraceService, LogsService, MetricsService) and `grpc.health.v1.Health`.

Handlers are registered as generic handlers over raw bytes: the receiver parses the request
itself (so it keeps the bytes it received, to forward them untouched when nothing changes and to
run the byte-level GenAI pre-check), and answers with serialized responses. gRPC itself enforces
the request size limit (`grpc.max_receive_message_length`, checked on the decompressed message)
with RESOURCE_EXHAUSTED, as the OTLP specification asks.

The health service answers `Check` for `""` (the whole server) and for each OTLP service name:
SERVING while the sidecar accepts data, NOT_SERVING once it is shutting down or while its traces
queue is full; an unknown service name gets NOT_FOUND.

`Watch` follows `grpc/health/v1/health.proto` (and `grpcio-health-checking`): the current status
at once, then one message per change; an unknown service name gets SERVICE_UNKNOWN and the stream
stays open. Streams are served without holding a worker thread (grpc's non-blocking stream
handlers, as `grpcio-health-checking` does), so open watches never starve the Export handlers:
one `HealthWatchers` thread pushes the changes. The sidecar reports its own transitions
(`changed()` once started; `close()` when it stops, which sends the final NOT_SERVING and ends every
stream with OK before the server stops); a traces queue filling up or draining, which nothing
reports, is seen by a re-check every `recheck_interval` seconds while watches are open.
"""

from __future__ import annotations

import hmac
import logging
import socket
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]

from tracehound.server._otlp import (
    SIGNALS,
    TRACES,
    OTLPError,
    Signal,
    Unauthenticated,
    encode_varint,
    parse_protobuf,
    retry_info_trailers,
)
from tracehound.server._pipeline import Submitted

__all__ = [
    "HEALTH_SERVICE",
    "HealthWatchers",
    "build_grpc_server",
    "encode_health_request",
    "parse_health_response",
]

_logger = logging.getLogger("tracehound.server.grpc")

HEALTH_SERVICE = "grpc.health.v1.Health"
SERVING, NOT_SERVING, SERVICE_UNKNOWN = 1, 2, 3

Submit = Callable[[Signal, Any, bytes | None, int, str], Submitted]
"""(signal, request message, raw bytes, size, transport) → what to answer; raises OTLPError."""


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def parse_health_request(data: bytes) -> str:
    """`HealthCheckRequest.service` (field 1, string); other fields skipped."""
    pos, service = 0, ""
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            chunk = data[pos : pos + length]
            if len(chunk) != length:
                raise ValueError("truncated field")
            pos += length
            if field == 1:
                service = chunk.decode("utf-8")
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return service


def encode_health_request(service: str) -> bytes:
    raw = service.encode()
    return b"\x0a" + encode_varint(len(raw)) + raw if raw else b""


def encode_health_response(status: int) -> bytes:
    return b"\x08" + encode_varint(status) if status else b""


def parse_health_response(data: bytes) -> int:
    """`HealthCheckResponse.status` (field 1, enum)."""
    pos, status = 0, 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        if tag == 0x08:
            status, pos = _read_varint(data, pos)
        else:
            raise ValueError("unexpected field in HealthCheckResponse")
    return status


def _known_service(service: str) -> bool:
    return service == "" or any(service == s.grpc_service for s in SIGNALS.values())


SendResponse = Callable[[bytes | None], None]
"""grpc's callback of a non-blocking stream: a message, or None to end the stream with OK."""


class _Watch:
    """One open `Watch` stream: sends the status when it differs from the last one sent."""

    def __init__(self, known: bool, send: SendResponse) -> None:
        self.known = known
        self.active = True  # False once the client is gone or the stream was ended
        self._send = send
        self._last = 0  # nothing sent yet (0 is UNKNOWN, never sent)
        # Serializes the sends of this stream, so that statuses arrive in the order computed.
        # Never taken by grpc's termination callback (see `HealthWatchers.watch`).
        self._lock = threading.Lock()

    def refresh(self, ready: Callable[[], bool]) -> None:
        with self._lock:
            self._push(ready)

    def end(self, ready: Callable[[], bool]) -> None:
        with self._lock:
            self._push(ready)
            if self.active:
                self.active = False
                self._send(None)

    def _push(self, ready: Callable[[], bool]) -> None:
        if not self.active:
            return
        # Computed under the stream's lock: a later send never carries an older status.
        status = (SERVING if ready() else NOT_SERVING) if self.known else SERVICE_UNKNOWN
        if status != self._last:
            self._last = status
            self._send(encode_health_response(status))


class HealthWatchers:
    """The open `Watch` streams of one server, and the thread that pushes status changes to them.

    `ready` is the readiness predicate (`Check` answers from it too). `changed()` wakes the thread
    at once (the owner calls it on the transitions it knows of); otherwise it re-checks every
    `recheck_interval` seconds, only while streams are open. `close()` sends each stream its
    final status and ends it; later watches get their status and end at once.
    """

    def __init__(self, ready: Callable[[], bool], *, recheck_interval: float = 1.0) -> None:
        self._ready = ready
        self._recheck_interval = recheck_interval
        self._cond = threading.Condition()
        self._watches: set[_Watch] = set()
        self._wake = False
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def open_streams(self) -> int:
        with self._cond:
            return len(self._watches)

    def watch(self, service: str, context: Any, send: SendResponse) -> None:
        """Serve one `Watch` call: send the current status, then keep the stream for updates."""
        stream = _Watch(_known_service(service), send)
        with self._cond:
            closed = self._closed
            if not closed:
                self._watches.add(stream)
                self._start_thread()
                self._wake = True  # the thread re-waits, now with the re-check interval
                self._cond.notify_all()
        if closed:
            stream.end(self._ready)
            return

        def on_terminated() -> None:
            # Runs on grpc's serving thread, which also completes the sends a pushing thread may
            # be waiting for: it must not take the stream's lock.
            stream.active = False
            with self._cond:
                self._watches.discard(stream)

        if not context.add_callback(on_terminated):
            on_terminated()  # the call already ended (cancelled before this ran)
            return
        stream.refresh(self._ready)

    def changed(self) -> None:
        """Push the current status to every stream now (not at the next re-check)."""
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def close(self) -> None:
        """Send every stream its final status and end it (OK). Idempotent."""
        with self._cond:
            self._closed = True
            watches, self._watches = list(self._watches), set()
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        for stream in watches:
            stream.end(self._ready)
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                name="tracehound-grpc-health", target=self._run, daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                recheck = self._recheck_interval if self._watches else None
                self._cond.wait_for(lambda: self._wake or self._closed, recheck)
                if self._closed:
                    return
                self._wake = False
                watches = list(self._watches)
            for stream in watches:  # outside the lock: a send waits for grpc
                try:
                    stream.refresh(self._ready)
                except Exception:
                    _logger.exception("sending a health status to a Watch stream failed")


class _Handlers:
    def __init__(
        self,
        submit: Submit,
        ready: Callable[[], bool],
        on_error: Callable[[Signal, OTLPError], None],
        watchers: HealthWatchers,
        token: str | None = None,
    ) -> None:
        self._expected = f"Bearer {token}".encode() if token else None
        self._submit = submit
        self._ready = ready
        self._on_error = on_error
        self._watchers = watchers

    def export(self, signal: Signal) -> Callable[[bytes, Any], bytes]:
        lazy = signal is TRACES
        response_class = signal.response
        rejected_field = signal.rejected_field

        expected = self._expected

        def handle(data: bytes, context: Any) -> bytes:
            try:
                if expected is not None and not _authorized(context, expected):
                    raise Unauthenticated("missing or wrong bearer token")
                # Trace requests go on as bytes: the pipeline parses them only when needed.
                message = None if lazy else parse_protobuf(signal, data)
                answer = self._submit(signal, message, data, len(data), "grpc")
            except OTLPError as error:
                self._on_error(signal, error)
                context.set_trailing_metadata(retry_info_trailers(error))
                context.abort(getattr(grpc.StatusCode, error.grpc_name), error.message)
                raise  # not reached: abort raises
            response = response_class()
            if answer.rejected or answer.message:
                partial = response.partial_success
                setattr(partial, rejected_field, answer.rejected)
                partial.error_message = answer.message
            data_out: bytes = response.SerializeToString()
            return data_out

        return handle

    def check(self, data: bytes, context: Any) -> bytes:
        service = self._health_request(data, context)
        if not _known_service(service):
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {service!r}")
        return encode_health_response(SERVING if self._ready() else NOT_SERVING)

    def watch_handler(self) -> Callable[[bytes, Any, SendResponse], None]:
        def watch(data: bytes, context: Any, send_response_callback: SendResponse) -> None:
            service = self._health_request(data, context)
            self._watchers.watch(service, context, send_response_callback)

        # grpc then passes `send_response_callback` and frees the worker thread when this returns
        # (the stream stays open until the callback gets None).
        watch.experimental_non_blocking = True  # type: ignore[attr-defined]
        return watch

    @staticmethod
    def _health_request(data: bytes, context: Any) -> str:
        try:
            return parse_health_request(data)
        except (ValueError, UnicodeDecodeError):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed HealthCheckRequest")
            raise


def _authorized(context: Any, expected: bytes) -> bool:
    for key, value in context.invocation_metadata():
        if key == "authorization":
            given = value.encode() if isinstance(value, str) else value
            return hmac.compare_digest(given.strip(), expected)
    return False


def build_grpc_server(
    host: str,
    port: int,
    submit: Submit,
    *,
    ready: Callable[[], bool],
    on_error: Callable[[Signal, OTLPError], None],
    max_request_bytes: int,
    max_workers: int = 8,
    watchers: HealthWatchers | None = None,
    tls: tuple[bytes, bytes] | None = None,
    token: str | None = None,
) -> tuple[grpc.Server, int]:
    """A started-not server bound to host:port; returns it with the bound port.

    `watchers` holds the health `Watch` streams (default: a new one on `ready`); its owner calls
    `close()` before stopping the server, or the open streams hold the stop for its whole grace.
    `tls` is (PEM key, PEM certificate chain); `token` makes exports require `authorization:
    Bearer <token>` metadata (UNAUTHENTICATED otherwise; health calls stay open).
    """
    handlers = _Handlers(submit, ready, on_error, watchers or HealthWatchers(ready), token)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tracehound-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )
    generic = [
        grpc.method_handlers_generic_handler(
            signal.grpc_service,
            {"Export": grpc.unary_unary_rpc_method_handler(handlers.export(signal))},
        )
        for signal in SIGNALS.values()
    ]
    generic.append(
        grpc.method_handlers_generic_handler(
            HEALTH_SERVICE,
            {
                "Check": grpc.unary_unary_rpc_method_handler(handlers.check),
                "Watch": grpc.unary_stream_rpc_method_handler(handlers.watch_handler()),
            },
        )
    )
    server.add_generic_rpc_handlers(generic)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    # Probed first: grpc's own failure is a C-level log line on stderr that names no receiver.
    reason = bind_failure(host, port) if port else None
    if reason is None:
        try:
            if tls is None:
                bound = server.add_insecure_port(target)
            else:
                bound = server.add_secure_port(target, grpc.ssl_server_credentials([tls]))
        except RuntimeError:  # grpcio ≥ 1.6x raises "Failed to bind" instead of returning 0
            bound = 0
        if not bound:
            reason = "the address is not available"
    if reason is not None:
        raise OSError(f"cannot listen on {target} (OTLP/gRPC): {reason}")
    return server, bound


def bind_failure(host: str, port: int) -> str | None:
    """Why host:port cannot be bound, in words, or None if one of its addresses can be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"cannot resolve the host ({exc.strerror or exc})"
    reason = "the address is not available"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                reason = (exc.strerror or str(exc)).lower()
                continue
        return None
    return reason
