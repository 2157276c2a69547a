"""Same spans → same results: `tracehound serve`, the in-process processor and `tracehound eval`.

Every fixture (real captures of each instrumentation library, with their log events when the
library puts content there) goes (1) through the sidecar subprocess via the SDK's OTLP/gRPC
exporters, results read back from the `gen_ai.evaluation.result` log records the downstream
received; (2) through a `TracehoundSpanProcessor` (observe mode) fed the same SDK objects; (3)
through `tracehound eval --format json` on the fixture files. The three result sets must be
equal, and the root span the sidecar forwarded must carry exactly the trace attributes `eval`
reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from _serve import Serve, emit_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags

from helpers import (
    FIXTURE_NAMES,
    fixture_logs_request,
    fixture_path,
    fixture_request,
    has_logs,
    readable_spans_from_request,
)
from tracehound.cli import main as cli_main
from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.processor import TracehoundSpanProcessor
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

Key = tuple[Any, ...]


def key(span_id: Any, attrs: dict[str, Any]) -> Key:
    score = attrs.get("gen_ai.evaluation.score.value", attrs.get("score"))
    return (
        span_id,
        attrs.get("gen_ai.evaluation.name"),
        None if score is None else float(score),
        attrs.get("gen_ai.evaluation.score.label") or None,
        attrs.get("gen_ai.evaluation.explanation") or None,
        attrs.get("tracehound.evaluator.name"),
        attrs.get("error.type") or None,
    )


def from_eval(reports: Iterable[dict[str, Any]]) -> list[Key]:
    out = []
    for report in reports:
        for r in report["results"]:
            out.append(
                (
                    r["span_id"],
                    r["name"],
                    None if r["score"] is None else float(r["score"]),
                    r["label"] or None,
                    r["explanation"] or None,
                    r["evaluator"],
                    r.get("error_type") or None,
                )
            )
    return sorted(out, key=repr)


def plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


@pytest.fixture(scope="module")
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


@pytest.fixture(scope="module")
def serve(sink: OTLPSink) -> Iterator[Serve]:
    process = Serve.start(
        ["--forward", sink.url, "--quiet-period", "0.2", "--evaluators", "evidence,loops"]
    )
    yield process
    assert process.stop() == 0


def eval_reports(name: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    paths = [str(fixture_path(name, "pb"))]
    if has_logs(name):
        paths.append(str(fixture_path(name, "pb", logs=True)))
    capsys.readouterr()
    assert cli_main(["eval", "--format", "json", *paths]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def processor_results(name: str) -> list[Key]:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    processor = TracehoundSpanProcessor(
        settings=ProcessorSettings(),
        engine_config=EngineConfig(quiet_period=60, trace_timeout=120),
        logger_provider=provider,
        meter_provider=NoOpMeterProvider(),
        emit_metrics=False,
    )
    try:
        if has_logs(name):
            emit_logs(fixture_logs_request(name), _Companion(processor))
        for span in readable_spans_from_request(fixture_request(name)):
            processor.on_end(sampled(span))
        assert processor.force_flush(10_000)
        out = []
        for record in memory.get_finished_logs():
            if record.log_record.event_name == "gen_ai.evaluation.result":
                attrs = dict(record.log_record.attributes or {})
                out.append(key(format(record.log_record.span_id or 0, "016x"), attrs))
        return sorted(out, key=repr)
    finally:
        processor.shutdown()


def sampled(span: ReadableSpan) -> ReadableSpan:
    """The same span with the sampled flag set (OTLP captures do not always keep it)."""
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


class _Companion:
    """A log 'exporter' that hands each emitted SDK record to the processor's companion, as a
    LoggerProvider carrying it would."""

    def __init__(self, processor: TracehoundSpanProcessor) -> None:
        self.processor = processor

    def export(self, batch: Any) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        for record in batch:
            self.processor.log_processor.on_emit(record)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_sidecar_processor_and_eval_agree(
    name: str, serve: Serve, sink: OTLPSink, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = eval_reports(name, capsys)
    expected = from_eval(reports)
    assert expected, "eval produced no result"
    assert processor_results(name) == expected

    spans = readable_spans_from_request(fixture_request(name))
    trace_ids = {format(s.context.trace_id, "032x") for s in spans}
    if has_logs(name):
        log_exporter = OTLPLogExporter(endpoint=serve.grpc, insecure=True, timeout=10)
        assert emit_logs(fixture_logs_request(name), log_exporter) > 0
        log_exporter.shutdown()
    exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()

    def sidecar_results() -> list[Key]:
        return sorted(
            (
                key(e.span_id, e.attributes)
                for e in sink.evaluation_events()
                if e.trace_id in trace_ids
            ),
            key=repr,
        )

    sink.wait_for(lambda: sidecar_results() == expected, 15)
    assert sidecar_results() == expected

    # The forwarded root carries exactly the trace attributes eval reports.
    (report,) = reports
    result_spans = {r["span_id"] for r in report["results"]}

    def roots() -> list[Any]:
        return [
            s
            for s in sink.spans()
            if s.trace_id == report["trace_id"]
            and s.span_id in result_spans
            and report["attributes"].keys() <= s.attributes.keys()
        ]

    sink.wait_for(lambda: len(roots()) == 1, 10)
    found = roots()
    assert len(found) == 1, [s.name for s in sink.spans() if s.trace_id == report["trace_id"]]
    for attr, value in report["attributes"].items():
        assert plain(found[0].attributes[attr]) == plain(value), attr
