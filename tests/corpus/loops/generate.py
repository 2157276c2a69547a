"""Generate the labelled loop corpus (deterministic: a fixed seed gives the same bytes).

    /work/venv/bin/python tests/corpus/loops/generate.py          # write the files
    /work/venv/bin/python tests/corpus/loops/generate.py --check  # exit 1 if they are stale

Each trace is one agent run written as the OTel GenAI conventions describe it: an `invoke_agent`
root span, `chat` spans (`gen_ai.output.messages` with the `tool_call` parts the model proposed,
token usage, `gen_ai.response.finish_reasons`) and `execute_tool` spans
(`gen_ai.tool.call.id/arguments/result`, status ERROR with a message and `error.type` when the
tool failed). Some traces leave the `tool_call` parts out of the chat outputs (the calls are then
known from the tool spans only), some run calls of one turn in parallel, some nest sub-agents.

Output, next to this file:

- `otlp/<family>.jsonl`: one OTLP/JSON `ExportTraceServiceRequest` per line, one trace each;
- `tracecheck.jsonl`: the same traces in tracecheck's native JSONL format (steps in start order:
  `llm_call` per chat span, `tool_call` per tool span with its parsed arguments as `input` and
  its result as `output`, and an `error` step after every span whose status is ERROR, carrying
  the status message; no timings or tokens, which its failure modes do not read);
- `labels.json`: trace id -> the kinds a reader of the trace would say it shows (loop kinds and
  failure modes); the scenario name is on the root span as `corpus.scenario`.

Labels are written by the scenario that builds the trace, from what it builds (e.g. the same
call three times, the third after two failures: `repeat`, `retry_storm`, `tool_call_error`),
never by running a detector. Hard negatives: pagination (page, offset, cursor), a parallel
fan-out of one tool (distinct arguments, possibly the same "not found" result), polling whose
result changes (progress: no loop, within the poll budget), a failed call retried until it
succeeds within the retry-storm threshold (backoff), consecutive single days, distinct ids that
differ by one digit, sibling sub-agents making the same call once each, a repeated short text
only twice. Identical calls whose results differ only in a timestamp are stuck: still loops.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20261130
MODEL = "gpt-4o-mini"
START = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
MS = 1_000_000

# --- OTLP/JSON spans ----------------------------------------------------------------------------


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    result: str | None = None
    error: str | None = None
    error_type: str | None = None


@dataclass
class Span:
    span_id: str
    parent: str
    name: str
    start: int
    end: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def otlp(self, trace_id: str) -> dict[str, Any]:
        span: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": self.span_id,
            "parentSpanId": self.parent,
            "name": self.name,
            "kind": 3 if self.name.startswith("chat") else 1,
            "startTimeUnixNano": str(self.start),
            "endTimeUnixNano": str(self.end),
            "attributes": [{"key": k, "value": _value(v)} for k, v in self.attrs.items()],
        }
        if self.error is not None:
            span["status"] = {"code": 2, "message": self.error}
        return span


class Trace:
    """One agent run under construction: turns of one chat span and its tool spans."""

    def __init__(self, gen: Gen, scenario: str, kinds: set[str], *, propose: bool) -> None:
        self.gen = gen
        self.rng = gen.rng
        self.trace_id = gen.hex(32)
        self.scenario = scenario
        self.kinds = set(kinds)
        self.propose = propose  # chat outputs carry the tool_call parts
        self.t = START + gen.index * 60_000 * MS
        self.spans: list[Span] = []
        self.calls = 0
        self.first_chat = True
        self.agents: list[Span] = []
        self.root = self.agent("assistant", root=True)

    def agent(self, name: str, *, root: bool = False) -> Span:
        parent = self.agents[-1].span_id if self.agents else ""
        span = Span(
            self.gen.hex(16),
            parent,
            f"invoke_agent {name}",
            self.t,
            attrs={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": "openai",
                "gen_ai.agent.name": name,
            },
        )
        if root:
            span.attrs["corpus.scenario"] = self.scenario
        self.t += self.rng.randint(1, 5) * MS
        self.spans.append(span)
        self.agents.append(span)
        return span

    def end_agent(self) -> None:
        span = self.agents.pop()
        self.t += self.rng.randint(1, 5) * MS
        span.end = self.t

    def turn(
        self,
        calls: list[Call] = (),  # type: ignore[assignment]
        *,
        text: str | None = None,
        finish: str | None = None,
        parallel: bool = False,
        llm_error: str | None = None,
        llm_error_type: str | None = None,
    ) -> None:
        rng = self.rng
        parent = self.agents[-1].span_id
        chat = Span(self.gen.hex(16), parent, f"chat {MODEL}", self.t)
        chat.end = self.t + rng.randint(250, 900) * MS
        attrs = chat.attrs
        attrs["gen_ai.operation.name"] = "chat"
        attrs["gen_ai.provider.name"] = "openai"
        attrs["gen_ai.request.model"] = MODEL
        if self.first_chat:
            self.first_chat = False
            user = [{"role": "user", "parts": [{"type": "text", "content": "Help me."}]}]
            attrs["gen_ai.input.messages"] = _compact(user)
        attrs["gen_ai.usage.input_tokens"] = rng.randint(300, 4000)
        if llm_error is not None:
            chat.error = llm_error
            if llm_error_type:
                attrs["error.type"] = llm_error_type
            self.spans.append(chat)
            self.t = chat.end + MS
            return
        attrs["gen_ai.usage.output_tokens"] = rng.randint(15, 300)
        finish = finish or ("tool_calls" if calls else "stop")
        ids = []
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append({"type": "text", "content": text})
        for call in calls:
            self.calls += 1
            call_id = f"call_{self.gen.hex(8)}"
            ids.append(call_id)
            if self.propose:
                parts.append(
                    {"type": "tool_call", "id": call_id, "name": call.tool, "arguments": call.args}
                )
        if parts:  # the finish reason is on the message (tracehound reads it from there)
            message = {"role": "assistant", "parts": parts, "finish_reason": finish}
            attrs["gen_ai.output.messages"] = _compact([message])
        else:
            attrs["gen_ai.response.finish_reasons"] = [finish]
        self.spans.append(chat)
        t = chat.end + rng.randint(1, 20) * MS
        ends = []
        for call, call_id in zip(calls, ids, strict=True):
            start = t + (rng.randint(0, 3) * MS if parallel else 0)
            tool = Span(self.gen.hex(16), parent, f"execute_tool {call.tool}", start)
            tool.end = start + rng.randint(40, 600) * MS
            tool.attrs.update(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.tool,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": _compact(call.args),
                }
            )
            if call.error is not None:
                tool.error = call.error
                tool.attrs["error.type"] = call.error_type or "ToolError"
            elif call.result is not None:
                tool.attrs["gen_ai.tool.call.result"] = call.result
            self.spans.append(tool)
            ends.append(tool.end)
            if not parallel:
                t = tool.end + rng.randint(1, 10) * MS
        self.t = max([*ends, t]) + rng.randint(1, 10) * MS

    def finish_sub(self) -> None:
        """End the current sub-agent with a short answer of its own."""
        self.turn(text=f"sub-result {self.gen.hex(4)}")
        self.end_agent()

    def finish(self, answer: str | None = None, *, error: str | None = None, **kw: Any) -> None:
        if answer is not None:
            self.turn(text=answer, **kw)
        while self.agents:
            span = self.agents[-1]
            if error is not None and span is self.root:
                span.error = error
                if kw.get("llm_error_type"):
                    span.attrs["error.type"] = kw["llm_error_type"]
            self.end_agent()

    def document(self) -> dict[str, Any]:
        return {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [
                            {"key": "service.name", "value": {"stringValue": "corpus-agent"}}
                        ]
                    },
                    "scopeSpans": [
                        {
                            "scope": {"name": "corpus.loops"},
                            "spans": [s.otlp(self.trace_id) for s in self.spans],
                        }
                    ],
                }
            ]
        }


# --- tracecheck export --------------------------------------------------------------------------


def tracecheck_record(document: dict[str, Any]) -> dict[str, Any]:
    """The trace of an OTLP/JSON document in tracecheck's native format."""
    spans = [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    spans.sort(key=lambda s: (int(s["startTimeUnixNano"]), s["spanId"]))
    steps: list[dict[str, Any]] = []
    trace_id = spans[0]["traceId"]
    for span in spans:
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        op = attrs["gen_ai.operation.name"]["stringValue"]
        if op == "chat":
            steps.append({"type": "llm_call", "name": MODEL})
        elif op == "execute_tool":
            result = attrs.get("gen_ai.tool.call.result")
            step = {
                "type": "tool_call",
                "name": attrs["gen_ai.tool.name"]["stringValue"],
                "input": json.loads(attrs["gen_ai.tool.call.arguments"]["stringValue"]),
            }
            if result is not None:
                step["output"] = result["stringValue"]
            steps.append(step)
        if "status" in span:
            steps.append(
                {"type": "error", "name": span["name"], "error": span["status"]["message"]}
            )
    return {"trace_id": trace_id, "agent_name": "corpus-agent", "steps": steps}


# --- scenarios ----------------------------------------------------------------------------------

WORDS = [
    "alpha",
    "bravo",
    "cedar",
    "delta",
    "ember",
    "falcon",
    "garnet",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lotus",
    "maple",
    "nectar",
    "onyx",
    "pepper",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]
CITIES = ["Paris", "Lisbon", "Osaka", "Denver", "Nairobi", "Quito", "Tallinn", "Perth", "Accra"]
QUERIES = [
    "weather forecast paris",
    "quarterly revenue report",
    "shipping policy for returns",
    "python asyncio timeout handling",
    "best hiking trails near denver",
    "mortgage interest rates today",
    "kubernetes pod eviction reasons",
    "symptoms of vitamin deficiency",
]
# Slight rewrites of a query: same words, other case/order, a typo — digits untouched.
REWRITES: list[Callable[[str], str]] = [
    lambda q: q.title(),
    lambda q: " ".join(reversed(q.split())),
    lambda q: q.replace("e", "", 1) if "e" in q else q + "s",
    lambda q: q + "s",
    lambda q: q.upper(),
    lambda q: "  " + q.replace(" ", "  "),
]


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.index = 0
        self.fill = 0
        self.traces: list[tuple[str, Trace]] = []

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(n * 4):0{n}x}"

    def new(self, scenario: str, kinds: set[str], *, propose: bool | None = None) -> Trace:
        if propose is None:
            propose = self.rng.random() < 0.8
        trace = Trace(self, scenario, kinds, propose=propose)
        self.index += 1
        return trace

    def filler(self) -> Call:
        """A call that repeats nothing: unique numbered arguments and result."""
        self.fill += 1
        n = self.fill
        kind = self.rng.randrange(3)
        if kind == 0:
            return Call("read_file", {"path": f"/data/report_{n}.csv"}, f"{n} rows, columns a b c")
        if kind == 1:
            return Call("lookup_order", {"order_id": f"ORD-{10000 + n}"}, f"order {n}: shipped")
        return Call("get_metric", {"name": f"m{n}", "window": n}, f"value {n * 7}")

    def fillers(self, trace: Trace, lo: int = 0, hi: int = 1) -> None:
        for _ in range(self.rng.randint(lo, hi)):
            trace.turn([self.filler()])

    def done(self, family: str, trace: Trace, answer: str | None = None) -> None:
        if answer is None:
            answer = f"Done ({trace.trace_id[:6]})."
        trace.finish(answer)
        self.traces.append((family, trace))

    def words(self, k: int) -> str:
        return " ".join(self.rng.sample(WORDS, k))


