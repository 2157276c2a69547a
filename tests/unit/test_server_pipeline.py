"""The sidecar pipeline in-process: stream/hold forwarding, in-place annotation, the non-GenAI
bypass, known-trace routing, dedupe, redaction and span events; plus the Prometheus rendering
and the JSON log format. Each test runs twice: with the C byte reader and without it."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracehound import _accel
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.server import ServeSettings, Sidecar
from tracehound.server._otlp import TRACES
from tracehound.server._telemetry import (
    JsonFormatter,
    ServerMetrics,
    prometheus_name,
    render_prometheus,
)
from tracehound.testing import OTLPSink

TOOL_RESULT = (
    "The deployment of build 42 failed because migration 0042 timed out after 300 seconds."
)


def value(v: Any) -> AnyValue:
    if isinstance(v, int) and not isinstance(v, bool):
        return AnyValue(int_value=v)
    return AnyValue(string_value=str(v))


def agent_request(
    trace_id: bytes, *, root_in_request: bool = True, scope: str = "app.genai"
) -> tuple[ExportTraceServiceRequest, ExportTraceServiceRequest, bytes]:
    """A GenAI request (3 identical tool calls + answer, children of an HTTP root) and a request
    holding only the HTTP root (non-GenAI). Returns (genai, root-only, root span id)."""
    root_id = os.urandom(8)
    genai = ExportTraceServiceRequest()
    rs = genai.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=value("agent-api"))
    ss = rs.scope_spans.add()
    ss.scope.name = scope
    t = 1_700_000_000_000_000_000
    for i in range(3):
        call = {"type": "tool_call", "id": f"c{i}", "name": "status", "arguments": {"build": 42}}
        chat = ss.spans.add(
            trace_id=trace_id, span_id=os.urandom(8), parent_span_id=root_id, name="chat m"
        )
        chat.start_time_unix_nano, chat.end_time_unix_nano = t + i * 10, t + i * 10 + 5
        for k, v in {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}]),
        }.items():
            chat.attributes.add(key=k, value=value(v))
        tool = ss.spans.add(
            trace_id=trace_id,
            span_id=os.urandom(8),
            parent_span_id=root_id,
            name="execute_tool status",
        )
        tool.start_time_unix_nano, tool.end_time_unix_nano = t + i * 10 + 6, t + i * 10 + 8
        for k, v in {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "status",
            "gen_ai.tool.call.id": f"c{i}",
            "gen_ai.tool.call.arguments": '{"build": 42}',
            "gen_ai.tool.call.result": TOOL_RESULT,
        }.items():
            tool.attributes.add(key=k, value=value(v))
    root_only = ExportTraceServiceRequest()
    rrs = root_only.resource_spans.add()
    rrs.resource.attributes.add(key="service.name", value=value("agent-api"))
    rss = rrs.scope_spans.add()
    rss.scope.name = "opentelemetry.instrumentation.fastapi"
    root = rss.spans.add(trace_id=trace_id, span_id=root_id, name="POST /ask", kind=2)
    root.start_time_unix_nano, root.end_time_unix_nano = t - 1, t + 100
    root.attributes.add(key="http.route", value=value("/ask"))
    if root_in_request:
        ss_root = genai.resource_spans[0].scope_spans.add()
        ss_root.CopyFrom(rss)
    return genai, root_only, root_id


def plain_request(count: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    ss = request.resource_spans.add().scope_spans.add()
    ss.scope.name = "opentelemetry.instrumentation.httpx"
    trace_id = os.urandom(16)
    for i in range(count):
        span = ss.spans.add(trace_id=trace_id, span_id=os.urandom(8), name=f"GET {i}", kind=3)
        span.attributes.add(key="http.request.method", value=value("GET"))
    return request


@pytest.fixture(autouse=True, params=["native", "pure-python"])
def byte_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the C accelerator's byte reader and with the pure-Python one."""
    if request.param == "pure-python":
        monkeypatch.setattr(_accel, "_in_use", None)
    return str(request.param)


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def sidecar(sink: OTLPSink, **flags: Any) -> Sidecar:
    settings = ServeSettings.resolve(
        {
            "otlp_grpc": "none",
            "otlp_http": "127.0.0.1:0",
            "forward": sink.url,
            "quiet_period": "0.2",
            **{k: str(v) for k, v in flags.items()},
        },
        environ={"TRACEHOUND_METRICS": "false"},
    )
    return Sidecar(settings, evaluators=[EvidenceEvaluator(), LoopEvaluator()]).start()


