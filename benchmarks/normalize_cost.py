"""Per-span cost of tracehound's hot path on OTLP protobuf input, above the protobuf parse.

Run from the repository root with the project's virtualenv:

    python benchmarks/normalize_cost.py              # 15 reps x 4096 spans
    python benchmarks/normalize_cost.py --reps 9 --spans 2048
    python benchmarks/normalize_cost.py --json        # machine-readable only
    TRACEHOUND_PURE_PYTHON=1 python benchmarks/normalize_cost.py   # without the C accelerator

The workload is generated deterministically (fixed seed) as `ExportTraceServiceRequest` batches
of 512 spans, in traces of 8 spans:

- non-GenAI: per trace 1 HTTP server span (10 attributes), 3 HTTP client spans (8) and 4 database
  spans (9), ordinary OTel semantic-convention keys and values;
- GenAI: 8 `chat` spans per trace following the OTel GenAI conventions: ~2 KB
  `gen_ai.input.messages` JSON, ~1.5 KB `gen_ai.output.messages` JSON and 10 scalars. The text is
  English prose from CPython's `pydoc_data.topics` with typographic quotes and dashes, as LLM
  output has. Each call's output holds a tool call whose result is in the next call's input, so
  the trajectory builder sees realistic resent history.

Stages, measured in the same run and interleaved (stage order rotates every rep):

    (0) ExportTraceServiceRequest.FromString of each batch (parse only);
    (1) (0) + SpanView.from_proto (iter_proto_spans) + detect_convention per span;
    (2) (0) + SpanView + normalize per span (full mapping for GenAI spans);
    (3) (2) + TrajectoryBuilder.add per trace (one builder per trace id).

Figures are µs/span: median over reps (min–max). "Above parse" and "x parse" are taken within
the same rep, then their median is reported. Targets: (a) non-GenAI <= 2 µs/span above the
parse, (b) GenAI chat spans <= 40 µs/span above the parse; checked on stages (2) and (3).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from _workload import Prose, any_value
from google.protobuf.internal import api_implementation
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tracehound import _accel
from tracehound.conventions import detect_convention, normalize
from tracehound.spans import iter_proto_spans
from tracehound.steps import TrajectoryBuilder

SEED = 20261129
BATCH = 512
TRACE_LEN = 8
TARGET_NON_GENAI_US = 2.0
TARGET_GENAI_US = 40.0
BASE_NS = 1_764_000_000_000_000_000

# --- workload ------------------------------------------------------------------------------------


def _set_attributes(span: Span, attrs: dict[str, Any]) -> None:
    span.attributes.extend(KeyValue(key=k, value=any_value(v)) for k, v in attrs.items())


def _span(
    rng: random.Random,
    *,
    trace_id: bytes,
    parent: bytes,
    name: str,
    kind: int,
    start_ns: int,
    dur_ns: int,
    attrs: dict[str, Any],
    error: bool = False,
) -> Span:
    span = Span(
        trace_id=trace_id,
        span_id=rng.getrandbits(64).to_bytes(8, "big"),
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + dur_ns,
        flags=0x100,
    )
    if error:
        span.status.code = Status.STATUS_CODE_ERROR
        span.status.message = "Internal Server Error"
    _set_attributes(span, attrs)
    return span


_ROUTES = ("/api/orders/{id}", "/api/users/{id}/cart", "/api/search", "/api/checkout", "/health")
_HOSTS = ("inventory.internal", "pricing.internal", "payments.example.com", "auth.internal")
_TABLES = ("orders", "users", "line_items", "products", "sessions")


def _http_db_trace(rng: random.Random, t0: int) -> list[tuple[str, Span]]:
    """1 HTTP server span, 3 HTTP client spans, 4 database spans; (scope name, span)."""
    tid = rng.getrandbits(128).to_bytes(16, "big")
    route = rng.choice(_ROUTES)
    path = route.replace("{id}", str(rng.randrange(1, 10**6)))
    status = 500 if rng.random() < 0.02 else rng.choice((200, 200, 200, 201, 404))
    server = _span(
        rng,
        trace_id=tid,
        parent=rng.getrandbits(64).to_bytes(8, "big"),
        name=f"GET {route}",
        kind=Span.SPAN_KIND_SERVER,
        start_ns=t0,
        dur_ns=40_000_000,
        attrs={
            "http.request.method": "GET",
            "url.path": path,
            "url.scheme": "https",
            "http.route": route,
            "http.response.status_code": status,
            "server.address": "shop.example.com",
            "server.port": 443,
            "network.protocol.version": "1.1",
            "client.address": f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
            "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0",
        },
        error=status >= 500,
    )
    out = [("opentelemetry.instrumentation.fastapi", server)]
    for i in range(3):
        host = rng.choice(_HOSTS)
        code = rng.choice((200, 200, 200, 204, 503))
        client = _span(
            rng,
            trace_id=tid,
            parent=server.span_id,
            name="POST",
            kind=Span.SPAN_KIND_CLIENT,
            start_ns=t0 + (i + 1) * 2_000_000,
            dur_ns=5_000_000,
            attrs={
                "http.request.method": "POST",
                "url.full": f"https://{host}/v2/{rng.choice(_TABLES)}/{rng.randrange(10**5)}",
                "server.address": host,
                "server.port": 443,
                "http.response.status_code": code,
                "network.protocol.version": "2",
                "http.request.body.size": rng.randrange(100, 5000),
                "http.response.body.size": rng.randrange(100, 50_000),
            },
        )
        out.append(("opentelemetry.instrumentation.httpx", client))
    for i in range(4):
        table = rng.choice(_TABLES)
        op = rng.choice(("SELECT", "SELECT", "INSERT", "UPDATE"))
        query = (
            f"SELECT id, status, total FROM {table} WHERE customer_id = $1 LIMIT 50"
            if op == "SELECT"
            else f"{op} {table} SET status = $1 WHERE id = $2"
        )
        db = _span(
            rng,
            trace_id=tid,
            parent=server.span_id,
            name=f"{op} {table}",
            kind=Span.SPAN_KIND_CLIENT,
            start_ns=t0 + (i + 5) * 2_000_000,
            dur_ns=1_500_000,
            attrs={
                "db.system": "postgresql",
                "db.system.name": "postgresql",
                "db.namespace": "shop",
                "db.operation.name": op,
                "db.collection.name": table,
                "db.query.text": query,
                "server.address": "db.internal",
                "server.port": 5432,
                "db.response.returned_rows": rng.randrange(0, 50),
            },
        )
        out.append(("opentelemetry.instrumentation.asyncpg", db))
    return out


_TOOLS = ("search_docs", "read_file", "run_python", "lookup_order")


def _chat_trace(rng: random.Random, prose: Prose, t0: int) -> list[tuple[str, Span]]:
    """8 OTel GenAI `chat` spans of one agent loop: call k's tool call is answered in call k+1."""
    tid = rng.getrandbits(128).to_bytes(16, "big")
    parent = rng.getrandbits(64).to_bytes(8, "big")  # the agent span, sent in another batch
    system = prose.text(300)
    question = prose.text(350)
    model = rng.choice(("gpt-4o-mini", "gpt-4.1", "claude-sonnet-4-5"))
    provider = "anthropic" if model.startswith("claude") else "openai"
    prev_call: dict[str, Any] | None = None
    out: list[tuple[str, Span]] = []
    for k in range(TRACE_LEN):
        inputs: list[dict[str, Any]] = [
            {"role": "system", "parts": [{"type": "text", "content": system}]},
        ]
        if prev_call is None:
            inputs.append(
                {"role": "user", "parts": [{"type": "text", "content": prose.text(1_500)}]}
            )
        else:
            inputs.append({"role": "user", "parts": [{"type": "text", "content": question}]})
            inputs.append({"role": "assistant", "parts": [prev_call]})
            inputs.append(
                {
                    "role": "tool",
                    "parts": [
                        {
                            "type": "tool_call_response",
                            "id": prev_call["id"],
                            "response": prose.text(1_050),
                        }
                    ],
                }
            )
        last = k == TRACE_LEN - 1
        answer = prose.text(1_250 if not last else 1_450)
        out_parts: list[dict[str, Any]] = [{"type": "text", "content": answer}]
        if not last:
            prev_call = {
                "type": "tool_call",
                "id": f"call_{rng.getrandbits(96):024x}",
                "name": rng.choice(_TOOLS),
                "arguments": {"query": prose.text(40)[:60], "limit": rng.randrange(1, 20)},
            }
            out_parts.append(prev_call)
        finish = "stop" if last else "tool_call"
        outputs = [{"role": "assistant", "parts": out_parts, "finish_reason": finish}]
        in_tokens = rng.randrange(600, 1_200)
        out_tokens = rng.randrange(250, 450)
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": model + "-2025-08-07",
            "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(128):032x}",
            "gen_ai.request.temperature": 0.2,
            "gen_ai.request.max_tokens": 2048,
            "gen_ai.usage.input_tokens": in_tokens,
            "gen_ai.usage.output_tokens": out_tokens,
            "gen_ai.response.finish_reasons": [finish],
            "gen_ai.input.messages": json.dumps(inputs, ensure_ascii=False),
            "gen_ai.output.messages": json.dumps(outputs, ensure_ascii=False),
        }
        start = t0 + k * 900_000_000
        chat = _span(
            rng,
            trace_id=tid,
            parent=parent,
            name=f"chat {model}",
            kind=Span.SPAN_KIND_CLIENT,
            start_ns=start,
            dur_ns=850_000_000,
            attrs=attrs,
        )
        out.append(("opentelemetry.instrumentation.openai_v2", chat))
    return out


