"""`tracehound serve` as a subprocess on 127.0.0.1 ephemeral ports, for integration tests.

`Serve.start(args, env)` runs `python -m tracehound.cli serve --otlp-grpc 127.0.0.1:0 --otlp-http
127.0.0.1:0 ARGS…`, reads its JSON log lines from stderr on a thread, and returns once the
`listening` record gives the bound addresses. `stop()` sends SIGTERM and waits (bounded) for the
exit code. Every wait here has a timeout.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from helpers import child_environ
from tracehound.spans import decode_any_value_proto

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0


class Serve:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.records: list[dict[str, Any]] = []
        self.text: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.listening: dict[str, Any] = {}

    @classmethod
    def start(
        cls,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        *,
        receivers: bool = True,
    ) -> Serve:
        command = [sys.executable, "-m", "tracehound.cli", "serve"]
        if receivers:
            command += ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0"]
        command += ["--log-format", "json", *args]
        environ = child_environ()
        environ.setdefault("OTEL_METRIC_EXPORT_INTERVAL", "60000")
        environ.update(env or {})
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=environ,
        )
        serve = cls(process)
        record = serve.wait_record(lambda r: r.get("message") == "listening", START_TIMEOUT)
        if record is None:
            serve.kill()
            raise AssertionError("tracehound serve did not start:\n" + "\n".join(serve.text))
        serve.listening = record
        return serve

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            line = line.rstrip("\n")
            with self._lock:
                self.text.append(line)
                with contextlib.suppress(ValueError):
                    self.records.append(json.loads(line))
            self._lines.put(line)
        self._lines.put(None)

    def wait_record(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                for record in self.records:
                    if predicate(record):
                        return record
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                if (
                    self._lines.get(timeout=min(remaining, 0.2)) is None
                    and self.process.poll() is not None
                ):
                    with self._lock:
                        found = [r for r in self.records if predicate(r)]
                    return found[0] if found else None
            except queue.Empty:
                pass

    @property
    def grpc(self) -> str:
        return str(self.listening["otlp_grpc"])

    @property
    def http(self) -> str:
        return "http://" + str(self.listening["otlp_http"])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                "tracehound serve did not stop in time:\n" + "\n".join(self.text)
            ) from None
        self._reader.join(5)
        self._close()
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(5)
        self._close()

    def _close(self) -> None:
        if self.process.stderr is not None and not self.process.stderr.closed:
            self.process.stderr.close()

    def stopped_record(self) -> dict[str, Any]:
        record = self.wait_record(lambda r: r.get("message") == "stopped", 5)
        assert record is not None, "\n".join(self.text)
        return record


def emit_logs(request: ExportLogsServiceRequest, exporter: Any) -> int:
    """Re-emit a captured logs request through a real LoggerProvider into `exporter`."""
    count = 0
    for resource_logs in request.resource_logs:
        attrs = {
            kv.key: decode_any_value_proto(kv.value) for kv in resource_logs.resource.attributes
        }
        provider = LoggerProvider(resource=Resource(attrs))
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        for scope_logs in resource_logs.scope_logs:
            logger = provider.get_logger(scope_logs.scope.name)
            for record in scope_logs.log_records:
                context = set_span_in_context(
                    NonRecordingSpan(
                        SpanContext(
                            int.from_bytes(record.trace_id, "big"),
                            int.from_bytes(record.span_id, "big"),
                            is_remote=False,
                            trace_flags=TraceFlags(TraceFlags.SAMPLED),
                        )
                    )
                )
                logger.emit(
                    timestamp=record.time_unix_nano or None,
                    context=context,
                    severity_number=SeverityNumber(record.severity_number or 9),
                    body=decode_any_value_proto(record.body) if record.HasField("body") else None,
                    attributes={
                        kv.key: decode_any_value_proto(kv.value) for kv in record.attributes
                    },
                    event_name=record.event_name or None,
                )
                count += 1
        provider.force_flush()
    return count
