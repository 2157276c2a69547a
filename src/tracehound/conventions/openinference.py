"""OpenInference (Arize): `openinference.span.kind` and flattened, indexed attributes.

Messages are flattened as `llm.input_messages.{i}.message.{role,content,tool_call_id,name}`, with
`...message.contents.{j}.message_content.{type,text}` and
`...message.tool_calls.{k}.tool_call.{id,function.name,function.arguments}`. Tool spans carry the
arguments and result in `input.value` / `output.value`; retriever spans carry
`retrieval.documents.{i}.document.{id,content,score}`.
"""

from __future__ import annotations

import json
from typing import Any

from tracehound.conventions import genai
from tracehound.conventions.base import (
    MAX_JSON_BYTES,
    Document,
    Message,
    NormalizedSpan,
    Operation,
    Part,
    to_text,
)
from tracehound.spans import LogView, SpanView

NAME = "openinference"

KIND_MAP: dict[str, Operation] = {
    "LLM": "llm",
    "TOOL": "tool",
    "AGENT": "agent",
    "RETRIEVER": "retrieval",
    "EMBEDDING": "embeddings",
    "CHAIN": "workflow",
    "RERANKER": "other",
}


# The keys that make `detect` claim a span (it looks at nothing else).
CLAIM_KEYS = frozenset(("openinference.span.kind",))


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    return not keys.isdisjoint(CLAIM_KEYS)


def _indexed(attrs: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Group `prefix.{i}.rest` keys into {i: {rest: value}}."""
    groups: dict[int, dict[str, Any]] = {}
    plen = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[plen:].partition(".")
        if not index.isdigit() or not rest:
            continue
        groups.setdefault(int(index), {})[rest] = value
    return groups


def _flat_messages(attrs: dict[str, Any], prefix: str) -> list[Message]:
    messages: list[Message] = []
    for _, fields in sorted(_indexed(attrs, prefix).items()):
        role = str(fields.get("message.role") or "assistant")
        parts: list[Part] = []
        content = fields.get("message.content")
        for _, cfields in sorted(_indexed(fields, "message.contents.").items()):
            text = cfields.get("message_content.text")
            if text:
                parts.append(Part(type="text", content=to_text(text)))
        if role == "tool":
            parts = [
                Part(
                    type="tool_call_response",
                    id=_opt(fields.get("message.tool_call_id")),
                    name=_opt(fields.get("message.name")),
                    response=content,
                    content=to_text(content),
                )
            ]
        elif content is not None and content != "":
            parts.insert(0, Part(type="text", content=to_text(content)))
        for _, tfields in sorted(_indexed(fields, "message.tool_calls.").items()):
            parts.append(
                Part(
                    type="tool_call",
                    id=_opt(tfields.get("tool_call.id")),
                    name=_opt(tfields.get("tool_call.function.name")),
                    arguments=tfields.get("tool_call.function.arguments"),
                )
            )
        messages.append(Message(role=role, parts=parts))
    return messages


def _opt(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _tool_output(value: Any) -> Any:
    """A TOOL span's `output.value`; for LangChain, the content of the serialized ToolMessage.

    The LangChain instrumentation records the tool's return as `{"type": "tool", "data":
    {"content": ...}}`; the result is that content, the same text the next LLM call receives in
    its `tool` message.
    """
    if not isinstance(value, str) or not value.startswith("{") or len(value) > MAX_JSON_BYTES:
        return value
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return value
    if isinstance(data, dict) and data.get("type") == "tool":
        inner = data.get("data")
        if isinstance(inner, dict) and "content" in inner:
            return inner["content"]
    return value


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    attrs = view.attributes
    kind = str(attrs.get("openinference.span.kind", "")).upper()
    span = NormalizedSpan(view=view, convention=NAME, operation=KIND_MAP.get(kind, "other"))
    span.error = genai.error_of(view)
    if span.operation == "llm":
        span.model = genai.first_str(
            view, "llm.model_name", "llm.request.model_name", "llm.response.model_name"
        )
        span.provider = genai.first_str(view, "llm.provider", "llm.system")
        span.input_tokens = genai.first_int(view, "llm.token_count.prompt")
        span.output_tokens = genai.first_int(view, "llm.token_count.completion")
        span.input_messages = _flat_messages(attrs, "llm.input_messages.")
        span.output_messages = _flat_messages(attrs, "llm.output_messages.")
        span.finish_reasons = genai.finish_reasons_of(attrs.get("llm.finish_reason"))
        if span.input_messages and span.input_messages[0].role == "system":
            pass  # kept as a system message; the step builder makes a system step of it
    elif span.operation == "tool":
        span.tool_name = genai.first_str(view, "tool.name") or view.name
        span.tool_call_id = genai.first_str(view, "tool.id", "tool_call.id")
        span.tool_arguments = attrs.get("input.value")
        span.tool_result = _tool_output(attrs.get("output.value"))
    elif span.operation == "retrieval":
        span.query = genai.first_str(view, "input.value")
        span.source = view.name
        for _, fields in sorted(_indexed(attrs, "retrieval.documents.").items()):
            score = fields.get("document.score")
            span.documents.append(
                Document(
                    id=_opt(fields.get("document.id")),
                    content=to_text(fields.get("document.content")),
                    score=float(score) if isinstance(score, (int, float)) else None,
                )
            )
    elif span.operation == "agent":
        span.agent_name = genai.first_str(view, "agent.name") or view.name
        output = attrs.get("output.value")
        span.declared_output = to_text(output) if output is not None else None
    return span