def s_repeat(g: Gen) -> None:
    """The same call 3-5 times, never twice in a row (unique calls between)."""
    n = g.rng.randint(3, 4)
    same = g.rng.random() < 0.5
    kinds = {"repeat"} | ({"no_progress"} if same else set())
    t = g.new("repeat_spaced", kinds)
    q = g.rng.choice(QUERIES)
    g.fillers(t, 0, 1)
    for i in range(n):  # the same result, or one that differs in its timestamp only
        result = "3 results: a, b, c" if same else f"3 results (index of 2026-01-0{i + 2}T08:00Z)"
        t.turn([Call("search", {"query": q}, result)])
        if i < n - 1:
            t.turn([g.filler()])
    g.done("repeat", t)


def s_consecutive(g: Gen) -> None:
    """The same call k times in a row, each attempt successful."""
    k = g.rng.choice([2, 2, 3, 4])
    same = g.rng.random() < 0.5
    kinds = {"consecutive"}
    if k >= 3:
        kinds |= {"repeat"} | ({"no_progress"} if same else set())
    if not same:  # the weather moves on: a poll, not a loop
        kinds = set()
    t = g.new("consecutive" if same else "polling_weather", kinds)
    city = g.rng.choice(CITIES)
    g.fillers(t)
    for i in range(k):
        result = f"{city}: 18 C, clear" if same else f"{city}: {18 + i} C at minute {i}"
        t.turn([Call("get_weather", {"city": city, "units": "metric"}, result)])
    g.fillers(t)
    g.done("consecutive", t)


