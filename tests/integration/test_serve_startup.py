"""`tracehound serve` start-up fails fast and clearly: one line on stderr, exit 2, for an address
it cannot listen on (each receiver, each address), a `file:` target it cannot write, and a
value that does not parse (named with its source). Each case runs the real process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import child_environ

pytestmark = [pytest.mark.integration]

QUICK = ["--forward", "none", "--evaluators", "loops"]


def serve(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    environ = child_environ()
    environ.update(env or {})
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tracehound.cli", "serve", "--log-format", "json", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return result.returncode, result.stderr, time.monotonic() - started


@pytest.fixture
def taken() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize(
    ("receiver", "label"),
    [("--otlp-grpc", "OTLP/gRPC"), ("--otlp-http", "OTLP/HTTP"), ("--prometheus", "Prometheus")],
)
def test_a_port_in_use_is_one_line_naming_the_address(
    tmp_path: Path, taken: int, receiver: str, label: str
) -> None:
    others = {"--otlp-grpc": "127.0.0.1:0", "--otlp-http": "127.0.0.1:0"}
    others[receiver] = f"127.0.0.1:{taken}"
    args = [arg for pair in others.items() for arg in pair]
    code, stderr, seconds = serve([*args, *QUICK], tmp_path)
    assert code == 2, stderr
    assert stderr.splitlines() == [
        f"tracehound serve: cannot start: cannot listen on 127.0.0.1:{taken} ({label}): "
        "address already in use"
    ]
    assert seconds < 20


def test_an_address_that_is_not_local_is_named(tmp_path: Path) -> None:
    # 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
    code, stderr, _ = serve(
        ["--otlp-grpc", "none", "--otlp-http", "192.0.2.1:4318", *QUICK], tmp_path
    )
    assert code == 2
    assert stderr.splitlines() == [
        "tracehound serve: cannot start: cannot listen on 192.0.2.1:4318 (OTLP/HTTP): "
        "cannot assign requested address"
    ]


@pytest.mark.parametrize("check", [[], ["--check-config"]])
def test_an_unwritable_file_target_fails_at_start_up(tmp_path: Path, check: list[str]) -> None:
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("")
    target = not_a_dir / "enriched.jsonl"  # a file below a file: unwritable even as root
    code, stderr, seconds = serve(
        [
            *("--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0"),
            *("--forward", f"file:{target}", "--evaluators", "loops", *check),
        ],
        tmp_path,
    )
    assert code == 2, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("tracehound serve: configuration error: forward (from flag --forward)")
    assert f"cannot write {target}: " in line
    assert seconds < 20


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            ["--max-request-bytes", "lots"],
            {},
            "max_request_bytes (from flag --max-request-bytes): expected a size like 4MiB, "
            "got 'lots'",
        ),
        (
            [],
            {"TRACEHOUND_MAX_QUEUE_BYTES": "12 parsecs"},
            "max_queue_bytes (from env TRACEHOUND_MAX_QUEUE_BYTES): expected a size like "
            "4MiB, got '12 parsecs'",
        ),
        (
            ["--max-traces", "0x10"],
            {},
            "max_traces (from flag --max-traces): expected a whole number >= 1, got '0x10'",
        ),
        (
            ["--shutdown-timeout", "soon"],
            {},
            "shutdown_timeout (from flag --shutdown-timeout): expected a number of seconds "
            ">= 0, got 'soon'",
        ),
    ],
)
def test_value_errors_name_the_setting_and_its_source(
    tmp_path: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    code, stderr, _ = serve([*args, *QUICK], tmp_path, env)
    assert code == 2
    assert stderr.splitlines() == [f"tracehound serve: configuration error: {line}"]
