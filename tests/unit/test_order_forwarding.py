"""Per-span results reach the right spans in the order real SDK exporters send them (children
before their parents), through the sidecar's pipeline (`stream` and `hold`, the C byte reader
and upb) and the in-process processor (wrap mode, `stream` and `hold`): the spans that repeat a
call carry `tracehound.loop.*`, as the engine gives them in parents-first order; every span is
forwarded once. The pipeline's steps run synchronously here, with a clock of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _processor_rig import make_rig, replay_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_order_property import (
    CAPTURES,
    LOOP_CAPTURES,
    fixture_spans,
    parents_first,
    per_span_results,
)

from helpers import RecordingLane, readable_spans_from_request
from tracehound import _accel
from tracehound import names as N
from tracehound.emit import MetricsRecorder
from tracehound.engine import EngineConfig
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.server import ServeSettings
from tracehound.server._otlp import TRACES, decode_request
from tracehound.server._pipeline import Pipeline
from tracehound.spans import decode_any_value_proto


@pytest.fixture(params=["native", "pure-python"])
def byte_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure-python":
        monkeypatch.setattr(_accel, "_in_use", None)
    elif _accel._in_use is None:
        pytest.skip("needs the C accelerator")
    return str(request.param)


def capture_request(name: str) -> ExportTraceServiceRequest:
    data = (CAPTURES / f"{name}.otlp.json").read_bytes()
    request: ExportTraceServiceRequest = decode_request(TRACES, data, "application/json")
    return request


def split(request: ExportTraceServiceRequest, order: list[str] | None) -> Iterator[bytes]:
    """The request's spans one per request, in file order (the SDK's) or in `order` (span ids)."""
    singles: dict[str, bytes] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                one = ExportTraceServiceRequest()
                one_rs = one.resource_spans.add()
                one_rs.resource.CopyFrom(rs.resource)
                one_ss = one_rs.scope_spans.add()
                one_ss.scope.CopyFrom(ss.scope)
                one_ss.spans.add().CopyFrom(span)
                singles[span.span_id.hex()] = one.SerializeToString()
    for span_id in order or list(singles):
        yield singles[span_id]


def forwarded(payloads: list[tuple[bytes, int]]) -> dict[str, dict[str, Any]]:
    """The `tracehound.*` attributes of each forwarded span, by span id (each span once)."""
    out: dict[str, dict[str, Any]] = {}
    for data, _ in payloads:
        for rs in ExportTraceServiceRequest.FromString(data).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span_id = span.span_id.hex()
                    assert span_id not in out, f"{span_id} forwarded twice"
                    out[span_id] = {
                        kv.key: decode_any_value_proto(kv.value)
                        for kv in span.attributes
                        if kv.key.startswith("tracehound.")
                    }
    return out


def run_pipeline(requests: Iterator[bytes], flags: dict[str, str]) -> tuple[Pipeline, Any]:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none", **flags},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, [EvidenceEvaluator(), LoopEvaluator()], lanes)
    now = [0.0]
    pipeline.engine._clock = lambda: now[0]  # still: only the spans' arrival moves things
    for raw in requests:
        pipeline.submit_traces(None, raw, len(raw))
        pipeline._drain()
        pipeline._finalize(pipeline.engine.poll())
        pipeline._flush_outputs()
    before_flush = forwarded(lanes["traces"].payloads)
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0
    return pipeline, (before_flush, forwarded(lanes["traces"].payloads))


def expected_attributes(name: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """The root's id and the per-span attributes the engine gives in parents-first order."""
    (spans,) = fixture_spans(CAPTURES / f"{name}.otlp.json")
    results = per_span_results(spans, parents_first(spans.views))
    out: dict[str, dict[str, Any]] = {}
    for span_id, facts in results.items():
        if span_id == "<trace>":
            continue
        attributes = out.setdefault(span_id, {})
        for *_, attrs in facts:
            attributes.update(dict(attrs))
    return spans.root.span_id, out


def loop_spans(attributes: dict[str, dict[str, Any]]) -> set[str]:
    return {s for s, attrs in attributes.items() if attrs.get(N.ATTR_LOOP_DETECTED)}


