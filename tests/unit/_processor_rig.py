"""A TracehoundSpanProcessor wired to in-memory SDK exporters, and helpers to replay spans into it.

- `Rig` holds the processor, the exporter it wraps (in-memory unless a test brings its own), and
  in-memory log and metric readers for what it emits.
- `replay(rig, spans, log_records)` feeds ended spans and GenAI log records the way the SDK would:
  log records through a real `LoggerProvider` carrying the companion log processor, spans through
  `on_end`.
- `results_from_events` / `results_from_json` / `results_from_engine` turn the three shapes'
  outputs into the same comparable tuples.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from tracehound.config import ProcessorSettings
from tracehound.evaluators.base import EvaluationResult
from tracehound.processor import TracehoundSpanProcessor
from tracehound.spans import decode_any_value_proto

ResultKey = tuple[Any, ...]

EVENT = "gen_ai.evaluation.result"


@dataclass
class Rig:
    processor: TracehoundSpanProcessor
    exporter: SpanExporter | None
    log_exporter: InMemoryLogRecordExporter
    logger_provider: LoggerProvider
    reader: InMemoryMetricReader
    meter_provider: MeterProvider
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def memory(self) -> InMemorySpanExporter:
        assert isinstance(self.exporter, InMemorySpanExporter)
        return self.exporter

    def exported(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def events(self) -> list[ReadableLogRecord]:
        return [
            r for r in self.log_exporter.get_finished_logs() if r.log_record.event_name == EVENT
        ]

    def results(self) -> list[ResultKey]:
        return results_from_events(self.events())

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], float]]:
        out: list[tuple[dict[str, Any], float]] = []
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.sum  # histogram
                        out.append((dict(point.attributes or {}), value))
        return out

    def close(self) -> None:
        self.processor.shutdown(timeout_millis=5000)
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def make_rig(
    exporter: SpanExporter | str | None = "memory",
    *,
    settings: ProcessorSettings | None = None,
    **kwargs: Any,
) -> Rig:
    """A processor with explicit settings (never the test environment's TRACEHOUND_*)."""
    span_exporter: SpanExporter | None = (
        InMemorySpanExporter() if exporter == "memory" else exporter  # type: ignore[assignment]
    )
    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=Resource.create({"service.name": "rig"}))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    kwargs.setdefault("schedule_delay_millis", 50)
    processor = TracehoundSpanProcessor(
        span_exporter,
        settings=settings or ProcessorSettings(),
        logger_provider=logger_provider,
        meter_provider=meter_provider,
        **kwargs,
    )
    logger_provider.add_log_record_processor(processor.log_processor)
    return Rig(processor, span_exporter, log_exporter, logger_provider, reader, meter_provider)


def sampled(span: ReadableSpan) -> ReadableSpan:
    """The same span with the sampled flag set (OTLP files do not always keep trace flags)."""
    ctx = span.context
    assert ctx is not None
    context = SpanContext(ctx.trace_id, ctx.span_id, ctx.is_remote, TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def replay_logs(rig: Rig, request: ExportLogsServiceRequest) -> int:
    """Emit the records of an OTLP logs request through the rig's LoggerProvider (so the
    companion log processor sees real SDK records). Returns how many were emitted."""
    count = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            logger = rig.logger_provider.get_logger(scope_logs.scope.name)
            for record in scope_logs.log_records:
                context = None
                if record.trace_id and record.span_id:
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
                    severity_number=SeverityNumber(record.severity_number)
                    if record.severity_number
                    else None,
                    body=decode_any_value_proto(record.body) if record.HasField("body") else None,
                    attributes={
                        kv.key: decode_any_value_proto(kv.value) for kv in record.attributes
                    },
                    event_name=record.event_name or None,
                )
                count += 1
    return count


def replay_records(rig: Rig, records: Iterable[ReadableLogRecord]) -> None:
    """Hand captured SDK log records to the companion, as the LoggerProvider would."""
    for record in records:
        rig.processor.log_processor.on_emit(record)  # type: ignore[arg-type]


def replay_spans(rig: Rig, spans: Sequence[ReadableSpan]) -> None:
    for span in spans:
        rig.processor.on_end(span)


def _key(  # noqa: PLR0917
    span_id: Any,
    name: Any,
    score: Any,
    label: Any,
    explanation: Any,
    evaluator: Any,
    error_type: Any,
) -> ResultKey:
    return (
        span_id,
        name,
        None if score is None else float(score),
        label or None,
        explanation or None,
        evaluator,
        error_type or None,
    )


def results_from_events(records: Iterable[ReadableLogRecord]) -> list[ResultKey]:
    out = []
    for r in records:
        a = r.log_record.attributes or {}
        out.append(
            _key(
                format(r.log_record.span_id or 0, "016x"),
                a.get("gen_ai.evaluation.name"),
                a.get("gen_ai.evaluation.score.value"),
                a.get("gen_ai.evaluation.score.label"),
                a.get("gen_ai.evaluation.explanation"),
                a.get("tracehound.evaluator.name"),
                a.get("error.type"),
            )
        )
    return sorted(out, key=repr)


def results_from_json(records: Iterable[dict[str, Any]]) -> list[ResultKey]:
    out = []
    for trace in records:
        for r in trace["results"]:
            out.append(
                _key(
                    r["span_id"],
                    r["name"],
                    r["score"],
                    r["label"],
                    r["explanation"],
                    r["evaluator"],
                    r.get("error_type"),
                )
            )
    return sorted(out, key=repr)


def results_from_engine(results: Iterable[EvaluationResult]) -> list[ResultKey]:
    return sorted(
        (
            _key(
                r.span_id,
                r.name,
                r.score_value,
                r.score_label,
                r.explanation,
                r.evaluator,
                r.error_type,
            )
            for r in results
        ),
        key=repr,
    )


def plain(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, list)) else value
