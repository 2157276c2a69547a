"""Message parsing shared by the conventions that use the OTel GenAI message shapes.

Tolerates the variants seen in real libraries: `thinking` parts (pydantic-ai) for `reasoning`,
`result` (pydantic-ai, registry example) for `response` in tool-call responses, tool results in a
`user` message, `text` for `content`, and the legacy per-message event bodies
(`gen_ai.user.message`, `gen_ai.choice`, ...), including pydantic-ai 1.x's list-valued content.
"""

from __future__ import annotations

from typing import Any

from tracehound.conventions.base import Message, Part, parse_json_value, to_text

_PART_TYPE_ALIASES = {"thinking": "reasoning", "tool_result": "tool_call_response"}


def parse_part(raw: Any) -> Part | None:
    # Positional Part(type, content, id, name, arguments, response): this runs for every part of
    # every message of every chat span.
    if type(raw) is not dict:
        if isinstance(raw, str):
            return Part("text", raw)
        if not isinstance(raw, dict):
            return None
    ptype = raw.get("type") or raw.get("kind") or "text"
    if type(ptype) is not str:
        ptype = str(ptype)
    ptype = _PART_TYPE_ALIASES.get(ptype, ptype)
    if ptype == "tool_call":
        return Part(
            "tool_call",
            None,
            _opt_str(raw.get("id")),
            _opt_str(raw.get("name")),
            raw.get("arguments"),
        )
    if ptype == "tool_call_response":
        response = raw.get("response", raw.get("result"))
        return Part(
            "tool_call_response",
            to_text(response),
            _opt_str(raw.get("id")),
            _opt_str(raw.get("name")),
            None,
            response,
        )
    content = raw["content"] if "content" in raw else raw.get("text")
    if content is None or type(content) is str:  # the usual case; to_text would return it
        return Part(ptype, content)
    return Part(ptype, to_text(content))


def parse_messages(value: Any, what: str, problems: list[str]) -> list[Message]:
    """Parse `gen_ai.input.messages` / `gen_ai.output.messages` (JSON string or structured)."""
    data = parse_json_value(value, what, problems)
    if data is None:
        return []
    if isinstance(data, dict):
        problems.append(f"{what}: an object, not an array of messages; read as one message")
        data = [data]
    if not isinstance(data, list):
        problems.append(f"{what}: expected an array of messages")
        return []
    messages: list[Message] = []
    for raw in data:
        if not isinstance(raw, dict):
            problems.append(f"{what}: a message that is not an object was skipped")
            continue
        role = raw.get("role") or "assistant"
        if type(role) is not str:
            role = str(role)
        raw_parts = raw.get("parts")
        parts: list[Part] = []
        if isinstance(raw_parts, list):
            for rp in raw_parts:
                # the usual part, {"type": "text", "content": "..."}, read in place (as
                # `parse_part` would) rather than through a call per part
                if type(rp) is dict and rp.get("type") == "text":
                    content = rp["content"] if "content" in rp else rp.get("text")
                    if content is None or type(content) is str:
                        parts.append(Part("text", content))
                        continue
                part = parse_part(rp)
                if part is None:
                    problems.append(f"{what}: a part that is not an object was skipped")
                    continue
                parts.append(part)
        else:
            if raw_parts is not None:
                problems.append(f"{what}: `parts` that is not an array was skipped")
            if "content" in raw:  # plain {role, content} chat message
                text = to_text(raw.get("content"))
                if text is not None:
                    parts.append(Part(type="text", content=text))
        finish = raw.get("finish_reason")
        messages.append(Message(role, parts, None if finish is None else _opt_str(finish)))
    return messages


def parse_instructions(value: Any, what: str, problems: list[str]) -> list[str]:
    """Parse `gen_ai.system_instructions`: an array of parts, or a plain string."""
    if isinstance(value, str) and not value.lstrip().startswith(("[", "{")):
        return [value] if value else []
    data = parse_json_value(value, what, problems)
    if data is None:
        return []
    if isinstance(data, dict):
        data = [data]
    texts: list[str] = []
    if isinstance(data, list):
        for raw in data:
            part = parse_part(raw)
            if part is not None and part.content:
                texts.append(part.content)
    return texts


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


# --- legacy per-message events --------------------------------------------------------------------

LEGACY_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
LEGACY_CHOICE_EVENT = "gen_ai.choice"


def _content_parts(content: Any) -> list[Part]:
    """Content of a legacy body: a string, or pydantic-ai 1.x's `[{"kind": "thinking", ...}]`."""
    if content is None or content == "":
        return []
    if isinstance(content, list):
        parts: list[Part] = []
        for item in content:
            part = parse_part(item)
            if part is not None and (part.content or part.type not in ("text", "reasoning")):
                parts.append(part)
        return parts
    text = to_text(content)
    return [Part(type="text", content=text)] if text else []


def _tool_call_parts(tool_calls: Any) -> list[Part]:
    parts: list[Part] = []
    if not isinstance(tool_calls, list):
        return parts
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        parts.append(
            Part(
                type="tool_call",
                id=_opt_str(call.get("id")),
                name=_opt_str(function.get("name") or call.get("name")),
                arguments=function.get("arguments", call.get("arguments")),
            )
        )
    return parts


def legacy_event_message(name: str, body: Any) -> tuple[str, Message] | None:
    """Map one legacy event (name + body map) to ("input" | "output", Message)."""
    if not isinstance(body, dict):
        body = {"content": body} if body is not None else {}
    if name in LEGACY_INPUT_EVENTS:
        role = LEGACY_INPUT_EVENTS[name]
        if role == "tool":
            content = body.get("content")
            part = Part(
                type="tool_call_response",
                id=_opt_str(body.get("id")),
                name=_opt_str(body.get("name")),
                response=content,
                content=to_text(content),
            )
            return "input", Message(role="tool", parts=[part])
        parts = _content_parts(body.get("content"))
        parts.extend(_tool_call_parts(body.get("tool_calls")))
        return "input", Message(role=role, parts=parts)
    if name == LEGACY_CHOICE_EVENT:
        message = body.get("message")
        message = message if isinstance(message, dict) else {}
        parts = _content_parts(message.get("content"))
        # tool_calls sit beside `message` in the spec, inside it in openai-v2 2.2
        parts.extend(_tool_call_parts(body.get("tool_calls")))
        parts.extend(_tool_call_parts(message.get("tool_calls")))
        return "output", Message(
            role=str(message.get("role") or "assistant"),
            parts=parts,
            finish_reason=_opt_str(body.get("finish_reason")),
        )
    return None


def ordered_legacy_messages(events: list[tuple[str, Any]]) -> list[Message]:
    """All messages of a legacy event list, inputs and choices alike, in the order given."""
    out: list[Message] = []
    for name, body in events:
        mapped = legacy_event_message(name, body)
        if mapped is not None:
            out.append(mapped[1])
    return out


def messages_from_legacy_events(
    events: list[tuple[str, Any]],
) -> tuple[list[Message], list[Message]]:
    """Inputs and outputs from a span's legacy events, in the order given."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, body in events:
        mapped = legacy_event_message(name, body)
        if mapped is None:
            continue
        side, message = mapped
        (inputs if side == "input" else outputs).append(message)
    return inputs, outputs
