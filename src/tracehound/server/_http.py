"""OTLP/HTTP receiver (`POST /v1/traces|logs|metrics`), `/healthz`, `/readyz`, and `/metrics`.

A `ThreadingHTTPServer` (HTTP/1.1, keep-alive; one thread per connection — the SDK exporters keep
one connection each). Per request: the path picks the signal (404 otherwise; 405 for another
method), `Content-Type` picks protobuf or JSON (415 otherwise), the body is read with the size
limit (a `Content-Length` over it is refused with 413 without reading it; chunked bodies are
read up to the limit), `Content-Encoding` is undone with the limit applied to the decompressed
bytes (413), a malformed body gives 400 with a `google.rpc.Status`, backpressure gives 503 with
`Retry-After`; success is 200 with the `Export*ServiceResponse` encoded like the request.

Bounds (`ConnectionLimits`), so that no client can make the receiver read or hold without limit:
the request line and headers are read within `max_header_bytes` together (431 past it; the
standard library also caps a line at 64 KiB and a request at 100 headers); a `Content-Length`
must be plain digits, a chunked body is decoded strictly (hex sizes only, every chunk checked
against the limit before it is read); a connection may sit idle between requests for
`idle_timeout` s, each read waits at most `read_timeout` s, and a request must have arrived whole
within `request_timeout` s of its first byte, else the connection is closed (a slow client
holds one thread for that long at most); at most `max_connections` connections are served at
once, the next ones get a 503 and are closed. TLS, when configured, is negotiated on the
connection's own thread, within `read_timeout`. An optional bearer token (`Authorization:
Bearer …`) is checked before the body is read (401 otherwise).

`/healthz` answers 200 while the process works (the evaluation worker is alive); `/readyz` 200
while it accepts data (not shutting down, traces queue not full), else 503.

Responses (here and on `/metrics`) are gzipped when the client's `Accept-Encoding` allows gzip and
the body is over `GZIP_THRESHOLD` bytes (`Content-Encoding: gzip`, `Vary: Accept-Encoding`), as
the OTLP specification allows. Export responses are a few bytes (a `partial_success` message is
capped well below the threshold), so in practice this compresses the Prometheus text and long
error statuses.
"""

from __future__ import annotations

import contextlib
import gzip
import hmac
import logging
import math
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    Unauthenticated,
    decode_request,
    decompress,
    media_type,
    response_body,
    status_body,
)
from tracehound.server._pipeline import Submitted

__all__ = [
    "GZIP_THRESHOLD",
    "ConnectionLimits",
    "OTLPHTTPServer",
    "PrometheusServer",
    "accepts_gzip",
    "encode_body",
]

_logger = logging.getLogger("tracehound.server.http")

_BY_PATH = {s.http_path: s for s in SIGNALS.values()}
_DISCARD_LIMIT = 64 * 1024 * 1024
_CHUNK_LINE = 4096  # a chunk-size line with its extensions; a trailer line
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_TRAILERS = 100
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


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How much one HTTP connection may send, and how slowly (see the module docstring)."""

    max_header_bytes: int = 64 * 1024
    idle_timeout: float = 60.0
    read_timeout: float = 10.0
    request_timeout: float = 30.0
    max_connections: int = 256


_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
)


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most `limits.max_connections` of them, each with deadlines
    (enforced by `service_actions`, which the serving loop runs every poll interval)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limits: ConnectionLimits,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.limits = limits
        self.tls = tls
        self._conn_lock = threading.Lock()
        self._connections = 0
        self._deadlines: dict[socket.socket, float] = {}
        self._late: set[socket.socket] = set()
        self.timed_out = 0  # connections closed for being too slow
        self.turned_away = 0  # connections refused at the cap
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            busy = self._connections >= self.limits.max_connections
            if not busy:
                self._connections += 1
        if busy:
            self.turned_away += 1
            try:
                if self.tls is None:
                    request.settimeout(1.0)
                    request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._connections -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone mid-request, a failed TLS handshake: the connection ends, nothing else.
        _logger.debug("connection from %s ended with an error", client_address, exc_info=True)

    def arm(self, connection: socket.socket, seconds: float) -> None:
        with self._conn_lock:
            self._deadlines[connection] = time.monotonic() + seconds

    def disarm(self, connection: socket.socket) -> None:
        with self._conn_lock:
            self._deadlines.pop(connection, None)
            self._late.discard(connection)

    def is_late(self, connection: socket.socket) -> bool:
        """Whether the connection's request passed its deadline (what was read is incomplete)."""
        with self._conn_lock:
            return connection in self._late

    def service_actions(self) -> None:
        if not self._deadlines:
            return
        now = time.monotonic()
        with self._conn_lock:
            late = [c for c, d in self._deadlines.items() if d <= now]
            for connection in late:
                del self._deadlines[connection]
                self._late.add(connection)
        for connection in late:
            self.timed_out += 1
            # The blocked read returns end-of-file; the handler closes the connection.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RD)