def submit(car: Sidecar, request: ExportTraceServiceRequest) -> Any:
    """As the receivers hand a protobuf trace request over: as bytes, parsed only if needed."""
    raw = request.SerializeToString()
    return car.submit(TRACES, None, raw, len(raw), "test")


def by_id(sink: OTLPSink) -> dict[bytes, Any]:
    return {bytes(s.span.span_id): s for s in sink.spans()}


def test_stream_forwards_evaluated_spans_at_once_and_holds_the_root(sink: OTLPSink) -> None:
    car = sidecar(sink, quiet_period=0.5)
    try:
        genai, _, root_id = agent_request(os.urandom(16))
        submit(car, genai)
        assert sink.wait_for(lambda: len(sink.spans()) == 6, 5)
        assert root_id not in by_id(sink)  # held until the trace is finalized
        looped = [s for s in sink.spans() if s.attributes.get("tracehound.loop.detected")]
        assert looped, "per-span results were written in place"
        assert sink.wait_for(lambda: root_id in by_id(sink), 5)
        root = by_id(sink)[root_id]
        assert root.attributes["tracehound.loops.detected"] is True
        assert root.attributes["http.route"] == "/ask"
        assert root.scope.name == "opentelemetry.instrumentation.fastapi"
        assert root.resource.attributes[0].value.string_value == "agent-api"
    finally:
        car.shutdown()


@pytest.mark.parametrize("mode", ["stream", "hold"])
def test_attributes_the_span_already_carries_are_replaced_not_repeated(
    sink: OTLPSink, mode: str
) -> None:
    car = sidecar(sink, mode=mode, quiet_period=0.3)
    try:
        genai, _, root_id = agent_request(os.urandom(16))
        for ss in genai.resource_spans[0].scope_spans:
            for span in ss.spans:  # stale values of the keys the evaluators write
                for key in ("tracehound.loop.detected", "tracehound.loops.detected"):
                    span.attributes.add(key=key, value=value("stale"))
        submit(car, genai)
        assert sink.wait_for(lambda: root_id in by_id(sink), 5)
        spans = [
            span
            for request in sink.trace_requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
        assert len(spans) == 7
        for span in spans:
            keys = [kv.key for kv in span.attributes]
            assert len(keys) == len(set(keys)), keys
        assert by_id(sink)[root_id].attributes["tracehound.loops.detected"] is True
        looped = [s for s in sink.spans() if s.attributes.get("tracehound.loop.detected") is True]
        assert looped, "the stale per-span value was replaced"
    finally:
        car.shutdown()


def test_hold_forwards_nothing_before_finalization(sink: OTLPSink) -> None:
    car = sidecar(sink, mode="hold", quiet_period=0.4)
    try:
        genai, _, _ = agent_request(os.urandom(16))
        submit(car, genai)
        assert car.pipeline.wait_idle(5)
        assert sink.spans() == []
        assert sink.wait_for(lambda: len(sink.spans()) == 7, 5)
        assert len(sink.trace_requests) == 1
    finally:
        car.shutdown()


def test_non_genai_requests_are_forwarded_byte_for_byte(sink: OTLPSink) -> None:
    car = sidecar(sink)
    try:
        request = plain_request(50)
        submit(car, request)
        assert sink.wait_for(lambda: len(sink.spans()) == 50, 5)
        assert sink.trace_requests[0] == request
        assert car.pipeline.stats.spans_bypassed == 50
        assert car.pipeline.engine.stats.spans_received == 0
    finally:
        car.shutdown()


def test_a_later_non_genai_root_of_a_known_trace_gets_the_trace_results(sink: OTLPSink) -> None:
    car = sidecar(sink)
    try:
        genai, root_only, root_id = agent_request(os.urandom(16), root_in_request=False)
        submit(car, genai)
        assert sink.wait_for(lambda: len(sink.spans()) == 6, 5)
        submit(car, root_only)  # no GenAI key in these bytes, but the trace is known
        assert sink.wait_for(lambda: root_id in by_id(sink), 5)
        assert by_id(sink)[root_id].attributes["tracehound.loops.detected"] is True
        assert car.pipeline.stats.spans_bypassed == 0
    finally:
        car.shutdown()


def test_duplicates_within_and_across_requests(sink: OTLPSink) -> None:
    car = sidecar(sink)
    try:
        request = plain_request(3)
        spans = request.resource_spans[0].scope_spans[0].spans
        spans.add().CopyFrom(spans[0])
        submit(car, request)
        submit(car, request)
        assert car.pipeline.wait_idle(5)
        assert sink.wait_for(lambda: len(sink.spans()) == 3, 5)
        assert car.pipeline.stats.spans_duplicate == 5
    finally:
        car.shutdown()


def test_redaction_and_span_events(sink: OTLPSink) -> None:
    car = sidecar(sink, redact="true")
    car.pipeline._span_events = True  # the TRACEHOUND_SPAN_EVENTS setting
    try:
        genai, _, root_id = agent_request(os.urandom(16))
        submit(car, genai)
        assert sink.wait_for(lambda: root_id in by_id(sink), 5)
        for span in sink.spans():
            assert "gen_ai.tool.call.result" not in span.attributes
            assert "gen_ai.output.messages" not in span.attributes
        assert any(s.attributes.get("tracehound.redacted") for s in sink.spans())
        root = by_id(sink)[root_id]
        assert any(e.name == "gen_ai.evaluation.result" for e in root.span.events)
        # evaluation happened on the content before it was stripped
        assert root.attributes["tracehound.evidence.sources"] == 3
    finally:
        car.shutdown()


def test_own_scope_spans_pass_through_unevaluated(sink: OTLPSink) -> None:
    car = sidecar(sink)
    try:
        genai, _, _ = agent_request(os.urandom(16), scope="tracehound")
        submit(car, genai)
        assert sink.wait_for(lambda: len(sink.spans()) == 7, 5)
        assert car.pipeline.stats.spans_evaluated == 0
        assert not any(k.startswith("tracehound.") for s in sink.spans() for k in s.attributes)
    finally:
        car.shutdown()


def test_shutdown_is_idempotent_and_safe_without_start(sink: OTLPSink) -> None:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none"}, environ={}
    )
    car = Sidecar(settings, evaluators=[LoopEvaluator()])
    assert car.shutdown(1.0) is True
    assert car.shutdown(1.0) is True


