"""Test helpers for users of tracehound (and for tracehound's own tests and examples).

`OTLPSink` is a real OTLP/gRPC server (traces, logs and metrics services) running in-process on
127.0.0.1, on an ephemeral port, that records every request it receives. Point any OTLP gRPC
exporter at `sink.endpoint` and assert on the protobuf it received::

    with OTLPSink() as sink:
        exporter = OTLPSpanExporter(endpoint=sink.endpoint, insecure=True)
        ...
        assert sink.wait_for(lambda: sink.spans(), timeout=5)
        root = sink.span_named("invoke_agent weather")
        assert sink.attributes(root.span)["tracehound.loops.detected"] is False

`sink.refuse_with(grpc.StatusCode.UNAVAILABLE)` makes it answer every export with that status,
to test retry and failure paths.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tracehound import names
from tracehound.spans import AttributeValue, decode_any_value_proto

__all__ = ["LogRecordItem", "OTLPSink", "SpanItem", "attributes"]


def attributes(key_values: Iterable[Any]) -> dict[str, AttributeValue]:
    """Decode a repeated `KeyValue` (span, resource, log record attributes) into a dict."""
    return {kv.key: decode_any_value_proto(kv.value) for kv in key_values}


@dataclass(frozen=True, slots=True)
class SpanItem:
    """One received span with its resource and scope (protobuf messages)."""

    resource: Any
    scope: Any
    span: Any

    @property
    def name(self) -> str:
        return str(self.span.name)

    @property
    def span_id(self) -> str:
        return bytes(self.span.span_id).hex()

    @property
    def trace_id(self) -> str:
        return bytes(self.span.trace_id).hex()

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        return attributes(self.span.attributes)


@dataclass(frozen=True, slots=True)
class LogRecordItem:
    """One received log record with its resource and scope (protobuf messages)."""

    resource: Any
    scope: Any
    record: Any

    @property
    def event_name(self) -> str:
        return str(self.record.event_name)

    @property
    def span_id(self) -> str:
        return bytes(self.record.span_id).hex()

    @property
    def trace_id(self) -> str:
        return bytes(self.record.trace_id).hex()

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        return attributes(self.record.attributes)


class _Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.traces: list[Any] = []
        self.logs: list[Any] = []
        self.metrics: list[Any] = []
        self.refusal: grpc.StatusCode | None = None
        self.refused = 0

    def keep(self, bucket: list[Any], request: Any, context: Any) -> bool:
        with self.lock:
            if self.refusal is not None:
                self.refused += 1
                refusal = self.refusal
            else:
                bucket.append(request)
                self.changed.notify_all()
                return True
        context.abort(refusal, "refused by OTLPSink")
        return False  # not reached: abort raises


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def Export(self, request: Any, context: Any) -> Any:
        self.recorder.keep(self.recorder.traces, request, context)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def Export(self, request: Any, context: Any) -> Any:
        self.recorder.keep(self.recorder.logs, request, context)
        return logs_service_pb2.ExportLogsServiceResponse()


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def Export(self, request: Any, context: Any) -> Any:
        self.recorder.keep(self.recorder.metrics, request, context)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class OTLPSink:
    """An in-process OTLP/gRPC server on 127.0.0.1 that records the requests it receives."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_workers: int = 4) -> None:
        self._host = host
        self._requested_port = port
        self._max_workers = max_workers
        self._recorder = _Recorder()
        self._server: grpc.Server | None = None
        self._port = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> OTLPSink:
        if self._server is not None:
            return self
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        recorder = self._recorder
        add_traces = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add_logs = logs_service_pb2_grpc.add_LogsServiceServicer_to_server
        add_metrics = metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server
        add_traces(_TraceService(recorder), server)  # type: ignore[no-untyped-call]
        add_logs(_LogsService(recorder), server)  # type: ignore[no-untyped-call]
        add_metrics(_MetricsService(recorder), server)  # type: ignore[no-untyped-call]
        self._port = server.add_insecure_port(f"{self._host}:{self._requested_port}")
        if not self._port:
            raise OSError(f"OTLPSink could not bind {self._host}:{self._requested_port}")
        server.start()
        self._server = server
        return self

    def stop(self, grace: float = 0.5) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace).wait(grace + 5)

    def __enter__(self) -> OTLPSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("OTLPSink is not started")
        return self._port

    @property
    def endpoint(self) -> str:
        """`host:port`, for `OTLPSpanExporter(endpoint=..., insecure=True)`."""
        return f"{self._host}:{self.port}"

    @property
    def url(self) -> str:
        """`http://host:port`, for `OTEL_EXPORTER_OTLP_ENDPOINT`."""
        return f"http://{self.endpoint}"

    def refuse_with(self, status: grpc.StatusCode | None) -> None:
        """Answer every export with `status` from now on (None: accept again)."""
        with self._recorder.lock:
            self._recorder.refusal = status

    @property
    def refused(self) -> int:
        return self._recorder.refused

    # --- what was received -----------------------------------------------------------------------

    @property
    def trace_requests(self) -> list[Any]:
        with self._recorder.lock:
            return list(self._recorder.traces)

    @property
    def log_requests(self) -> list[Any]:
        with self._recorder.lock:
            return list(self._recorder.logs)

    @property
    def metric_requests(self) -> list[Any]:
        with self._recorder.lock:
            return list(self._recorder.metrics)

    def spans(self) -> list[SpanItem]:
        return list(_iter_spans(self.trace_requests))

    def span_named(self, name: str) -> SpanItem:
        found = [s for s in self.spans() if s.name == name]
        if len(found) != 1:
            raise LookupError(f"{len(found)} spans named {name!r}")
        return found[0]

    def log_records(self) -> list[LogRecordItem]:
        return list(_iter_logs(self.log_requests))

    def evaluation_events(self) -> list[LogRecordItem]:
        """The `gen_ai.evaluation.result` log records received."""
        return [r for r in self.log_records() if r.event_name == names.EVENT_EVALUATION_RESULT]

    def metric_names(self) -> set[str]:
        out: set[str] = set()
        for request in self.metric_requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    out.update(m.name for m in sm.metrics)
        return out

    def wait_for(self, predicate: Callable[[], object], timeout: float = 5.0) -> bool:
        """Wait until `predicate()` is truthy (re-checked on every request received)."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._recorder.changed:  # woken by each request; re-checked at least every 0.1 s
                self._recorder.changed.wait(min(remaining, 0.1))

    def clear(self) -> None:
        with self._recorder.lock:
            self._recorder.traces.clear()
            self._recorder.logs.clear()
            self._recorder.metrics.clear()


def _iter_spans(requests: Iterable[Any]) -> Iterator[SpanItem]:
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    yield SpanItem(rs.resource, ss.scope, span)


def _iter_logs(requests: Iterable[Any]) -> Iterator[LogRecordItem]:
    for request in requests:
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    yield LogRecordItem(rl.resource, sl.scope, record)
