"""A second port of `reasontrace`'s five drift scenarios, written apart from `_drift_scenarios`.

Same protocol (control: 15 steady runs; the others: 10 baseline runs, then 5 drifted ones), but
nothing else is shared: another agent (an order-support assistant), other tools and texts, and
other step shapes, produced with the real OpenTelemetry SDK (`TracerProvider` and an in-memory
exporter, explicit times, seeded ids) rather than written as OTLP/JSON:

- the plan is one `chat` call whose output holds a `reasoning` part and *several* `tool_call`
  parts at once (parallel calls), the tools run as sibling `execute_tool` spans, and a last `chat`
  call writes the answer as a `text` part;
- a reconsideration is an extra `chat` call whose output is only a `reasoning` part ("on second
  thought…"), with no tool call; a retry is a tool span with an error status followed by the same
  call (same arguments) that succeeds.

The drifts: tools (the refund pipeline replaced by an escalation one), semantics (confident
wording replaced by hedged wording over the same facts), complexity (three reconsiderations and
two failing-then-retried tools, longer prompts), and all three at once.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracehound.spans import SpanView

SERVICE = "support-desk"
AGENT = "order-assistant"
START_NS = 1_780_000_000_000_000_000

CONFIDENT = (
    "The customer gave an order number, so I look the order up before anything else.",
    "Order found and delivered late; the policy covers a refund for this case.",
    "Stock is available, so a replacement can ship today if the customer prefers it.",
    "The refund amount matches the invoice total; I will issue it now.",
    "The delivery scan shows the parcel was lost in transit, which qualifies for a refund.",
    "The account is in good standing, so no manual review is required here.",
    "I will check the warehouse first, then settle the refund in the same reply.",
    "The request is routine: look up, verify stock, refund, confirm to the customer.",
    "The order history shows no previous refunds, so the standard flow applies.",
    "Everything checks out; I am confirming the refund and the new delivery date.",
    "The customer wants the money back rather than a replacement, so I refund the card.",
    "The tracking number resolves to a returned parcel; the refund goes through.",
)

HEDGED = (
    "I'm not certain the order number is right; it could belong to another account.",
    "It's hard to say whether the policy covers this; perhaps a refund applies, perhaps not.",
    "Stock might be available, although the figures I see could be out of date.",
    "I'm unsure the refund amount is correct, it may differ from what was actually paid.",
    "The parcel seems to be lost, but I can't rule out that it's simply delayed.",
    "Maybe the account needs a manual review; I'm not confident either way.",
    "I wonder if checking the warehouse first makes sense, or whether that's unnecessary.",
    "This looks routine, though I might be missing something about the request.",
    "Possibly there were earlier refunds I can't see; I'd rather not assume anything.",
    "I think it works out, but I'm hesitant to confirm the refund without more details.",
)

REFUND_TOOLS = ("lookup_order", "check_stock", "issue_refund")
ESCALATION_TOOLS = ("open_ticket", "notify_supervisor")


@dataclass(frozen=True)
class Run:
    """One agent run: reasoning texts, tools per plan call, reconsiderations, failing tools."""

    thoughts: tuple[str, ...]
    tools: tuple[str, ...]
    reconsiderations: int = 0
    failing: tuple[str, ...] = ()
    """Tools whose first call fails (an error span) and is retried with the same arguments."""
    prompt_tokens: int = 420
    drifted: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    runs: tuple[Run, ...]
    driver: str | None
    seed: int
    baseline_runs: int = 10


def _pick(rng: random.Random, texts: Sequence[str], count: int) -> tuple[str, ...]:
    return tuple(rng.sample(list(texts), count))


def _steady(rng: random.Random) -> Run:
    return Run(thoughts=_pick(rng, CONFIDENT, 3), tools=REFUND_TOOLS)


def control() -> Scenario:
    rng = random.Random(7)
    return Scenario("control", tuple(_steady(rng) for _ in range(15)), None, 7, baseline_runs=15)


def _with_drift(
    name: str, seed: int, driver: str | None, make: Callable[[random.Random], Run]
) -> Scenario:
    rng = random.Random(seed)
    base = tuple(_steady(rng) for _ in range(10))
    return Scenario(name, (*base, *(make(rng) for _ in range(5))), driver, seed)


def tool_drift() -> Scenario:
    return _with_drift(
        "tool_drift",
        8,
        "tool_mix",
        lambda rng: Run(thoughts=_pick(rng, CONFIDENT, 3), tools=ESCALATION_TOOLS, drifted=True),
    )


def semantic_drift() -> Scenario:
    return _with_drift(
        "semantic_drift",
        9,
        "semantic",
        lambda rng: Run(thoughts=_pick(rng, HEDGED, 3), tools=REFUND_TOOLS, drifted=True),
    )


def complexity_drift() -> Scenario:
    return _with_drift(
        "complexity_drift",
        10,
        "complexity",
        lambda rng: Run(
            thoughts=_pick(rng, CONFIDENT, 3),
            tools=REFUND_TOOLS,
            reconsiderations=3,
            failing=("check_stock", "issue_refund"),
            prompt_tokens=900,
            drifted=True,
        ),
    )


def combined_drift() -> Scenario:
    return _with_drift(
        "combined_drift",
        11,
        None,
        lambda rng: Run(
            thoughts=_pick(rng, HEDGED, 3),
            tools=ESCALATION_TOOLS,
            reconsiderations=3,
            failing=ESCALATION_TOOLS,
            prompt_tokens=900,
            drifted=True,
        ),
    )


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "control": control,
    "tool_drift": tool_drift,
    "semantic_drift": semantic_drift,
    "complexity_drift": complexity_drift,
    "combined_drift": combined_drift,
}


class _SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) | 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) | 1


def _messages(role: str, parts: list[dict[str, object]]) -> str:
    return json.dumps([{"role": role, "parts": parts}])


def record(runs: Sequence[Run], seed: int) -> list[list[SpanView]]:
    """Each run recorded with the SDK as one trace; its spans as views, in end order."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": SERVICE}), id_generator=_SeededIds(seed)
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.drift.sdk")
    rng = random.Random(seed * 31 + 5)
    out: list[list[SpanView]] = []
    for index, spec in enumerate(runs):
        exporter.clear()
        _record_run(tracer, spec, index, rng)
        finished: Sequence[ReadableSpan] = exporter.get_finished_spans()
        out.append([SpanView.from_readable(s) for s in finished])
    provider.shutdown()
    return out


