"""A real Redis for the tests: `$TRACEHOUND_TEST_REDIS_URL` (CI starts one, see `.ci/run`), or a
`redis-server` this module starts on a free 127.0.0.1 port (or a unix socket) and stops.

Each test gets its own key prefix (`redis_url` adds `?prefix=…` to the URL) and only keys under
that prefix are deleted afterwards, so tests never touch anything else in the database.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest

ENV_TEST_REDIS_URL = "TRACEHOUND_TEST_REDIS_URL"
_TEST_DB = 15
_START_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_server_binary() -> str:
    """The `redis-server` executable; fails the test (never skips) when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "the Redis baseline store tests need a real Redis: install redis-server "
            f"(apt-get install redis-server) or set {ENV_TEST_REDIS_URL}=redis://HOST:PORT/DB"
        )
    return binary


@contextmanager
def redis_server(
    *, port: int | None = None, unix_socket: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A throw-away `redis-server` (no persistence) on 127.0.0.1:`port` or on `unix_socket`."""
    command = [
        redis_server_binary(),
        *("--port", str(0 if port is None else port), "--bind", "127.0.0.1"),
        *("--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""),
    ]
    if unix_socket is not None:
        command += ["--unixsocket", str(unix_socket), "--unixsocketperm", "700"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_up(process, port, unix_socket)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _wait_until_up(
    process: subprocess.Popen[bytes], port: int | None, unix_socket: Path | None
) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"redis-server exited at start-up with code {process.returncode}")
        try:
            if unix_socket is not None:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.connect(str(unix_socket))
            else:
                socket.create_connection(("127.0.0.1", port or 0), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"redis-server did not accept connections within {_START_TIMEOUT} s")


@contextmanager
def session_server() -> Iterator[str]:
    """The base URL (with the database) every test of the session shares."""
    configured = os.environ.get(ENV_TEST_REDIS_URL, "").strip()
    if configured:
        yield configured
        return
    port = free_port()
    with redis_server(port=port):
        yield f"redis://127.0.0.1:{port}/{_TEST_DB}"


def with_prefix(url: str, prefix: str) -> str:
    """`url` with the store's `prefix` query parameter set to `prefix`."""
    head, _, query = url.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "prefix"]
    return f"{head}?{urlencode([*pairs, ('prefix', prefix)])}"


@contextmanager
def prefixed_url(base_url: str) -> Iterator[str]:
    """`base_url` with a key prefix of its own; the keys under it are deleted afterwards."""
    import redis

    prefix = f"tracehound-test:{uuid.uuid4().hex[:12]}"
    try:
        yield with_prefix(base_url, prefix)
    finally:
        client = redis.Redis.from_url(base_url)
        try:
            keys = list(client.scan_iter(match=prefix + ":*", count=500))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
        finally:
            client.close()