def _distinct_calls(g: Gen, p: int) -> list[Call]:
    tools = g.rng.sample(["search", "open_page", "summarize", "check_inventory", "get_price"], p)
    return [Call(tool, {"target": g.words(2)}, None) for tool in tools]


def s_cycle(g: Gen) -> None:
    """A pattern of 2-4 distinct calls repeated 3-4 times (optionally two calls per turn)."""
    p = g.rng.choice([2, 3, 4])
    reps = g.rng.choice([3, 3, 4])
    same = g.rng.random() < 0.5
    kinds = {"cycle", "repeat"} | ({"no_progress"} if same else set())
    paired = p == 2 and g.rng.random() < 0.4
    t = g.new(f"cycle_p{p}" + ("_parallel" if paired else ""), kinds)
    pattern = _distinct_calls(g, p)
    g.fillers(t)
    for r in range(reps):
        batch = []
        for j, c in enumerate(pattern):
            # the same result each round, or one whose timestamp only moves on (still stuck)
            result = f"{c.tool} says {j}" if same else f"{c.tool} says {j} at 10:{r:02d}:00"
            batch.append(Call(c.tool, c.args, result))
        if paired:
            t.turn(batch, parallel=True)
        else:
            for call in batch:
                t.turn([call])
    g.fillers(t)
    g.done("cycle", t)


