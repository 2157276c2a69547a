"""Message parsing shared by the conventions that use the OTel GenAI message shapes.

Tolerates the variants seen in real libraries: `thinking` parts (pydantic-ai) for `reasoning`,
`result` (pydantic-ai, registry example) for `response` in tool-call responses, tool results in a
`user` message, `text` for `content`, and the legacy per-message event bodies
(`gen_ai.user.message`, `gen_ai.choice`, ...), including pydantic-ai 1.x's list-valued content.

Content blocks are read as what they say: a tool result or message content that is a list of text
blocks (`[{"text": ...}]` as Bedrock / Strands Agents write it, `[{"type": "text", "text": ...}]`
as Anthropic / MCP do) is its text; Strands' keyed blocks (`toolUse`, `toolResult`,
`reasoningContent`), which its default telemetry writes as JSON strings into legacy event bodies,
are tool calls, tool results and reasoning.
"""

from __future__ import annotations

from typing import Any

from tracehound.conventions.base import Message, Part, parse_json_value, to_text

_PART_TYPE_ALIASES = {
    "thinking": "reasoning",
    "tool_result": "tool_call_response",
    # Strands' latest-convention mapping keeps a block it has no part type for as
    # `{"type": <block key>, "content": <block value>}`
    "reasoningContent": "reasoning",
}

# Text-like content block types (OTel `text`, Anthropic / MCP `text`, OpenAI Responses).
_TEXT_BLOCK_TYPES = frozenset(("text", "input_text", "output_text"))


def _block_text(block: Any) -> str | None:
    """The text of one content block, or None when `block` is not a text block.

    `{"text": s}` (Bedrock / Strands; the one key), `{"json": v}` (Bedrock's JSON block),
    `{"type": "text", "text" | "content": s}` (Anthropic, MCP, OTel parts).
    """
    if type(block) is not dict:
        return None
    btype = block.get("type")
    if btype is None:
        if len(block) == 1:
            if type(block.get("text")) is str:
                return str(block["text"])
            if "json" in block:
                return to_text(block["json"])
        return None
    if btype in _TEXT_BLOCK_TYPES:
        text = block.get("text", block.get("content"))
        return text if isinstance(text, str) else None
    return None


def blocks_text(value: Any) -> str | None:
    """The text of a list of text blocks (or of one block); None if `value` is not one."""
    if type(value) is dict:
        return _block_text(value)
    if type(value) is not list or not value:
        return None
    texts: list[str] = []
    for block in value:
        text = _block_text(block)
        if text is None:
            return None
        texts.append(text)
    return "\n".join(texts)


_JSON_HEADS = frozenset("[{")
# Keys a content block starts with; a JSON string whose head has none of them is not parsed
# (tool results resent in every later LLM input are often JSON of their own).
_BLOCK_KEYS = ('"text"', '"type"', '"json"', '"kind"', '"toolUse"', '"toolResult"', '"reasoning')
_HEAD = 48


def _maybe_blocks(value: str) -> Any:
    """`value` parsed when it may be the JSON of content blocks (an array or object whose head
    names a block key), else None (never raises)."""
    if value[:1] not in _JSON_HEADS:
        value = value.lstrip()
        if value[:1] not in _JSON_HEADS:
            return None
    head = value[:_HEAD]
    if not any(key in head for key in _BLOCK_KEYS):
        return None
    problems: list[str] = []
    return parse_json_value(value, "", problems)


def content_text(value: Any) -> str | None:
    """Text of a content value (a tool result, a message's content): text blocks unwrapped,
    also from their JSON string; anything else as `to_text` gives it."""
    if value is None:
        return None
    if isinstance(value, str):
        data = _maybe_blocks(value)
        if data is not None:
            text = blocks_text(data)
            if text is not None:
                return text
        return value
    text = blocks_text(value)
    return text if text is not None else to_text(value)


def _keyed_block_part(raw: dict[str, Any]) -> Part | None:
    """A Strands / Bedrock content block without a `type`: `{"toolUse": {...}}`,
    `{"toolResult": {...}}`, `{"reasoningContent": {...}}`; None for any other dict."""
    if len(raw) != 1:
        return None
    if "toolUse" in raw:
        use = raw["toolUse"]
        if isinstance(use, dict):
            return Part(
                "tool_call",
                None,
                _opt_str(use.get("toolUseId")),
                _opt_str(use.get("name")),
                use.get("input"),
            )
    elif "toolResult" in raw:
        result = raw["toolResult"]
        if isinstance(result, dict):
            content = result.get("content")
            return Part(
                "tool_call_response",
                content_text(content),
                _opt_str(result.get("toolUseId")),
                None,
                None,
                content,
                failed_result(result),
            )
    elif "reasoningContent" in raw:
        return Part("reasoning", _reasoning_text(raw["reasoningContent"]))
    return None


