"""Bounded reads of the OTLP/HTTP receiver, over raw sockets: chunked and `Content-Length`
framing checked strictly and against the size limit before the body is read, the header budget,
slow clients (slowloris) closed at their deadline, the connection cap, and the bearer token."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.server._http import ConnectionLimits, OTLPHTTPServer
from tracehound.server._otlp import OTLPError, Signal
from tracehound.server._pipeline import Submitted

LIMIT = 64 * 1024


@dataclass
class Recorder:
    sizes: list[int] = field(default_factory=list)
    raws: list[bytes | None] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)

    def submit(self, signal: Signal, message: Any, raw: bytes | None, size: int, how: str) -> Any:
        self.sizes.append(size)
        self.raws.append(raw)
        return Submitted()

    def on_error(self, signal: Signal, error: OTLPError) -> None:
        self.errors.append(error.http_status)


@dataclass
class Receiver:
    server: OTLPHTTPServer
    recorder: Recorder

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.server.server_address[1]


def start(limits: ConnectionLimits | None = None, token: str | None = None) -> Receiver:
    recorder = Recorder()
    server = OTLPHTTPServer(
        ("127.0.0.1", 0),
        recorder.submit,
        live=lambda: True,
        ready=lambda: True,
        on_error=recorder.on_error,
        max_request_bytes=LIMIT,
        limits=limits,
        token=token,
    )
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return Receiver(server, recorder)


def stop(receiver: Receiver) -> None:
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture(scope="module")
def shared() -> Iterator[Receiver]:
    receiver = start()
    yield receiver
    stop(receiver)


def exchange(address: tuple[str, int], data: bytes, timeout: float = 10.0) -> bytes:
    """Send `data`, half-close, and read the whole answer until the server closes."""
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close first (it refused without reading everything)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
        return out


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer[9:12])


def head(extra: str = "", te: str = "chunked") -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Transfer-Encoding: {te}\r\n{extra}\r\n"
    ).encode()


def chunked(body: bytes, sizes: list[int], extension: bytes = b"") -> bytes:
    out, pos = b"", 0
    for size in [*sizes, len(body)]:
        piece = body[pos : pos + size]
        if not piece:
            continue
        out += b"%x%s\r\n%s\r\n" % (len(piece), extension, piece)
        pos += len(piece)
    return out + b"0\r\n\r\n"


def test_chunk_size_minus_one_is_refused_without_reading_the_body(shared: Receiver) -> None:
    # Was: rfile.read(-1), reading the whole stream before answering.
    started = time.monotonic()
    answer = exchange(shared.address, head() + b"-1\r\n" + b"x" * 1_000_000)
    assert status_of(answer) == 400
    assert b"malformed chunked body" in answer
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "line", [b"-1", b"+10", b"0x10", b"1_0", b" ", b"g", b"1" * 16, b"10 20", b"\xff"]
)
def test_malformed_chunk_sizes_are_400(shared: Receiver, line: bytes) -> None:
    assert status_of(exchange(shared.address, head() + line + b"\r\nabc\r\n0\r\n\r\n")) == 400


def test_chunked_body_over_the_limit_is_413_and_never_buffered(shared: Receiver) -> None:
    before = len(shared.recorder.sizes)
    chunk = b"y" * 32 * 1024
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(40)) + b"0\r\n\r\n"
    answer = exchange(shared.address, head() + body)
    assert status_of(answer) == 413
    assert len(shared.recorder.sizes) == before  # nothing reached the pipeline


def test_gzip_bomb_in_a_chunked_body_is_413(shared: Receiver) -> None:
    bomb = gzip.compress(b"\0" * (LIMIT * 50))
    assert len(bomb) < LIMIT
    answer = exchange(
        shared.address, head("Content-Encoding: gzip\r\n") + chunked(bomb, [1000] * 3)
    )
    assert status_of(answer) == 413
    assert b"decompressed request is over" in answer


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=8),
    extension=st.sampled_from([b"", b";name=value", b'; a="b"']),
    gzipped=st.booleans(),
)
def test_chunked_bodies_decode_to_what_was_sent(
    shared: Receiver, body: bytes, sizes: list[int], extension: bytes, gzipped: bool
) -> None:
    wire = gzip.compress(body) if gzipped else body
    extra = "Content-Encoding: gzip\r\n" if gzipped else ""
    answer = exchange(shared.address, head(extra) + chunked(wire, sizes, extension))
    assert status_of(answer) == 200
    assert shared.recorder.raws[-1] == body


@pytest.mark.parametrize(
    "headers",
    [
        "Content-Length: +5\r\n",
        "Content-Length: 1_0\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
    ],
)
def test_invalid_content_length_is_400(shared: Receiver, headers: str) -> None:
    request = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"{headers}\r\nhello"
    ).encode()
    assert status_of(exchange(shared.address, request)) == 400


@pytest.mark.parametrize("te", ["gzip, chunked", "identity", "chunked, chunked", "xchunked"])
def test_unsupported_transfer_encodings_are_400(shared: Receiver, te: str) -> None:
    answer = exchange(shared.address, head(te=te) + b"5\r\nhello\r\n0\r\n\r\n")
    assert status_of(answer) == 400


def test_header_count_and_size_are_bounded(shared: Receiver) -> None:
    many = "".join(f"X-H{i}: v\r\n" for i in range(101))
    assert status_of(exchange(shared.address, head(many))) == 431
    # 60 headers of 1.2 KB each: every line is fine, together they pass the 64 KiB budget.
    big = "".join(f"X-H{i}: {'v' * 1200}\r\n" for i in range(60))
    assert status_of(exchange(shared.address, head(big))) == 431
    small = "".join(f"X-H{i}: {'v' * 100}\r\n" for i in range(60))
    assert status_of(exchange(shared.address, head(small) + b"0\r\n\r\n")) == 200


def closed_while_trickling(sock: socket.socket, within: float) -> bool:
    """Send a byte every 0.1 s until the server closes the connection (True) or `within` s."""
    sock.settimeout(0.1)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            sock.sendall(b"a")
            if sock.recv(1) == b"":
                return True
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def test_slow_clients_are_closed_at_their_deadline_and_cannot_hold_every_thread() -> None:
    limits = ConnectionLimits(request_timeout=0.6, read_timeout=5.0, max_connections=3)
    receiver = start(limits)
    slow: list[socket.socket] = []
    try:
        for _ in range(3):  # slowloris: a request line, then one header byte now and then
            sock = socket.create_connection(receiver.address, timeout=5)
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(sock)
        time.sleep(0.2)
        # Every slot is held: the next connection is turned away at once, not left hanging.
        assert status_of(exchange(receiver.address, head() + b"0\r\n\r\n")) == 503
        for sock in slow:
            assert closed_while_trickling(sock, within=3.0)
        # The deadline freed the slots: a normal client is served.
        time.sleep(0.2)
        assert status_of(exchange(receiver.address, head() + b"0\r\n\r\n")) == 200
        assert receiver.server.timed_out >= 3
        assert receiver.recorder.sizes == [0]  # cut-off requests never reached the pipeline
        assert receiver.server.turned_away >= 1
    finally:
        for sock in slow:
            sock.close()
        stop(receiver)


def test_a_body_cut_off_at_the_deadline_is_not_submitted() -> None:
    receiver = start(ConnectionLimits(request_timeout=0.4))
    try:
        with socket.create_connection(receiver.address, timeout=5) as sock:
            sock.sendall(head() + b"10\r\n0123")  # 16 bytes announced, 4 sent
            assert sock.recv(65536) == b""  # closed at the deadline, no answer
        assert receiver.recorder.sizes == []
        assert receiver.server.timed_out == 1
    finally:
        stop(receiver)


def test_idle_keep_alive_connections_are_closed() -> None:
    receiver = start(ConnectionLimits(idle_timeout=0.3))
    try:
        with socket.create_connection(receiver.address, timeout=5) as sock:
            sock.sendall(head() + b"0\r\n\r\n")
            first = sock.recv(65536)
            assert status_of(first) == 200
            started = time.monotonic()
            assert sock.recv(1) == b""  # the server closed the idle connection
            assert time.monotonic() - started < 3
    finally:
        stop(receiver)


def test_bearer_token_is_checked_before_the_body() -> None:
    receiver = start(token="s3cret")
    try:
        body = head() + b"0\r\n\r\n"
        answer = exchange(receiver.address, body)
        assert status_of(answer) == 401
        assert b"WWW-Authenticate: Bearer" in answer
        wrong = exchange(receiver.address, head("Authorization: Bearer nope\r\n") + b"0\r\n\r\n")
        assert status_of(wrong) == 401
        assert receiver.recorder.sizes == []
        assert receiver.recorder.errors == [401, 401]
        good = exchange(receiver.address, head("Authorization: Bearer s3cret\r\n") + b"0\r\n\r\n")
        assert status_of(good) == 200
        assert receiver.recorder.sizes == [0]
    finally:
        stop(receiver)