class OTLPHTTPServer(_BoundedServer):
    def __init__(
        self,
        address: tuple[str, int],
        submit: Submit,
        *,
        live: Callable[[], bool],
        ready: Callable[[], bool],
        on_error: Callable[[Signal, OTLPError], None],
        max_request_bytes: int,
        limits: ConnectionLimits | None = None,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
    ) -> None:
        self.submit = submit
        self.live = live
        self.ready = ready
        self.on_error = on_error
        self.max_request_bytes = max_request_bytes
        self.expected_authorization = f"Bearer {token}".encode() if token else None
        self.closing = False
        self.in_flight = 0
        self.in_flight_cond = threading.Condition()
        super().__init__(address, _Handler, limits or ConnectionLimits(), tls)

    def wait_in_flight(self, timeout: float) -> bool:
        with self.in_flight_cond:
            return self.in_flight_cond.wait_for(lambda: self.in_flight == 0, timeout)


class _HeaderBudget:
    """`rfile` while the headers are parsed: ends them once `left` bytes have been read."""

    def __init__(self, raw: Any, left: int) -> None:
        self.raw = raw
        self.left = left
        self.exceeded = False

    def readline(self, limit: int = -1) -> bytes:
        if self.left <= 0:
            self.exceeded = True
            return b"\r\n"
        line: bytes = self.raw.readline(self.left if limit < 0 else min(limit, self.left))
        self.left -= len(line)
        if self.left <= 0 and not line.endswith(b"\n"):
            self.exceeded = True
            return b"\r\n"
        return line


class _BoundedHandler(BaseHTTPRequestHandler):
    """Deadlines, the header budget and TLS for one connection of a `_BoundedServer`."""

    protocol_version = "HTTP/1.1"
    server: _BoundedServer

    def setup(self) -> None:
        limits = self.server.limits
        self.request.settimeout(limits.read_timeout)
        if self.server.tls is not None:  # the handshake runs here, not on the accepting thread
            raw = self.request
            self.server.arm(raw, limits.request_timeout)
            try:
                self.request = self.server.tls.wrap_socket(raw, server_side=True)
            finally:
                self.server.disarm(raw)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.server.tls is not None:
                self.request.close()

    def handle_one_request(self) -> None:
        limits = self.server.limits
        connection = self.connection
        try:  # idle between two requests: up to idle_timeout
            connection.settimeout(limits.idle_timeout)
            if not self.rfile.peek(1):  # type: ignore[attr-defined]  # a BufferedReader
                self.close_connection = True
                return
            connection.settimeout(limits.read_timeout)
        except (OSError, ValueError):
            self.close_connection = True
            return
        self.server.arm(connection, limits.request_timeout)
        try:
            super().handle_one_request()
        finally:
            self.server.disarm(connection)

    def parse_request(self) -> bool:
        raw = self.rfile
        line: bytes = self.raw_requestline  # type: ignore[attr-defined]
        budget = _HeaderBudget(raw, self.server.limits.max_header_bytes - len(line))
        self.rfile = budget  # type: ignore[assignment]
        try:
            ok = super().parse_request()
        finally:
            self.rfile = raw
        if ok and self.server.is_late(self.connection):
            self.close_connection = True  # the headers were cut off at the deadline
            return False
        if ok and budget.exceeded:
            self.close_connection = True
            self.send_error(431, "Request Header Fields Too Large")
            return False
        return ok


