"""Soak: `tracehound serve` under a steady load for a long time — RSS, active traces and export
latency must stay flat once its bounded caches are full.

    python benchmarks/soak.py --rate 800 --duration 1800     # the soak (R: half the maximum)
    python benchmarks/soak.py --rate 100000 --duration 60    # overdriven: the maximum throughput
    python benchmarks/soak.py --rate 800 --duration 600 --probe probe.jsonl   # what grows

`--rate` is in spans per second; the soak runs at half the maximum throughput for this workload
on the same machine, which an overdriven run measures: `forwarded_rate_spans_s` (what the sink
received per second after warm-up) is then the maximum. The load is GenAI agent traces of 8 spans
(an `invoke_agent` root, 4 `chat`, 3 `execute_tool`; every trace new), sent over OTLP/gRPC by
one paced client thread in requests of `--batch` spans; tracehound forwards to a counting sink
in this process.

Every `--interval` seconds one sample: RSS, active traces (`tracehound.traces.active`), held
spans, queued bytes, and the p50/p99 export latency of that window.

Warm-up: the sidecar keeps three bounded caches of ids that fill at the load's pace — the
duplicate filter (2 × `DEDUPE_WINDOW` span keys), the engine's finalized traces
(`finalized_cache_size` trace ids) and the pipeline's known traces (`max_traces` +
`finalized_cache_size`) — about 50 MiB when full, so RSS rises until the last has filled:
`(max_traces + finalized_cache_size) / traces per second` (1,100 s at 800 spans/s). The judged
window starts then (or at `--warmup` seconds) and must last 5 minutes at least, else the verdict
is `too short`. In the judged window: RSS must grow less than `--rss-slope` (0.5) MiB a minute
(fitted line) — a leak of 100 bytes a trace at 100 traces/s is 0.57 MiB a minute; active traces
less than 5 % of their mean a minute; the median p99 latency of its last third within 1.5× that
of its first third (or 5 ms of it). The summary also gives RSS at the start, at the end of
warm-up and at the end, and the slopes over the whole run and its second half.
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

from tracehound.engine import EngineConfig
from tracehound.server._pipeline import DEDUPE_WINDOW

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


def cache_fill_seconds(rate: float) -> float:
    """Seconds until the sidecar's id caches are full at `rate` spans/s (8-span traces)."""
    config = EngineConfig()
    traces_per_second = rate / 8
    return max(
        2 * DEDUPE_WINDOW / rate,
        config.finalized_cache_size / traces_per_second,
        (config.max_traces + config.finalized_cache_size) / traces_per_second,
    )


def _median_p99(samples: list[dict[str, Any]]) -> float:
    values = [s["p99_ms"] for s in samples if s["p99_ms"] is not None]
    return statistics.median(values) if values else 0.0