def s_cycle_short(g: Gen) -> None:
    """A,B,A,B,A: two and a half repetitions — not a cycle yet, but A three times."""
    t = g.new("cycle_short", {"repeat"})
    a, b = _distinct_calls(g, 2)
    for r in range(5):
        c = a if r % 2 == 0 else b
        t.turn([Call(c.tool, c.args, None)])  # results not recorded
    g.done("repeat", t)


def s_duplicate_in_turn(g: Gen) -> None:
    """The model asks for the same call twice in one response."""
    t = g.new("duplicate_in_turn", {"consecutive"})
    g.fillers(t)
    call = Call("get_weather", {"city": g.rng.choice(CITIES), "units": "metric"}, "14 C, rain")
    t.turn([call, Call(call.tool, call.args, call.result)], parallel=True)
    g.fillers(t)
    g.done("consecutive", t)


def _near_series(g: Gen, n: int) -> tuple[str, list[dict[str, Any]]]:
    style = g.rng.randrange(3)
    if style == 0:  # a date range (5-30 days) shifted by a day or two each time
        span_days = g.rng.randint(5, 30)
        shift = g.rng.choice([1, 1, 2])
        d0 = date(2025, 1, 1) + timedelta(days=g.rng.randint(0, 300))
        metric = g.rng.choice(["sales", "signups", "errors"])
        args = [
            {
                "metric": metric,
                "start": (d0 + timedelta(days=shift * i)).isoformat(),
                "end": (d0 + timedelta(days=shift * i + span_days)).isoformat(),
            }
            for i in range(n)
        ]
        return "query_metrics", args
    if style == 1:  # the same query slightly rewritten
        q = g.rng.choice(QUERIES)
        variants = [q, *(f(q) for f in g.rng.sample(REWRITES, len(REWRITES)))]
        unique: list[str] = []
        for v in variants:
            if v not in unique:
                unique.append(v)
        return "web_search", [{"q": v, "limit": 10} for v in unique[:n]]
    lat = round(g.rng.choice([-1, 1]) * g.rng.uniform(10, 60), 4)
    lon = round(g.rng.choice([-1, 1]) * g.rng.uniform(10, 150), 4)
    return "find_places", [
        {"lat": round(lat + 0.0003 * i, 4), "lon": round(lon - 0.0002 * i, 4), "kind": "cafe"}
        for i in range(n)
    ]


