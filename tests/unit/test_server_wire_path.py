"""The sidecar's worker on bytes (requests the receiver's scan validated, never parsed: views
from `read_trace_views`, the forwarded request spliced from the bytes received) against its upb
path (the request parsed, edited in place and re-serialized): the same spans, attributes,
events and log records reach the lanes, once parsed. The worker's steps run synchronously."""

from __future__ import annotations

import os
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_server_pipeline import agent_request, plain_request

from helpers import RecordingLane
from tracehound import _accel
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.server import ServeSettings
from tracehound.server import _pipeline as pipeline_module
from tracehound.server._pipeline import Pipeline

pytestmark = pytest.mark.skipif(_accel._in_use is None, reason="needs the C accelerator")


def _requests() -> list[bytes]:
    out: list[bytes] = []
    for index in range(3):
        trace_id = os.urandom(16)
        genai, root_only, _ = agent_request(trace_id, root_in_request=index == 0)
        if index == 2:  # a second resource and scope in the same request
            extra = plain_request(2)
            genai.resource_spans.extend(extra.resource_spans)
        genai.resource_spans[0].schema_url = "https://example.com/resource"
        genai.resource_spans[0].scope_spans[0].schema_url = "https://example.com/scope"
        out.append(genai.SerializeToString())
        if index:
            # the HTTP root later, alone: known trace, routed to the worker as bytes
            out.append(root_only.SerializeToString())
    out.append(plain_request(3).SerializeToString())  # bypassed: never reaches the worker
    return out


def _run(requests: list[bytes], flags: dict[str, str]) -> tuple[list[Any], list[Any], Any]:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none", **flags},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, [EvidenceEvaluator(), LoopEvaluator()], lanes)
    now = [0.0]
    pipeline.engine._clock = lambda: now[0]
    for raw in requests:
        pipeline.submit_traces(None, raw, len(raw))
        pipeline._drain()
        pipeline._finalize(pipeline.engine.poll())
        pipeline._flush_outputs()
        now[0] += 100.0
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0
    traces = [
        (ExportTraceServiceRequest.FromString(data), items)
        for data, items in lanes["traces"].payloads
    ]
    logs = []
    for data, items in lanes["logs"].payloads:
        message = ExportLogsServiceRequest.FromString(data)
        for rl in message.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:  # stamped with the time of emission
                    record.time_unix_nano = record.observed_time_unix_nano = 0
        logs.append((message, items))
    return traces, logs, pipeline.stats


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"mode": "hold"},
        {"span_events": "true"},
        {"mode": "hold", "span_events": "true"},
        {"events": "false"},
    ],
    ids=["stream", "hold", "span-events", "hold-span-events", "no-events"],
)
def test_the_wire_path_forwards_what_the_upb_path_forwards(
    flags: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _requests()
    with monkeypatch.context() as patch:
        parsed: list[bytes] = []
        real_parse = pipeline_module.parse_protobuf

        def parse(signal: Any, data: bytes) -> Any:
            parsed.append(data)
            return real_parse(signal, data)

        patch.setattr(pipeline_module, "parse_protobuf", parse)
        wire = _run(requests, flags)
        assert not parsed  # every request stayed bytes: the fast path was taken
    monkeypatch.setattr(pipeline_module, "read_trace_views", lambda *args: None)
    upb = _run(requests, flags)
    assert wire[0] == upb[0]
    assert wire[1] == upb[1]
    assert wire[2] == upb[2]
    assert any(
        kv.key.startswith("tracehound.")
        for request, _ in wire[0]
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
        for kv in span.attributes
    ), "no result was written: the comparison proves little"


def test_a_result_key_already_on_the_span_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A span that already carries a result attribute cannot take the appended bytes: it is
    rewritten (upb), as the upb path rewrites it."""
    trace_id = os.urandom(16)
    genai, _, _ = agent_request(trace_id)
    for span in genai.resource_spans[0].scope_spans[0].spans:
        kv = span.attributes.add(key="tracehound.loop.detected")
        kv.value.string_value = "stale"
    requests = [genai.SerializeToString()]
    wire = _run(requests, {"span_events": "true"})
    monkeypatch.setattr(pipeline_module, "read_trace_views", lambda *args: None)
    upb = _run(requests, {"span_events": "true"})
    assert wire[0] == upb[0] and wire[1] == upb[1]


def test_a_failure_on_the_wire_path_forwards_the_request_as_received(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug")

    requests = _requests()[:1]
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none"},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, [LoopEvaluator()], lanes)
    monkeypatch.setattr(pipeline_module, "splice_trace_request", broken)
    pipeline.submit_traces(None, requests[0], len(requests[0]))
    pipeline._drain()
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 1
    assert lanes["traces"].payloads == [(requests[0], 7)]  # once: the held root is not re-sent