def judge(
    samples: list[dict[str, Any]],
    rate: float,
    duration: float,
    warmup: float | None,
    rss_slope_limit: float,
) -> dict[str, Any]:
    """The summary and the verdict (see the module doc)."""
    fill = cache_fill_seconds(rate)
    start = fill if warmup is None else warmup
    judged = [s for s in samples if s["t_s"] >= start]
    second_half = [s for s in samples if s["t_s"] >= duration / 2]
    warm = judged[0] if judged else (samples[-1] if samples else None)
    last = samples[-1] if samples else None

    def slope(points: list[dict[str, Any]], key: str) -> float | None:
        return round(slope_per_minute([(s["t_s"], s[key]) for s in points]), 2) if points else None

    summary: dict[str, Any] = {
        "rate_spans_s": rate,
        "duration_s": duration,
        "spans_sent": last["spans_sent"] if last else 0,
        "achieved_rate_spans_s": round((last["spans_sent"] if last else 0) / duration),
        "forwarded_rate_spans_s": round(
            (judged[-1]["spans_forwarded"] - judged[0]["spans_forwarded"])
            / (judged[-1]["t_s"] - judged[0]["t_s"])
        )
        if len(judged) > 1
        else None,
        "cache_fill_s": round(fill),
        "judged_from_s": round(start),
        "rss_start_mib": samples[0]["rss_mib"] if samples else None,
        "rss_warm_mib": warm["rss_mib"] if warm else None,
        "rss_end_mib": last["rss_mib"] if last else None,
        "rss_peak_mib": last["peak_rss_mib"] if last else None,
        "rss_slope_whole_mib_per_min": slope(samples, "rss_mib"),
        "rss_slope_second_half_mib_per_min": slope(second_half, "rss_mib"),
        "rss_slope_judged_mib_per_min": slope(judged, "rss_mib"),
    }
    if not judged or judged[-1]["t_s"] - start < 300:
        summary["verdict"] = "too short"  # the caches have not filled long enough before the end
        summary["flat"] = None
        return summary
    active_mean = statistics.fmean(s["active_traces"] for s in judged)
    active_slope = slope_per_minute([(s["t_s"], s["active_traces"]) for s in judged])
    third = max(len(judged) // 3, 1)
    p99_first, p99_last = _median_p99(judged[:third]), _median_p99(judged[-third:])
    rss_slope = summary["rss_slope_judged_mib_per_min"]
    checks = {
        "rss": rss_slope < rss_slope_limit,
        "active_traces": abs(active_slope) <= 0.05 * max(active_mean, 1.0),
        "latency": p99_last <= max(1.5 * p99_first, p99_first + 5.0),
    }
    summary.update(
        {
            "active_traces_mean": round(active_mean, 1),
            "active_traces_max": max(s["active_traces"] for s in judged),
            "active_traces_slope_per_min": round(active_slope, 2),
            "p50_first_third_ms": statistics.median(
                [s["p50_ms"] for s in judged[:third] if s["p50_ms"] is not None] or [0.0]
            ),
            "p50_last_third_ms": statistics.median(
                [s["p50_ms"] for s in judged[-third:] if s["p50_ms"] is not None] or [0.0]
            ),
            "p99_first_third_ms": p99_first,
            "p99_last_third_ms": p99_last,
            "checks": checks,
            "flat": all(checks.values()),
        }
    )
    summary["verdict"] = "flat" if summary["flat"] else "growing"
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rate", type=float, default=2000.0, help="spans per second")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds")
    parser.add_argument("--batch", type=int, default=128, help="spans per request (x8)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds per sample")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds before the judged window (default: until the id caches are full)",
    )
    parser.add_argument(
        "--rss-slope", type=float, default=0.5, help="MiB a minute RSS may grow once warm"
    )
    parser.add_argument("--json", action="store_true", help="JSON lines only")
    parser.add_argument(
        "--probe",
        metavar="FILE",
        help="run the sidecar under benchmarks/_memprobe.py, which writes container sizes, "
        "object counts and allocator figures to FILE (JSON lines)",
    )
    parser.add_argument("--probe-interval", type=float, default=30.0, help="seconds per probe")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="with --probe: trace allocations",
    )
    args = parser.parse_args()
    sink = CountingSink()
    launcher: tuple[str, ...] = ("-m", "tracehound.cli")
    if args.probe:
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_memprobe.py")
        launcher = (probe, args.probe, str(args.probe_interval), str(args.tracemalloc))
    serve = ServeProcess(
        ["--forward", f"http://127.0.0.1:{sink.port}", "--baselines", "memory"],
        {"TRACEHOUND_QUIET_PERIOD": "1"},
        launcher=launcher,
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
    summary = judge(samples, args.rate, args.duration, args.warmup, args.rss_slope)
    summary["clean_stop"] = stopped.get("clean")
    summary["dropped"] = stopped.get("dropped")
    print(json.dumps(summary) if args.json else summary, flush=True)


if __name__ == "__main__":
    main()