def s_near(g: Gen) -> None:
    """The same tool with slightly different arguments, in 3-5 separate turns."""
    n = g.rng.randint(3, 5)
    tool, series = _near_series(g, n)
    same = g.rng.random() < 0.3
    kinds = {"near_duplicate"} | ({"no_progress"} if same and len(series) >= 3 else set())
    t = g.new(f"near_{tool}", kinds)
    g.fillers(t)
    for i, args in enumerate(series):
        result = "nothing new" if same else f"{tool} result #{i}: {g.words(2)}"
        t.turn([Call(tool, args, result)])
        if g.rng.random() < 0.3:
            t.turn([g.filler()])
    g.done("near_duplicate", t)


def s_no_progress(g: Gen) -> None:
    """Different queries, one tool, the same empty result 3-4 times."""
    n = g.rng.randint(3, 4)
    t = g.new("no_progress", {"no_progress"})
    empty = g.rng.choice(["No results found.", "[]", "0 matching documents"])
    g.fillers(t)
    for q in g.rng.sample(QUERIES, n):
        t.turn([Call("search_kb", {"query": q}, empty)])
        if g.rng.random() < 0.4:
            t.turn([g.filler()])
    g.done("no_progress", t)


def s_retry_storm(g: Gen) -> None:
    """The same call failing and retried again and again."""
    fails = g.rng.randint(2, 4)
    recovers = fails == 2 or g.rng.random() < 0.5  # at least 2 retries, each after a failure
    # a storm once the second retry fails too; two retries, the second succeeding: backoff
    kinds = {"retry_storm", "repeat", "tool_call_error"} if fails >= 3 else {"tool_call_error"}
    t = g.new("retry_storm" if fails >= 3 else "retry_backoff", kinds)
    g.fillers(t)
    call = {"url": f"https://api.example.com/v1/{g.rng.choice(WORDS)}"}
    for i in range(fails):
        err = g.rng.choice(["upstream timed out after 30s", "503 Service Unavailable"])
        t.turn([Call("http_get", call, error=err, error_type="TimeoutError")])
        if g.rng.random() < 0.3 and i < fails - 1:
            t.turn([g.filler()])
    if recovers:
        t.turn([Call("http_get", call, "200 OK")])
    g.done("retry_storm", t)


def s_output_repeat(g: Gen) -> None:
    """The model says the same thing 3-4 times while trying different things."""
    n = g.rng.randint(3, 4)
    t = g.new("output_repeat", {"output_repeat"})
    text = g.rng.choice(
        [
            "Let me look into that for you.",
            "I still could not find the answer; trying again.",
            "Checking the records now.",
        ]
    )
    for i in range(n):
        variant = text if i % 2 == 0 else "  " + text.upper() + " "
        t.turn([g.filler()], text=variant)
    g.done("output_repeat", t)


