"""OpenLLMetry / Traceloop: `traceloop.span.kind` decorator spans and legacy indexed content.

Decorator spans (`@workflow`, `@task`, `@agent`, `@tool`) carry `traceloop.entity.name` and JSON
`traceloop.entity.input` (`{"args": [...], "kwargs": {...}}`) / `traceloop.entity.output`. LLM
spans of current instrumentations use the OTel GenAI attributes; older ones the indexed
`gen_ai.prompt.{i}.*` / `gen_ai.completion.{i}.*` keys. Vector-DB spans report documents as
`db.query.result` span events.
"""

from __future__ import annotations

import json
from typing import Any

from tracehound.conventions import genai
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

NAME = "traceloop"

KIND_MAP: dict[str, Operation] = {
    "workflow": "workflow",
    "task": "workflow",
    "agent": "agent",
    "tool": "tool",
}
_REQUEST_TYPES: dict[str, Operation] = {
    "chat": "llm",
    "completion": "llm",
    "embedding": "embeddings",
}
DB_QUERY_RESULT = "db.query.result"
# Keys only OpenLLMetry sets (beside the OTel GenAI ones its current instrumentations use).
_TRACELOOP_ONLY_KEYS = frozenset(
    (
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.role",
        "gen_ai.completion.0.content",
        "gen_ai.is_streaming",
        "gen_ai.openai.api_base",
        "llm.is_streaming",
        "llm.usage.total_tokens",
        "traceloop.entity.name",
        "traceloop.workflow.name",
    )
)


# The keys that make `detect` claim a span (beside a `db.query.result` event).
CLAIM_KEYS = _TRACELOOP_ONLY_KEYS | {"traceloop.span.kind", "llm.request.type"}


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    if not keys.isdisjoint(CLAIM_KEYS):
        return True
    return view.has_event(DB_QUERY_RESULT)


def _indexed_messages(attrs: dict[str, Any], prefix: str) -> list[Message]:
    groups: dict[int, dict[str, Any]] = {}
    plen = len(prefix)
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[plen:].partition(".")
            if index.isdigit() and rest:
                groups.setdefault(int(index), {})[rest] = value
    messages: list[Message] = []
    for _, fields in sorted(groups.items()):
        role = str(fields.get("role") or "assistant")
        content = fields.get("content")
        parts: list[Part] = []
        if role == "tool":
            parts.append(
                Part(
                    type="tool_call_response",
                    id=_opt(fields.get("tool_call_id")),
                    response=content,
                    content=to_text(content),
                )
            )
        elif content:
            parts.append(Part(type="text", content=to_text(content)))
        calls: dict[int, dict[str, Any]] = {}
        for key, value in fields.items():
            if key.startswith("tool_calls."):
                index, _, rest = key[len("tool_calls.") :].partition(".")
                if index.isdigit():
                    calls.setdefault(int(index), {})[rest] = value
        for _, call in sorted(calls.items()):
            parts.append(
                Part(
                    type="tool_call",
                    id=_opt(call.get("id")),
                    name=_opt(call.get("name")),
                    arguments=call.get("arguments"),
                )
            )
        finish = fields.get("finish_reason")
        messages.append(Message(role=role, parts=parts, finish_reason=_opt(finish)))
    return messages


def _opt(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _entity_arguments(value: Any, problems: list[str]) -> Any:
    """`{"args": [...], "kwargs": {...}}` → the kwargs (or the single positional argument)."""
    data = parse_json_value(value, "traceloop.entity.input", problems)
    if isinstance(data, dict) and ("args" in data or "kwargs" in data):
        kwargs = data.get("kwargs") or {}
        args = data.get("args") or []
        if kwargs and not args:
            return kwargs
        if args and not kwargs:
            return args[0] if len(args) == 1 else args
        return {"args": args, "kwargs": kwargs}
    return data if data is not None else value


def _entity_output(value: Any) -> Any:
    """`traceloop.entity.output` is the JSON of the return value: `"\\"Rain\\""` → `Rain`.

    A value that is not JSON (set by hand) is kept as it is.
    """
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    span = genai.extract(view, logs)
    span.convention = NAME
    attrs = view.attributes
    problems = span.problems
    kind = attrs.get("traceloop.span.kind")
    entity = genai.first_str(view, "traceloop.entity.name")
    if isinstance(kind, str) and kind in KIND_MAP:
        span.operation = KIND_MAP[kind]
    elif span.operation == "other":
        request_type = attrs.get("llm.request.type")
        if isinstance(request_type, str) and request_type in _REQUEST_TYPES:
            span.operation = _REQUEST_TYPES[request_type]
    if span.operation == "agent":
        span.agent_name = span.agent_name or entity or view.name
        output = attrs.get("traceloop.entity.output")
        if output is not None:
            span.declared_output = to_text(
                parse_json_value(output, "traceloop.entity.output", problems) or output
            )
    elif span.operation == "tool":
        span.tool_name = span.tool_name or entity or view.name
        if span.tool_arguments is None and "traceloop.entity.input" in attrs:
            span.tool_arguments = _entity_arguments(attrs["traceloop.entity.input"], problems)
        if span.tool_result is None and "traceloop.entity.output" in attrs:
            span.tool_result = _entity_output(attrs["traceloop.entity.output"])
    if not span.input_messages:
        span.input_messages = _indexed_messages(attrs, "gen_ai.prompt.")
    if not span.output_messages:
        span.output_messages = _indexed_messages(attrs, "gen_ai.completion.")
    if span.operation == "other" and (span.input_messages or span.output_messages):
        span.operation = "llm"
    genai.fill_from_output_messages(span)
    for event in view.events:
        if event.name == DB_QUERY_RESULT:
            ea = event.attributes
            score = ea.get("db.query.result.score", ea.get("db.query.result.distance"))
            span.documents.append(
                Document(
                    id=_opt(ea.get("db.query.result.id")),
                    content=to_text(ea.get("db.query.result.document")),
                    score=float(score) if isinstance(score, (int, float)) else None,
                )
            )
    if span.documents and span.operation in ("other", "workflow"):
        span.operation = "retrieval"
        span.source = span.source or entity or view.name
    return span
