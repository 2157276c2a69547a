"""Small inputs for the `tracehound eval` and HTML report tests, and a way to evaluate them.

- `evidenceflow_steps()`: an evidenceflow step list with one tool result (two units: one reused by
  an intermediate answer, one by the final answer) and one retrieved document nobody reuses.
- `tracecheck_traces()`: tracecheck traces — a grounded one, one that fails with an error, and one
  that calls the same tool with the same arguments four times (a loop).
- `nested_otlp()`: an OTLP/JSON document with a planner agent calling a researcher agent whose
  tool span fails.
- `reports_for(paths, evaluators)`: what `tracehound eval` computes for those files, as reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracehound.cli import OFFLINE_CONFIG, imported_spans, load_input, run_engine
from tracehound.engine import Engine
from tracehound.evaluators.base import Evaluator
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.report import TraceReport

PARIS = "Paris is the capital of France."
EIFFEL = "The Eiffel Tower was completed in 1889."
BANANAS = "Bananas are yellow fruit grown in tropical climates."


def evidenceflow_steps(*, final: str = PARIS) -> list[dict[str, Any]]:
    return [
        {"type": "user", "content": "Tell me about France."},
        {"type": "tool_call", "tool": "search", "arguments": {"q": "France"}},
        {
            "type": "tool_result",
            "tool": "search",
            "content": f"{PARIS} {EIFFEL}",
            "evidence_id": "ev-search",
        },
        {"type": "retrieval", "source": "wiki", "content": BANANAS, "evidence_id": "doc-bananas"},
        {"type": "assistant", "content": f"Interesting: {EIFFEL}"},
        {"type": "user", "content": "And the capital?"},
        {"type": "assistant", "content": final},
    ]


def tracecheck_traces() -> list[dict[str, Any]]:
    grounded = {
        "trace_id": "tc-grounded",
        "agent_name": "weather_bot",
        "user_input": "Weather in Oslo?",
        "steps": [
            {
                "type": "llm_call",
                "name": "gpt-4o",
                "output": "calling the weather tool",
                "tokens": {"prompt": 10, "completion": 4, "total": 14},
                "latency_ms": 120,
            },
            {
                "type": "tool_call",
                "name": "weather",
                "input": {"city": "Oslo"},
                "output": "Oslo has light snow and minus three degrees today.",
                "latency_ms": 50,
            },
            {
                "type": "llm_call",
                "name": "gpt-4o",
                "input": "summarize",
                "output": "Oslo has light snow and minus three degrees today.",
            },
        ],
    }
    failing = {
        "trace_id": "tc-error",
        "agent_name": "weather_bot",
        "steps": [
            {
                "type": "llm_call",
                "name": "gpt-4o",
                "input": "Weather in Rome?",
                "output": "calling",
            },
            {"type": "error", "name": "weather", "error": "ConnectionError: upstream down"},
        ],
    }
    same_call = {"type": "tool_call", "name": "search", "input": {"q": "weather"}, "output": "none"}
    looping = {
        "trace_id": "tc-loop",
        "agent_name": "looper",
        "user_input": "Find the weather",
        "steps": [
            {"type": "llm_call", "name": "gpt-4o", "output": "searching"},
            *[dict(same_call) for _ in range(4)],
            {"type": "llm_call", "name": "gpt-4o", "output": "I could not find it."},
        ],
    }
    return [grounded, failing, looping]


def write_evidenceflow(path: Path, steps: list[dict[str, Any]] | None = None) -> Path:
    path.write_text(json.dumps(steps if steps is not None else evidenceflow_steps()), "utf-8")
    return path


def write_tracecheck(path: Path, traces: list[dict[str, Any]] | None = None) -> Path:
    lines = [json.dumps(t) for t in (traces if traces is not None else tracecheck_traces())]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
_BASE = 1_700_000_000_000_000_000


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    span_id: str,
    parent: str,
    name: str,
    times_ms: tuple[int, int],
    attributes: dict[str, Any],
    *,
    error: str | None = None,
) -> dict[str, Any]:
    start_ms, end_ms = times_ms
    span: dict[str, Any] = {
        "traceId": TRACE_ID,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(_BASE + start_ms * 1_000_000),
        "endTimeUnixNano": str(_BASE + end_ms * 1_000_000),
        "attributes": [_attr(k, v) for k, v in attributes.items()],
    }
    if error is not None:
        span["status"] = {"code": 2, "message": error}
    return span


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


PLANNER, PLANNER_CHAT, RESEARCHER, LOOKUP, RESEARCHER_CHAT = (
    f"a00000000000000{i}" for i in range(1, 6)
)


def nested_otlp() -> dict[str, Any]:
    """planner → (chat, researcher → (failing lookup tool, chat))."""
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
    }
    spans = [
        _span(PLANNER, "", "invoke_agent planner", (0, 100),
              {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}),
        _span(PLANNER_CHAT, PLANNER, "chat m", (1, 10),
              {**chat, "gen_ai.input.messages": _messages("user", "Plan a trip to Oslo"),
               "gen_ai.output.messages": _messages("assistant", "Delegating to the researcher.")}),
        _span(RESEARCHER, PLANNER, "invoke_agent researcher", (11, 90),
              {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}),
        _span(LOOKUP, RESEARCHER, "execute_tool lookup", (12, 20),
              {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
               "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"city":"Oslo"}',
               "error.type": "RuntimeError"},
              error="RuntimeError: lookup failed"),
        _span(RESEARCHER_CHAT, RESEARCHER, "chat m", (21, 40),
              {**chat,
               "gen_ai.output.messages": _messages("assistant", "Oslo is cold in winter.")}),
    ]  # fmt: skip
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "svc")]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
            }
        ]
    }


def default_evaluators() -> list[Evaluator]:
    return [EvidenceEvaluator(), LoopEvaluator()]


def reports_for(
    paths: Sequence[str | Path],
    evaluators: Sequence[Evaluator] | None = None,
    *,
    examples: bool = False,
) -> list[TraceReport]:
    """The reports `tracehound eval` builds for these inputs (same reading, same engine)."""
    telemetry = load_input([str(p) for p in paths], examples)
    imported_spans(telemetry)
    engine = Engine(default_evaluators() if evaluators is None else evaluators, OFFLINE_CONFIG)
    traces, span_results = run_engine(telemetry, engine)
    return [TraceReport(t, tuple(span_results.get(t.trace_id, ()))) for t in traces]
