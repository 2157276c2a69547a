"""A scripted, stdlib-only fake of the OpenAI HTTP API, bound to 127.0.0.1 on an ephemeral port.

Routes:

- ``POST /v1/chat/completions``: non-streaming, or SSE chunks (``stream: true``) with tool-call
  deltas and a usage chunk when ``stream_options.include_usage`` is set;
- ``POST /v1/responses``: the Responses API, non-streaming or as the SSE event stream the openai
  SDK parses (``response.created`` ... ``response.completed``);
- ``POST /v1/embeddings``: deterministic bag-of-words vectors, so a retriever can work offline.

What the model answers comes from a `Script` (a list of `Turn`s). Which script: the
``X-Fake-Scenario`` request header, else a ``[[script:NAME]]`` marker anywhere in the system
prompt / instructions, else the request's ``model`` if a script has that name, else the default
script. Which turn: the number of tool results the request already carries (``role: tool``
messages, ``function_call_output`` items, or smolagents-style ``Observation:`` / ``Error:`` user
messages, each answering every call of the ``Calling tools:`` message before it), so
every conversation is deterministic and needs no server-side state. When the request offers a
``final_answer`` tool (smolagents), a final text turn is answered as a call to that tool.

Every request is kept in `FakeLLM.requests` for inspection.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLM", "Script", "ToolCall", "Turn", "embed_text"]

SCENARIO_HEADER = "X-Fake-Scenario"
_MARKER = re.compile(r"\[\[script:([A-Za-z0-9_.-]+)\]\]")
# smolagents sends tool results back as user text "Call id: ...\nObservation:\n..."
_OBSERVATION = re.compile(r"Observation:")
# ... and a failed call as "Error:\n<exception>\nNow let's retry: ..."
_RETRY = re.compile(r"\nNow let's retry")
# the assistant's calls are echoed as text: "Calling tools:\n[{'id': ..., 'type': 'function', ...}]"
_CALLING_TOOLS = "Calling tools:"
_CALL_ENTRY = re.compile(r"""['"]type['"]: ['"]function['"]""")
EMBEDDING_DIM = 64
CREATED = 1_700_000_000


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One model answer: tool calls (one or several) or final text. Tool calls may come with a
    `preamble`, text the model writes before them in the same response ("Let me check...")."""

    tool_calls: tuple[ToolCall, ...] = ()
    text: str | None = None
    preamble: str | None = None

    def __post_init__(self) -> None:
        if bool(self.tool_calls) == (self.text is not None):
            raise ValueError("a turn is either tool calls or final text")
        if self.preamble is not None and not self.tool_calls:
            raise ValueError("a preamble comes before tool calls")


@dataclass(frozen=True)
class Script:
    """One conversation's scripted answers; the turn is picked by tool results seen so far."""

    name: str
    turns: tuple[Turn, ...]
    usage: tuple[int, int] = (61, 17)

    def turn_for(self, tool_results: int) -> tuple[int, Turn]:
        consumed = 0
        for index, turn in enumerate(self.turns):
            if not turn.tool_calls or consumed + len(turn.tool_calls) > tool_results:
                return index, turn
            consumed += len(turn.tool_calls)
        return len(self.turns) - 1, self.turns[-1]


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Hashed bag-of-words, L2-normalised: texts sharing words are near each other."""
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return " ".join(
            str(p.get("text") or p.get("content") or "") for p in content if isinstance(p, dict)
        )
    return "" if content is None else str(content)


def _count_tool_results(body: dict[str, Any]) -> int:
    messages = body.get("messages")
    if isinstance(messages, list):
        tools = sum(1 for m in messages if m.get("role") == "tool")
        if tools:
            return tools
        return _count_text_tool_results(messages)
    items = body.get("input")
    if isinstance(items, list):
        return sum(
            1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        )
    return 0


def _count_text_tool_results(messages: list[dict[str, Any]]) -> int:
    """Tool results sent back as text (smolagents): each observation or error message answers
    every call of the assistant's "Calling tools:" message before it (one or several)."""
    count = 0
    calls = 1
    for message in messages:
        text = _text_of(message.get("content"))
        if message.get("role") == "assistant" and text.startswith(_CALLING_TOOLS):
            calls = max(1, len(_CALL_ENTRY.findall(text)))
        elif message.get("role") == "user":
            answered = len(_OBSERVATION.findall(text)) + len(_RETRY.findall(text))
            count += answered * calls
            if answered:
                calls = 1
    return count


def _system_text(body: dict[str, Any]) -> str:
    parts = [str(body.get("instructions") or "")]
    for m in body.get("messages") or body.get("input") or []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            parts.append(_text_of(m.get("content")))
    return "\n".join(parts)


def _offers_tool(body: dict[str, Any], name: str) -> bool:
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if fn.get("name") == name:
            return True
    return False


@dataclass
class _Answer:
    """A resolved answer: tool calls (with ids) or text, plus usage."""

    script: str
    turn: int
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (call id, name, json args)
    text: str | None = None
    usage: tuple[int, int] = (0, 0)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: FakeLLM) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 30  # a stuck client must not hang a capture

    def log_message(self, format: str, *args: Any) -> None:  # keep driver output clean
        return

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: Iterator[tuple[str | None, dict[str, Any] | str]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            head = f"event: {event}\n" if event else ""
            self.wfile.write(f"{head}data: {payload}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        self._send_json(404, _error(f"no route {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, _error("invalid JSON body"))
            return
        owner = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        number = owner.record(path, dict(self.headers), body)
        if path.endswith("/embeddings"):
            self._send_json(200, _embeddings(body))
            return
        if not path.endswith(("/chat/completions", "/responses")):
            self._send_json(404, _error(f"no route {self.path}"))
            return
        answer = owner.answer(body, self.headers.get(SCENARIO_HEADER))
        model = str(body.get("model") or "gpt-4o-mini")
        if path.endswith("/chat/completions"):
            completion = _chat_completion(answer, model, number, body)
            if body.get("stream"):
                self._send_sse(_chat_chunks(completion, body))
            else:
                self._send_json(200, completion)
        else:
            response = _response(answer, model, number, body)
            if body.get("stream"):
                self._send_sse(_response_events(response))
            else:
                self._send_json(200, response)


def _error(message: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
    data = [
        {"object": "embedding", "index": i, "embedding": embed_text(str(t))}
        for i, t in enumerate(texts)
    ]
    tokens = sum(len(str(t).split()) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model") or "text-embedding-3-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _usage_chat(answer: _Answer) -> dict[str, Any]:
    prompt, completion = answer.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chat_completion(answer: _Answer, model: str, number: int, body: dict[str, Any]) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in answer.calls
        ]
    return {
        "id": f"chatcmpl-fake{number:04d}",
        "object": "chat.completion",
        "created": CREATED + number,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if answer.calls else "stop",
            }
        ],
        "usage": _usage_chat(answer),
    }


def _chat_chunks(completion: dict[str, Any], body: dict[str, Any]) -> Iterator[tuple[None, Any]]:
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    message = completion["choices"][0]["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = message.get("content") or ""  # (with tool calls: a preamble, streamed first)
    deltas += [{"content": text[i : i + 32]} for i in range(0, len(text), 32)]
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        args = fn["arguments"]
        for start in range(0, len(args), 24):  # arguments arrive in pieces, as from the real API
            deltas.append(
                {
                    "tool_calls": [
                        {"index": index, "function": {"arguments": args[start : start + 24]}}
                    ]
                }
            )
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    for delta in deltas:
        chunk = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
        if include_usage:
            chunk["usage"] = None
        yield None, chunk
    finish = completion["choices"][0]["finish_reason"]
    yield None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])
    if include_usage:
        yield None, dict(base, choices=[], usage=completion["usage"])
    yield None, "[DONE]"