def _reasoning_text(value: Any) -> str | None:
    """Strands' `reasoningContent` value: `{"reasoningText": {"text": ..., "signature": ...}}`."""
    if isinstance(value, dict):
        inner = value.get("reasoningText", value)
        if isinstance(inner, dict):
            text = inner.get("text")
            return text if isinstance(text, str) else None
    return value if isinstance(value, str) else None


def failed_result(raw: dict[str, Any]) -> bool:
    """Whether a tool result object says its call failed: `"is_error": true` (Anthropic
    `tool_result` blocks, AutoGen's FunctionExecutionResult) or `"status": "error"` (Strands /
    Bedrock `toolResult`, LangChain's ToolMessage)."""
    return raw.get("is_error") is True or raw.get("status") == "error"


def parse_part(raw: Any) -> Part | None:
    # Positional Part(type, content, id, name, arguments, response): this runs for every part of
    # every message of every chat span.
    if type(raw) is not dict:
        if isinstance(raw, str):
            return Part("text", raw)
        if not isinstance(raw, dict):
            return None
    ptype = raw.get("type") or raw.get("kind")
    if not ptype:
        keyed = _keyed_block_part(raw)
        if keyed is not None:
            return keyed
        ptype = "text"
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
            content_text(response),
            _opt_str(raw.get("id")),
            _opt_str(raw.get("name")),
            None,
            response,
            failed_result(raw),
        )
    content = raw["content"] if "content" in raw else raw.get("text")
    if content is None or type(content) is str:  # the usual case; to_text would return it
        return Part(ptype, content)
    if ptype == "reasoning":
        text = _reasoning_text(content)
        if text is not None:
            return Part(ptype, text)
    return Part(ptype, content_text(content))


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
    """Content of a legacy body: a string, pydantic-ai 1.x's `[{"kind": "thinking", ...}]`, or
    content blocks, also as their JSON string (Strands: `'[{"text": ...}, {"toolUse": ...}]'`)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        data = _maybe_blocks(content)
        if type(data) is list and data and all(type(item) is dict for item in data):
            read = _block_parts(data)
            if read is not None:
                return read
        return [Part(type="text", content=content)]
    if isinstance(content, list):
        parts: list[Part] = []
        for item in content:
            part = parse_part(item)
            if part is not None and (part.content or part.type not in ("text", "reasoning")):
                parts.append(part)
        return parts
    text = to_text(content)
    return [Part(type="text", content=text)] if text else []


def _block_parts(blocks: list[dict[str, Any]]) -> list[Part] | None:
    """Parts of a JSON list of content blocks; None unless every block is one tracehound reads
    (a text block, a Strands keyed block, or a typed part) — then the string is plain text."""
    parts: list[Part] = []
    for block in blocks:
        if "type" in block or "kind" in block:
            part = parse_part(block)
        else:
            part = _keyed_block_part(block)
            if part is None:
                text = _block_text(block)
                if text is None:
                    return None
                part = Part("text", text)
        if part is not None and (part.content or part.type not in ("text", "reasoning")):
            parts.append(part)
    return parts


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
            # Strands puts the result in the content, as `[{"toolResult": {...}}]` (no `id`)
            blocks = _content_parts(content) if isinstance(content, str) else []
            results = [p for p in blocks if p.type == "tool_call_response"]
            if results:
                return "input", Message(role="tool", parts=results)
            part = Part(
                type="tool_call_response",
                id=_opt_str(body.get("id")),
                name=_opt_str(body.get("name")),
                response=content,
                content=content_text(content),
            )
            return "input", Message(role="tool", parts=[part])
        parts = _content_parts(body.get("content"))
        parts.extend(_tool_call_parts(body.get("tool_calls")))
        return "input", Message(role=role, parts=parts)
    if name == LEGACY_CHOICE_EVENT:
        message = body.get("message")
        if isinstance(message, dict):
            parts = _content_parts(message.get("content"))
        else:  # Strands: the message's content itself, as a string or JSON content blocks
            parts = _content_parts(message)
            message = {}
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
