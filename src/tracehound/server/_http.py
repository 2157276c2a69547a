"""OTLP/HTTP receiver (`POST /v1/traces|logs|metrics`), `/healthz`, `/readyz`, and `/metrics`.

A `ThreadingHTTPServer` (HTTP/1.1, keep-alive; one thread per connection — the SDK exporters keep
one connection each). Per request: the path picks the signal (404 otherwise; 405 for another
method), `Content-Type` picks protobuf or JSON (415 otherwise), the body is read with the size
limit (a `Content-Length` over it is refused with 413 without reading it; chunked bodies are
read up to the limit), `Content-Encoding` is undone with the limit applied to the decompressed
bytes (413), a malformed body gives 400 with a `google.rpc.Status`, backpressure gives 503 with
`Retry-After`; success is 200 with the `Export*ServiceResponse` encoded like the request.

`/healthz` answers 200 while the process works (the evaluation worker is alive); `/readyz` 200
while it accepts data (not shutting down, traces queue not full), else 503.

Responses (here and on `/metrics`) are gzipped when the client's `Accept-Encoding` allows gzip and
the body is over `GZIP_THRESHOLD` bytes (`Content-Encoding: gzip`, `Vary: Accept-Encoding`), as
the OTLP specification allows. Export responses are a few bytes (a `partial_success` message is
capped well below the threshold), so in practice this compresses the Prometheus text and long
error statuses.
"""

from __future__ import annotations

import gzip
import logging
import math
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tracehound.server._otlp import (
    PROTOBUF,
    SIGNALS,
    TRACES,
    BadRequest,
    OTLPError,
    Signal,
    TooLarge,
    decode_request,
    decompress,
    media_type,
    response_body,
    status_body,
)
from tracehound.server._pipeline import Submitted

__all__ = ["GZIP_THRESHOLD", "OTLPHTTPServer", "PrometheusServer", "accepts_gzip", "encode_body"]

_logger = logging.getLogger("tracehound.server.http")

_BY_PATH = {s.http_path: s for s in SIGNALS.values()}
_DISCARD_LIMIT = 64 * 1024 * 1024
Submit = Callable[[Signal, Any, bytes | None, int, str], Submitted]

