"""A scripted stand-in for OpenAI's `POST /v1/chat/completions`, bound to 127.0.0.1 only.

Stdlib only (`http.server`), on an ephemeral port, run in a daemon thread for the duration of a
`with FakeOpenAI() as server:` block. The answers are deterministic and driven by the request:

- a user message containing `fail_marker` (default ``"FAIL"``) → HTTP 500 with an OpenAI-style
  error body;
- no `tool` message in the request yet → one assistant tool call (`script.tool_name` with
  `script.tool_arguments`, id `call_fake0001` for the conversation's first call), finish reason
  ``tool_calls``;
- a `tool` message present → final assistant text quoting that tool message's content, finish
  reason ``stop``.

Every request body is kept in `server.requests`, so a test can check what the client really sent.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "Script"]


@dataclass(frozen=True)
class Script:
    """What the fake model answers."""

    tool_name: str = "search"
    tool_arguments: dict[str, Any] = field(
        default_factory=lambda: {"query": "OpenTelemetry GenAI semantic conventions"}
    )
    call_id_prefix: str = "call_fake"
    final_template: str = "According to the search result: {result}"
    fail_marker: str = "FAIL"
    model_suffix: str = "-2024-07-18"
    tool_usage: tuple[int, int] = (57, 18)
    final_usage: tuple[int, int] = (131, 42)

    def final_text(self, tool_result: str) -> str:
        return self.final_template.format(result=tool_result)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, script: Script) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            self._reply(400, _error("invalid JSON body", "invalid_request_error"))
            return
        with self.server.lock:
            self.server.requests.append({"path": self.path, "body": body})
            number = len(self.server.requests)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._reply(404, _error(f"no route {self.path}", "invalid_request_error"))
            return
        status, payload = _answer(self.server.script, body, number)
        self._reply(status, payload)


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _tool_turn(messages: list[dict[str, Any]]) -> int:
    """1 + the tool calls the assistant already made in this conversation (ids per conversation)."""
    return 1 + sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def _answer(script: Script, body: dict[str, Any], number: int) -> tuple[int, dict[str, Any]]:
    messages = body.get("messages") or []
    users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    if any(script.fail_marker in text for text in users):
        return 500, _error("The server had an error while processing your request.", "server_error")
    tool_messages = [m for m in messages if m.get("role") == "tool"]
    if tool_messages:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": script.final_text(_text_of(tool_messages[-1].get("content"))),
            "refusal": None,
        }
        finish = "stop"
        prompt_tokens, completion_tokens = script.final_usage
    else:
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": f"{script.call_id_prefix}{_tool_turn(messages):04d}",
                    "type": "function",
                    "function": {
                        "name": script.tool_name,
                        "arguments": json.dumps(script.tool_arguments),
                    },
                }
            ],
        }
        finish = "tool_calls"
        prompt_tokens, completion_tokens = script.tool_usage
    model = str(body.get("model") or "gpt-4o-mini")
    return 200, {
        "id": f"chatcmpl-fake{number:04d}",
        "object": "chat.completion",
        "created": 1_700_000_000 + number,
        "model": model + script.model_suffix,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class FakeOpenAI:
    """Context manager running the fake endpoint; `base_url` is what to give the client."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def server_address(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def base_url(self) -> str:
        host, port = self.server_address
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests if self._server is not None else []

    def __enter__(self) -> FakeOpenAI:
        self._server = _Server(self.script)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
