"""The five drift scenarios of `reasontrace`'s evaluation, as OTel traces (and as its sessions).

`reasontrace` evaluates its drift scorer on five generated scenarios of 15 sessions each: a control
without drift, then four with 10 baseline sessions followed by 5 drifted ones — tool drift (a
different tool pipeline), semantic drift (hedging instead of decisive reasoning), complexity drift
(9–12 steps with 2 reconsiderations instead of 3 steps) and all three combined (on a longer
content pipeline). The structure is the same here; the texts and tool names are our own, and
every session is produced in two forms from one `RunSpec`:

- `otlp_document(spec, ...)`: one OTel trace in OTLP/JSON — an `invoke_agent` span, a `chat` span
  per step (its reasoning text as a `reasoning` part, its tool call as a `tool_call` part) and an
  `execute_tool` span per call; a reconsideration is a failed call retried with the same arguments;
- `reasontrace_session(spec)`: the session dict `reasontrace`'s scorer reads, with the same
  reasoning texts, the same tool calls (retries included) and the decisions the spec declares.

Token counts and durations come from a `random.Random` seeded per scenario, so every run of the
tests sees the same traces.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracehound.spans import SpanView, iter_json_spans

DECISIVE = (
    "Task received. Chose web_search first since it returns fresh, structured results quickly.",
    "Search finished. Ran extract_records on the top hits; the path ahead is clear.",
    "Records extracted. Applied summarize to produce the final brief. Done.",
    "Started with web_search: it is the fastest route to authoritative sources for this request.",
    "extract_records confirmed the search results are high quality. Moving straight to summarize.",
    "Picked web_search over db_query because this request needs current information.",
    "Plan: web_search, then extract_records, then summarize. The sequence fits the request.",
    "The request is time sensitive, so web_search goes first; extraction and summary follow.",
    "This request matches earlier ones. Running the usual search, extract, summarize sequence.",
    "Ran the standard three-stage pipeline without deviation.",
    "Identified the relevant sources and launched web_search right away.",
    "Verified the web_search results, filtered them with extract_records, wrote the summary.",
    "Following the established approach: search, extract, summarize, in that order.",
    "High confidence in this plan: web_search fits, extract_records is quick, summarize ends it.",
    "Routine request handled by the routine pipeline. Nothing unusual found.",
)

HEDGING = (
    "I am not really sure which route fits here. web_search might work, though db_query could too.",
    "Unclear whether extract_records is needed or whether to jump to summarize. Hard to tell.",
    "Perhaps web_search is appropriate, but I doubt it is the right tool for this kind of request.",
    "Maybe the first path is better, maybe the second one. Neither seems obviously correct.",
    "Trying extract_records, although it may not give anything useful. I might need to revisit.",
    "Several options look plausible and none stands out. Going ahead cautiously with web_search.",
    "Not confident about this tool choice. web_search is a guess; another tool might suit better.",
    "Hard to decide on an order. Falling back to web_search; other routes could be better.",
    "The requirements seem ambiguous. Picking web_search provisionally, possibly changing course.",
    "Not sure this approach is right. db_query might be a better fit than web_search here.",
)

SEARCH_PIPELINE = ("web_search", "extract_records", "summarize")
DB_PIPELINE = ("db_query", "format_report")
CONTENT_PIPELINE = (
    "web_search",
    "extract_records",
    "draft_content",
    "review_draft",
    "publish_post",
)
CONTENT_DRIFT = ("db_query", "rewrite_llm", "push_api")

SERVICE = "research-service"
AGENT = "planner"
BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class RunSpec:
    """One session: reasoning texts, tool calls in order, failed calls, decisions."""

    texts: tuple[str, ...]
    tools: tuple[str, ...]
    failed: frozenset[int] = frozenset()
    """Indices (into `tools`) of calls that fail; the next call retries them."""
    decisions: tuple[tuple[int, float], ...] = ()
    """(options considered, confidence) per decision — only `reasontrace` sessions carry them."""
    drifted: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    runs: tuple[RunSpec, ...]
    expected_driver: str | None
    seed: int
    baseline_runs: int = 10
    notes: str = field(default="", compare=False)


def _decisions(count: int, options: int, reconsiderations: int) -> tuple[tuple[int, float], ...]:
    return tuple((options, 0.4 if k < reconsiderations else 0.9) for k in range(count))


def _with_retries(
    pipeline: tuple[str, ...], steps: int, retries: int
) -> tuple[tuple[str, ...], frozenset[int]]:
    """`steps` tool calls cycling through the pipeline, the first `retries` of them failing once."""
    plan = [pipeline[k % len(pipeline)] for k in range(steps - retries)]
    tools: list[str] = []
    failed: set[int] = set()
    for k, tool in enumerate(plan):
        if k < retries:
            failed.add(len(tools))
            tools.append(tool)
        tools.append(tool)
    return tuple(tools), frozenset(failed)


def _window(texts: tuple[str, ...], start: int, count: int, step: int = 1) -> tuple[str, ...]:
    return tuple(texts[(start + k * step) % len(texts)] for k in range(count))


def control() -> Scenario:
    rng = random.Random(42)
    runs = tuple(
        RunSpec(
            texts=_window(DECISIVE, rng.randrange(10), 3),
            tools=SEARCH_PIPELINE,
            decisions=_decisions(3, 2, 0),
        )
        for _ in range(15)
    )
    return Scenario("control", runs, None, seed=42, baseline_runs=15)


def _baseline(i: int, texts: int = 3) -> RunSpec:
    return RunSpec(
        texts=_window(DECISIVE, i, texts), tools=SEARCH_PIPELINE, decisions=_decisions(3, 2, 0)
    )


def tool_drift() -> Scenario:
    drift = tuple(
        RunSpec(
            texts=_window(DECISIVE, i, 2),
            tools=DB_PIPELINE,
            decisions=_decisions(3, 2, 0),
            drifted=True,
        )
        for i in range(5)
    )
    return Scenario("tool_drift", (*(_baseline(i) for i in range(10)), *drift), "tool_mix", seed=43)


def semantic_drift() -> Scenario:
    drift = tuple(
        RunSpec(
            texts=_window(HEDGING, i, 3),
            tools=SEARCH_PIPELINE,
            decisions=_decisions(3, 2, 0),
            drifted=True,
        )
        for i in range(5)
    )
    return Scenario(
        "semantic_drift", (*(_baseline(i) for i in range(10)), *drift), "semantic", seed=44
    )


def complexity_drift() -> Scenario:
    drift = []
    for i in range(5):
        tools, failed = _with_retries(SEARCH_PIPELINE, 9 + i % 4, 2)
        drift.append(
            RunSpec(
                texts=_window(DECISIVE, i, 2, step=2),
                tools=tools,
                failed=failed,
                decisions=_decisions(3, 4, 2),
                drifted=True,
            )
        )
    base = tuple(_baseline(i, texts=2) for i in range(10))
    return Scenario("complexity_drift", (*base, *drift), "complexity", seed=45)


def combined_drift() -> Scenario:
    base = tuple(
        RunSpec(
            texts=tuple(f"Step {j + 1}: {DECISIVE[(i + j) % len(DECISIVE)]}" for j in range(3)),
            tools=CONTENT_PIPELINE,
            decisions=_decisions(3, 2, 0),
        )
        for i in range(10)
    )
    drift = []
    for i in range(5):
        tools, failed = _with_retries(CONTENT_DRIFT, 10, 3)
        drift.append(
            RunSpec(
                texts=tuple(f"Step {j + 1}: {HEDGING[(i + j) % len(HEDGING)]}" for j in range(3)),
                tools=tools,
                failed=failed,
                decisions=_decisions(3, 4, 3),
                drifted=True,
            )
        )
    return Scenario("combined_drift", (*base, *drift), None, seed=46)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "control": control,
    "tool_drift": tool_drift,
    "semantic_drift": semantic_drift,
    "complexity_drift": complexity_drift,
    "combined_drift": combined_drift,
}


# --- OTel rendering ------------------------------------------------------------------------------


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    ids: tuple[str, str, str],
    name: str,
    times: tuple[int, int],
    attrs: dict[str, Any],
    *,
    error: str | None = None,
) -> dict[str, Any]:
    trace_id, span_id, parent = ids
    start, end = times
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1 if not name.startswith("chat") else 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }
    if error is not None:
        span["status"] = {"code": 2, "message": error}
    return span


def otlp_document(
    spec: RunSpec,
    index: int,
    rng: random.Random,
    *,
    scenario: str = "s",
    service: str = SERVICE,
    agent: str = AGENT,
) -> dict[str, Any]:
    """One run as an OTLP/JSON traces document (one trace, one resource)."""
    trace_id = f"{zlib.crc32(scenario.encode()):08x}{index:024x}"
    ids = iter(range(1, 10_000))

    def next_id() -> str:
        return f"{index:08x}{next(ids):08x}"

    root = next_id()
    clock = BASE_NS + index * 3_600_000_000_000
    start = clock
    spans: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = [
        {
            "role": "user",
            "parts": [{"type": "text", "content": f"Request {index}: prepare a brief."}],
        }
    ]
    steps = max(len(spec.tools), len(spec.texts))
    for k in range(steps):
        clock += rng.randrange(1, 5) * 1_000_000
        chat_start = clock
        clock += rng.randrange(400, 900) * 1_000_000
        parts: list[dict[str, Any]] = []
        if k < len(spec.texts):
            parts.append({"type": "reasoning", "content": spec.texts[k]})
        call_id = f"call_{index}_{k}"
        tool = spec.tools[k] if k < len(spec.tools) else None
        retry_of = k - 1 if k - 1 in spec.failed else None
        arguments = {"query": f"request-{index}-{retry_of if retry_of is not None else k}"}
        if tool is not None:
            parts.append({"type": "tool_call", "id": call_id, "name": tool, "arguments": arguments})
        output = [
            {"role": "assistant", "parts": parts, "finish_reason": "tool_call" if tool else "stop"}
        ]
        spans.append(
            _span(
                (trace_id, next_id(), root),
                "chat model-a",
                (chat_start, clock),
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "model-a",
                    "gen_ai.usage.input_tokens": 150 + 60 * k + rng.randrange(0, 20),
                    "gen_ai.usage.output_tokens": 30 + rng.randrange(0, 30),
                    "gen_ai.input.messages": json.dumps(history),
                    "gen_ai.output.messages": json.dumps(output),
                },
            )
        )
        history.append({"role": "assistant", "parts": parts})
        if tool is None:
            continue
        clock += rng.randrange(1, 5) * 1_000_000
        tool_start = clock
        clock += rng.randrange(100, 300) * 1_000_000
        failed = k in spec.failed
        result = (
            None if failed else f"{tool} returned {rng.randrange(3, 9)} items for request {index}."
        )
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(arguments),
        }
        if result is not None:
            attrs["gen_ai.tool.call.result"] = result
        spans.append(
            _span(
                (trace_id, next_id(), root),
                f"execute_tool {tool}",
                (tool_start, clock),
                attrs,
                error="upstream timeout" if failed else None,
            )
        )
        history.append(
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": call_id,
                        "response": result or "error: upstream timeout",
                    }
                ],
            }
        )
    clock += 1_000_000
    spans.insert(
        0,
        _span(
            (trace_id, root, ""),
            f"invoke_agent {agent}",
            (start, clock),
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.provider.name": "openai",
            },
        ),
    )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "tests.drift"}, "spans": spans}],
            }
        ]
    }


def span_views(document: dict[str, Any]) -> list[SpanView]:
    errors: list[str] = []
    views = list(iter_json_spans(document, errors))
    assert not errors, errors
    return views


def scenario_documents(scenario: Scenario, **kw: Any) -> list[dict[str, Any]]:
    rng = random.Random(scenario.seed)
    return [
        otlp_document(spec, i, rng, scenario=scenario.name, **kw)
        for i, spec in enumerate(scenario.runs)
    ]


# --- reasontrace sessions ------------------------------------------------------------------------


def reasontrace_session(spec: RunSpec, index: int) -> dict[str, Any]:
    """The same run as a `reasontrace` session dict (what its scorer and baseline read)."""
    return {
        "session_id": f"session-{index}",
        "agent_name": AGENT,
        "reasoning_checkpoints": [{"step": k + 1, "content": t} for k, t in enumerate(spec.texts)],
        "tool_calls": [{"step": k + 1, "tool_name": t} for k, t in enumerate(spec.tools)],
        "decisions": [
            {
                "step": k + 1,
                "options_considered": [f"option_{c}" for c in "abcd"[:options]],
                "option_chosen": "option_a",
                "confidence": confidence,
            }
            for k, (options, confidence) in enumerate(spec.decisions)
        ],
    }


__all__ = [
    "AGENT",
    "SCENARIOS",
    "SERVICE",
    "RunSpec",
    "Scenario",
    "otlp_document",
    "reasontrace_session",
    "scenario_documents",
    "span_views",
]