def s_overflow(g: Gen) -> None:
    style = g.rng.randrange(4)
    t = g.new(f"overflow_{style}", {"context_window_overflow"})
    g.fillers(t, 1, 3)
    if style == 0:
        message = (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 131072 tokens."
        )
        t.turn(llm_error=message)
        t.finish(None, error=message)
    elif style == 1:  # only error.type says what happened
        t.turn(llm_error="Error code: 400", llm_error_type="context_length_exceeded")
        t.finish(None, error="Error code: 400", llm_error_type="context_length_exceeded")
    elif style == 2:  # Anthropic's wording
        message = "prompt is too long: 210344 tokens > 200000 maximum"
        t.turn(llm_error=message)
        t.finish(None, error=message)
    else:  # the answer was cut at the output limit
        t.finish("The report covers the following sections: one, two, thr", finish="length")
    g.traces.append(("failure_modes", t))


def s_tool_error(g: Gen) -> None:
    """One error, then the agent moves on (no retry of the same call)."""
    style = g.rng.randrange(2)
    t = g.new(f"tool_error_{style}", {"tool_call_error"})
    g.fillers(t)
    if style == 0:
        t.turn(
            [Call("read_file", {"path": "/missing.txt"}, error="FileNotFoundError: /missing.txt")]
        )
        g.fillers(t, 1, 2)
        g.done("failure_modes", t)
    else:
        message = "Rate limit reached for requests"
        t.turn(llm_error=message, llm_error_type="RateLimitError")
        t.finish(None, error=message, llm_error_type="RateLimitError")
        g.traces.append(("failure_modes", t))


# --- hard negatives -----------------------------------------------------------------------------


def n_pagination(g: Gen) -> None:
    style = g.rng.randrange(3)
    t = g.new(f"pagination_{style}", set())
    q = g.rng.choice(QUERIES)
    pages = g.rng.randint(3, 5)
    g.fillers(t, 0, 1)
    for i in range(pages):
        if style == 0:
            args: dict[str, Any] = {"query": q, "page": i + 1, "per_page": 20}
        elif style == 1:
            args = {"query": q, "offset": 50 * i, "limit": 50}
        else:
            args = {"query": q, "cursor": None if i == 0 else g.hex(12)}
        t.turn([Call("list_items", args, f"items {20 * i + 1}-{20 * i + 20} of 500")])
    g.done("negatives", t)


def n_fanout(g: Gen) -> None:
    style = g.rng.randrange(4)
    t = g.new(f"fanout_{style}", set())
    k = g.rng.randint(3, 6)
    g.fillers(t, 0, 1)
    if style == 0:  # distinct ids, distinct results
        ids = g.rng.sample(range(100, 999), k)
        calls = [Call("get_user", {"id": i}, f"user {i}: active") for i in ids]
    elif style == 1:  # consecutive dates of one forecast, one turn
        d0 = date(2026, 3, 1) + timedelta(days=g.rng.randint(0, 200))
        calls = [
            Call(
                "get_forecast",
                {"city": "Lyon", "date": (d0 + timedelta(days=i)).isoformat()},
                f"day {i}: mild",
            )
            for i in range(k)
        ]
    elif style == 2:  # distinct ids, the same "not found"
        ids = g.rng.sample(range(1000, 9999), k)
        calls = [Call("get_invoice", {"invoice_id": f"INV-{i}"}, "not found") for i in ids]
    else:  # overlapping weekly windows, fetched together
        d0 = date(2026, 1, 5) + timedelta(days=g.rng.randint(0, 100))
        calls = [
            Call(
                "query_metrics",
                {
                    "metric": "sales",
                    "start": (d0 + timedelta(days=i)).isoformat(),
                    "end": (d0 + timedelta(days=i + 7)).isoformat(),
                },
                f"window {i}: {100 + i}",
            )
            for i in range(k)
        ]
    t.turn(calls, parallel=True)
    g.done("negatives", t)


