"""OTel GenAI semantic conventions: current (≥1.37) and legacy (≤1.36) shapes.

Current: `gen_ai.provider.name`, `gen_ai.input.messages` / `gen_ai.output.messages` /
`gen_ai.system_instructions` (JSON strings on spans, structured on the
`gen_ai.client.inference.operation.details` log event), `gen_ai.tool.call.*`,
`gen_ai.retrieval.*`. Legacy: `gen_ai.system`, `gen_ai.usage.prompt_tokens`, and per-message log
events (`gen_ai.user.message`, `gen_ai.choice`, ...) joined to the span by (trace_id, span_id).
"""

from __future__ import annotations

import json
from typing import Any

from tracehound.conventions import _adk
from tracehound.conventions._messages import (
    LEGACY_CHOICE_EVENT,
    LEGACY_INPUT_EVENTS,
    content_text,
    messages_from_legacy_events,
    parse_instructions,
    parse_messages,
)
from tracehound.conventions.base import (
    Document,
    Message,
    NormalizedSpan,
    Operation,
    Part,
    parse_json_value,
    to_text,
)
from tracehound.spans import LogView, SpanView

NAME = "otel_genai"
LEGACY_NAME = "otel_genai_legacy"

OPERATION_MAP: dict[str, Operation] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "retrieval": "retrieval",
    "embeddings": "embeddings",
    "invoke_workflow": "workflow",
}

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_LEGACY_EVENTS = frozenset((*LEGACY_INPUT_EVENTS, LEGACY_CHOICE_EVENT))

DETECT_KEYS = frozenset(
    (
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.system",
        "gen_ai.tool.name",
        "gen_ai.request.model",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
    )
)


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    return not keys.isdisjoint(DETECT_KEYS)


def operation_of(view: SpanView) -> Operation:
    return _operation(view.attributes)


def _operation(attrs: dict[str, Any]) -> Operation:
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op in OPERATION_MAP:
        return OPERATION_MAP[op]
    if isinstance(op, str) and op:
        return "other"
    if "gen_ai.tool.name" in attrs:
        return "tool"
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        return "llm"
    if "gen_ai.request.model" in attrs:
        return "llm"
    return "other"


def error_of(view: SpanView) -> str | None:
    """The error a span reports: status ERROR, an `exception` event, or `error.type`."""
    error_type = view.get("error.type")
    if not view.is_error and not error_type:
        return None
    for event in view.events:
        if event.name == "exception":
            etype = event.attributes.get("exception.type")
            emsg = event.attributes.get("exception.message")
            if etype or emsg:
                return ": ".join(str(x) for x in (etype, emsg) if x)
    if view.status_message:
        return view.status_message
    if error_type:
        return str(error_type)
    return "error"


def first_int(view: SpanView, *keys: str) -> int | None:
    for key in keys:
        value = view.get_int(key)
        if value is not None:
            return value
    return None


def first_str(view: SpanView, *keys: str) -> str | None:
    return _first_str(view.attributes, keys)