def _record_run(tracer: trace.Tracer, spec: Run, index: int, rng: random.Random) -> None:
    clock = START_NS + index * 7_200_000_000_000

    def later(low_ms: int, high_ms: int) -> int:
        nonlocal clock
        clock += rng.randint(low_ms, high_ms) * 1_000_000
        return clock

    agent = tracer.start_span(
        f"invoke_agent {AGENT}",
        start_time=clock,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT},
    )
    context = trace.set_span_in_context(agent)
    question = f"Order {1000 + index}: my parcel never arrived, what can you do?"

    def chat(parts: list[dict[str, object]], tokens: int) -> None:
        span = tracer.start_span(
            "chat support-model",
            context=context,
            kind=trace.SpanKind.CLIENT,
            start_time=later(2, 6),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "support-model",
                "gen_ai.usage.input_tokens": tokens + rng.randint(0, 40),
                "gen_ai.usage.output_tokens": 60 + rng.randint(0, 40),
                "gen_ai.input.messages": _messages("user", [{"type": "text", "content": question}]),
                "gen_ai.output.messages": _messages("assistant", parts),
            },
        )
        span.end(end_time=later(300, 700))

    def tool(name: str, call: int, fails: bool) -> None:
        span = tracer.start_span(
            f"execute_tool {name}",
            context=context,
            start_time=later(1, 3),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": f"toolu_{index}_{call}",
                "gen_ai.tool.call.arguments": json.dumps({"order": 1000 + index}),
            },
        )
        if fails:
            span.set_status(trace.Status(trace.StatusCode.ERROR, "service unavailable"))
        else:
            span.set_attribute("gen_ai.tool.call.result", f"{name}: ok for order {1000 + index}")
        span.end(end_time=later(80, 200))

    first, *rest = spec.thoughts
    calls = [
        {"type": "tool_call", "id": f"toolu_{index}_{k}", "name": name, "arguments": {}}
        for k, name in enumerate(spec.tools)
    ]
    chat([{"type": "reasoning", "content": first}, *calls], spec.prompt_tokens)
    for k in range(spec.reconsiderations):
        thought = rest[k % len(rest)] if rest else first
        chat(
            [{"type": "reasoning", "content": f"On second thought: {thought}"}], spec.prompt_tokens
        )
    for k, name in enumerate(spec.tools):
        if name in spec.failing:
            tool(name, k, True)
        tool(name, k, False)
    answer = " ".join(rest) or first
    chat(
        [{"type": "reasoning", "content": answer}, {"type": "text", "content": "Done: " + answer}],
        spec.prompt_tokens + 200,
    )
    agent.end(end_time=later(1, 2))


__all__ = ["AGENT", "SCENARIOS", "SERVICE", "Run", "Scenario", "record"]