def n_polling(g: Gen) -> None:
    """A job polled until done; the status changes every time."""
    k = g.rng.randint(2, 4)
    t = g.new("polling", set())  # each poll returns a new status: progress
    job = g.hex(6)
    t.turn([Call("start_job", {"spec": g.words(2)}, f"job {job} queued")])
    for i in range(k):
        status = "done" if i == k - 1 else f"running {25 * (i + 1)}%"
        t.turn([Call("job_status", {"job_id": job}, status)])
    g.done("negatives", t)


def n_retry_ok(g: Gen) -> None:
    """One failure, one retry that works."""
    t = g.new("retry_once", {"tool_call_error"})
    g.fillers(t)
    call = {"url": f"https://api.example.com/v2/{g.rng.choice(WORDS)}"}
    t.turn([Call("http_get", call, error="503 Service Unavailable", error_type="HTTPError")])
    if g.rng.random() < 0.5:
        t.turn([g.filler()])
    t.turn([Call("http_get", call, "200 OK: 12 records")])
    g.fillers(t)
    g.done("negatives", t)


def n_sequential(g: Gen) -> None:
    """Step by step through distinct things that look alike (days, ids, words)."""
    style = g.rng.randrange(4)
    t = g.new(f"sequential_{style}", set())
    n = g.rng.randint(3, 5)
    if style == 0:
        d0 = date(2025, 6, 1) + timedelta(days=g.rng.randint(0, 100))
        calls = [
            Call("daily_report", {"date": (d0 + timedelta(days=i)).isoformat()}, f"report {i}")
            for i in range(n)
        ]
    elif style == 1:
        base = g.rng.randint(1000, 8000)
        calls = [
            Call("lookup_order", {"order_id": f"ORD-{base + i}"}, f"order {i} ok") for i in range(n)
        ]
    elif style == 2:  # one letter apart, different files
        folder = g.rng.choice(WORDS)
        calls = [
            Call("read_file", {"path": f"/{folder}/{chr(97 + i)}.txt"}, f"{i} lines")
            for i in range(n)
        ]
    else:
        cities = g.rng.sample(CITIES, n)
        calls = [
            Call("get_weather", {"city": c, "units": "metric"}, f"{c}: {10 + i} C")
            for i, c in enumerate(cities)
        ]
    for call in calls:
        t.turn([call])
    g.done("negatives", t)


def n_clean(g: Gen) -> None:
    t = g.new("clean", set())
    for _ in range(g.rng.randint(2, 4)):
        if g.rng.random() < 0.3:
            t.turn([g.filler(), g.filler()], parallel=True)
        else:
            t.turn([g.filler()], text=f"Step {g.fill}: {g.words(3)}.")
    g.done("negatives", t)


def n_near_miss(g: Gen) -> None:
    """Same tool, arguments that change a lot: other words, other numbers, other structure."""
    t = g.new("near_miss", set())
    queries = g.rng.sample(QUERIES, 3)
    for i, q in enumerate(queries):
        args = {"q": q, "limit": 10} if i != 1 else {"q": q, "limit": 10, "site": "docs"}
        t.turn([Call("web_search", args, f"{g.words(2)} ({i})")])
    temps = [0.2, 0.5, 0.9]
    for i, temp in enumerate(temps):
        t.turn([Call("tune", {"temperature": temp}, f"tuned {i}")])
    t.turn([Call("echo", {"text": "same"}, "same")], text="Twice said.")
    t.turn([Call("echo", {"text": "other"}, "other")], text="Twice said.")
    g.done("negatives", t)


def n_refine(g: Gen) -> None:
    """A query narrowed step by step: words added, not a near-duplicate."""
    t = g.new("refine", set())
    words = g.rng.sample(WORDS, 5)
    for n in (2, 3, 5):
        t.turn([Call("web_search", {"q": " ".join(words[:n]), "limit": 10}, f"{n} hits")])
    g.done("negatives", t)