GZIP_THRESHOLD = 1024
"""Response bodies larger than this (bytes) are gzipped for clients that accept gzip; smaller ones
would gain a few bytes at best, and cost a compression per request."""


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an `Accept-Encoding` value allows gzip: listed (or `x-gzip`), else covered by `*`,
    with a non-zero weight (`gzip;q=0` refuses it; RFC 9110 §12.5.3)."""
    gzip_weight: float | None = None
    any_weight: float | None = None
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        weight = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0  # an unreadable weight: do not assume the client accepts it
        if coding in ("gzip", "x-gzip"):
            gzip_weight = weight
        elif coding == "*":
            any_weight = weight
    chosen = gzip_weight if gzip_weight is not None else any_weight
    return chosen is not None and chosen > 0


def encode_body(body: bytes, accept_encoding: str) -> tuple[bytes, dict[str, str]]:
    """The body to send and the headers that go with it: gzipped when allowed and worth it."""
    if len(body) <= GZIP_THRESHOLD:
        return body, {}
    # From this size the representation depends on Accept-Encoding, compressed or not.
    headers = {"Vary": "Accept-Encoding"}
    if accepts_gzip(accept_encoding):
        compressed = gzip.compress(body, compresslevel=6, mtime=0)
        if len(compressed) < len(body):  # already-dense bytes can grow
            headers["Content-Encoding"] = "gzip"
            return compressed, headers
    return body, headers


class OTLPHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        submit: Submit,
        *,
        live: Callable[[], bool],
        ready: Callable[[], bool],
        on_error: Callable[[Signal, OTLPError], None],
        max_request_bytes: int,
    ) -> None:
        if ":" in address[0]:
            import socket

            self.address_family = socket.AF_INET6
        self.submit = submit
        self.live = live
        self.ready = ready
        self.on_error = on_error
        self.max_request_bytes = max_request_bytes
        self.closing = False
        self.in_flight = 0
        self.in_flight_cond = threading.Condition()
        super().__init__(address, _Handler)

    def wait_in_flight(self, timeout: float) -> bool:
        with self.in_flight_cond:
            return self.in_flight_cond.wait_for(lambda: self.in_flight == 0, timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OTLPHTTPServer
    server_version = "tracehound"

    def log_message(self, format: str, *args: Any) -> None:
        _logger.debug("%s " + format, self.address_string(), *args)

    # --- plumbing --------------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        body, encoding = encode_body(body, self.headers.get("Accept-Encoding", ""))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in {**(headers or {}), **encoding}.items():
            self.send_header(key, value)
        if self.server.closing or self.close_connection:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _error(self, error: OTLPError, mime: str, signal: Signal | None) -> None:
        if signal is not None:
            self.server.on_error(signal, error)
        headers: dict[str, str] = {}
        if error.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
        self._send(error.http_status, response_body(status_body(error), mime), mime, headers)

    def _read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(limit)
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            self.close_connection = True
            raise BadRequest("invalid Content-Length") from None
        if length < 0:
            self.close_connection = True
            raise BadRequest("invalid Content-Length")
        if length > limit:
            # Read and discard a body up to 64 MiB, so that the client (still sending) reads our
            # 413 instead of a reset connection; past that, close without reading it.
            if length <= _DISCARD_LIMIT:
                left = length
                while left > 0:
                    chunk = self.rfile.read(min(left, 65536))
                    if not chunk:
                        break
                    left -= len(chunk)
            else:
                self.close_connection = True
            raise TooLarge(f"request body of {length} bytes is over the {limit}-byte limit")
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            raise BadRequest("truncated body")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                chunk_size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise BadRequest("malformed chunked body") from None
            if chunk_size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            size += chunk_size
            if size > limit:
                self.close_connection = True
                raise TooLarge(f"request body is over the {limit}-byte limit")
            chunks.append(self.rfile.read(chunk_size))
            self.rfile.readline(1024)

    # --- methods ---------------------------------------------------------------------------------

    def do_POST(self) -> None:
        server = self.server
        with server.in_flight_cond:
            server.in_flight += 1
        try:
            self._post()
        finally:
            with server.in_flight_cond:
                server.in_flight -= 1
                server.in_flight_cond.notify_all()

    def _post(self) -> None:
        path = self.path.split("?", 1)[0]
        signal = _BY_PATH.get(path)
        if signal is None:
            self._send(404, b"not found\n", "text/plain")
            return
        mime = PROTOBUF
        try:
            mime = media_type(self.headers.get("Content-Type", ""))
            limit = self.server.max_request_bytes
            body = self._read_body(limit)
            data = decompress(body, self.headers.get("Content-Encoding", ""), limit)
            # Protobuf trace requests go on as bytes: the pipeline parses them only when needed.
            lazy = signal is TRACES and mime == PROTOBUF
            message = None if lazy else decode_request(signal, data, mime)
            answer = self.server.submit(
                signal, message, data if mime == PROTOBUF else None, len(data), "http"
            )
        except OTLPError as error:
            if error.http_status == 415:
                self.close_connection = True  # unknown framing: do not trust the rest of the stream
            self._error(error, mime, signal)
            return
        response = signal.response()
        if answer.rejected or answer.message:
            partial = response.partial_success
            setattr(partial, signal.rejected_field, answer.rejected)
            partial.error_message = answer.message
        content_type = self.headers.get("Content-Type", PROTOBUF).split(";", 1)[0].strip()
        self._send(200, response_body(response, mime), content_type)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            ok = self.server.live()
            self._send(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n", "text/plain")
        elif path == "/readyz":
            ok = self.server.ready()
            self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n", "text/plain")
        elif path in _BY_PATH:
            self._send(405, b"method not allowed\n", "text/plain", {"Allow": "POST"})
        else:
            self._send(404, b"not found\n", "text/plain")

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._send(405, b"method not allowed\n", "text/plain", {"Allow": "POST"})

    do_PUT = do_DELETE = do_PATCH = _not_allowed


class PrometheusServer(ThreadingHTTPServer):
    """`GET /metrics` in the Prometheus text format."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], render: Callable[[], str]) -> None:
        if ":" in address[0]:
            import socket

            self.address_family = socket.AF_INET6
        self.render = render
        super().__init__(address, _PrometheusHandler)


class _PrometheusHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PrometheusServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            body, status, content_type = b"not found\n", 404, "text/plain"
        else:
            try:
                body, status = self.server.render().encode(), 200
            except Exception:
                _logger.exception("rendering /metrics failed")
                body, status = b"error\n", 500
            content_type = "text/plain; version=0.0.4; charset=utf-8"
        body, encoding = encode_body(body, self.headers.get("Accept-Encoding", ""))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in encoding.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
