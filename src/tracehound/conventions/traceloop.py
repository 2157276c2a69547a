"""OpenLLMetry / Traceloop: `traceloop.span.kind` decorator spans and legacy indexed content.

Decorator spans (`@workflow`, `@task`, `@agent`, `@tool`) carry `traceloop.entity.name` and JSON
`traceloop.entity.input` (`{"args": [...], "kwargs": {...}}`) / `traceloop.entity.output`. LLM
spans of current instrumentations use the OTel GenAI attributes; older ones the indexed
`gen_ai.prompt.{i}.*` / `gen_ai.completion.{i}.*` keys. Vector-DB spans report documents as
`db.query.result` span events.

Traceloop's LangChain / LangGraph instrumentation (`opentelemetry-instrumentation-langchain`)
records LangChain's callback payloads: a tool span's `traceloop.entity.input` (and
`gen_ai.tool.call.arguments`) is `on_tool_start`'s `{"input_str", "tags", "metadata", "inputs",
"kwargs": {"tool_call_id", ...}}` and its output (`gen_ai.tool.call.result`) `on_tool_end`'s
`{"output": <a serialized ToolMessage, or the tool's raw return>, "kwargs": {...}}`; a retriever
span (`vector_db_retrieve`) has `{"query", ...}` in and `{"documents": [{"page_content",
"metadata"}], "count"}` out. Those are read for what the tool received and returned.
"""

from __future__ import annotations

import ast
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
# Traceloop's own `gen_ai.operation.name` values (semconv-ai `GenAICustomOperationName`) that
# name a GenAI operation (`execute_task` is a chain step: a workflow).
_CUSTOM_OPERATIONS: dict[str, Operation] = {"vector_db_retrieve": "retrieval"}
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
    """`{"args": [...], "kwargs": {...}}` → the kwargs (or the single positional argument); a
    call with neither received no arguments (`{}`)."""
    data = parse_json_value(value, "traceloop.entity.input", problems)
    if isinstance(data, dict) and ("args" in data or "kwargs" in data):
        kwargs = data.get("kwargs") or {}
        args = data.get("args") or []
        if not args:
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


# --- LangChain callback payloads -----------------------------------------------------------------

# `str(dict)` of a tool input (`input_str` when LangChain passed no `inputs`) is read as a Python
# literal only up to this size.
_MAX_LITERAL_BYTES = 64 * 1024


def _payload(value: Any, key: str) -> dict[str, Any] | None:
    """The decoded callback payload of an attribute when it is one (a JSON object with `key`)."""
    if isinstance(value, str):
        if not value.startswith("{") or len(value) > MAX_JSON_BYTES or f'"{key}"' not in value:
            return None
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) and key in value else None


def _lc_message(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(class name, fields) of a LangChain-serialized message, `{"lc": 1, "type":
    "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {...}}`."""
    if not isinstance(value, dict) or value.get("type") != "constructor" or "lc" not in value:
        return None
    ids, fields = value.get("id"), value.get("kwargs")
    if not isinstance(fields, dict):
        return None
    name = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else ""
    return name, fields


def content_text(content: Any) -> str | None:
    """Text of a LangChain message content: a string, or content blocks (`[{"type": "text",
    "text": ...}]`, plain strings) whose texts are joined; other blocks as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                texts.append(to_text(block) or "")
        return "\n".join(t for t in texts if t)
    return to_text(content)


def _tool_input(payload: dict[str, Any]) -> tuple[Any, str | None]:
    """(arguments the tool received, tool call id) from an `on_tool_start` payload.

    `inputs` is the tool's input when it was a dict (the model's arguments, injected ones left
    out); else `input_str` is the input itself (a string), or `str()` of it (a Python literal).
    """
    kwargs = payload.get("kwargs")
    call_id = kwargs.get("tool_call_id") if isinstance(kwargs, dict) else None
    inputs = payload.get("inputs")
    if isinstance(inputs, (dict, list)):
        arguments: Any = inputs
    else:
        arguments = _literal(payload.get("input_str"))
    return arguments, call_id if isinstance(call_id, str) and call_id else None


def _literal(text: Any) -> Any:
    """`'{"city": "Oslo"}'` or `"{'city': 'Oslo'}"` → the dict; any other value as it is."""
    if not isinstance(text, str) or text[:1] not in ("{", "[") or len(text) > _MAX_LITERAL_BYTES:
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, (dict, list)) else text


