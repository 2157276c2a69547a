"""Soak: `tracehound serve` under a steady load for a long time — RSS, active traces and export
latency must stay flat.

    python benchmarks/soak.py --rate 2000 --duration 600      # the 10-minute soak
    python benchmarks/soak.py --rate 1000 --duration 60       # a one-minute check

`--rate` is in spans per second; the issue's soak runs at half the maximum throughput, i.e.
half the `wall_rate` that `benchmarks/sidecar_throughput.py` reports for GenAI spans on the same
machine. The load is GenAI agent traces of 8 spans (an `invoke_agent` root, 4 `chat`, 3
`execute_tool`; every trace new), sent over OTLP/gRPC by one paced client thread in requests of
`--batch` spans; tracehound forwards to a counting sink in this process.

Every `--interval` seconds one sample: RSS, active traces (`tracehound.traces.active`), held
spans, queued bytes, and the p50/p99 export latency of that window. The first 20 % of the run is
warm-up. The summary fits a line through the rest: RSS and active-trace slopes per minute and
the p99 latency of the first and last windows; `flat` is true when RSS grows less than 2 MiB a
minute, active traces less than 5 % of their mean a minute, and the last p99 is within 2× the
first (or 5 ms of it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from typing import Any

from _serveproc import ServeProcess, metric_sum
from memory_bounds import CountingSink
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TEXT = (
    "The build failed because the integration test timed out waiting for the database; "
    "retrying with a longer timeout made it pass, and the cache was warm the second time."
)


def agent_trace(request: ExportTraceServiceRequest, now: int) -> None:
    if not request.resource_spans:
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "soak"
        rs.scope_spans.add().scope.name = "soak"
    ss = request.resource_spans[0].scope_spans[0]
    trace_id, root_id = os.urandom(16), os.urandom(8)

    def add(
        name: str, attributes: dict[str, str], parent: bytes, span_id: bytes | None = None
    ) -> None:
        span = ss.spans.add(
            trace_id=trace_id, span_id=span_id or os.urandom(8), parent_span_id=parent, name=name
        )
        span.start_time_unix_nano, span.end_time_unix_nano = now, now + 1000
        for key, value in attributes.items():
            span.attributes.add(key=key).value.string_value = value

    for i in range(4):
        add(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": f"{i} {TEXT}"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": TEXT}]}]
                ),
            },
            root_id,
        )
    for i in range(3):
        add(
            "execute_tool status",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "status",
                "gen_ai.tool.call.id": f"c{i}",
                "gen_ai.tool.call.arguments": '{"build": 42}',
                "gen_ai.tool.call.result": TEXT,
            },
            root_id,
        )
    add("invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, b"", root_id)


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return (
        60.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rate", type=float, default=2000.0, help="spans per second")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds")
    parser.add_argument("--batch", type=int, default=128, help="spans per request (x8)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds per sample")
    parser.add_argument("--json", action="store_true", help="JSON lines only")
    args = parser.parse_args()
    sink = CountingSink()
    serve = ServeProcess(
        ["--forward", f"http://127.0.0.1:{sink.port}", "--baselines", "memory"],
        {"TRACEHOUND_QUIET_PERIOD": "1"},
    )
    latencies: list[float] = []
    lock = threading.Lock()
    sent = [0]
    stop = threading.Event()
    traces_per_request = max(args.batch // 8, 1)
    period = traces_per_request * 8 / args.rate

    def load() -> None:
        next_at = time.monotonic()
        while not stop.is_set():
            request = ExportTraceServiceRequest()
            now = time.time_ns()
            for _ in range(traces_per_request):
                agent_trace(request, now)
            payload = request.SerializeToString()
            begun = time.perf_counter()
            serve.send(payload)
            took = time.perf_counter() - begun
            with lock:
                latencies.append(took)
                sent[0] += traces_per_request * 8
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # behind: do not burst to catch up

    sender = threading.Thread(target=load, daemon=True)
    started = time.monotonic()
    sender.start()
    samples: list[dict[str, Any]] = []
    while time.monotonic() - started < args.duration:
        time.sleep(args.interval)
        rss, peak = serve.memory_kib()
        metrics = serve.metrics()
        with lock:
            window, latencies[:] = sorted(latencies), []
            total = sent[0]
        sample = {
            "t_s": round(time.monotonic() - started, 1),
            "spans_sent": total,
            "spans_forwarded": sink.spans,
            "rss_mib": round(rss / 1024, 1),
            "peak_rss_mib": round(peak / 1024, 1),
            "active_traces": metric_sum(metrics, "tracehound_traces_active"),
            "held_spans": metric_sum(metrics, "tracehound_server_spans_held"),
            "queue_bytes": metric_sum(metrics, "tracehound_server_queue_size_bytes"),
            "p50_ms": round(1e3 * window[len(window) // 2], 2) if window else None,
            "p99_ms": round(1e3 * window[min(len(window) - 1, int(len(window) * 0.99))], 2)
            if window
            else None,
        }
        samples.append(sample)
        print(json.dumps(sample) if args.json else sample, flush=True)
    stop.set()
    sender.join(30)
    stopped = serve.stop()
    sink.server.stop(1)
    steady = [s for s in samples if s["t_s"] >= 0.2 * args.duration] or samples
    rss_slope = slope_per_minute([(s["t_s"], s["rss_mib"]) for s in steady])
    active_slope = slope_per_minute([(s["t_s"], s["active_traces"]) for s in steady])
    active_mean = statistics.fmean(s["active_traces"] for s in steady) if steady else 0.0
    first_p99, last_p99 = steady[0]["p99_ms"] or 0.0, steady[-1]["p99_ms"] or 0.0
    summary = {
        "rate_spans_s": args.rate,
        "duration_s": args.duration,
        "spans_sent": samples[-1]["spans_sent"] if samples else 0,
        "achieved_rate_spans_s": round(
            (samples[-1]["spans_sent"] if samples else 0) / args.duration
        ),
        "rss_first_mib": steady[0]["rss_mib"] if steady else None,
        "rss_last_mib": steady[-1]["rss_mib"] if steady else None,
        "rss_slope_mib_per_min": round(rss_slope, 2),
        "active_traces_mean": round(active_mean, 1),
        "active_traces_slope_per_min": round(active_slope, 2),
        "p99_first_ms": first_p99,
        "p99_last_ms": last_p99,
        "flat": rss_slope < 2.0
        and abs(active_slope) <= 0.05 * max(active_mean, 1.0)
        and last_p99 <= max(2 * first_p99, first_p99 + 5.0),
        "clean_stop": stopped.get("clean"),
        "dropped": stopped.get("dropped"),
    }
    print(json.dumps(summary) if args.json else summary, flush=True)


if __name__ == "__main__":
    main()
