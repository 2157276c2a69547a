"""Vercel AI SDK telemetry: `ai.*` attributes, step kind in `ai.operationId`.

`ai.generateText.doGenerate` / `ai.streamText.doStream` (and the object variants) are provider
calls; `ai.toolCall` is a tool execution; the top-level `ai.generateText` / `ai.streamText` call
runs the multi-step tool loop and is treated as the agent run, named by `ai.telemetry.functionId`.
"""

from __future__ import annotations

import json
from typing import Any

from tracehound.conventions import genai
from tracehound.conventions.base import Message, NormalizedSpan, Part, parse_json_value, to_text
from tracehound.spans import LogView, SpanView

NAME = "vercel_ai"

_LLM_SUFFIXES = (".doGenerate", ".doStream")
_TOP_LEVEL = frozenset(("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"))


# The keys that make `detect` claim a span (beside names starting with `ai.`).
CLAIM_KEYS = frozenset(("ai.operationId",))


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    if not keys.isdisjoint(CLAIM_KEYS):
        return True
    name = view.name
    return name.startswith("ai.") and (
        name in _TOP_LEVEL or name == "ai.toolCall" or name.endswith(_LLM_SUFFIXES)
    )


def _vercel_part(raw: Any) -> Part | None:
    if isinstance(raw, str):
        return Part(type="text", content=raw)
    if not isinstance(raw, dict):
        return None
    ptype = raw.get("type")
    if ptype == "text":
        return Part(type="text", content=to_text(raw.get("text")))
    if ptype == "reasoning":
        return Part(type="reasoning", content=to_text(raw.get("text")))
    if ptype == "tool-call":
        return Part(
            type="tool_call",
            id=_opt(raw.get("toolCallId")),
            name=_opt(raw.get("toolName")),
            arguments=raw.get("args", raw.get("input")),
        )
    if ptype == "tool-result":
        result = raw.get("result", raw.get("output"))
        if isinstance(result, dict) and "value" in result and "type" in result:
            result = result["value"]  # AI SDK 5 output envelope {type, value}
        return Part(
            type="tool_call_response",
            id=_opt(raw.get("toolCallId")),
            name=_opt(raw.get("toolName")),
            response=result,
            content=to_text(result),
        )
    return Part(type=str(ptype or "other"))


def _opt(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _messages(value: Any, what: str, problems: list[str]) -> list[Message]:
    data = parse_json_value(value, what, problems)
    if (
        isinstance(data, dict) and "messages" in data
    ):  # `ai.prompt` = {"system"?, "prompt"?, "messages"?}
        data = data["messages"]
    if not isinstance(data, list):
        return []
    messages: list[Message] = []
    for raw in data:
        if not isinstance(raw, dict):
            continue
        role = str(raw.get("role") or "user")
        content = raw.get("content")
        items = content if isinstance(content, list) else [content] if content else []
        parts = [p for p in (_vercel_part(item) for item in items) if p is not None]
        messages.append(Message(role=role, parts=parts))
    return messages


def _json_text_value(value: Any) -> Any:
    """`ai.toolCall.result` holds `JSON.stringify(result)`: `"\\"sunny\\""` is the text `sunny`.

    Decoded so that the result reads the same as in the next call's `tool-result` part; a value
    that is not JSON is kept as it is.
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
    op_id = genai.first_str(view, "ai.operationId") or view.name
    if op_id.endswith(_LLM_SUFFIXES):
        span.operation = "llm"
        span.model = genai.first_str(view, "ai.model.id", "gen_ai.request.model")
        span.provider = genai.first_str(view, "ai.model.provider", "gen_ai.system")
        span.input_tokens = genai.first_int(
            view, "ai.usage.promptTokens", "ai.usage.inputTokens", "gen_ai.usage.input_tokens"
        )
        span.output_tokens = genai.first_int(
            view,
            "ai.usage.completionTokens",
            "ai.usage.outputTokens",
            "gen_ai.usage.output_tokens",
        )
        span.input_messages = _messages(
            attrs.get("ai.prompt.messages"), "ai.prompt.messages", problems
        )
        parts: list[Part] = []
        text = attrs.get("ai.response.text", attrs.get("ai.result.text"))
        if isinstance(text, str) and text:
            parts.append(Part(type="text", content=text))
        calls = parse_json_value(
            attrs.get("ai.response.toolCalls", attrs.get("ai.result.toolCalls")),
            "ai.response.toolCalls",
            problems,
        )
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    parts.append(
                        Part(
                            type="tool_call",
                            id=_opt(call.get("toolCallId")),
                            name=_opt(call.get("toolName")),
                            arguments=call.get("args", call.get("input")),
                        )
                    )
        finish = genai.first_str(view, "ai.response.finishReason", "ai.finishReason")
        if parts or finish:
            span.output_messages = [Message(role="assistant", parts=parts, finish_reason=finish)]
        span.finish_reasons = [finish] if finish else span.finish_reasons
    elif op_id == "ai.toolCall":
        span.operation = "tool"
        span.tool_name = genai.first_str(view, "ai.toolCall.name")
        span.tool_call_id = genai.first_str(view, "ai.toolCall.id")
        span.tool_arguments = attrs.get("ai.toolCall.args", attrs.get("ai.toolCall.input"))
        span.tool_result = _json_text_value(
            attrs.get("ai.toolCall.result", attrs.get("ai.toolCall.output"))
        )
    elif op_id in _TOP_LEVEL:
        span.operation = "agent"
        span.agent_name = genai.first_str(view, "ai.telemetry.functionId") or op_id
        span.model = genai.first_str(view, "ai.model.id")
        text = attrs.get("ai.response.text", attrs.get("ai.result.text"))
        span.declared_output = text if isinstance(text, str) else None
        prompt = attrs.get("ai.prompt")
        data = parse_json_value(prompt, "ai.prompt", problems) if isinstance(prompt, str) else None
        if isinstance(data, dict):
            if isinstance(data.get("system"), str):
                span.system_instructions = [data["system"]]
            if isinstance(data.get("prompt"), str):
                span.history = [
                    Message(role="user", parts=[Part(type="text", content=data["prompt"])])
                ]
            elif isinstance(data.get("messages"), list):
                span.history = _messages(data, "ai.prompt", problems)
    elif op_id.startswith(("ai.embed",)):
        span.operation = "embeddings"
    return span
