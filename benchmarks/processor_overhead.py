"""TracehoundSpanProcessor overhead: `on_end` on the calling thread, and worker throughput.

1. `on_end` cost on the application's thread, against `BatchSpanProcessor.on_end` in the same run
   (perf-baseline B1 measured ~1.6 µs for BSP here; the target is a ratio ≤ 1.5). Both get the
   same 512 pre-ended GenAI spans (10 attributes, one 1,540 B `gen_ai.output.messages`), the same
   queue/batch settings (2048 / 512) and a no-op exporter; the order alternates per rep; the
   ratio is taken per rep, then the median.
2. Worker throughput, in spans/s, for a realistic GenAI mix: agent traces of 6 LLM turns (chat
   spans resending a growing history, execute_tool spans with ~600 B results), each turn with an
   HTTP client span and a DB span that are not GenAI (≈ half the spans). All spans are handed to
   `on_end` at once; the clock stops when `force_flush` returns (everything evaluated, events and
   metrics emitted, copies exported to a no-op exporter).

Usage: python benchmarks/processor_overhead.py [REPS] [TRACES]     (defaults 9 and 150)
Prints a table and one JSON line with the figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from tracehound.cli import select_evaluators
from tracehound.config import ProcessorSettings
from tracehound.engine import Engine, EngineConfig
from tracehound.processor import TracehoundSpanProcessor
from tracehound.spans import SpanView


class NoopSpanExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class NoopLogExporter(LogRecordExporter):
    def export(self, batch: Any) -> LogRecordExportResult:
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


OUTPUT = json.dumps(
    [_msg("assistant", ("The weather in Paris is sunny and warm today. " * 40)[:1500])]
)
assert 1500 <= len(OUTPUT) <= 1600


def b1_spans(n: int = 512) -> list[ReadableSpan]:
    """B1's span: 10 GenAI attributes including a ~1,540 B gen_ai.output.messages."""
    collect = Collect()
    provider = TracerProvider()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("bench")
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-123",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 340,
        "gen_ai.response.finish_reasons": ("stop",),
        "server.address": "api.openai.com",
        "gen_ai.output.messages": OUTPUT,
    }
    for _ in range(n):
        tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=attrs).end()
    return collect.spans


def on_end_cost(reps: int) -> dict[str, float]:
    spans = b1_spans()
    bsp_us: list[float] = []
    th_us: list[float] = []
    ratios: list[float] = []
    for rep in range(reps):
        made: dict[str, Any] = {
            "bsp": BatchSpanProcessor(
                NoopSpanExporter(), 2048, 60_000, 512, export_timeout_millis=30_000
            ),
            "th": TracehoundSpanProcessor(
                NoopSpanExporter(),
                2048,
                60_000,
                512,
                settings=ProcessorSettings(),
                emit_events=False,
                emit_metrics=False,
            ),
        }
        timing: dict[str, float] = {}
        order = ("bsp", "th") if rep % 2 == 0 else ("th", "bsp")
        for key in order:
            on_end = made[key].on_end
            started = time.perf_counter()
            for span in spans:
                on_end(span)
            timing[key] = (time.perf_counter() - started) / len(spans) * 1e6
        for processor in made.values():
            processor.shutdown()
        bsp_us.append(timing["bsp"])
        th_us.append(timing["th"])
        ratios.append(timing["th"] / timing["bsp"])
    return {
        "bsp_on_end_us": statistics.median(bsp_us),
        "bsp_on_end_us_min": min(bsp_us),
        "th_on_end_us": statistics.median(th_us),
        "th_on_end_us_min": min(th_us),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


# --- realistic GenAI mix ------------------------------------------------------------------------

TOOL_RESULT = (
    "Order {i} shipped on 2026-03-{d:02d} from the Lyon warehouse. Carrier: DHL Express, "
    "tracking JD0146{i:06d}. The parcel weighs 2.4 kg and contains 3 items: a USB-C dock, a "
    "27-inch monitor arm and a set of cables. Estimated delivery is within 2 business days. "
    "The customer asked for a signature on delivery. Previous delivery attempt failed because "
    "nobody was at home; a new attempt is scheduled for Thursday morning between 9 and 12."
)


def mix_spans(traces: int, turns: int = 6) -> list[ReadableSpan]:
    collect = Collect()
    provider = TracerProvider()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("bench.app")
    for t in range(traces):
        history = [_msg("system", "You are a support agent."), _msg("user", f"Where is order {t}?")]
        with tracer.start_as_current_span(
            "invoke_agent support",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        ):
            for turn in range(turns):
                last = turn == turns - 1
                call_id = f"call_{t}_{turn}"
                args = json.dumps({"order": t + turn})
                if last:
                    answer = f"Order {t} shipped from the Lyon warehouse with DHL Express."
                    outputs = [_msg("assistant", answer)]
                else:
                    outputs = [
                        {
                            "role": "assistant",
                            "parts": [
                                {
                                    "type": "tool_call",
                                    "id": call_id,
                                    "name": "lookup_order",
                                    "arguments": {"order": t + turn},
                                }
                            ],
                        }
                    ]
                with (
                    tracer.start_as_current_span(
                        "chat gpt-4o",
                        kind=SpanKind.CLIENT,
                        attributes={
                            "gen_ai.operation.name": "chat",
                            "gen_ai.provider.name": "openai",
                            "gen_ai.request.model": "gpt-4o",
                            "gen_ai.usage.input_tokens": 200 + 150 * turn,
                            "gen_ai.usage.output_tokens": 40,
                            "gen_ai.input.messages": json.dumps(history),
                            "gen_ai.output.messages": json.dumps(outputs),
                        },
                    ),
                    tracer.start_as_current_span(
                        "POST", kind=SpanKind.CLIENT, attributes={"http.request.method": "POST"}
                    ),
                ):
                    pass
                if last:
                    break
                result = TOOL_RESULT.format(i=t + turn, d=1 + (t + turn) % 28)
                with (
                    tracer.start_as_current_span(
                        "execute_tool lookup_order",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "lookup_order",
                            "gen_ai.tool.call.id": call_id,
                            "gen_ai.tool.call.arguments": args,
                            "gen_ai.tool.call.result": result,
                        },
                    ),
                    tracer.start_as_current_span(
                        "SELECT orders",
                        kind=SpanKind.CLIENT,
                        attributes={"db.system.name": "postgresql"},
                    ),
                ):
                    pass
                history += [
                    outputs[0],
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": call_id, "response": result}
                        ],
                    },
                ]
    return collect.spans