# --- telemetry ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "environ", "recorded"),
    [
        ({"forward": "none"}, {}, False),  # nothing to export the metrics to
        ({"forward": "http://127.0.0.1:9"}, {"TRACEHOUND_METRICS": "false"}, False),
        ({"forward": "http://127.0.0.1:9"}, {}, True),  # exported downstream
        ({"forward": "none", "prometheus": "127.0.0.1:0"}, {}, True),  # pulled
    ],
)
def test_evaluation_metrics_are_recorded_only_when_something_reads_them(
    flags: dict[str, str], environ: dict[str, str], recorded: bool
) -> None:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", **flags}, environ=environ
    )
    car = Sidecar(settings, evaluators=[LoopEvaluator()])
    try:
        assert (car.recorder is not None) is recorded
        assert (car.pipeline._recorder is not None) is recorded
    finally:
        car.shutdown(1.0)


def test_prometheus_text_exposition() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = ServerMetrics(provider, "1")
    metrics.request("traces", "grpc", "success")
    metrics.request("traces", "grpc", "success")
    metrics.gauge(
        "tracehound.server.queue.size",
        "By",
        "bytes",
        lambda: [(12.0, {"tracehound.signal": "traces"})],
    )
    histogram = provider.get_meter("t").create_histogram(
        "tracehound.evaluation.duration", unit="s", explicit_bucket_boundaries_advisory=[0.1, 1.0]
    )
    histogram.record(0.5, {"tracehound.stage": 'sp"an'})
    text = render_prometheus(reader.get_metrics_data())
    lines = text.splitlines()
    assert "# TYPE tracehound_server_requests_total counter" in lines
    labels = 'tracehound_outcome="success",tracehound_signal="traces",tracehound_transport="grpc"'
    assert f"tracehound_server_requests_total{{{labels}}} 2" in lines
    assert 'tracehound_server_queue_size_bytes{tracehound_signal="traces"} 12.0' in lines
    assert "# TYPE tracehound_evaluation_duration_seconds histogram" in lines
    assert (
        'tracehound_evaluation_duration_seconds_bucket{tracehound_stage="sp\\"an",le="0.1"} 0'
        in lines
    )
    assert (
        'tracehound_evaluation_duration_seconds_bucket{tracehound_stage="sp\\"an",le="1.0"} 1'
        in lines
    )
    assert (
        'tracehound_evaluation_duration_seconds_bucket{tracehound_stage="sp\\"an",le="+Inf"} 1'
        in lines
    )
    assert 'tracehound_evaluation_duration_seconds_count{tracehound_stage="sp\\"an"} 1' in lines
    assert text.endswith("\n")
    assert render_prometheus(None) == ""
    assert prometheus_name("a.b-c", "{span}", True) == "a_b_c_total"
    provider.shutdown()