class _Handler(_BoundedHandler):
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
        codings = [
            c.strip().lower()
            for c in ",".join(self.headers.get_all("Transfer-Encoding") or ()).split(",")
            if c.strip()
        ]
        if codings:
            if codings != ["chunked"]:
                self.close_connection = True
                raise BadRequest(f"unsupported Transfer-Encoding {', '.join(codings)!r}")
            if "Content-Length" in self.headers:  # RFC 9112 §6.3: chunked wins, then close
                self.close_connection = True
            return self._read_chunked(limit)
        lengths = {v.strip() for v in self.headers.get_all("Content-Length") or ()}
        if not lengths:
            return b""
        length_header = lengths.pop()
        if lengths or not (length_header.isascii() and length_header.isdigit()):
            self.close_connection = True
            raise BadRequest("invalid Content-Length")
        length = int(length_header)
        if length > limit:
            # Read and discard a body up to 64 MiB, so that the client (still sending) reads our
            # 413 instead of a reset connection; past that, close without reading it.
            if length <= _DISCARD_LIMIT:
                self._discard(length)
            else:
                self.close_connection = True
            raise TooLarge(f"request body of {length} bytes is over the {limit}-byte limit")
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            raise BadRequest("truncated body")
        return body

    def _discard(self, length: int) -> bool:
        """Read and drop `length` bytes; False (and the connection closes) if they never come."""
        left = length
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                self.close_connection = True
                return False
            left -= len(chunk)
        return True

    def _read_chunked(self, limit: int) -> bytes:
        """A chunked body, strictly: hex sizes (no sign, no prefix), each chunk checked against
        the limit before it is read. Over the limit, the rest is read and dropped up to 64 MiB
        (the client then reads the 413), else the connection closes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(_CHUNK_LINE + 1)
            head = line.split(b";", 1)[0].strip(b" \t\r\n")
            if not line.endswith(b"\n") or not _CHUNK_SIZE.fullmatch(head):
                self.close_connection = True
                raise BadRequest("malformed chunked body")
            chunk_size = int(head, 16)
            if chunk_size == 0:
                for _ in range(_TRAILERS):
                    trailer = self.rfile.readline(_CHUNK_LINE + 1)
                    if trailer in (b"\r\n", b"\n"):
                        break
                    if not trailer.endswith(b"\n"):
                        self.close_connection = True
                        raise BadRequest("malformed chunked body trailer")
                else:
                    self.close_connection = True
                    raise BadRequest("too many trailer fields")
                if size > limit:
                    raise TooLarge(f"request body of {size} bytes is over the {limit}-byte limit")
                return b"".join(chunks)
            size += chunk_size
            if size > limit:
                chunks = []
                if size > _DISCARD_LIMIT or not self._discard(chunk_size):
                    self.close_connection = True
                    raise TooLarge(f"request body is over the {limit}-byte limit")
            else:
                chunk = self.rfile.read(chunk_size)
                if len(chunk) != chunk_size:
                    self.close_connection = True
                    raise BadRequest("truncated chunked body")
                chunks.append(chunk)
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise BadRequest("malformed chunked body")

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
        expected = self.server.expected_authorization
        if expected is not None and not hmac.compare_digest(
            self.headers.get("Authorization", "").strip().encode(), expected
        ):
            self.close_connection = True  # the body is not read
            self.server.on_error(signal, Unauthenticated("missing or wrong bearer token"))
            self._send(
                401, b"unauthorized\n", "text/plain", {"WWW-Authenticate": 'Bearer realm="otlp"'}
            )
            return
        try:
            mime = media_type(self.headers.get("Content-Type", ""))
            limit = self.server.max_request_bytes
            body = self._read_body(limit)
            if self.server.is_late(self.connection):
                self.close_connection = True  # the body was cut off at the deadline
                return
            data = decompress(body, self.headers.get("Content-Encoding", ""), limit)
            # Protobuf trace requests go on as bytes: the pipeline parses them only when needed.
            lazy = signal is TRACES and mime == PROTOBUF
            message = None if lazy else decode_request(signal, data, mime)
            answer = self.server.submit(
                signal, message, data if mime == PROTOBUF else None, len(data), "http"
            )
        except OTLPError as error:
            if self.server.is_late(self.connection):
                self.close_connection = True  # cut off at the deadline: no answer
                return
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


class PrometheusServer(_BoundedServer):
    """`GET /metrics` in the Prometheus text format."""

    def __init__(
        self,
        address: tuple[str, int],
        render: Callable[[], str],
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.render = render
        super().__init__(address, _PrometheusHandler, limits or ConnectionLimits())


class _PrometheusHandler(_BoundedHandler):
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