def throughput(traces: int, reps: int) -> dict[str, Any]:
    spans = mix_spans(traces)
    genai = sum(1 for s in spans if "gen_ai.operation.name" in (s.attributes or {}))
    out: dict[str, Any] = {"spans": len(spans), "genai_share": genai / len(spans)}
    # The engine alone, on this thread: the evaluation cost the worker cannot avoid.
    rates = []
    for _ in range(reps + 1):  # the first run warms caches and imports up; it is not kept
        engine = Engine(select_evaluators(None), EngineConfig(quiet_period=60, trace_timeout=120))
        started = time.perf_counter()
        for span in spans:
            engine.add_span(SpanView.from_readable(span))
        engine.flush()
        rates.append(len(spans) / (time.perf_counter() - started))
    rates = rates[1:]
    out["engine_only"] = {
        "spans_per_s": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
    }
    for mode, exporter, forwarding in (
        ("observe", None, "stream"),
        ("wrap_stream", NoopSpanExporter(), "stream"),
        ("wrap_hold", NoopSpanExporter(), "hold"),
    ):
        rates = []
        for rep in range(reps + 1):  # rep 0 warms up and is not kept
            logger_provider = LoggerProvider()
            logger_provider.add_log_record_processor(SimpleLogRecordProcessor(NoopLogExporter()))
            meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
            processor = TracehoundSpanProcessor(
                exporter,
                len(spans) + 1,
                200,
                512,
                settings=ProcessorSettings(),
                forwarding=forwarding,  # type: ignore[arg-type]
                engine_config=EngineConfig(quiet_period=60, trace_timeout=120),
                logger_provider=logger_provider,
                meter_provider=meter_provider,
            )
            started = time.perf_counter()
            for span in spans:
                processor.on_end(span)
            assert processor.force_flush(600_000)
            elapsed = time.perf_counter() - started
            stats = processor.stats
            assert stats.dropped_queue_full == 0 and stats.internal_errors == 0
            assert stats.traces_finalized == traces, stats
            processor.shutdown()
            logger_provider.shutdown()
            meter_provider.shutdown()
            if rep:
                rates.append(len(spans) / elapsed)
        out[mode] = {"spans_per_s": statistics.median(rates), "min": min(rates), "max": max(rates)}
    return out


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    traces = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    cost = on_end_cost(reps)
    print(f"on_end on the calling thread, 512 B1 GenAI spans, {reps} reps (median, min):")
    for label, key in (("BatchSpanProcessor", "bsp"), ("TracehoundSpanProcessor", "th")):
        median, low = cost[f"{key}_on_end_us"], cost[f"{key}_on_end_us_min"]
        print(f"  {label + '.on_end':<31} {median:.2f} µs  (min {low:.2f})")
    print(
        f"  ratio tracehound / BSP: median {cost['ratio_median']:.2f} "
        f"(min {cost['ratio_min']:.2f}, max {cost['ratio_max']:.2f}); target ≤ 1.5"
    )
    tp = throughput(traces, max(3, reps // 3))
    print(
        f"worker throughput, realistic GenAI mix: {tp['spans']} spans in {traces} traces, "
        f"{tp['genai_share']:.0%} GenAI (median of {max(3, reps // 3)} runs):"
    )
    for mode in ("engine_only", "observe", "wrap_stream", "wrap_hold"):
        r = tp[mode]
        print(
            f"  {mode:<12} {r['spans_per_s']:>8,.0f} spans/s"
            f"  (min {r['min']:,.0f}, max {r['max']:,.0f})"
        )
    print(json.dumps({"on_end": cost, "throughput": tp}))


if __name__ == "__main__":
    main()