def test_json_log_lines() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tracehound.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("forward failed: %s", "UNAVAILABLE", extra={"signal": "traces"})
    finally:
        logger.removeHandler(handler)
    record = json.loads(stream.getvalue())
    assert record["level"] == "warning"
    assert record["message"] == "forward failed: UNAVAILABLE"
    assert record["signal"] == "traces"
    assert record["ts"].endswith("Z")


def test_genai_log_events_make_their_trace_known(sink: OTLPSink) -> None:
    """Legacy instrumentations put the content in log events and emit plain-looking spans: once
    a GenAI event of a trace arrived, its spans go to the engine even from GenAI-free bytes."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    from tracehound.server._otlp import LOGS

    car = sidecar(sink)
    try:
        request = plain_request(2)
        first = request.resource_spans[0].scope_spans[0].spans[0]
        logs = ExportLogsServiceRequest()
        record = logs.resource_logs.add().scope_logs.add().log_records.add()
        record.trace_id, record.span_id = first.trace_id, first.span_id
        record.event_name = "gen_ai.user.message"
        record.body.string_value = "hello"
        raw = logs.SerializeToString()
        car.submit(LOGS, ExportLogsServiceRequest.FromString(raw), raw, len(raw), "test")
        submit(car, request)
        assert car.pipeline.wait_idle(5)
        assert car.pipeline.stats.spans_bypassed == 0
        assert car.pipeline.engine.stats.spans_received == 2
        assert sink.wait_for(lambda: len(sink.spans()) == 2 and sink.log_records(), 5)
    finally:
        car.shutdown()


def test_bad_ids_fall_back_to_the_span_by_span_pass(sink: OTLPSink) -> None:
    car = sidecar(sink)
    try:
        request = plain_request(4)
        spans = request.resource_spans[0].scope_spans[0].spans
        spans[1].parent_span_id = b"\x01\x02"  # only the span-by-span pass sees parents
        spans[2].trace_id = bytes(16)
        answer = submit(car, request)
        assert answer.rejected == 2
        assert sink.wait_for(lambda: len(sink.spans()) == 2, 5)
    finally:
        car.shutdown()


def test_bytes_the_scan_vouched_for_but_upb_refuses_are_forwarded_and_counted(
    sink: OTLPSink, byte_reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defensive path: if the C scan ever accepted bytes that upb then refuses, the request is
    forwarded as received (never lost) and counted as an internal error."""
    car = sidecar(sink)
    try:
        trace_id = os.urandom(16)
        genai, _, _ = agent_request(trace_id, root_in_request=False)
        submit(car, genai)  # the trace is known from now on: the next request is routed
        assert sink.wait_for(lambda: len(sink.spans()) == 6, 5)
        garbage = b"\x0a\xff\xff"  # not a protobuf message
        key = trace_id + os.urandom(8)
        monkeypatch.setattr(
            "tracehound.server._pipeline.scan_trace_request",
            lambda data, validate=False: (False, [key], [0, len(data)]),
        )
        before = car.pipeline.stats.internal_errors
        car.submit(TRACES, None, garbage, len(garbage), "test")
        assert car.pipeline.stats.internal_errors == before + 1
        assert car.pipeline.stats.spans_bypassed == 1
    finally:
        car.shutdown()