def _first_str(attrs: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _first_int(view: SpanView, attrs: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if type(value) is int:  # the usual case; `get_int` also reads floats and strings
            return value
        if value is not None:
            value = view.get_int(key)
            if value is not None:
                return value
    return None


def finish_reasons_of(value: Any) -> list[str]:
    """`gen_ai.response.finish_reasons`: a string array, a single string, or the array's JSON
    string (`'["tool_calls"]'`, Microsoft Agent Framework)."""
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    if isinstance(value, str) and value:
        if value[0] == "[" and value[-1] == "]":
            try:
                data = json.loads(value)
            except ValueError:
                return [value]
            if isinstance(data, list):
                return [str(v) for v in data if v is not None]
        return [value]
    return []


def documents_from(value: Any, what: str, problems: list[str]) -> list[Document]:
    data = parse_json_value(value, what, problems)
    if data is None:
        return []
    if isinstance(data, dict):
        data = [data]
    docs: list[Document] = []
    if isinstance(data, list):
        for raw in data:
            if isinstance(raw, dict):
                score = raw.get("score")
                content = raw.get("content", raw.get("text", raw.get("document")))
                docs.append(
                    Document(
                        id=None if raw.get("id") is None else str(raw.get("id")),
                        content=to_text(content),
                        score=float(score) if isinstance(score, (int, float)) else None,
                    )
                )
            elif isinstance(raw, str):
                docs.append(Document(content=raw))
    return docs


def apply_log_events(span: NormalizedSpan, logs: list[LogView]) -> None:
    """Fill messages from log events joined to this span, where the span itself had none."""
    if not logs:
        return
    legacy: list[tuple[str, Any]] = []
    details: list[dict[str, Any]] = []
    for log in sorted(logs, key=lambda lg: lg.time_ns):
        if log.event_name == DETAILS_EVENT:
            details.append(log.attributes)
        elif log.event_name in _LEGACY_EVENTS:
            legacy.append((log.event_name, log.body))
    apply_content_events(span, details, legacy, "event")


def apply_span_events(span: NormalizedSpan) -> None:
    """Fill messages from the span's own events, read like the log-record forms: a
    `gen_ai.client.inference.operation.details` span event's attributes are the record's
    attributes, a legacy per-message span event's attributes are the record's body (Strands
    Agents records both shapes as span events)."""
    legacy: list[tuple[str, Any]] = []
    details: list[dict[str, Any]] = []
    for event in span.view.events:
        name = event.name
        if name == DETAILS_EVENT:
            details.append(event.attributes)
        elif name in _LEGACY_EVENTS:
            legacy.append((name, event.attributes))
    if details or legacy:
        apply_content_events(span, details, legacy, "span event")


_DETAIL_FIELDS = (
    ("input_messages", "gen_ai.input.messages"),
    ("output_messages", "gen_ai.output.messages"),
)


def apply_content_events(
    span: NormalizedSpan,
    details: list[dict[str, Any]],
    legacy: list[tuple[str, Any]],
    where: str,
) -> None:
    """Fill what the span's attributes lacked from its content events, in time order: the
    attributes of each `operation.details` event (one event may carry all of them, or one
    event each, as Strands writes them), then the legacy per-message events."""
    problems = span.problems
    for attrs in details:
        for field_name, key in _DETAIL_FIELDS:
            if key in attrs and not getattr(span, field_name):
                setattr(span, field_name, parse_messages(attrs[key], f"{where} {key}", problems))
        if not span.system_instructions and "gen_ai.system_instructions" in attrs:
            span.system_instructions = parse_instructions(
                attrs["gen_ai.system_instructions"], f"{where} gen_ai.system_instructions", problems
            )
        if not span.finish_reasons and "gen_ai.response.finish_reasons" in attrs:
            span.finish_reasons = finish_reasons_of(attrs["gen_ai.response.finish_reasons"])
    if legacy:
        if span.operation == "tool":
            _tool_from_legacy_events(span, legacy)
        else:
            inputs, outputs = messages_from_legacy_events(legacy)
            if not span.input_messages:
                span.input_messages = inputs
            if not span.output_messages:
                span.output_messages = outputs
        if span.convention == NAME and "gen_ai.provider.name" not in span.view.attributes:
            span.convention = LEGACY_NAME
    if (
        span.operation == "other"
        and (span.input_messages or span.output_messages)
        and not span.view.attributes.get("gen_ai.operation.name")
    ):
        # unmarked span with chat content; a span that names another operation (Strands'
        # `execute_event_loop_cycle`, which repeats its chat span's messages) stays what it is
        span.operation = "llm"


def _tool_from_legacy_events(span: NormalizedSpan, legacy: list[tuple[str, Any]]) -> None:
    """Legacy events on a tool span (Strands): `gen_ai.tool.message` holds what the tool was
    given (its `content`: the arguments), `gen_ai.choice` what it returned (its `message`)."""
    for name, body in legacy:
        if not isinstance(body, dict):
            continue
        if name == "gen_ai.tool.message" and span.tool_arguments is None:
            span.tool_arguments = body.get("content")
        elif name == LEGACY_CHOICE_EVENT and span.tool_result is None:
            message = body.get("message")
            if isinstance(message, dict):
                message = message.get("content")
            span.tool_result = None if message is None else content_text(message)
        if not span.tool_call_id:
            call_id = body.get("id")
            span.tool_call_id = call_id if isinstance(call_id, str) and call_id else None


def _tool_from_messages(span: NormalizedSpan) -> None:
    """A tool span's call and result from its own messages (Strands' latest shape records the
    call as an input `tool_call` part and the result as an output `tool_call_response` part)."""
    call_id = span.tool_call_id
    if span.tool_arguments is None:
        for part in _parts_of(span.input_messages, "tool_call", call_id):
            span.tool_arguments = part.arguments
            break
    if span.tool_result is None:
        for part in _parts_of(span.output_messages, "tool_call_response", call_id):
            span.tool_result = part.content
            break


def _parts_of(messages: list[Message], ptype: str, call_id: str | None) -> list[Part]:
    return [
        part
        for message in messages
        for part in message.parts
        if part.type == ptype and (call_id is None or part.id in (None, call_id))
    ]


def fill_from_output_messages(span: NormalizedSpan) -> None:
    if not span.finish_reasons:
        span.finish_reasons = [m.finish_reason for m in span.output_messages if m.finish_reason]


_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model")
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    """The span's GenAI facts."""
    attrs = view.attributes
    get = attrs.get
    legacy = "gen_ai.provider.name" not in attrs and "gen_ai.system" in attrs
    operation = _operation(attrs)
    span = NormalizedSpan(view, LEGACY_NAME if legacy else NAME, operation)
    problems = span.problems
    # `_first_str` / `_first_int` over the keys of each fact, written out: this runs per span
    value = get("gen_ai.agent.name")
    span.agent_name = value if isinstance(value, str) and value else None
    span.model = _first_str(attrs, _MODEL_KEYS)
    span.provider = _first_str(attrs, _PROVIDER_KEYS)
    span.input_tokens = _first_int(view, attrs, _INPUT_TOKEN_KEYS)
    span.output_tokens = _first_int(view, attrs, _OUTPUT_TOKEN_KEYS)
    value = get("gen_ai.response.finish_reasons")
    if value is not None:
        span.finish_reasons = finish_reasons_of(value)
    if "gen_ai.system_instructions" in attrs:
        span.system_instructions = parse_instructions(
            attrs["gen_ai.system_instructions"], "gen_ai.system_instructions", problems
        )
    if "gen_ai.input.messages" in attrs:
        span.input_messages = parse_messages(
            attrs["gen_ai.input.messages"], "gen_ai.input.messages", problems
        )
    if "gen_ai.output.messages" in attrs:
        span.output_messages = parse_messages(
            attrs["gen_ai.output.messages"], "gen_ai.output.messages", problems
        )
    if operation == "tool":
        value = get("gen_ai.tool.name")
        span.tool_name = value if isinstance(value, str) and value else None
        value = get("gen_ai.tool.call.id")
        span.tool_call_id = value if isinstance(value, str) and value else None
        span.tool_arguments = get("gen_ai.tool.call.arguments")
        value = get("gen_ai.tool.call.result")
        span.tool_result = None if value is None else content_text(value)
    elif operation == "retrieval":
        span.query = first_str(view, "gen_ai.retrieval.query.text")
        span.source = first_str(view, "gen_ai.data_source.id") or view.name
        if "gen_ai.retrieval.documents" in attrs:
            span.documents = documents_from(
                attrs["gen_ai.retrieval.documents"], "gen_ai.retrieval.documents", problems
            )
    adk_scope = view.scope_name == _adk.SCOPE
    if adk_scope:
        _adk.apply_legacy_attributes(span)
    if view.events:
        apply_span_events(span)
    if logs:
        apply_log_events(span, logs)
    if operation == "tool" and (span.input_messages or span.output_messages):
        _tool_from_messages(span)
    if adk_scope:
        _adk.after_content(span)
    if span.output_messages:
        fill_from_output_messages(span)
    span.error = error_of(view)
    return span


def messages_text_bytes(messages: list[Message]) -> int:
    return sum(len(p.content or "") for m in messages for p in m.parts)
