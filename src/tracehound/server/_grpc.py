"""OTLP/gRPC receiver (TraceService, LogsService, MetricsService) and `grpc.health.v1.Health`.

Handlers are registered as generic handlers over raw bytes: the receiver parses the request
itself (so it keeps the bytes it received, to forward them untouched when nothing changes and to
run the byte-level GenAI pre-check), and answers with serialized responses. gRPC itself enforces
the request size limit (`grpc.max_receive_message_length`, checked on the decompressed message)
with RESOURCE_EXHAUSTED, as the OTLP specification asks.

The health service answers `Check` for `""` (the whole server) and for each OTLP service name:
SERVING while the sidecar accepts data, NOT_SERVING once it is shutting down or while its traces
queue is full; an unknown service name gets NOT_FOUND. (`Watch` is not implemented: Kubernetes
probes and `grpc-health-probe` use `Check`.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError

from tracehound.server._otlp import (
    SIGNALS,
    BadRequest,
    OTLPError,
    Signal,
    retry_info_trailers,
)
from tracehound.server._pipeline import Submitted

__all__ = ["HEALTH_SERVICE", "build_grpc_server", "encode_health_request", "parse_health_response"]

_logger = logging.getLogger("tracehound.server.grpc")

HEALTH_SERVICE = "grpc.health.v1.Health"
SERVING, NOT_SERVING = 1, 2

Submit = Callable[[Signal, Any, bytes | None, int, str], Submitted]
"""(signal, request message, raw bytes, size, transport) → what to answer; raises OTLPError."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


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
    return b"\x0a" + _varint(len(raw)) + raw if raw else b""


def encode_health_response(status: int) -> bytes:
    return b"\x08" + _varint(status) if status else b""


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


class _Handlers:
    def __init__(
        self,
        submit: Submit,
        ready: Callable[[], bool],
        on_error: Callable[[Signal, OTLPError], None],
    ) -> None:
        self._submit = submit
        self._ready = ready
        self._on_error = on_error

    def export(self, signal: Signal) -> Callable[[bytes, Any], bytes]:
        request_class = signal.request
        response_class = signal.response
        rejected_field = signal.rejected_field

        def handle(data: bytes, context: Any) -> bytes:
            try:
                try:
                    message = request_class.FromString(data)
                except (DecodeError, ValueError, RuntimeError) as exc:
                    raise BadRequest(
                        f"malformed protobuf {request_class.__name__}: {exc}"
                    ) from None
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
        try:
            service = parse_health_request(data)
        except (ValueError, UnicodeDecodeError):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed HealthCheckRequest")
            raise
        known = service == "" or any(service == s.grpc_service for s in SIGNALS.values())
        if not known:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {service!r}")
        return encode_health_response(SERVING if self._ready() else NOT_SERVING)


def build_grpc_server(
    host: str,
    port: int,
    submit: Submit,
    *,
    ready: Callable[[], bool],
    on_error: Callable[[Signal, OTLPError], None],
    max_request_bytes: int,
    max_workers: int = 8,
) -> tuple[grpc.Server, int]:
    """A started-not server bound to host:port; returns it with the bound port."""
    handlers = _Handlers(submit, ready, on_error)
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
            HEALTH_SERVICE, {"Check": grpc.unary_unary_rpc_method_handler(handlers.check)}
        )
    )
    server.add_generic_rpc_handlers(generic)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(target)
    if not bound:
        raise OSError(f"cannot listen on {target} (OTLP/gRPC)")
    return server, bound
