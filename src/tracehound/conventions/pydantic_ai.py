"""pydantic-ai's variants of the OTel GenAI conventions (instrumentation versions 1–6).

On top of the OTel GenAI shapes: `thinking` parts and `result` keys (handled by the shared message
parser), `agent run` / `running tool` span names with `tool_arguments` / `tool_response` (v2 and
1.x), `pydantic_ai.all_messages` and `final_result` on the agent span, and 1.x's per-message
events serialized into a JSON `events` (chat span) or `all_messages_events` (agent span) attribute.
"""

from __future__ import annotations

from typing import Any

from tracehound.conventions import genai
from tracehound.conventions._messages import (
    messages_from_legacy_events,
    ordered_legacy_messages,
    parse_messages,
)
from tracehound.conventions.base import NormalizedSpan, parse_json_value
from tracehound.spans import LogView, SpanView

NAME = "pydantic_ai"
SCOPE_NAME = "pydantic-ai"

SPAN_NAMES = frozenset(("agent run", "running tool", "running tools"))
DETECT_KEYS = frozenset(
    (
        "pydantic_ai.all_messages",
        "all_messages_events",
        "final_result",
        "agent_name",
        "tool_arguments",
        "tool_response",
        "model_request_parameters",
    )
)


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    if view.scope_name == SCOPE_NAME:
        return True
    return view.name in SPAN_NAMES or not keys.isdisjoint(DETECT_KEYS)


def _json_events(value: Any, what: str, problems: list[str]) -> list[tuple[str, Any]]:
    data = parse_json_value(value, what, problems)
    events: list[tuple[str, Any]] = []
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("event.name"), str):
                events.append((item["event.name"], item))
    return events


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    span = genai.extract(view, logs)
    span.convention = NAME
    attrs = view.attributes
    problems = span.problems
    if view.name == "agent run" or span.operation == "agent":
        span.operation = "agent"
        span.agent_name = genai.first_str(view, "gen_ai.agent.name", "agent_name") or view.name
        span.model = span.model or genai.first_str(view, "model_name")
    elif view.name == "running tool":
        span.operation = "tool"
    elif view.name == "running tools":
        span.operation = "other"
    if span.operation == "tool":
        span.tool_name = span.tool_name or genai.first_str(view, "gen_ai.tool.name")
        span.tool_call_id = span.tool_call_id or genai.first_str(view, "gen_ai.tool.call.id")
        if span.tool_arguments is None:
            span.tool_arguments = attrs.get("tool_arguments")
        if span.tool_result is None:
            span.tool_result = attrs.get("tool_response")
    if "events" in attrs and not (span.input_messages or span.output_messages):
        inputs, outputs = messages_from_legacy_events(
            _json_events(attrs["events"], "events", problems)
        )
        span.input_messages, span.output_messages = inputs, outputs
        if span.operation == "other" and (inputs or outputs):
            span.operation = "llm"
    if "pydantic_ai.all_messages" in attrs:
        span.history = parse_messages(
            attrs["pydantic_ai.all_messages"], "pydantic_ai.all_messages", problems
        )
    elif "all_messages_events" in attrs:
        span.history = ordered_legacy_messages(
            _json_events(attrs["all_messages_events"], "all_messages_events", problems)
        )
    final = attrs.get("final_result")
    if final is not None:
        span.declared_output = final if isinstance(final, str) else str(final)
    genai.fill_from_output_messages(span)
    return span
