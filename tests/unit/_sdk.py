"""Build spans and log events with the real OpenTelemetry SDK, for convention and trajectory tests.

A scenario is a callable that receives a `Recorder` (a tracer, a logger and a logical clock) and
emits spans and log events the way an instrumentation library would. `capture()` runs it against a
`TracerProvider` + `SimpleSpanProcessor` + `InMemorySpanExporter` and a `LoggerProvider` +
`SimpleLogRecordProcessor` + `InMemoryLogRecordExporter`, and returns the finished `ReadableSpan`s
and `ReadableLogRecord`s. `trajectory()` then does what the engine does: view every span with
`SpanView.from_readable`, every record with `LogView.from_sdk`, join records to their span by
(trace id, span id), normalize, and build the trajectory with the parents and names of *all* spans.

Times come from the clock (explicit start/end/timestamps), and ids from a sequential id generator,
so a scenario gives the same spans on every run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracehound.conventions import NormalizedSpan, normalize
from tracehound.spans import LogView, SpanView
from tracehound.steps import Trajectory, build_trajectory

__all__ = [
    "Captured",
    "Clock",
    "Recorder",
    "capture",
    "dumps",
    "normalize_all",
    "outline",
    "run_outline",
    "trajectory",
]

BASE_NS = 1_700_000_000_000_000_000
TICK_NS = 1_000_000  # 1 ms per tick


def dumps(value: Any) -> str:
    """JSON as instrumentations put it on span attributes (a string)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Clock:
    """A logical clock: every `tick()` is one millisecond later than the previous one."""

    now: int = BASE_NS

    def tick(self, n: int = 1) -> int:
        self.now += n * TICK_NS
        return self.now


class _SequentialIds(IdGenerator):
    """Deterministic ids, so that tie-breaks on span id are the same on every run."""

    def __init__(self) -> None:
        self._span = itertools.count(1)
        self._trace = itertools.count(1)

    def generate_span_id(self) -> int:
        return 0x1000 + next(self._span)

    def generate_trace_id(self) -> int:
        return (0xABC << 64) + next(self._trace)