def n_outputs_across_runs(g: Gen) -> None:
    """The same closing text in three different runs (two sub-agents and their parent)."""
    t = g.new("outputs_across_runs", set(), propose=True)
    t.turn([Call("plan", {"goal": g.words(2)}, "two helpers")])
    for name in ("helper_a", "helper_b"):
        t.agent(name)
        t.turn([g.filler()])
        t.turn(text="All set.")
        t.end_agent()
    g.done("negatives", t, "All set.")


def n_sub_agents(g: Gen) -> None:
    """Sibling sub-agents each making the same lookup once: per run, nothing repeats."""
    t = g.new("sub_agents_once", set(), propose=True)
    t.turn([Call("plan", {"goal": g.words(2)}, "two researchers")])
    shared = Call("search", {"query": g.rng.choice(QUERIES)}, "shared facts")
    for name in ("researcher_a", "researcher_b"):
        t.agent(name)
        t.turn([Call(shared.tool, shared.args, shared.result)])
        t.turn([g.filler()])
        t.finish_sub()
    g.done("negatives", t)


def p_sub_agent_loop(g: Gen) -> None:
    """A sub-agent repeating its own call; its parent and sibling are fine."""
    t = g.new("sub_agent_loop", {"repeat", "consecutive"}, propose=True)
    t.turn([Call("plan", {"goal": g.words(2)}, "one researcher")])
    t.agent("researcher")
    call = Call("search", {"query": g.rng.choice(QUERIES)}, None)
    for i in range(3):
        t.turn([Call(call.tool, call.args, f"page of results (as of 2026-02-01T09:0{i}:00Z)")])
    t.finish_sub()
    t.agent("writer")
    t.turn([g.filler()])
    t.finish_sub()
    g.done("repeat", t)


PLAN: list[tuple[Callable[[Gen], None], int]] = [
    (s_repeat, 18),
    (s_consecutive, 18),
    (s_cycle, 20),
    (s_near, 24),
    (s_no_progress, 16),
    (s_retry_storm, 20),
    (s_output_repeat, 12),
    (s_overflow, 16),
    (s_tool_error, 8),
    (p_sub_agent_loop, 6),
    (s_cycle_short, 6),
    (s_duplicate_in_turn, 6),
    (n_pagination, 12),
    (n_fanout, 12),
    (n_polling, 10),
    (n_retry_ok, 8),
    (n_sequential, 14),
    (n_clean, 8),
    (n_near_miss, 6),
    (n_sub_agents, 6),
    (n_refine, 6),
    (n_outputs_across_runs, 6),
]


def build(seed: int = SEED) -> dict[str, bytes]:
    """Every corpus file, by path relative to this folder."""
    gen = Gen(seed)
    for scenario, count in PLAN:
        for _ in range(count):
            scenario(gen)
    families: dict[str, list[str]] = {}
    labels: dict[str, list[str]] = {}
    tracecheck: list[str] = []
    for family, trace in gen.traces:
        document = trace.document()
        families.setdefault(family, []).append(_compact(document))
        labels[trace.trace_id] = sorted(trace.kinds)
        tracecheck.append(_compact(tracecheck_record(document)))
    files = {
        f"otlp/{name}.jsonl": ("\n".join(lines) + "\n").encode()
        for name, lines in sorted(families.items())
    }
    files["tracecheck.jsonl"] = ("\n".join(tracecheck) + "\n").encode()
    files["labels.json"] = (json.dumps(labels, indent=0, sort_keys=True) + "\n").encode()
    return files


def iter_stale(files: dict[str, bytes]) -> Iterator[str]:
    for rel, data in files.items():
        path = HERE / rel
        if not path.exists() or path.read_bytes() != data:
            yield rel
    present = {p.relative_to(HERE).as_posix() for p in (HERE / "otlp").glob("*.jsonl")}
    yield from sorted(present - set(files))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the files are stale")
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        stale = list(iter_stale(files))
        for rel in stale:
            print(f"stale: {rel}", file=sys.stderr)
        return 1 if stale else 0
    for rel, data in files.items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"{len(json.loads(files['labels.json']))} traces written to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