def _batch(spans: list[tuple[str, Span]], service: str) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    for k, v in (
        ("service.name", service),
        ("service.version", "1.4.2"),
        ("deployment.environment.name", "production"),
        ("telemetry.sdk.name", "opentelemetry"),
        ("telemetry.sdk.language", "python"),
        ("telemetry.sdk.version", "1.45.2"),
    ):
        rs.resource.attributes.add(key=k, value=AnyValue(string_value=v))
    scopes: dict[str, Any] = {}
    for scope_name, span in spans:
        ss = scopes.get(scope_name)
        if ss is None:
            ss = scopes[scope_name] = rs.scope_spans.add()
            ss.scope.name = scope_name
            ss.scope.version = "0.56b0"
        ss.spans.append(span)
    return request.SerializeToString()


def make_workload(kind: str, n_spans: int, seed: int = SEED) -> list[bytes]:
    rng = random.Random(f"{seed}-{kind}")
    prose = Prose(rng) if kind == "genai" else None
    batches: list[bytes] = []
    t0 = BASE_NS
    for _ in range(n_spans // BATCH):
        spans: list[tuple[str, Span]] = []
        while len(spans) < BATCH:
            t0 += 1_000_000_000
            if prose is not None:
                spans.extend(_chat_trace(rng, prose, t0))
            else:
                spans.extend(_http_db_trace(rng, t0))
        batches.append(_batch(spans, "agent-api" if prose is not None else "shop-api"))
    return batches


def describe(batches: list[bytes]) -> dict[str, Any]:
    """Wire size, attributes per span, share of text with non-ASCII typography."""
    n = attrs = text_fields = non_ascii = 0
    in_bytes = out_bytes = 0
    for data in batches:
        request = ExportTraceServiceRequest.FromString(data)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    n += 1
                    attrs += len(span.attributes)
                    for kv in span.attributes:
                        if kv.key == "gen_ai.input.messages":
                            in_bytes += len(kv.value.string_value.encode())
                        elif kv.key == "gen_ai.output.messages":
                            out_bytes += len(kv.value.string_value.encode())
                        else:
                            continue
                        text_fields += 1
                        non_ascii += not kv.value.string_value.isascii()
    wire = sum(len(b) for b in batches)
    out = {
        "spans": n,
        "batches": len(batches),
        "attributes_per_span": round(attrs / n, 2),
        "wire_bytes_per_span": round(wire / n),
    }
    if text_fields:
        out["input_messages_bytes_avg"] = round(in_bytes / n)
        out["output_messages_bytes_avg"] = round(out_bytes / n)
        out["message_json_with_non_ascii"] = round(non_ascii / text_fields, 3)
    return out


# --- stages --------------------------------------------------------------------------------------


def stage_parse(batches: list[bytes]) -> None:
    parse = ExportTraceServiceRequest.FromString
    for data in batches:
        parse(data)


def stage_detect(batches: list[bytes]) -> None:
    parse = ExportTraceServiceRequest.FromString
    for data in batches:
        for view in iter_proto_spans(parse(data), raw=data):
            detect_convention(view)


def stage_normalize(batches: list[bytes]) -> None:
    parse = ExportTraceServiceRequest.FromString
    for data in batches:
        for view in iter_proto_spans(parse(data), raw=data):
            normalize(view)


def stage_trajectory(batches: list[bytes]) -> dict[str, TrajectoryBuilder]:
    parse = ExportTraceServiceRequest.FromString
    builders: dict[str, TrajectoryBuilder] = {}
    for data in batches:
        for view in iter_proto_spans(parse(data), raw=data):
            span = normalize(view)
            if span is None:
                continue
            builder = builders.get(view.trace_id)
            if builder is None:
                builder = builders[view.trace_id] = TrajectoryBuilder(view.trace_id)
            builder.add(span)
    return builders


STAGES: dict[str, tuple[str, Callable[[list[bytes]], Any]]] = {
    "parse": ("(0) parse", stage_parse),
    "detect": ("(1) parse + view + detect_convention", stage_detect),
    "normalize": ("(2) parse + view + normalize", stage_normalize),
    "trajectory": ("(3) (2) + TrajectoryBuilder.add", stage_trajectory),
}
WORKLOADS = {"non_genai": "non-GenAI HTTP/db", "genai": "GenAI chat"}


def sanity(batches: list[bytes]) -> dict[str, Any]:
    """What the pipeline makes of the workload (also a warm-up)."""
    conventions: dict[str, int] = {}
    parse = ExportTraceServiceRequest.FromString
    problems = 0
    for data in batches:
        for view in iter_proto_spans(parse(data), raw=data):
            span = normalize(view)
            name = "none" if span is None else f"{span.convention}/{span.operation}"
            conventions[name] = conventions.get(name, 0) + 1
            problems += len(span.problems) if span is not None else 0
    builders = stage_trajectory(batches)
    steps: dict[str, int] = {}
    for builder in builders.values():
        for step in builder.build().steps:
            steps[step.kind] = steps.get(step.kind, 0) + 1
    return {
        "normalized_as": conventions,
        "problems": problems,
        "traces": len(builders),
        "trajectory_steps": steps,
    }


# --- measuring -----------------------------------------------------------------------------------


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(workloads: dict[str, list[bytes]], reps: int) -> dict[str, Any]:
    names = list(STAGES)
    per_rep: dict[str, dict[str, list[float]]] = {w: {s: [] for s in names} for w in workloads}
    jobs = [(w, s) for w in workloads for s in names]
    for rep in range(reps):
        shift = rep % len(jobs)
        for w, s in jobs[shift:] + jobs[:shift]:  # interleaved, rotating order
            batches = workloads[w]
            n = len(batches) * BATCH
            fn = STAGES[s][1]
            gc.collect()
            t0 = time.perf_counter()
            fn(batches)
            elapsed = time.perf_counter() - t0
            per_rep[w][s].append(elapsed / n * 1e6)
    results: dict[str, Any] = {}
    for w in workloads:
        parse = per_rep[w]["parse"]
        results[w] = {}
        for s in names:
            us = per_rep[w][s]
            entry: dict[str, Any] = {"us_per_span": _summary(us), "reps": us}
            if s != "parse":
                entry["above_parse"] = _summary([a - p for a, p in zip(us, parse, strict=True)])
                entry["x_parse"] = _summary([a / p for a, p in zip(us, parse, strict=True)])
            results[w][s] = entry
    return results


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for w, limit, label in (
        ("non_genai", TARGET_NON_GENAI_US, "(a) non-GenAI"),
        ("genai", TARGET_GENAI_US, "(b) GenAI chat"),
    ):
        for s in ("normalize", "trajectory"):
            above = results[w][s]["above_parse"]["median"]
            out.append(
                {
                    "target": label,
                    "stage": STAGES[s][0],
                    "limit_us": limit,
                    "above_parse_us": round(above, 2),
                    "total_us": round(results[w][s]["us_per_span"]["median"], 2),
                    "pass": above <= limit,
                }
            )
    return out


def _fmt(s: dict[str, float], digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def calibration_ms() -> float:
    """Best of 5 x `sum(range(100_000))`: compares machine speed between runs (noisy hosts)."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        sum(range(100_000))
        best = min(best, time.perf_counter() - t0)
    return round(best * 1e3, 3)


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "protobuf": version("protobuf"),
        "protobuf_backend": api_implementation.Type(),
        "opentelemetry_proto": version("opentelemetry-proto"),
        "cpus": os.cpu_count(),
        "loadavg_at_start": round(os.getloadavg()[0], 2),
        "calibration_sum_range_1e5_ms": calibration_ms(),
        # TRACEHOUND_PURE_PYTHON=1 measures the pure-Python paths
        "accelerator": "C (tracehound._speedups)" if _accel.NATIVE else "none (pure Python)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15, help="repetitions (default 15)")
    parser.add_argument(
        "--spans",
        type=int,
        default=4096,
        help="spans per workload per rep, rounded up to a multiple of 512 (default 4096)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document only")
    args = parser.parse_args(argv)
    n_spans = max(BATCH, -(-args.spans // BATCH) * BATCH)

    env = environment()
    workloads = {w: make_workload(w, n_spans) for w in WORKLOADS}
    info = {w: describe(b) | sanity(b) for w, b in workloads.items()}
    results = measure(workloads, args.reps)
    verdicts = targets(results)

    if args.json:
        doc = {
            "environment": env,
            "reps": args.reps,
            "workloads": info,
            "results": results,
            "targets": verdicts,
        }
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        print()
        return 0

    print(
        f"tracehound normalize cost — {args.reps} reps × {n_spans} spans per workload, "
        f"batches of {BATCH}, traces of {TRACE_LEN}"
    )
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    for w, d in info.items():
        print(f"workload {WORKLOADS[w]}: " + ", ".join(f"{k}={v}" for k, v in d.items()))
    print()
    header = (
        f"{'workload':<18} {'stage':<38} {'µs/span (min–max)':>22} "
        f"{'above parse (min–max)':>23} {'x parse (min–max)':>20}"
    )
    print(header)
    print("-" * len(header))
    for w in workloads:
        for s, (label, _) in STAGES.items():
            r = results[w][s]
            above = _fmt(r["above_parse"]) if "above_parse" in r else "—"
            ratio = _fmt(r["x_parse"], 1) if "x_parse" in r else "1.0"
            print(
                f"{WORKLOADS[w]:<18} {label:<38} {_fmt(r['us_per_span']):>22} "
                f"{above:>23} {ratio:>20}"
            )
    print()
    for v in verdicts:
        print(
            f"{'PASS' if v['pass'] else 'MISS'}  {v['target']:<15} {v['stage']:<38} "
            f"{v['above_parse_us']:6.2f} µs/span above parse (limit {v['limit_us']:g}; "
            f"total {v['total_us']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