@dataclass
class Recorder:
    """What a scenario gets: tracers (one per scope), a logger and a clock."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    clock: Clock = field(default_factory=Clock)
    default_scope: str = "tests.synthetic"

    def tracer(self, scope: str | None = None) -> trace.Tracer:
        return self.tracer_provider.get_tracer(scope or self.default_scope)

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        scope: str | None = None,
        start: int | None = None,
        end: int | None = None,
        error: str | None = None,
    ) -> Iterator[trace.Span]:
        """A span current inside the block, started/ended at clock ticks (or the given times).

        `error` sets status ERROR with that description (as instrumentations do on failure).
        """
        start_ns = start if start is not None else self.clock.tick()
        with self.tracer(scope).start_as_current_span(
            name,
            kind=kind,
            attributes=dict(attributes or {}),
            start_time=start_ns,
            end_on_exit=False,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield span
            if error is not None:
                span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end(end_time=end if end is not None else self.clock.tick())

    def event(
        self,
        name: str,
        body: Any = None,
        attributes: Mapping[str, Any] | None = None,
        *,
        name_in_attribute: bool = False,
        scope: str = "tests.synthetic.events",
    ) -> None:
        """A log event joined to the current span (trace and span id come from the context).

        With `name_in_attribute`, the name goes only into an `event.name` attribute and
        `LogRecord.event_name` stays empty (the SDK 1.36 Events API, pydantic-ai 1.x logs mode).
        """
        attrs = dict(attributes or {})
        if name_in_attribute:
            attrs["event.name"] = name
        self.logger_provider.get_logger(scope).emit(
            timestamp=self.clock.tick(),
            body=body,
            attributes=attrs,
            event_name=None if name_in_attribute else name,
        )


@dataclass
class Captured:
    """The finished spans and log records of one scenario."""

    spans: tuple[ReadableSpan, ...]
    logs: tuple[ReadableLogRecord, ...]

    def span(self, name: str) -> ReadableSpan:
        """The only span with this name."""
        found = [s for s in self.spans if s.name == name]
        assert len(found) == 1, f"{len(found)} spans named {name!r}"
        return found[0]

    def span_id(self, name: str) -> str:
        return format(self.span(name).context.span_id, "016x")

    def span_ids(self, name: str) -> list[str]:
        """Ids of all spans with this name, by start time."""
        found = sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time or 0)
        return [format(s.context.span_id, "016x") for s in found]

    @property
    def trace_id(self) -> str:
        ids = {format(s.context.trace_id, "032x") for s in self.spans}
        assert len(ids) == 1, f"scenario made {len(ids)} traces"
        return ids.pop()

    def labels(self) -> dict[str, str]:
        """span id → a readable label: the span name, `name#k` (k-th by start) when repeated."""
        by_name: dict[str, list[ReadableSpan]] = {}
        for s in sorted(self.spans, key=lambda s: (s.start_time or 0, s.context.span_id)):
            by_name.setdefault(s.name, []).append(s)
        out: dict[str, str] = {}
        for name, spans in by_name.items():
            for k, s in enumerate(spans, 1):
                out[format(s.context.span_id, "016x")] = name if len(spans) == 1 else f"{name}#{k}"
        return out

    def span_views(self) -> list[SpanView]:
        return [SpanView.from_readable(s) for s in self.spans]

    def log_views(self) -> list[LogView]:
        return [
            LogView.from_sdk(
                r.log_record, r.instrumentation_scope.name if r.instrumentation_scope else ""
            )
            for r in self.logs
        ]


def capture(
    scenario: Callable[[Recorder], None],
    *,
    service_name: str = "unit-test",
    default_scope: str = "tests.synthetic",
) -> Captured:
    """Run `scenario` against a real SDK pipeline and return what the in-memory exporters got."""
    resource = Resource.create({"service.name": service_name})
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource, id_generator=_SequentialIds())
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    try:
        scenario(Recorder(tracer_provider, logger_provider, default_scope=default_scope))
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()
    return Captured(
        tuple(span_exporter.get_finished_spans()), tuple(log_exporter.get_finished_logs())
    )


def normalize_all(
    views: list[SpanView], logs: list[LogView] | None = None
) -> dict[str, NormalizedSpan | None]:
    """span id → normalized span (None for a non-GenAI span), with log events joined by ids."""
    by_span: dict[tuple[str, str], list[LogView]] = {}
    for log in logs or []:
        by_span.setdefault((log.trace_id, log.span_id), []).append(log)
    return {v.span_id: normalize(v, by_span.get((v.trace_id, v.span_id))) for v in views}


def trajectory(
    source: Captured | tuple[list[SpanView], list[LogView]],
    *,
    order: Callable[[list[NormalizedSpan]], list[NormalizedSpan]] | None = None,
) -> Trajectory:
    """The trajectory of a one-trace scenario, built as the engine builds it.

    `order` may reorder the normalized spans before they reach `build_trajectory` (the order
    property tests use it).
    """
    if isinstance(source, Captured):
        views, logs = source.span_views(), source.log_views()
    else:
        views, logs = source
    trace_ids = {v.trace_id for v in views}
    assert len(trace_ids) == 1, f"expected one trace, got {len(trace_ids)}"
    normalized = [n for n in normalize_all(views, logs).values() if n is not None]
    if order is not None:
        normalized = order(normalized)
    parents = {v.span_id: v.parent_span_id for v in views}
    names = {v.span_id: v.name for v in views}
    return build_trajectory(trace_ids.pop(), normalized, parents, names)


_ID_FIELDS = ("span_id", "run_id", "exec_span_id")


def outline(traj: Trajectory, captured: Captured) -> list[dict[str, Any]]:
    """The steps as `Step.to_dict()` without times, span and run ids replaced by span labels."""
    labels = captured.labels()
    out: list[dict[str, Any]] = []
    for step in traj.steps:
        d = step.to_dict()
        del d["start_ns"], d["end_ns"]
        for key in _ID_FIELDS:
            if key in d:
                d[key] = labels.get(d[key], d[key])
        out.append(d)
    return out


def run_outline(traj: Trajectory, captured: Captured) -> list[tuple[Any, ...]]:
    """Runs as (label, agent name, parent label, depth, implicit, declared output)."""
    labels = captured.labels()
    return [
        (
            labels.get(r.run_id, r.run_id),
            r.agent_name,
            None if r.parent_run_id is None else labels.get(r.parent_run_id, r.parent_run_id),
            r.depth,
            r.implicit,
            r.declared_output,
        )
        for r in traj.runs
    ]
