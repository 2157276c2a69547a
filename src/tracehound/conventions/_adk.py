"""Google ADK's own shapes, read on the spans of its instrumentation scope (`gcp.vertex.agent`).

- ADK hands a tool's return value to the model as a `FunctionResponse.response` dict: a dict as
  returned, anything else wrapped as exactly `{"result": value}` (`flows/llm_flows/tools/
  _caller.py`; ADK's own Anthropic adapter unwraps that exact shape again). That dict is what the
  tool span's `gen_ai.tool.call.result` and the next LLM input's `tool_call_response` part hold:
  the tool's own value is read from inside the wrapper.
- Telemetry schema 1 (`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`, ADK 1.x's format): a `call_llm`
  span carries the request and the response as google-genai JSON
  (`gcp.vertex.agent.llm_request` / `.llm_response`: `contents[].parts[]` of `text`,
  `function_call`, `function_response`, `thought`), tool spans carry
  `gcp.vertex.agent.tool_call_args` / `.tool_response` (`{}` when content is not captured), and
  log records hold `<elided>` where content is not captured.
- After parallel calls ADK marks the merged response event with one more `execute_tool` span,
  tool name `(merged tools)` (`trace_merged_tool_calls`, "not needed for telemetry purposes",
  kept for its web UI): it executed nothing, each call has its own tool span.
"""

from __future__ import annotations

import json
from typing import Any

from tracehound.conventions._messages import content_text
from tracehound.conventions.base import Message, NormalizedSpan, Part, parse_json_value, to_text

SCOPE = "gcp.vertex.agent"
_LLM_REQUEST = "gcp.vertex.agent.llm_request"
_LLM_RESPONSE = "gcp.vertex.agent.llm_response"
_TOOL_ARGS = "gcp.vertex.agent.tool_call_args"
_TOOL_RESPONSE = "gcp.vertex.agent.tool_response"
_ELIDED = "<elided>"
_ROLES = {"model": "assistant"}
_MERGED_TOOLS = "(merged tools)"


def unwrapped(value: Any) -> Any:
    """The tool's own return value inside ADK's `{"result": value}` wrapper; else `value`."""
    data = value
    if isinstance(value, str) and value[:1] == "{":
        try:
            data = json.loads(value)
        except ValueError:
            return value
    if isinstance(data, dict) and len(data) == 1 and "result" in data:
        inner = data["result"]
        if inner is not None:
            return inner if isinstance(inner, str) else to_text(inner)
    return value


def apply_legacy_attributes(span: NormalizedSpan) -> None:
    """Schema 1 content on the span's own attributes (before any event or log record); the
    `(merged tools)` bookkeeping span is no tool call."""
    attrs = span.view.attributes
    if span.operation == "tool":
        if span.tool_name == _MERGED_TOOLS:
            span.operation = "other"
            return
        if span.tool_arguments is None and _TOOL_ARGS in attrs:
            span.tool_arguments = attrs[_TOOL_ARGS]
        response = attrs.get(_TOOL_RESPONSE)
        if span.tool_result is None and response is not None and response != "{}":
            span.tool_result = content_text(response)
    elif _LLM_REQUEST in attrs or _LLM_RESPONSE in attrs:
        problems = span.problems
        request = parse_json_value(attrs.get(_LLM_REQUEST), _LLM_REQUEST, problems)
        if isinstance(request, dict) and request:
            config = request.get("config")
            if isinstance(config, dict) and not span.system_instructions:
                text = _content_parts_text(config.get("system_instruction"))
                if text:
                    span.system_instructions = [text]
            contents = request.get("contents")
            if isinstance(contents, list) and not span.input_messages:
                span.input_messages = [m for m in map(_message, contents) if m is not None]
        response = parse_json_value(attrs.get(_LLM_RESPONSE), _LLM_RESPONSE, problems)
        if isinstance(response, dict) and response and not span.output_messages:
            message = _message(response.get("content"))
            if message is not None:
                finish = response.get("finish_reason")
                message.finish_reason = finish if isinstance(finish, str) else None
                span.output_messages = [message]
        if span.operation == "other" and (span.input_messages or span.output_messages):
            span.operation = "llm"


def _content_parts_text(value: Any) -> str | None:
    """A system instruction: a string, or a google-genai Content / list of parts."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        value = value.get("parts")
    if isinstance(value, list):
        texts = [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(texts) or None
    return None


def _message(content: Any) -> Message | None:
    """A google-genai `Content` ({role, parts}) as a message."""
    if not isinstance(content, dict):
        return None
    role = content.get("role")
    role = _ROLES.get(role, role) if isinstance(role, str) and role else "user"
    parts: list[Part] = []
    raw_parts = content.get("parts")
    for raw in raw_parts if isinstance(raw_parts, list) else ():
        if not isinstance(raw, dict):
            continue
        call = raw.get("function_call")
        response = raw.get("function_response")
        text = raw.get("text")
        if isinstance(call, dict):
            parts.append(
                Part(
                    "tool_call",
                    None,
                    _str(call.get("id")),
                    _str(call.get("name")),
                    call.get("args"),
                )
            )
        elif isinstance(response, dict):
            value = unwrapped(response.get("response"))
            parts.append(
                Part(
                    "tool_call_response",
                    content_text(value),
                    _str(response.get("id")),
                    _str(response.get("name")),
                    None,
                    value,
                )
            )
        elif isinstance(text, str) and text:
            parts.append(Part("reasoning" if raw.get("thought") else "text", text))
    return Message(role, parts) if parts else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def after_content(span: NormalizedSpan) -> None:
    """Once every carrier is read: tool values out of their wrapper; `<elided>` is no content."""
    if span.tool_result is not None:
        span.tool_result = unwrapped(span.tool_result)
    for messages in (span.input_messages, span.output_messages):
        for message in messages:
            parts = message.parts
            if any(p.content == _ELIDED for p in parts):
                parts[:] = [p for p in parts if p.content != _ELIDED]
            for part in parts:
                if part.type == "tool_call_response" and part.response is not None:
                    value = unwrapped(part.response)
                    if value is not part.response:
                        part.content = content_text(value)
    if _ELIDED in span.system_instructions:
        span.system_instructions = [t for t in span.system_instructions if t != _ELIDED]
