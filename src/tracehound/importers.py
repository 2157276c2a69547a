"""Import the earlier tools' trace formats as OTel GenAI spans, so their users can migrate.

Imported traces are turned into OTLP/JSON spans that follow the OTel GenAI conventions and then go
through the very same path as any other input (SpanView → conventions → steps → engine).

- `evidenceflow` step lists: a JSON array of `{type, content, id?, tool?, source?, evidence_id?}`
  (or `{"steps": [...]}`). Each assistant/reasoning step becomes a `chat` span whose inputs are the
  user/system steps since the previous one (the span starts with the first of them, so tool steps
  in between fall within it and keep their place after the question); a tool_call with its
  tool_result becomes an `execute_tool` span (call id = the result's `evidence_id`, else
  generated); a retrieval step a `retrieval` span with one document.
- `tracecheck` traces: `{trace_id, agent_name, user_input?, steps: [{type: llm_call | tool_call |
  retry | error, name, input, output, latency_ms, tokens, timestamp, error}]}`, one per JSON line
  or as an array. `llm_call` → `chat`, `tool_call` and `retry` → `execute_tool`, `error` → a span
  with status ERROR (an `execute_tool` span when the step names a tool, else a `chat` span).
  A trace's `expected_tools` becomes the agent span's `tracehound.expectation.expected_tools`,
  which `tracehound eval` checks as tracecheck's `tool_accuracy` (exact order) and
  `step_efficiency` excess do (the `expectations` evaluator's `expected_tools.*` rules).

Trace ids are derived from the imported trace's own id (SHA-256, first 16 bytes) so that re-running
an import gives the same ids; the original id is kept as the root span's
`tracehound.import.trace_id` attribute.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from tracehound import names
from tracehound.spans import SpanView, iter_json_spans

__all__ = ["UnknownFormatError", "import_document", "is_evidenceflow_steps", "is_tracecheck_trace"]

_EVIDENCEFLOW_TYPES = frozenset(
    ("user", "assistant", "tool_call", "tool_result", "retrieval", "system", "reasoning")
)
_TRACECHECK_TYPES = frozenset(("llm_call", "tool_call", "retry", "error"))
_STEP_NS = 1_000_000  # 1 ms between imported steps when they carry no timestamps
_BASE_NS = 1_700_000_000_000_000_000


class UnknownFormatError(ValueError):
    """A document that looks like an importable format but is not valid."""


def is_evidenceflow_steps(doc: Any) -> bool:
    steps = doc.get("steps") if isinstance(doc, dict) and "trace_id" not in doc else doc
    return (
        isinstance(steps, list)
        and bool(steps)
        and all(isinstance(s, dict) and s.get("type") in _EVIDENCEFLOW_TYPES for s in steps)
    )


def is_tracecheck_trace(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("steps"), list)
        and ("trace_id" in doc or "agent_name" in doc)
        and all(isinstance(s, dict) and s.get("type") in _TRACECHECK_TYPES for s in doc["steps"])
    )


def import_document(doc: Any, where: str) -> list[SpanView]:
    """Spans for one non-OTLP JSON document; raises UnknownFormatError if it is no known format."""
    if is_tracecheck_trace(doc):
        return _views(_tracecheck_spans(doc, where))
    if isinstance(doc, list) and doc and all(is_tracecheck_trace(d) for d in doc):
        out: list[SpanView] = []
        for i, item in enumerate(doc):
            out.extend(_views(_tracecheck_spans(item, f"{where}[{i}]")))
        return out
    if is_evidenceflow_steps(doc):
        steps = doc["steps"] if isinstance(doc, dict) else doc
        return _views(_evidenceflow_spans(steps, where))
    raise UnknownFormatError(
        f"{where}: JSON that is neither OTLP (resourceSpans/resourceLogs), a tracecheck trace, "
        "nor an evidenceflow step list"
    )


# --- building OTLP/JSON ---------------------------------------------------------------------------


def _trace_id(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _span_id(trace_id: str, index: int) -> str:
    return hashlib.sha256(f"{trace_id}:{index}".encode()).hexdigest()[:16]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value, default=str)}


class _SpanWriter:
    def __init__(self, key: str, service: str) -> None:
        self.trace_id = _trace_id(key)
        self.root_id = _span_id(self.trace_id, 0)
        self.spans: list[dict[str, Any]] = []
        self.service = service
        self._count = 0

    def add(
        self,
        name: str,
        start: int,
        end: int,
        attributes: dict[str, Any],
        *,
        parent: str | None = None,
        error: str | None = None,
        root: bool = False,
    ) -> str:
        span_id = self.root_id if root else _span_id(self.trace_id, len(self.spans) + 1)
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "parentSpanId": "" if root else (parent or self.root_id),
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [
                {"key": k, "value": _value(v)} for k, v in attributes.items() if v is not None
            ],
        }
        if error is not None:
            span["status"] = {"code": 2, "message": error}
        self.spans.append(span)
        return span_id

    def document(self) -> dict[str, Any]:
        return {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": _value(self.service)}]
                    },
                    "scopeSpans": [{"scope": {"name": "tracehound.import"}, "spans": self.spans}],
                }
            ]
        }


def _views(doc: dict[str, Any]) -> list[SpanView]:
    return list(iter_json_spans(doc))


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _evidenceflow_spans(steps: list[dict[str, Any]], where: str) -> dict[str, Any]:
    key = json.dumps(steps, sort_keys=True, default=str)
    writer = _SpanWriter(f"evidenceflow:{key}", "evidenceflow-import")
    pending_inputs: list[dict[str, Any]] = []
    inputs_since = 0  # when the first of the pending inputs came
    pending_call: tuple[int, dict[str, Any]] | None = None
    t = _BASE_NS
    generated = 0
    for index, step in enumerate(steps):
        t += _STEP_NS
        kind = step.get("type")
        raw_content = step.get("content")
        content = raw_content if isinstance(raw_content, str) else ""
        if kind in ("user", "system"):
            if not pending_inputs:
                inputs_since = t
            pending_inputs.append(_text_message(str(kind), content))
        elif kind in ("assistant", "reasoning"):
            part_type = "text" if kind == "assistant" else "reasoning"
            # The call starts when its inputs came, so that a question asked before tool steps
            # stays before them in the trajectory (the tools then run within the call).
            writer.add(
                "chat imported",
                inputs_since if pending_inputs else t,
                t + _STEP_NS // 2,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "imported",
                    "gen_ai.input.messages": json.dumps(pending_inputs) if pending_inputs else None,
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": part_type, "content": content}]}]
                    ),
                },
            )
            pending_inputs = []
        elif kind == "tool_call":
            pending_call = (index, step)
        elif kind == "tool_result":
            generated += 1
            call_id = step.get("evidence_id") or f"call_{generated}"
            tool = (
                step.get("tool")
                or (pending_call[1].get("tool") if pending_call else None)
                or "tool"
            )
            args = (
                pending_call[1].get("arguments", pending_call[1].get("input"))
                if pending_call
                else None
            )
            writer.add(
                f"execute_tool {tool}",
                t - (_STEP_NS if pending_call else 0),
                t + _STEP_NS // 2,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": None if args is None else json.dumps(args),
                    "gen_ai.tool.call.result": content,
                },
            )
            pending_call = None
        elif kind == "retrieval":
            generated += 1
            source = step.get("source") or "retrieval"
            doc_id = step.get("evidence_id") or f"doc_{generated}"
            writer.add(
                f"retrieval {source}",
                t,
                t + _STEP_NS // 2,
                {
                    "gen_ai.operation.name": "retrieval",
                    "gen_ai.data_source.id": source,
                    "gen_ai.retrieval.documents": json.dumps([{"id": doc_id, "content": content}]),
                },
            )
    writer.add(
        "invoke_agent imported",
        _BASE_NS,
        t + _STEP_NS,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "imported",
            "tracehound.import.trace_id": where,
        },
        root=True,
    )
    return writer.document()


def _timestamp_ns(value: Any) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None


def _tracecheck_spans(trace: dict[str, Any], where: str) -> dict[str, Any]:
    original = str(trace.get("trace_id") or where)
    agent = str(trace.get("agent_name") or "agent")
    writer = _SpanWriter(f"tracecheck:{original}", agent)
    t = _BASE_NS
    user_input = trace.get("user_input")
    first_llm = True
    for index, step in enumerate(_steps(trace)):
        start = _timestamp_ns(step.get("timestamp")) or t + _STEP_NS
        latency = step.get("latency_ms")
        duration = int(float(latency) * 1e6) if isinstance(latency, (int, float)) else _STEP_NS // 2
        end = start + max(duration, 1)
        t = max(t + _STEP_NS, end)
        kind = step.get("type")
        name = step.get("name")
        raw_tokens = step.get("tokens")
        tokens: dict[str, Any] = raw_tokens if isinstance(raw_tokens, dict) else {}
        if kind == "llm_call" or (kind == "error" and not name):
            inputs = []
            if first_llm and isinstance(user_input, str) and user_input:
                inputs.append(_text_message("user", user_input))
            first_llm = False
            if step.get("input") is not None:
                message = _text_message("user", _as_text(step.get("input")))
                if message not in inputs:  # the first call's input is often the user input
                    inputs.append(message)
            outputs = []
            if step.get("output") is not None:
                outputs.append(
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": _as_text(step.get("output"))}],
                    }
                )
            writer.add(
                f"chat {name or 'model'}",
                start,
                end,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "imported",
                    "gen_ai.request.model": name,
                    "gen_ai.usage.input_tokens": tokens.get("prompt"),
                    "gen_ai.usage.output_tokens": tokens.get("completion"),
                    "gen_ai.input.messages": json.dumps(inputs) if inputs else None,
                    "gen_ai.output.messages": json.dumps(outputs) if outputs else None,
                    "error.type": "error" if kind == "error" else None,
                },
                error=_error_text(step) if kind == "error" else None,
            )
        elif kind in ("tool_call", "retry", "error"):
            arguments = step.get("input")
            writer.add(
                f"execute_tool {name or 'tool'}",
                start,
                end,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name or "tool",
                    "gen_ai.tool.call.id": f"call_{index}",
                    "gen_ai.tool.call.arguments": None
                    if arguments is None
                    else json.dumps(arguments, sort_keys=True, default=str),
                    "gen_ai.tool.call.result": None
                    if step.get("output") is None
                    else _as_text(step.get("output")),
                    "error.type": "error" if kind == "error" else None,
                },
                error=_error_text(step) if kind == "error" else None,
            )
    writer.add(
        f"invoke_agent {agent}",
        _BASE_NS,
        t + _STEP_NS,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "tracehound.import.trace_id": original,
            names.ATTR_EXPECTATION_EXPECTED_TOOLS: _expected_tools(trace, where),
        },
        root=True,
    )
    return writer.document()


def _expected_tools(trace: dict[str, Any], where: str) -> list[str] | None:
    """The trace's `expected_tools` (checked by the `expectations` evaluator), if it has any."""
    expected = trace.get("expected_tools")
    if expected is None:
        return None
    if not isinstance(expected, list) or not all(isinstance(t, str) for t in expected):
        raise UnknownFormatError(f"{where}: expected_tools must be a list of tool names")
    return expected


def _steps(trace: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for step in trace.get("steps") or ():
        if isinstance(step, dict):
            yield step


def _error_text(step: dict[str, Any]) -> str:
    error = step.get("error")
    return str(error) if error else "error"


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