def _response(answer: _Answer, model: str, number: int, body: dict[str, Any]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for cid, name, args in answer.calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{cid}",
                "call_id": cid,
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    if answer.text is not None:
        # a preamble comes before the calls, as the real API orders its output items
        output.insert(
            0,
            {
                "type": "message",
                "id": f"msg_fake{number:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
                ],
            },
        )
    prompt, completion = answer.usage
    return {
        "id": f"resp_fake{number:04d}",
        "object": "response",
        "created_at": CREATED + number,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "instructions": body.get("instructions"),
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
        "max_output_tokens": body.get("max_output_tokens"),
        "previous_response_id": body.get("previous_response_id"),
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def _response_events(response: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    sequence = 0

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        nonlocal sequence
        sequence += 1
        return kind, {"type": kind, "sequence_number": sequence - 1, **fields}

    pending = dict(response, status="in_progress", output=[], usage=None)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, arguments="", status="in_progress"),
            )
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
                name=item["name"],
            )
        else:
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, content=[], status="in_progress"),
            )
            empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=empty_part,
            )
            for start in range(0, len(text), 32):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=text[start : start + 32],
                    logprobs=[],
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            yield event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


class FakeLLM:
    """``with FakeLLM(default_script, other_scripts...) as llm: llm.base_url``."""

    def __init__(self, default: Script, *others: Script, deadline_s: float = 300.0) -> None:
        self.scripts = {s.name: s for s in (default, *others)}
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._deadline = time.monotonic() + deadline_s
        self._httpd = _Server(self)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _serve(self) -> None:
        self._httpd.serve_forever(poll_interval=0.05)

    def _watchdog(self) -> None:
        # the server stops by itself even if a driver forgets to close it
        while self._thread.is_alive():
            if time.monotonic() > self._deadline:
                self._httpd.shutdown()
                return
            time.sleep(0.5)

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        threading.Thread(target=self._watchdog, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
            return len(self.requests)

    def pick_script(self, body: dict[str, Any], header: str | None) -> Script:
        if header and header in self.scripts:
            return self.scripts[header]
        for name in _MARKER.findall(_system_text(body)):
            if name in self.scripts:
                return self.scripts[name]
        model = str(body.get("model") or "")
        return self.scripts.get(model, self.default)

    def answer(self, body: dict[str, Any], header: str | None = None) -> _Answer:
        script = self.pick_script(body, header)
        index, turn = script.turn_for(_count_tool_results(body))
        resolved = _Answer(script=script.name, turn=index, usage=script.usage)
        if turn.text is not None and _offers_tool(body, "final_answer"):
            calls: tuple[ToolCall, ...] = (ToolCall("final_answer", {"answer": turn.text}),)
        elif turn.text is not None:
            resolved.text = turn.text
            return resolved
        else:
            calls = turn.tool_calls
            resolved.text = turn.preamble
        for k, call in enumerate(calls):
            # unique per conversation: script name + turn + position in the turn
            call_id = f"call_{script.name}_{index + 1}_{k + 1}"
            resolved.calls.append(
                (call_id, call.name, json.dumps(call.arguments, ensure_ascii=False))
            )
        return resolved
