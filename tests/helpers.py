"""Shared test helpers: load fixtures, build trajectories, rebuild SDK spans from protobuf.

- `load_fixture(name, fmt)` reads `tests/fixtures/NAME.otlp.json` (or `NAME.pb`) and, when it
  exists, the log events of the same run (`NAME.logs.otlp.json` / `NAME.logs.pb`).
- `trajectory_of(spans, logs)` runs the whole mapping (join logs to spans, normalize, build) and
  returns one `Trajectory` per trace id.
- `readable_spans_from_request(request)` turns an `ExportTraceServiceRequest` into real OTel SDK
  `ReadableSpan` objects, so the same spans can be read the way a `SpanProcessor` sees them.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.util.types import Attributes

from tracehound.conventions import normalize
from tracehound.engine import Engine, FinalizedTrace, SpanOutcome
from tracehound.files import read_paths
from tracehound.spans import (
    LogView,
    SpanView,
    decode_any_value_proto,
    iter_json_logs,
    iter_json_spans,
    iter_proto_logs,
    iter_proto_spans,
)
from tracehound.steps import Trajectory, build_trajectory

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Every fixture that holds spans (NAME.otlp.json + NAME.pb).
FIXTURE_NAMES: tuple[str, ...] = tuple(
    sorted(
        p.name.removesuffix(".otlp.json")
        for p in FIXTURES.glob("*.otlp.json")
        if not p.name.endswith(".logs.otlp.json")
    )
)


def fixture_path(name: str, fmt: str = "json", *, logs: bool = False) -> Path:
    stem = f"{name}.logs" if logs else name
    return FIXTURES / (f"{stem}.otlp.json" if fmt == "json" else f"{stem}.pb")


def has_logs(name: str) -> bool:
    return fixture_path(name, logs=True).exists()


def fixture_json(name: str, *, logs: bool = False) -> dict[str, Any]:
    """The OTLP/JSON document of a fixture, freshly parsed (safe to modify)."""
    data: dict[str, Any] = json.loads(fixture_path(name, "json", logs=logs).read_text("utf-8"))
    return data


def fixture_request(name: str) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(fixture_path(name, "pb").read_bytes())


def fixture_logs_request(name: str) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest.FromString(fixture_path(name, "pb", logs=True).read_bytes())


def load_fixture(
    name: str, fmt: str = "json", *, with_logs: bool = True
) -> tuple[list[SpanView], list[LogView]]:
    """Spans (and log events, if the fixture has them) of one fixture, read by `tracehound.files`.

    `fmt` is "json" (OTLP/JSON, one line) or "pb" (binary protobuf). The files must read cleanly.
    """
    if fmt not in ("json", "pb"):
        raise ValueError(f"unknown fixture format {fmt!r}")
    paths = [fixture_path(name, fmt)]
    if with_logs and has_logs(name):
        paths.append(fixture_path(name, fmt, logs=True))
    telemetry = read_paths(paths)
    assert telemetry.problems == [], telemetry.problems
    assert telemetry.other_documents == []
    return telemetry.spans, telemetry.logs


def spans_from_json(document: dict[str, Any]) -> tuple[list[SpanView], list[str]]:
    errors: list[str] = []
    return list(iter_json_spans(document, errors)), errors


def logs_from_json(document: dict[str, Any]) -> list[LogView]:
    return list(iter_json_logs(document))


def spans_from_proto(request: ExportTraceServiceRequest) -> list[SpanView]:
    return list(iter_proto_spans(request))


def logs_from_proto(request: ExportLogsServiceRequest) -> list[LogView]:
    return list(iter_proto_logs(request))


def trajectory_of(spans: Iterable[SpanView], logs: Iterable[LogView] = ()) -> dict[str, Trajectory]:
    """One trajectory per trace: logs joined by (trace_id, span_id), every span's parent/name known.

    The parents and names passed to the builder cover ALL spans of the trace, GenAI or not, so
    runs are found through pass-through spans and the implicit run is named after the trace root.
    """
    logs_by_span: dict[tuple[str, str], list[LogView]] = defaultdict(list)
    for log in logs:
        if log.trace_id and log.span_id:
            logs_by_span[(log.trace_id, log.span_id)].append(log)
    by_trace: dict[str, list[SpanView]] = defaultdict(list)
    for view in spans:
        by_trace[view.trace_id].append(view)
    out: dict[str, Trajectory] = {}
    for trace_id, views in by_trace.items():
        parents = {v.span_id: v.parent_span_id for v in views}
        names = {v.span_id: v.name for v in views}
        normalized = []
        for view in views:
            ns = normalize(view, logs_by_span.get((view.trace_id, view.span_id)))
            if ns is not None:
                normalized.append(ns)
        out[trace_id] = build_trajectory(trace_id, normalized, parents, names)
    return out


def single_trajectory(spans: Iterable[SpanView], logs: Iterable[LogView] = ()) -> Trajectory:
    """The trajectory of a one-trace input (fails if there is not exactly one trace)."""
    trajectories = trajectory_of(spans, logs)
    assert len(trajectories) == 1, sorted(trajectories)
    return next(iter(trajectories.values()))


def fixture_trajectory(name: str, fmt: str = "json", *, with_logs: bool = True) -> Trajectory:
    spans, logs = load_fixture(name, fmt, with_logs=with_logs)
    return single_trajectory(spans, logs)


# --- SDK ReadableSpan from protobuf -------------------------------------------------------------

# OTLP SpanKind numbering starts at UNSPECIFIED=0, INTERNAL=1; the SDK's at INTERNAL=0.
_SDK_KIND = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_SDK_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200


def _sdk_attribute(value: Any) -> Any:
    # SDK span attributes are scalars or homogeneous sequences (the SDK stores tuples).
    if isinstance(value, list):
        return tuple(value)
    return value


def _sdk_attributes(key_values: Any) -> Attributes:
    return {kv.key: _sdk_attribute(decode_any_value_proto(kv.value)) for kv in key_values}


def readable_spans_from_request(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """Rebuild the SDK `ReadableSpan`s an exporter encoded into `request`.

    Ids, parent (with its remote flag), resource, scope, attributes, events (as SDK `Event`s),
    status, kind and times are all carried over, so `SpanView.from_readable` sees what a
    `SpanProcessor.on_end` would have seen.
    """
    out: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        # Resource(...) rather than Resource.create(...): keep the attributes exactly as encoded,
        # without the SDK's defaults.
        resource = Resource(
            _sdk_attributes(resource_spans.resource.attributes), resource_spans.schema_url or None
        )
        for scope_spans in resource_spans.scope_spans:
            scope = InstrumentationScope(
                scope_spans.scope.name,
                scope_spans.scope.version or None,
                scope_spans.schema_url or None,
                _sdk_attributes(scope_spans.scope.attributes) or None,
            )
            for span in scope_spans.spans:
                trace_id = int.from_bytes(span.trace_id, "big")
                context = SpanContext(
                    trace_id,
                    int.from_bytes(span.span_id, "big"),
                    is_remote=False,
                    trace_flags=TraceFlags(span.flags & 0xFF),
                )
                parent = None
                if span.parent_span_id:
                    parent = SpanContext(
                        trace_id,
                        int.from_bytes(span.parent_span_id, "big"),
                        is_remote=bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE),
                        trace_flags=TraceFlags(span.flags & 0xFF),
                    )
                events = [
                    Event(ev.name, _sdk_attributes(ev.attributes), ev.time_unix_nano)
                    for ev in span.events
                ]
                status_code = _SDK_STATUS.get(span.status.code, StatusCode.UNSET)
                status = Status(
                    status_code,
                    span.status.message if status_code is StatusCode.ERROR else None,
                )
                out.append(
                    ReadableSpan(
                        name=span.name,
                        context=context,
                        parent=parent,
                        resource=resource,
                        attributes=_sdk_attributes(span.attributes),
                        events=events,
                        kind=_SDK_KIND.get(span.kind, SpanKind.INTERNAL),
                        status=status,
                        start_time=span.start_time_unix_nano,
                        end_time=span.end_time_unix_nano,
                        instrumentation_scope=scope,
                    )
                )
    return out


def spans_from_sdk(request: ExportTraceServiceRequest) -> list[SpanView]:
    return [SpanView.from_readable(s) for s in readable_spans_from_request(request)]


def sdk_logs_from_request(request: ExportLogsServiceRequest) -> list[LogView]:
    """Emit the records of `request` through a real SDK `LoggerProvider`; view what it exports.

    The SDK cleans attributes on the way (inner lists become tuples, ...), so the views see what
    an in-process log processor would.
    """
    out: list[LogView] = []
    for resource_logs in request.resource_logs:
        exporter = InMemoryLogRecordExporter()
        provider = LoggerProvider(
            resource=Resource(_sdk_attributes(resource_logs.resource.attributes))
        )
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        for scope_logs in resource_logs.scope_logs:
            logger = provider.get_logger(scope_logs.scope.name, scope_logs.scope.version or None)
            for record in scope_logs.log_records:
                context = None
                if record.trace_id and record.span_id:
                    context = set_span_in_context(
                        NonRecordingSpan(
                            SpanContext(
                                int.from_bytes(record.trace_id, "big"),
                                int.from_bytes(record.span_id, "big"),
                                is_remote=False,
                                trace_flags=TraceFlags(record.flags & 0xFF),
                            )
                        )
                    )
                logger.emit(
                    timestamp=record.time_unix_nano or None,
                    observed_timestamp=record.observed_time_unix_nano or None,
                    context=context,
                    severity_number=SeverityNumber(record.severity_number)
                    if record.severity_number
                    else None,
                    severity_text=record.severity_text or None,
                    body=decode_any_value_proto(record.body) if record.HasField("body") else None,
                    attributes={
                        kv.key: decode_any_value_proto(kv.value) for kv in record.attributes
                    },
                    event_name=record.event_name or None,
                )
        provider.shutdown()
        for readable in exporter.get_finished_logs():
            scope = readable.instrumentation_scope
            out.append(LogView.from_sdk(readable.log_record, scope.name if scope else ""))
    return out


def steps_as_dicts(trajectory: Trajectory) -> list[dict[str, Any]]:
    return [s.to_dict() for s in trajectory.steps]


def feed_engine(
    engine: Engine, views: Iterable[SpanView], *, flush: bool = True
) -> tuple[list[SpanOutcome], list[FinalizedTrace]]:
    """Feed `views` to `engine` in this order; the outcome of each GenAI span once evaluated —
    on arrival, or later for a span the engine deferred until its ancestors arrived
    (`Engine.take_released`) — and, with `flush`, the finalized traces."""
    outcomes: list[SpanOutcome] = []
    for view in views:
        outcome = engine.add_span(view)
        if outcome.genai and not outcome.deferred:
            outcomes.append(outcome)
        outcomes += engine.take_released()
    finalized = engine.flush() if flush else []
    outcomes += engine.take_released()
    return outcomes, finalized


def child_environ() -> dict[str, str]:
    """This process's environment for a spawned `tracehound`, without the `OTEL_*` and
    `TRACEHOUND_*` settings a test does not give it — but with `TRACEHOUND_PURE_PYTHON` kept, so
    the suite's pure-Python run reaches the child processes too."""
    kept = {"TRACEHOUND_PURE_PYTHON"}
    return {
        k: v
        for k, v in os.environ.items()
        if k in kept or not k.startswith(("OTEL_", "TRACEHOUND_"))
    }


class RecordingLane:
    """What the sidecar's pipeline uses of a forwarding lane (a budget, put, offer,
    retry_hint), keeping every payload it is handed with its item count."""

    def __init__(self) -> None:
        from tracehound.server._forward import Budget

        self.budget = Budget(1 << 40)
        self.payloads: list[tuple[bytes, int]] = []

    def put(self, data: bytes, items: int, reserved: int = 0) -> None:
        self.payloads.append((data, items))

    def offer(self, data: bytes, items: int) -> bool:
        self.payloads.append((data, items))
        return True

    def retry_hint(self) -> float:
        return 0.0