def _tool_output(output: Any, call_id: str | None) -> tuple[Any, str | None, str | None]:
    """(result, tool call id, error) from `on_tool_end`'s `output`.

    A ToolMessage gives its content (blocks unwrapped), call id and `status`; a LangGraph
    `Command` (or a list of messages) the ToolMessage of this call inside it; any other value
    is the tool's own return.
    """
    message = _lc_message(output)
    if message is None:
        messages: Any = output
        if isinstance(output, dict) and isinstance(output.get("update"), dict):  # Command
            messages = output["update"].get("messages")
        if isinstance(messages, list):
            found = [m for m in map(_lc_message, messages) if m and m[0] == "ToolMessage"]
            mine = [m for m in found if call_id and m[1].get("tool_call_id") == call_id]
            if mine or len(found) == 1:
                message = (mine or found)[0]
    if message is None or message[0] != "ToolMessage":
        if message is not None:
            return content_text(message[1].get("content")), None, None
        return output, None, None
    fields = message[1]
    text = content_text(fields.get("content"))
    found_id = fields.get("tool_call_id")
    error = (text or "error") if fields.get("status") == "error" else None
    return text, found_id if isinstance(found_id, str) and found_id else None, error


def _read_langchain_tool(span: NormalizedSpan, attrs: dict[str, Any]) -> bool:
    """Fill a tool span from LangChain callback payloads; False when it has none."""
    payload = _payload(
        attrs.get("traceloop.entity.input", attrs.get("gen_ai.tool.call.arguments")), "input_str"
    )
    if payload is None:
        return False
    arguments, call_id = _tool_input(payload)
    span.tool_arguments = arguments
    span.tool_call_id = span.tool_call_id or call_id
    out = _payload(
        attrs.get("traceloop.entity.output", attrs.get("gen_ai.tool.call.result")), "output"
    )
    if out is None:  # the tool failed (no on_tool_end): the error is on the span
        span.tool_result = None
        return True
    result, found_id, error = _tool_output(out.get("output"), span.tool_call_id)
    span.tool_result = result
    span.tool_call_id = span.tool_call_id or found_id
    span.error = span.error or error
    return True


def _read_retriever(span: NormalizedSpan, attrs: dict[str, Any], entity: str | None) -> None:
    """A LangChain retriever span: `{"query"}` in, `{"documents": [{"page_content",
    "metadata"}]}` out."""
    payload = _payload(attrs.get("traceloop.entity.input"), "query")
    if payload is not None and isinstance(payload.get("query"), str):
        span.query = span.query or payload["query"]
    metadata = payload.get("metadata") if payload is not None else None
    name = metadata.get("ls_retriever_name") if isinstance(metadata, dict) else None
    span.source = entity or (name if isinstance(name, str) and name else None) or span.view.name
    out = _payload(attrs.get("traceloop.entity.output"), "documents")
    documents = out.get("documents") if out is not None else None
    if not isinstance(documents, list):
        return
    for raw in documents:
        if isinstance(raw, dict):
            meta = raw.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            score = meta.get("score", meta.get("relevance_score"))
            span.documents.append(
                Document(
                    id=_opt(raw.get("id", meta.get("id"))),
                    content=to_text(raw.get("page_content", raw.get("content"))),
                    score=float(score) if isinstance(score, (int, float)) else None,
                )
            )
        elif isinstance(raw, str):
            span.documents.append(Document(content=raw))


def _agent_output(value: Any, problems: list[str]) -> str | None:
    """An agent's answer from its `traceloop.entity.output`: a returned string, or the text
    of a returned LangChain message. Any other value (a graph state, a dict) is not an answer:
    the run's last assistant text is."""
    data = parse_json_value(value, "traceloop.entity.output", problems)
    if data is None and isinstance(value, str):
        return value or None  # not JSON: set by hand
    if isinstance(data, str):
        return data or None
    message = _lc_message(data)
    if message is not None and message[0] in ("AIMessage", "AIMessageChunk"):
        return content_text(message[1].get("content")) or None
    return None


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    span = genai.extract(view, logs)
    span.convention = NAME
    attrs = view.attributes
    problems = span.problems
    kind = attrs.get("traceloop.span.kind")
    entity = genai.first_str(view, "traceloop.entity.name")
    op_name = attrs.get("gen_ai.operation.name")
    if isinstance(op_name, str) and op_name in _CUSTOM_OPERATIONS:
        span.operation = _CUSTOM_OPERATIONS[op_name]
    elif isinstance(kind, str) and kind in KIND_MAP:
        span.operation = KIND_MAP[kind]
    elif span.operation == "other":
        request_type = attrs.get("llm.request.type")
        if isinstance(request_type, str) and request_type in _REQUEST_TYPES:
            span.operation = _REQUEST_TYPES[request_type]
    if span.operation == "agent":
        span.agent_name = span.agent_name or entity or view.name
        output = attrs.get("traceloop.entity.output")
        if output is not None:
            span.declared_output = _agent_output(output, problems)
    elif span.operation == "tool":
        span.tool_name = span.tool_name or entity or view.name
        if not _read_langchain_tool(span, attrs):
            if span.tool_arguments is None and "traceloop.entity.input" in attrs:
                span.tool_arguments = _entity_arguments(attrs["traceloop.entity.input"], problems)
            if span.tool_result is None and "traceloop.entity.output" in attrs:
                span.tool_result = _entity_output(attrs["traceloop.entity.output"])
    elif span.operation == "retrieval" and op_name in _CUSTOM_OPERATIONS:
        _read_retriever(span, attrs, entity)
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
