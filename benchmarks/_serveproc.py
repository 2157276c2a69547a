"""`tracehound serve` as a child process for the reliability scripts (`memory_bounds.py`,
`soak.py`): start it on ephemeral 127.0.0.1 ports, read its bound addresses and its `stopped`
record, sample its memory and its Prometheus metrics, send OTLP/gRPC requests to it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    def __init__(
        self,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        launcher: Sequence[str] = ("-m", "tracehound.cli"),
    ) -> None:
        environ = {
            k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEHOUND_"))
        }
        environ["PYTHONPATH"] = str(ROOT / "src")
        environ["TRACEHOUND_METRICS"] = "false"
        environ.update(env or {})
        command = [sys.executable, *launcher, "serve", "--log-format", "json"]
        command += ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "none"]
        command += ["--prometheus", "127.0.0.1:0", *args]
        self.process = subprocess.Popen(
            command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=environ
        )
        self.records: list[dict[str, Any]] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            record = self._parse(line)
            if record.get("message") == "listening":
                self.listening = record
                break
        else:
            raise RuntimeError("tracehound serve did not start")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.grpc_target = str(self.listening["otlp_grpc"])
        host, port = str(self.listening["prometheus"]).rsplit(":", 1)
        self._prometheus = (host, int(port))
        self.channel = grpc.insecure_channel(
            self.grpc_target, options=[("grpc.max_send_message_length", -1)]
        )
        self.export = self.channel.unary_unary(TRACES)

    def _parse(self, line: str) -> dict[str, Any]:
        try:
            record: dict[str, Any] = json.loads(line)
        except ValueError:
            record = {"message": line.rstrip()}
        self.records.append(record)
        return record

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._parse(line)

    def send(self, payload: bytes, timeout: float = 30.0) -> bool:
        """Send one request, resending after UNAVAILABLE; False if refused for good."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.export(payload, timeout=30)
                return True
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    return False
                time.sleep(0.01)

    def memory_kib(self) -> tuple[int, int]:
        """(current RSS, peak RSS) in KiB."""
        values = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
        return values.get("VmRSS", 0), values.get("VmHWM", 0)

    def metrics(self) -> dict[str, float]:
        """The Prometheus samples, by their full name with labels."""
        conn = http.client.HTTPConnection(*self._prometheus, timeout=10)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    samples[name] = float(value)
                except ValueError:
                    continue
        return samples

    def stop(self, timeout: float = 120.0) -> dict[str, Any]:
        """SIGTERM, wait; the `stopped` record."""
        self.channel.close()
        self.process.terminate()
        self.process.wait(timeout)
        self._reader.join(10)
        for record in reversed(self.records):
            if record.get("message") == "stopped":
                return record
        return {}


def metric_sum(samples: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in samples.items() if k.split("{", 1)[0] == prefix)