@pytest.mark.parametrize("mode", ["stream", "hold"])
@pytest.mark.parametrize("batching", ["one-request", "span-by-span", "parents-first"])
@pytest.mark.parametrize("name", LOOP_CAPTURES)
def test_the_sidecar_puts_per_span_results_on_the_right_spans(
    name: str, batching: str, mode: str, byte_reader: str
) -> None:
    request = capture_request(name)
    root, expected = expected_attributes(name)
    assert len(loop_spans(expected)) >= 2
    (spans,) = fixture_spans(CAPTURES / f"{name}.otlp.json")
    if batching == "one-request":
        requests: Iterator[bytes] = iter([request.SerializeToString()])
    elif batching == "span-by-span":
        requests = split(request, None)
    else:
        requests = split(request, [v.span_id for v in parents_first(spans.views)])
    pipeline, (streamed, got) = run_pipeline(requests, {"mode": mode})
    assert set(got) == {v.span_id for v in spans.views}
    del got[root]  # the trace results
    assert {s: a for s, a in got.items() if a} == {s: a for s, a in expected.items() if a}
    if mode == "stream":  # forwarded as soon as evaluated: once the root arrived
        assert set(streamed) == set(got)
        assert streamed == got
    else:
        assert streamed == {}
    assert pipeline.held_spans == 0


@pytest.mark.parametrize("name", LOOP_CAPTURES[:2])
def test_the_sidecar_forwards_a_span_whose_ancestors_never_come_after_the_delay(
    name: str, byte_reader: str
) -> None:
    """Stream mode, the root never sent: the spans wait `reorder_delay`, then are evaluated and
    forwarded as they are (the loop still found) while the trace is not finalized yet."""
    request = capture_request(name)
    (spans,) = fixture_spans(CAPTURES / f"{name}.otlp.json")
    order = [v.span_id for v in spans.views if v is not spans.root]
    settings = ServeSettings.resolve(
        {
            "otlp_grpc": "none",
            "otlp_http": "127.0.0.1:0",
            "forward": "none",
            "reorder_delay": "0.5",
            "quiet_period": "2",
        },
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {n: RecordingLane() for n in ("traces", "logs", "metrics")}
    reader = InMemoryMetricReader()
    recorder = MetricsRecorder(MeterProvider(metric_readers=[reader]))
    pipeline = Pipeline(settings, [EvidenceEvaluator(), LoopEvaluator()], lanes, recorder=recorder)
    now = [10.0]
    pipeline.engine._clock = lambda: now[0]
    for raw in split(request, order):
        pipeline.submit_traces(None, raw, len(raw))
        pipeline._drain()
    pipeline._finalize(pipeline.engine.poll())
    pipeline._flush_outputs()
    genai = pipeline.held_spans
    assert genai > 0 and len(forwarded(lanes["traces"].payloads)) == len(order) - genai
    now[0] += 0.5
    pipeline._finalize(pipeline.engine.poll())
    pipeline._flush_outputs()
    assert pipeline.held_spans == 0 and pipeline.engine.active_traces == 1
    got = forwarded(lanes["traces"].payloads)
    assert set(got) == set(order)
    assert loop_spans(got)
    assert pipeline.engine.stats.spans_reorder_expired == genai
    data = reader.get_metrics_data()
    assert data is not None
    points = [
        (dict(point.attributes or {}), point.value)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == N.METRIC_SPANS_REORDERED
        for point in metric.data.data_points
    ]
    assert points == [({N.METRIC_ATTR_REORDER_OUTCOME: "expired"}, genai)]


@pytest.mark.parametrize("forwarding", ["stream", "hold"])
@pytest.mark.parametrize("name", LOOP_CAPTURES)
def test_the_processor_puts_per_span_results_on_the_right_spans(name: str, forwarding: str) -> None:
    root, expected = expected_attributes(name)
    rig = make_rig(
        "memory",
        forwarding=forwarding,
        engine_config=EngineConfig(quiet_period=60.0, trace_timeout=120.0),
    )
    try:
        request = capture_request(name)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.flags |= 1  # sampled (the capture's exporter did not write the flags)
        replay_spans(rig, readable_spans_from_request(request))  # in the SDK's order
        assert rig.processor.force_flush(10_000)
        exported = rig.exported()
        got = {
            format(s.context.span_id, "016x"): {
                k: v for k, v in (s.attributes or {}).items() if k.startswith("tracehound.")
            }
            for s in exported
        }
        assert len(got) == len(exported)  # each span once
        del got[root]
        assert {s: a for s, a in got.items() if a} == {
            s: {k: (tuple(v) if isinstance(v, list) else v) for k, v in a.items()}
            for s, a in expected.items()
            if a
        }
        assert len(loop_spans(got)) >= 2
        reordered = rig.processor.stats.spans_reordered
        assert reordered > 0 and rig.processor.stats.spans_reorder_expired == 0
        assert rig.metric_points(N.METRIC_SPANS_REORDERED) == [
            ({N.METRIC_ATTR_REORDER_OUTCOME: "ancestors"}, reordered)
        ]
    finally:
        rig.processor.shutdown()


def test_captures_are_found() -> None:
    for name in LOOP_CAPTURES:
        assert Path(CAPTURES / f"{name}.otlp.json").exists()
