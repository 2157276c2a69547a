"""Memory bounds of `tracehound serve`: peak RSS while each engine limit is hit, end to end.

    python benchmarks/memory_bounds.py                       # the full sizes below
    python benchmarks/memory_bounds.py --spans 100000 --values 5 --traces 20000   # smaller
    python benchmarks/memory_bounds.py --only open_traces --json

Scenarios, each against a fresh `tracehound serve` (stream mode, evidence + loops, forwarding
over OTLP/gRPC to a counting sink in this process):

- `big_trace`: one trace of `--spans` (1,000,000) GenAI chat spans, then its root. The engine
  evaluates `max_spans_per_trace` (10,000) of them; the rest pass through unevaluated and the
  root is marked `tracehound.truncated`.
- `big_values`: one trace of `--values` (20) chat spans, each with a `--value-bytes` (10 MB)
  `gen_ai.input.messages` value (one request each, under the 16 MiB request limit). A value
  over 8 MiB is not parsed (a mapping problem on the span); smaller ones are indexed until
  `max_text_bytes_per_trace` (16 MiB), then the text is dropped and the root marked truncated.
- `open_traces`: `--traces` (100,000) traces of one chat span each, never ended. Past
  `--max-traces` (10,000) the oldest is finalized early (counted in
  `tracehound.traces.finalized_early`); the active-trace gauge never passes the limit.

Reported per scenario: spans sent and forwarded, seconds, peak RSS (`VmHWM`) and RSS at the end,
roots marked truncated, traces finalized early, the largest active-trace count seen.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from concurrent import futures
from typing import Any

import grpc
from _serveproc import ServeProcess, metric_sum
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

MIB = 1024 * 1024


class CountingSink:
    """An OTLP/gRPC receiver that counts spans and truncated roots, keeping nothing (logs and
    metrics are accepted and dropped)."""

    def __init__(self) -> None:
        self.spans = 0
        self.truncated = 0
        self.other_requests = 0  # evaluation log records and metrics: accepted, not counted
        self.lock = threading.Lock()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=[("grpc.max_receive_message_length", -1)],
        )

        def export(data: bytes, context: Any) -> bytes:
            request = ExportTraceServiceRequest.FromString(data)
            spans = truncated = 0
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    spans += len(ss.spans)
                    for span in ss.spans:
                        if not span.parent_span_id:
                            truncated += any(
                                a.key == "tracehound.truncated" and a.value.bool_value
                                for a in span.attributes
                            )
            with self.lock:
                self.spans += spans
                self.truncated += truncated
            return bytes(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        def accept(data: bytes, context: Any) -> bytes:
            with self.lock:
                self.other_requests += 1
            return b""  # an empty Export*ServiceResponse

        services = {
            "opentelemetry.proto.collector.trace.v1.TraceService": export,
            "opentelemetry.proto.collector.logs.v1.LogsService": accept,
            "opentelemetry.proto.collector.metrics.v1.MetricsService": accept,
        }
        self.server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    service, {"Export": grpc.unary_unary_rpc_method_handler(handler)}
                )
                for service, handler in services.items()
            ]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def wait(self, spans: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.spans >= spans:
                return True
            time.sleep(0.05)
        return False


def chat_span(request: ExportTraceServiceRequest, trace_id: bytes, parent: bytes, text: str) -> Any:
    if not request.resource_spans:
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "memory-bounds"
        rs.scope_spans.add().scope.name = "memory.bounds"
    ss = request.resource_spans[0].scope_spans[0]
    span = ss.spans.add(trace_id=trace_id, span_id=os.urandom(8), parent_span_id=parent)
    span.name = "chat model"
    span.kind = 3
    span.start_time_unix_nano = time.time_ns()
    span.end_time_unix_nano = span.start_time_unix_nano + 1000
    for key, value in (
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "m"),
        (
            "gen_ai.input.messages",
            json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}]),
        ),
        (
            "gen_ai.output.messages",
            json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "ok " + text[:40]}]}]
            ),
        ),
    ):
        span.attributes.add(key=key).value.string_value = value
    return span


def root_request(trace_id: bytes, root_id: bytes) -> bytes:
    request = ExportTraceServiceRequest()
    ss = request.resource_spans.add().scope_spans.add()
    ss.scope.name = "memory.bounds"
    span = ss.spans.add(trace_id=trace_id, span_id=root_id, name="invoke_agent a", kind=1)
    span.start_time_unix_nano = time.time_ns() - 10**9
    span.end_time_unix_nano = time.time_ns()
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
    return request.SerializeToString()


def run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    sink = CountingSink()
    extra = ["--forward", f"http://127.0.0.1:{sink.port}", "--evaluators", "evidence,loops"]
    extra += ["--quiet-period", "0.5", "--max-traces", str(args.max_traces)]
    serve = ServeProcess(extra)
    active_max = 0.0
    sampling = threading.Event()

    def sample() -> None:
        nonlocal active_max
        while not sampling.wait(0.5):
            try:
                active = metric_sum(serve.metrics(), "tracehound_traces_active")
            except OSError:
                continue
            active_max = max(active_max, active)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    sent = 0
    if name == "big_trace":
        trace_id, root_id = os.urandom(16), os.urandom(8)
        batch = 1000
        for first in range(0, args.spans, batch):
            request = ExportTraceServiceRequest()
            for i in range(first, min(first + batch, args.spans)):
                chat_span(request, trace_id, root_id, f"question {i} about the build status")
            sent += len(request.resource_spans[0].scope_spans[0].spans)
            serve.send(request.SerializeToString())
        serve.send(root_request(trace_id, root_id))
        sent += 1
    elif name == "big_values":
        trace_id, root_id = os.urandom(16), os.urandom(8)
        words = ("agent tool result evidence answer build status " * 220_000)[: args.value_bytes]
        for i in range(args.values):
            request = ExportTraceServiceRequest()
            chat_span(request, trace_id, root_id, f"{i} {words}")
            serve.send(request.SerializeToString(), timeout=120)
            sent += 1
        serve.send(root_request(trace_id, root_id))
        sent += 1
    else:
        batch = 500
        for first in range(0, args.traces, batch):
            request = ExportTraceServiceRequest()
            for i in range(first, min(first + batch, args.traces)):
                chat_span(request, os.urandom(16), os.urandom(8), f"open trace {i}")
            sent += len(request.resource_spans[0].scope_spans[0].spans)
            serve.send(request.SerializeToString())
    forwarded_all = sink.wait(sent, 600)
    seconds = time.monotonic() - started
    rss, peak = serve.memory_kib()
    samples = serve.metrics()
    sampling.set()
    stopped = serve.stop()
    sink.server.stop(1)
    return {
        "scenario": name,
        "value_bytes": args.value_bytes if name == "big_values" else None,
        "spans_sent": sent,
        "spans_forwarded": sink.spans,
        "all_forwarded": forwarded_all,
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "rss_at_end_mib": round(rss / 1024, 1),
        "truncated_roots": sink.truncated,
        "finalized_early": metric_sum(samples, "tracehound_traces_finalized_early_total"),
        "active_traces_max": active_max,
        "max_traces": args.max_traces,
        "spans_accepted": stopped.get("spans_accepted"),
        "clean_stop": stopped.get("clean"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=20)
    parser.add_argument("--value-bytes", type=int, default=10_000_000)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--max-traces", type=int, default=10_000)
    parser.add_argument("--only", choices=["big_trace", "big_values", "open_traces"])
    parser.add_argument("--json", action="store_true", help="one JSON line per scenario only")
    args = parser.parse_args()
    for name in [args.only] if args.only else ["big_trace", "big_values", "open_traces"]:
        result = run(name, args)
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(f"{name}:")
            for key, value in result.items():
                if key != "scenario":
                    print(f"  {key:<18} {value}")


if __name__ == "__main__":
    main()
