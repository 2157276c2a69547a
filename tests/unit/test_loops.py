"""Loop evaluator: each signal and its threshold, hard negatives, per-span attachment, failure
modes, waste accounting, and the order independence of the trace result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers import feed_engine
from tracehound import Engine, EvaluationResult, FinalizedTrace, SpanView
from tracehound import names as N
from tracehound.conventions import NormalizedSpan
from tracehound.evaluators import LoopConfig, LoopEvaluator, loops
from tracehound.evaluators.base import Evaluator, TraceInfo
from tracehound.evaluators.loops import analyze, classify_error, near_arguments
from tracehound.steps import Step, Trajectory

TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"
MS = 1_000_000


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": v}


@dataclass
class Call:
    tool: str
    args: Any
    result: str | None = "ok"
    error: str | None = None


@dataclass
class Agent:
    """Builds one trace: an invoke_agent span, then turns of one chat span and its tool spans.

    Span ids are readable: `c01` is the first chat span, `t01` the first tool span, `a01` the
    first agent span (padded to 16 hex digits by `sid`).
    """

    propose: bool = True  # chat outputs carry the tool_call parts
    spans: list[SpanView] = field(default_factory=list)
    t: int = 1_000 * MS
    chats: int = 0
    tools: int = 0
    agents: int = 0
    stack: list[str] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.enter("main")

    def span(self, kind: str, n: int) -> str:
        return sid(f"{kind}{n:02d}")

    def _add(
        self,
        span_id: str,
        name: str,
        start: int,
        end: int,
        attrs: dict[str, Any],
        *,
        status: dict[str, Any] | None = None,
    ) -> None:
        doc: dict[str, Any] = {
            "traceId": TRACE,
            "spanId": span_id,
            "parentSpanId": self.stack[-1] if self.stack else "",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
        }
        if status:
            doc["status"] = status
        self.spans.append(SpanView.from_json(doc))

    def enter(self, name: str) -> str:
        """Start an agent span (a run); `leave()` ends it."""
        self.agents += 1
        span_id = self.span("a", self.agents)
        self.starts[span_id] = self.t
        self.names[span_id] = name
        self.stack.append(span_id)
        self.t += MS
        return span_id

    def leave(self) -> None:
        span_id = self.stack.pop()
        self.t += MS
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.names[span_id]}
        self._add(
            span_id, f"invoke_agent {self.names[span_id]}", self.starts[span_id], self.t, attrs
        )

    def turn(
        self,
        *calls: Call,
        text: str | None = None,
        parallel: bool = False,
        finish: str | None = None,
        tokens: tuple[int, int] = (100, 10),
        chat_ms: int = 100,
        tool_ms: int = 50,
        error: str | None = None,
        error_type: str | None = None,
    ) -> str:
        self.chats += 1
        chat_id = self.span("c", self.chats)
        start, end = self.t, self.t + chat_ms * MS
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
        }
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append({"type": "text", "content": text})
        ids = []
        for call in calls:
            call_id = f"call_{self.tools + len(ids) + 1}"
            ids.append(call_id)
            if self.propose:
                parts.append(
                    {"type": "tool_call", "id": call_id, "name": call.tool, "arguments": call.args}
                )
        if parts:
            message = {"role": "assistant", "parts": parts}
            if finish:
                message["finish_reason"] = finish
            attrs["gen_ai.output.messages"] = json.dumps([message])
        elif finish:
            attrs["gen_ai.response.finish_reasons"] = [finish]
        status = None
        if error is not None:
            status = {"code": 2, "message": error}
        if error_type is not None:
            attrs["error.type"] = error_type
        self._add(chat_id, "chat m", start, end, attrs, status=status)
        t = end + MS
        ends = []
        for call, call_id in zip(calls, ids, strict=True):
            self.tools += 1
            tool_id = self.span("t", self.tools)
            tool_attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.tool,
                "gen_ai.tool.call.id": call_id,
            }
            if call.args is not None:  # content capture off: no arguments at all
                tool_attrs["gen_ai.tool.call.arguments"] = json.dumps(call.args)
            tstatus = None
            if call.error is not None:
                tstatus = {"code": 2, "message": call.error}
            elif call.result is not None:
                tool_attrs["gen_ai.tool.call.result"] = call.result
            self._add(
                tool_id,
                f"execute_tool {call.tool}",
                t,
                t + tool_ms * MS,
                tool_attrs,
                status=tstatus,
            )
            ends.append(t + tool_ms * MS)
            if not parallel:
                t += (tool_ms + 1) * MS
        self.t = max([*ends, t]) + MS
        return chat_id

    def done(self) -> list[SpanView]:
        while self.stack:
            self.leave()
        return self.spans


def sid(name: str) -> str:
    """A readable span id: `c01` → `c010000000000000`; tool spans `t01` → `d010000000000000`."""
    return name.replace("t", "d").ljust(16, "0")


def run(
    spans: Sequence[SpanView], config: LoopConfig | None = None
) -> tuple[dict[str, list[EvaluationResult]], FinalizedTrace]:
    """Spans in the given order through one engine; per-span results by span id, the trace."""
    engine = Engine([LoopEvaluator(config)])
    return _per_span(engine, spans)


def _per_span(
    engine: Engine, spans: Sequence[SpanView]
) -> tuple[dict[str, list[EvaluationResult]], FinalizedTrace]:
    """Per-span results by span id (a span deferred until its ancestors arrived included),
    the finalized trace."""
    per_span: dict[str, list[EvaluationResult]] = {}
    outcomes, (finalized,) = feed_engine(engine, spans)
    for outcome in outcomes:
        if outcome.results:
            per_span.setdefault(outcome.span_id, []).extend(outcome.results)
    return per_span, finalized


def loop_labels(per_span: dict[str, list[EvaluationResult]]) -> dict[str, set[str]]:
    return {
        span_id: {r.score_label or "" for r in results if r.name == N.EVAL_LOOP}
        for span_id, results in per_span.items()
        if any(r.name == N.EVAL_LOOP for r in results)
    }


def trace_result(finalized: FinalizedTrace, name: str = N.EVAL_LOOPS) -> EvaluationResult:
    (result,) = [r for r in finalized.results if r.name == name]
    return result


def kinds(finalized: FinalizedTrace) -> set[str]:
    return set(trace_result(finalized).attributes[N.ATTR_LOOPS_KINDS])  # type: ignore[arg-type]


def modes(finalized: FinalizedTrace) -> set[str]:
    attrs = trace_result(finalized, N.EVAL_FAILURE_MODES).attributes
    return set(attrs[N.ATTR_FAILURE_MODES])  # type: ignore[arg-type]


def primary(per_span: dict[str, list[EvaluationResult]], span_id: str) -> dict[str, Any]:
    """The tracehound.loop.* attributes put on one span."""
    attrs: dict[str, Any] = {}
    for r in per_span.get(span_id, []):
        if r.name == N.EVAL_LOOP:
            attrs.update(r.attributes)
    return attrs


def search(q: str, result: str = "ok", **kw: Any) -> Call:
    return Call("search", {"q": q}, result, **kw)


def filler(n: int) -> Call:
    return Call("read", {"path": f"/f{n}.txt"}, f"content {n}")


# --- repeat ------------------------------------------------------------------------------------


def test_repeat_is_decided_on_the_span_of_the_third_call_and_names_the_first() -> None:
    a = Agent()
    a.turn(search("x", "r1"))
    a.turn(filler(1))
    a.turn(search("x", "r1"))  # the same result again: the call is stuck, decided at once
    a.turn(filler(2))
    third = a.turn(search("x", "r3"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {third: {"repeat"}}
    attrs = primary(per_span, third)
    assert attrs[N.ATTR_LOOP_DETECTED] is True
    assert attrs[N.ATTR_LOOP_KIND] == "repeat"
    assert attrs[N.ATTR_LOOP_COUNT] == 3
    assert attrs[N.ATTR_LOOP_FIRST_SPAN_ID] == sid("c01")
    assert kinds(finalized) == {"repeat"}
    loops = trace_result(finalized)
    assert loops.score_label == "fail"
    assert loops.attributes[N.ATTR_LOOPS_BY_KIND["repeat"]] == 1


def test_repeat_threshold_is_configurable_and_every_later_repeat_is_annotated() -> None:
    a = Agent()
    chats = [a.turn(search("x", f"r{i}"), filler(i)) for i in range(5)]
    # poll_budget=1: no call is progress, whatever its results (tracecheck's rule)
    per_span, finalized = run(a.done(), LoopConfig(repeat_threshold=4, poll_budget=1))
    assert {s for s, k in loop_labels(per_span).items() if "repeat" in k} == {chats[3], chats[4]}
    assert primary(per_span, chats[4])[N.ATTR_LOOP_COUNT] == 5
    assert kinds(finalized) == {"repeat"}


def test_two_identical_calls_apart_are_not_a_loop() -> None:
    a = Agent()
    a.turn(search("x", "r1"))
    a.turn(filler(1))
    a.turn(search("x", "r2"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {}
    assert kinds(finalized) == set()
    assert trace_result(finalized).score_value == 1.0
    assert trace_result(finalized).score_label == "pass"


def test_calls_without_recorded_arguments_never_match() -> None:
    a = Agent()
    for i in range(4):
        a.turn(Call("search", None, f"r{i}"))
    spans = a.done()
    per_span, finalized = run(spans)
    assert loop_labels(per_span) == {} and kinds(finalized) == set()


# --- consecutive -------------------------------------------------------------------------------


def test_consecutive_duplicates_default_two_and_configurable() -> None:
    a = Agent()
    a.turn(search("x", "r1"))
    a.turn(search("x", "r1"))
    spans = a.done()
    per_span, finalized = run(spans)
    # decided when the second result arrives: on its tool span
    assert loop_labels(per_span) == {sid("d02"): {"consecutive"}}
    assert primary(per_span, sid("d02"))[N.ATTR_LOOP_COUNT] == 2
    assert kinds(finalized) == {"consecutive"}
    per_span, finalized = run(spans, LoopConfig(consecutive_threshold=3))
    assert loop_labels(per_span) == {} and kinds(finalized) == set()


def test_the_same_call_twice_in_one_response_is_consecutive() -> None:
    a = Agent()
    chat = a.turn(search("x", "same"), search("x", "same"), parallel=True)
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {chat: {"consecutive"}}
    assert kinds(finalized) == {"consecutive"}


def test_a_retry_after_a_failure_is_not_a_consecutive_duplicate() -> None:
    a = Agent()
    a.turn(search("x", error="503"))
    a.turn(search("x", "r"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {}
    assert kinds(finalized) == set()
    assert modes(finalized) == {"tool_call_error"}


# --- cycle -------------------------------------------------------------------------------------


@pytest.mark.parametrize("period", [2, 3, 4])
def test_cycle_of_each_period_is_decided_at_its_third_repetition(period: int) -> None:
    a = Agent()
    tools = ["open", "read", "summarize", "check"][:period]
    chats = []
    for _ in range(3):
        for j, tool in enumerate(tools):
            chats.append(a.turn(Call(tool, {"id": j}, None)))  # results not recorded
    per_span, finalized = run(a.done())
    labels = loop_labels(per_span)
    cycle_spans = [s for s, k in labels.items() if "cycle" in k]
    assert cycle_spans == [chats[-1]]
    attrs = primary(per_span, chats[-1])
    assert attrs[N.ATTR_LOOP_KIND] == "cycle"
    assert attrs[N.ATTR_LOOP_PERIOD] == period
    assert attrs[N.ATTR_LOOP_COUNT] == 3
    assert attrs[N.ATTR_LOOP_FIRST_SPAN_ID] == chats[0]
    assert set(attrs[N.ATTR_LOOP_KINDS]) == {"cycle", "repeat"}
    assert kinds(finalized) == {"cycle", "repeat"}
    (cycle,) = [r for r in per_span[chats[-1]] if r.score_label == "cycle"]
    assert cycle.span_id == chats[-1]


def test_two_and_a_half_repetitions_are_not_a_cycle() -> None:
    a = Agent()
    for r in range(5):
        a.turn(Call("open" if r % 2 == 0 else "read", {}, None))
    _, finalized = run(a.done())
    assert kinds(finalized) == {"repeat"}  # `open` three times, but no A,B x3


def test_one_call_repeated_is_not_reported_as_a_cycle_and_period_four_reduces_to_two() -> None:
    a = Agent()
    for _ in range(6):
        a.turn(search("x", None))
    _, finalized = run(a.done())
    assert "cycle" not in kinds(finalized)
    b = Agent()
    for r in range(8):  # A,B x4: also A,B,A,B x2 — reported once, with period 2
        b.turn(Call("open" if r % 2 == 0 else "read", {}, None))
    per_span, finalized = run(b.done())
    periods = {
        r.attributes.get(N.ATTR_LOOP_PERIOD)
        for results in per_span.values()
        for r in results
        if r.score_label == "cycle" and r.attributes
    }
    assert periods == {2}
    cycles = [x for x in analyze(finalized.trajectory).loops if x.kind == "cycle"]
    assert [(c.period, c.count) for c in cycles] == [(2, 4)]


def test_cycle_repeats_is_configurable() -> None:
    a = Agent()
    for _ in range(2):
        a.turn(Call("open", {}, "o"))
        a.turn(Call("read", {}, "r"))
    _, finalized = run(a.done(), LoopConfig(cycle_repeats=2, repeat_threshold=5))
    assert kinds(finalized) == {"cycle"}


# --- near-duplicate arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        (
            {"from": "2025-01-01", "to": "2025-01-31"},
            {"from": "2025-01-02", "to": "2025-02-01"},
            True,
        ),
        (
            {"from": "2025-01-01", "to": "2025-01-06"},
            {"from": "2025-01-03", "to": "2025-01-08"},
            True,
        ),
        (
            {"from": "2025-01-01", "to": "2025-01-02"},
            {"from": "2025-01-02", "to": "2025-01-03"},
            False,
        ),
        ({"date": "2025-01-01"}, {"date": "2025-01-02"}, False),
        ({"at": "2025-01-01T10:00:00Z"}, {"at": "2025-01-01T10:20:00+00:00"}, True),
        ({"at": "2025-01-01T10:00:00Z"}, {"at": "2025-01-01T12:00:00Z"}, False),
        ({"q": "weather in paris"}, {"q": "Weather in  Paris"}, True),
        ({"q": "weather in paris"}, {"q": "wether in paris"}, True),
        ({"q": "weather in paris"}, {"q": "paris weather in"}, True),
        ({"q": "weather in paris"}, {"q": "weather in rome"}, False),
        ({"q": "python asyncio"}, {"q": "python asyncio timeout"}, False),
        ({"id": "ORD-1001"}, {"id": "ORD-1002"}, False),
        ({"page": 1, "q": "x"}, {"page": 2, "q": "x"}, False),
        ({"lat": 48.8566, "lon": 2.3522}, {"lat": 48.8570, "lon": 2.3525}, True),
        ({"temperature": 0.2}, {"temperature": 0.5}, False),
        ({"q": "x", "limit": 10}, {"q": "x", "limit": 10, "site": "docs"}, False),
        ({"flag": True}, {"flag": False}, False),
        ({"q": "x"}, {"q": "x"}, False),
        ({"n": 1}, {"n": 1.0}, False),
        (["asc", "a"], ["desc", "a"], False),
        ("weather in paris", "weather in paris.", True),
        ("python tutorial", "python tutorials", True),
        ("best hiking trails", "bst hiking trails", True),
        ("/data/a.txt", "/data/b.txt", False),
        ("user_alice", "user_alicia", False),
        ("jon smith", "jan smith", False),
        ("wether forcast for paris", "weather forecast for paris", True),
    ],
)
def test_near_arguments_rule(a: Any, b: Any, near: bool) -> None:
    assert near_arguments(a, b) is near
    assert near_arguments(b, a) is near


def test_near_duplicate_date_range_shifted_by_a_day() -> None:
    a = Agent()
    chats = []
    for i in range(4):
        args = {"metric": "sales", "start": f"2025-03-{10 + i:02d}", "end": f"2025-03-{20 + i:02d}"}
        chats.append(a.turn(Call("query_metrics", args, f"result {i}")))
    per_span, finalized = run(a.done())
    labels = loop_labels(per_span)
    assert labels == {chats[2]: {"near_duplicate"}, chats[3]: {"near_duplicate"}}
    assert primary(per_span, chats[2])[N.ATTR_LOOP_COUNT] == 3
    assert primary(per_span, chats[2])[N.ATTR_LOOP_FIRST_SPAN_ID] == chats[0]
    assert kinds(finalized) == {"near_duplicate"}
    per_span, finalized = run(a.spans, LoopConfig(near_duplicate_threshold=5))
    assert kinds(finalized) == set()


@pytest.mark.parametrize("propose", [True, False])
def test_parallel_fan_out_is_not_a_loop(propose: bool) -> None:
    a = Agent(propose=propose)
    calls = [
        Call(
            "query_metrics",
            {"start": f"2025-03-{10 + i:02d}", "end": f"2025-03-{17 + i:02d}"},
            "nf",
        )
        for i in range(5)
    ]
    a.turn(*calls, parallel=True)
    a.turn(*[Call("get_user", {"id": 100 + i}, f"user {i}") for i in range(5)], parallel=True)
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {}
    assert kinds(finalized) == set()


def test_the_same_ranges_one_per_turn_are_near_duplicates_even_without_tool_call_parts() -> None:
    a = Agent(propose=False)
    for i in range(3):
        a.turn(
            Call(
                "query_metrics",
                {"start": f"2025-03-{10 + i:02d}", "end": f"2025-03-{17 + i:02d}"},
                f"r{i}",
            )
        )
    per_span, finalized = run(a.done())
    assert kinds(finalized) == {"near_duplicate"}
    (span_id,) = loop_labels(per_span)
    assert span_id == sid("d03")  # no tool_call parts: the tool span completes it


def test_pagination_and_sequential_ids_are_not_near_duplicates() -> None:
    a = Agent()
    for page in range(1, 6):
        a.turn(Call("list", {"q": "x", "page": page}, f"items {page}"))
    for n in range(4):
        a.turn(Call("order", {"id": f"ORD-{1000 + n}"}, f"order {n}"))
    for day in range(1, 5):
        a.turn(Call("daily", {"date": f"2025-05-0{day}"}, f"day {day}"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {}
    assert kinds(finalized) == set()


# --- no progress -------------------------------------------------------------------------------


def test_no_progress_is_decided_on_the_third_identical_result() -> None:
    a = Agent()
    for q in ("alpha", "bravo", "charlie"):
        a.turn(search(q, "No results found."))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {sid("d03"): {"no_progress"}}
    attrs = primary(per_span, sid("d03"))
    assert attrs[N.ATTR_LOOP_COUNT] == 3
    assert attrs[N.ATTR_LOOP_FIRST_SPAN_ID] == sid("c01")
    assert kinds(finalized) == {"no_progress"}
    _, finalized = run(a.spans, LoopConfig(no_progress_threshold=4))
    assert kinds(finalized) == set()


def test_polling_whose_result_changes_is_not_no_progress() -> None:
    a = Agent()
    for status in ("queued", "running 40%", "running 80%", "done"):
        a.turn(Call("job_status", {"job": "j1"}, status))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {} and kinds(finalized) == set()  # progress, not a loop


def test_the_same_result_from_calls_of_one_turn_is_one_observation() -> None:
    a = Agent()
    a.turn(*[Call("get_invoice", {"id": f"INV-{i}"}, "not found") for i in range(4)], parallel=True)
    _, finalized = run(a.done())
    assert kinds(finalized) == set()


def test_failed_results_are_not_no_progress() -> None:
    a = Agent()
    for q in ("a", "b", "c"):
        a.turn(search(q, error="timeout"))
    _, finalized = run(a.done())
    assert kinds(finalized) == set()
    assert modes(finalized) == {"tool_call_error"}


# --- retry storm -------------------------------------------------------------------------------


def test_retry_storm_after_two_failed_retries() -> None:
    a = Agent()
    a.turn(search("x", error="503"))
    a.turn(search("x", error="503"))
    a.turn(search("x", error="503"))
    per_span, finalized = run(a.done())
    third = sid("d03")  # decided when the second retry's failure arrives
    assert loop_labels(per_span) == {third: {"retry_storm", "repeat"}}
    attrs = primary(per_span, third)
    assert attrs[N.ATTR_LOOP_KIND] == "retry_storm"
    assert attrs[N.ATTR_LOOP_KINDS] == ["retry_storm", "repeat"]
    assert attrs[N.ATTR_LOOP_COUNT] == 3
    assert kinds(finalized) == {"retry_storm", "repeat"}
    assert modes(finalized) == {"tool_call_error"}


def test_one_retry_is_a_storm_when_configured_only_if_it_fails() -> None:
    a = Agent()
    a.turn(search("x", error="503"))
    a.turn(filler(1))
    a.turn(search("x", "ok"))
    spans = a.done()
    for config in (None, LoopConfig(retry_storm_threshold=1)):
        per_span, finalized = run(spans, config)
        assert loop_labels(per_span) == {} and kinds(finalized) == set()
    b = Agent()
    b.turn(search("x", error="503"))
    b.turn(filler(1))
    b.turn(search("x", error="503"))
    per_span, finalized = run(b.done(), LoopConfig(retry_storm_threshold=1))
    assert loop_labels(per_span) == {sid("d03"): {"retry_storm"}}


def test_a_retry_with_fixed_arguments_is_not_a_storm() -> None:
    a = Agent()
    a.turn(Call("read", {"path": "/a.txt"}, error="not found"))
    a.turn(Call("read", {"path": "/b.txt"}, error="not found"))
    a.turn(Call("read", {"path": "/c.txt"}, "ok"))
    _, finalized = run(a.done())
    assert kinds(finalized) == set()


# --- progress: polling, pagination, backoff ------------------------------------------------------


def _polls(results: Sequence[str | None], tool: str = "job_status") -> list[str]:
    """Turns of one agent polling one job, each poll's result given; the chat span ids."""
    a = _POLLER[0] = Agent()
    a.turn(Call("start_job", {"spec": "build"}, "job j1 queued"))
    return [a.turn(Call(tool, {"job": "j1"}, result)) for result in results]


_POLLER: list[Agent] = [Agent()]


def test_polling_with_changing_results_passes_until_the_budget() -> None:
    statuses = ["queued", *(f"running {10 * i}%" for i in range(1, 9)), "done"]
    _polls(statuses)  # ten polls, each a new status: the default budget
    per_span, finalized = run(_POLLER[0].done())
    assert loop_labels(per_span) == {} and kinds(finalized) == set()
    assert trace_result(finalized).score_label == "pass"
    chats = _polls([*statuses, "done, archived"])  # an eleventh: past the budget
    per_span, finalized = run(_POLLER[0].done())
    assert loop_labels(per_span) == {chats[10]: {"repeat", "consecutive"}}
    assert primary(per_span, chats[10])[N.ATTR_LOOP_COUNT] == 11
    assert kinds(finalized) == {"repeat", "consecutive"}
    chats = _polls(["queued", "running 30%", "running 70%", "done"])
    per_span, finalized = run(_POLLER[0].done(), LoopConfig(poll_budget=3))
    assert loop_labels(per_span) == {chats[3]: {"repeat", "consecutive"}}


def test_identical_results_are_no_progress_and_a_loop() -> None:
    chats = _polls(["queued", "queued", "queued"])
    per_span, finalized = run(_POLLER[0].done())
    # the second poll is decided at its result (the same: stuck), the third at once
    assert loop_labels(per_span) == {
        sid("d03"): {"consecutive"},
        chats[2]: {"repeat", "consecutive"},
        sid("d04"): {"no_progress"},
    }
    assert kinds(finalized) == {"repeat", "consecutive", "no_progress"}


def test_a_poll_that_goes_back_to_an_earlier_result_is_progress_but_a_stall_is_not() -> None:
    _polls(["running 10%", "running 20%", "running 10%"])  # each differs from the one before
    assert kinds(run(_POLLER[0].done())[1]) == set()
    _polls(["running 10%", "running 20%", "running 20%", "done"])  # stuck once: a loop
    assert kinds(run(_POLLER[0].done())[1]) == {"repeat", "consecutive"}


@pytest.mark.parametrize(
    ("results", "loop"),
    [
        (["status: queued", "status: running 30%", "status: running 70%", "status: done"], False),
        (["queued (checked 10:00:01)", "queued (checked 10:00:31)", "queued (10:01:01)"], True),
        ([f"processed {n} of 500 items" for n in (120, 260, 390, 500)], False),
        ([f"pending, as of 2026-03-0{d}T12:00:00Z" for d in (1, 2, 3)], True),
        ([f"pending since {t}" for t in (1767225600, 1767225630, 1767225660)], True),
        (
            [f"queued, request 2b1f0c1e-7d1a-4c4e-9f3a-0a1b2c3d4e{n:02d}" for n in (10, 11, 12)],
            True,
        ),
        (
            [
                json.dumps({"id": "j1", "state": s, "updated_at": f"2026-03-01T10:0{i}:00Z"})
                for i, s in enumerate(["queued", "running", "succeeded"])
            ],
            False,
        ),
        (
            [
                json.dumps({"id": "j1", "state": "queued", "updated_at": f"2026-03-01T10:0{i}:00Z"})
                for i in range(3)
            ],
            True,
        ),
        (["x" * 5000 + str(i) for i in range(4)], False),  # long results, the end changes
        (["y" * 5000] * 3, True),
        (["0", "1", "2", "3"], False),  # short results
    ],
)
def test_what_a_changing_result_is(results: list[str], loop: bool) -> None:
    """Numbers, words and fields count as change; date-times, clock times, epoch timestamps
    and UUIDs do not (a result that differs in those only is the same poll again)."""
    _polls(results)
    found = kinds(run(_POLLER[0].done())[1])
    assert bool(found & {"repeat", "consecutive"}) is loop, found


def test_same_result_masks_volatile_parts_only() -> None:
    same = loops._same_result
    assert same("done", "done")
    assert same("queued at 2026-01-01T10:00:00Z", "queued at 2026-01-02 11:30:15.123+01:00")
    assert same("queued 09:15:00", "queued 9:16:30.5")
    assert not same("running 30%", "running 70%")
    assert not same("page 1", "page 2")
    assert not same("on 2026-01-01", "on 2026-01-02")  # a date alone names a day
    assert not same("a" * 70_000 + "1", "a" * 70_000 + "2")


def test_cursor_pagination_with_the_same_call_is_progress() -> None:
    a = Agent()
    for batch in range(4):  # next_page() with fixed arguments, a new batch each time
        a.turn(Call("next_page", {"stream": "orders"}, f"orders {100 * batch}-{100 * batch + 99}"))
    a.turn(Call("next_page", {"stream": "orders"}, "[]"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {} and kinds(finalized) == set()
    b = Agent()
    for cursor in (None, "c2", "c3", "c4"):  # cursor in the arguments: distinct calls
        b.turn(Call("list", {"cursor": cursor}, "a page of 50"))
    assert kinds(run(b.done())[1]) == {"no_progress"}  # but the same page each time


@pytest.mark.parametrize("propose", [True, False])
def test_retries_that_end_in_success_are_backoff_not_a_storm(propose: bool) -> None:
    a = Agent(propose=propose)
    a.turn(search("x", error="503"))
    a.turn(search("x", error="503"))
    a.turn(search("x", "3 hits"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {} and kinds(finalized) == set()
    assert modes(finalized) == {"tool_call_error"}
    b = Agent(propose=propose)
    for _ in range(3):
        b.turn(search("x", error="503"))
    b.turn(search("x", "3 hits"))
    assert kinds(run(b.done())[1]) == {"retry_storm", "repeat"}


def test_a_poll_that_fails_or_whose_result_is_not_recorded_is_no_progress() -> None:
    _polls(["queued", "running 50%", None])  # the third result not recorded
    assert kinds(run(_POLLER[0].done())[1]) == {"repeat", "consecutive"}
    a = Agent()
    a.turn(Call("job_status", {"job": "j1"}, "queued"))
    a.turn(Call("job_status", {"job": "j1"}, "running 50%"))
    a.turn(Call("job_status", {"job": "j1"}, error="503"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {sid("d03"): {"repeat", "consecutive"}}
    assert kinds(finalized) == {"repeat", "consecutive"}


def test_a_deferred_call_whose_result_never_arrives_is_decided_at_the_end() -> None:
    chats = _polls(["queued", "running 50%", "done"])
    spans = [v for v in _POLLER[0].done() if v.span_id != sid("d04")]  # the last tool span
    per_span, finalized = run(spans)
    assert loop_labels(per_span) == {}  # nothing to annotate it with while streaming
    assert kinds(finalized) == {"repeat", "consecutive"}
    (repeat,) = [x for x in analyze(finalized.trajectory).loops if x.kind == "repeat"]
    assert repeat.last_span_id == chats[2]


@st.composite
def poll_traces(draw: st.DrawFn) -> tuple[list[Call], list[Call]]:
    """Turns of repeated and distinct calls with results drawn from a few texts, errors and
    unrecorded results; and the same calls with every recorded result the same text."""
    calls = draw(
        st.lists(
            st.builds(
                Call,
                tool=st.sampled_from(["status", "fetch"]),
                args=st.sampled_from([{"job": 1}, {"job": 1}, {"job": 2}]),
                result=st.sampled_from(["queued", "running 50%", "done", None]),
                error=st.sampled_from([None, None, None, "503"]),
            ),
            min_size=1,
            max_size=9,
        )
    )
    same = [Call(c.tool, c.args, None if c.result is None else "same", c.error) for c in calls]
    return calls, same


def _trace_of(calls: Sequence[Call], fillers: Sequence[bool]) -> list[SpanView]:
    a = Agent()
    for i, call in enumerate(calls):
        a.turn(call)
        if fillers[i % len(fillers)]:
            a.turn(filler(i))
    return a.done()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces=poll_traces(), fillers=st.lists(st.booleans(), min_size=1, max_size=4))
def test_making_results_identical_never_turns_a_loop_into_a_pass(
    traces: tuple[list[Call], list[Call]], fillers: list[bool]
) -> None:
    calls, same = traces
    found = kinds(run(_trace_of(calls, fillers))[1])
    found_same = kinds(run(_trace_of(same, fillers))[1])
    if found:
        assert found_same, (found, found_same)
    # and the kinds that do not read results stay as they are
    assert found & {"near_duplicate", "output_repeat"} <= found_same


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    traces=poll_traces(), fillers=st.lists(st.booleans(), min_size=1, max_size=4), data=st.data()
)
def test_the_verdict_on_polls_does_not_depend_on_span_arrival_order(
    traces: tuple[list[Call], list[Call]], fillers: list[bool], data: st.DataObject
) -> None:
    spans = _trace_of(traces[0], fillers)
    _, in_order = run(spans)
    _, shuffled = run(data.draw(st.permutations(spans)))
    names = (N.EVAL_LOOPS, N.EVAL_FAILURE_MODES)
    assert [r for r in shuffled.results if r.name in names] == [
        r for r in in_order.results if r.name in names
    ]


# --- repeated output ---------------------------------------------------------------------------


def test_output_repeat_folds_case_and_spaces() -> None:
    a = Agent()
    a.turn(filler(1), text="Let me check.")
    a.turn(filler(2), text="LET ME  CHECK.")
    third = a.turn(filler(3), text=" let me check. ")
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {third: {"output_repeat"}}
    assert primary(per_span, third)[N.ATTR_LOOP_FIRST_SPAN_ID] == sid("c01")
    assert kinds(finalized) == {"output_repeat"}
    _, finalized = run(a.spans, LoopConfig(output_repeat_threshold=4))
    assert kinds(finalized) == set()


def test_disabled_kinds_are_not_reported() -> None:
    a = Agent()
    a.turn(search("x", "r"))
    a.turn(search("x", "r"))
    _, finalized = run(a.done(), LoopConfig(disabled=frozenset({"consecutive"})))
    assert kinds(finalized) == set()


# --- runs --------------------------------------------------------------------------------------


def test_signals_are_per_run_unlike_tracecheck() -> None:
    from tracecheck.evaluators.failure_modes import FailureModesEvaluator
    from tracecheck.schema import Step, StepType, Trace

    a = Agent()
    a.turn(search("shared", "facts"))
    for name in ("researcher", "writer"):
        a.enter(name)
        a.turn(search("shared", "facts"))
        a.turn(text=f"{name} done")
        a.leave()
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {}
    assert kinds(finalized) == set()
    # tracecheck counts over the whole trace: the same three calls are an infinite loop to it.
    steps = [Step(type=StepType.TOOL_CALL, name="search", input={"q": "shared"})] * 3
    tc = FailureModesEvaluator().evaluate(Trace(trace_id="t", agent_name="a", steps=steps))
    assert tc.metadata["modes"] == ["infinite_loop"]


def test_a_sub_agent_loop_is_found_in_its_run_and_annotated_while_streaming() -> None:
    a = Agent()
    a.turn(Call("plan", {}, "go"))
    run_id = a.enter("researcher")
    chats = [a.turn(search("q", "r")) for _ in range(3)]
    a.leave()
    per_span, finalized = run(a.done())
    assert loop_labels(per_span)[chats[2]] == {"repeat", "consecutive"}
    (repeat,) = [x for x in analyze(finalized.trajectory).loops if x.kind == "repeat"]
    assert repeat.run_id == run_id


def test_streaming_order_children_first_gives_the_same_per_span_results() -> None:
    a = Agent()
    for r in range(3):
        a.turn(Call("open", {}, f"o{r}"))
        a.turn(Call("read", {}, f"r{r}"))
    spans = a.done()
    by_start, f1 = run(spans)
    by_end, f2 = run(sorted(spans, key=lambda v: (v.end_ns, v.span_id)))
    assert loop_labels(by_start) == loop_labels(by_end)
    assert trace_result(f1) == trace_result(f2)


# --- failure modes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "mode"),
    [
        ("This model's maximum context length is 128000 tokens", "context_window_overflow"),
        ("Error code: 400 - {'code': 'context_length_exceeded'}", "context_window_overflow"),
        ("prompt is too long: 210344 tokens > 200000 maximum", "context_window_overflow"),
        ("ContextWindowExceededError", "context_window_overflow"),
        ("Request exceeds the token limit", "context_window_overflow"),
        ("Rate limit reached for requests", "tool_call_error"),
        ("upstream timed out", "tool_call_error"),
        (None, "tool_call_error"),
    ],
)
def test_classify_error(message: str | None, mode: str) -> None:
    assert classify_error(message) == mode


def test_context_overflow_from_error_text_error_type_and_finish_reason() -> None:
    cases = [
        {"error": "maximum context length exceeded"},
        {"error": "Error code: 400", "error_type": "context_length_exceeded"},
        {"finish": "length", "text": "cut sh"},
    ]
    for case in cases:
        a = Agent()
        a.turn(filler(1))
        last = a.turn(**case)
        per_span, finalized = run(a.done())
        assert modes(finalized) == {"context_window_overflow"}, case
        (result,) = [r for r in per_span[last] if r.name == N.EVAL_FAILURE_MODE]
        assert result.score_label == "context_window_overflow"
        assert result.attributes == {N.ATTR_FAILURE_MODE: "context_window_overflow"}
        failure = trace_result(finalized, N.EVAL_FAILURE_MODES)
        assert failure.score_label == "fail" and failure.score_value == 0.0


def test_tool_call_error_on_the_failing_tool_span() -> None:
    a = Agent()
    a.turn(Call("read", {"path": "/missing"}, error="FileNotFoundError"))
    per_span, finalized = run(a.done())
    assert [r.score_label for r in per_span[sid("d01")]] == ["tool_call_error"]
    assert modes(finalized) == {"tool_call_error"}
    assert kinds(finalized) == set()


def test_clean_trace_passes_both() -> None:
    a = Agent()
    a.turn(filler(1), filler(2), parallel=True)
    a.turn(text="done")
    per_span, finalized = run(a.done())
    assert per_span == {}
    assert trace_result(finalized).score_label == "pass"
    failure = trace_result(finalized, N.EVAL_FAILURE_MODES)
    assert failure.score_label == "pass" and failure.score_value == 1.0
    assert failure.attributes == {N.ATTR_FAILURE_MODES: []}


# --- waste, score, attributes ------------------------------------------------------------------


def test_wasted_steps_tokens_and_seconds() -> None:
    a = Agent()
    a.turn(search("x", "same"), tokens=(1000, 10), chat_ms=200, tool_ms=30)
    a.turn(search("x", "same"), tokens=(2000, 20), chat_ms=300, tool_ms=40)
    a.turn(search("x", "same"), tokens=(3000, 30), chat_ms=400, tool_ms=50)
    a.turn(text="answer", tokens=(500, 5))
    _, finalized = run(a.done())
    assert kinds(finalized) == {"repeat", "consecutive", "no_progress"}
    attrs = finalized.attributes
    # calls 2 and 3 repeat call 1; the LLM calls that made them produced nothing else
    assert attrs[N.ATTR_LOOPS_WASTED_STEPS] == 2
    assert attrs[N.ATTR_LOOPS_WASTED_TOKENS] == 2020 + 3030
    assert attrs[N.ATTR_LOOPS_WASTED_SECONDS] == pytest.approx(0.3 + 0.04 + 0.4 + 0.05)
    # 3 tool calls + 1 answer; 2 wasted
    assert attrs[N.ATTR_LOOPS_SCORE] == pytest.approx(0.5)
    loops = trace_result(finalized)
    assert loops.score_value == pytest.approx(0.5)
    assert loops.span_id == finalized.root_span_id
    assert attrs[N.ATTR_LOOPS_DETECTED] is True
    assert attrs[N.ATTR_LOOPS_COUNT] == 3
    assert attrs[N.ATTR_LOOPS_KINDS] == ["repeat", "consecutive", "no_progress"]
    assert "Wasted 2 of 4 steps" in (loops.explanation or "")


def test_every_emitted_attribute_is_a_declared_name() -> None:
    a = Agent()
    for r in range(3):
        a.turn(Call("open", {}, "same"), text="again")
        a.turn(Call("read", {}, f"r{r}"))
    a.turn(error="maximum context length")
    per_span, finalized = run(a.done())
    declared = {v for k, v in vars(N).items() if k.startswith("ATTR_") and isinstance(v, str)}
    declared |= set(N.ATTR_LOOPS_BY_KIND.values())
    emitted = {key for r in finalized.results for key in r.attributes}
    emitted |= {key for results in per_span.values() for r in results for key in r.attributes}
    assert emitted <= declared
    assert emitted >= {N.ATTR_LOOP_KIND, N.ATTR_LOOPS_SCORE, N.ATTR_FAILURE_MODE}
    assert {r.name for r in finalized.results} >= {N.EVAL_LOOPS, N.EVAL_FAILURE_MODES}
    assert all(r.evaluator == "loops" and r.evaluator_version == "1.1.0" for r in finalized.results)


def test_kind_names_agree_with_the_names_module() -> None:
    from typing import get_args

    from tracehound.evaluators.loops import _PRIORITY, FailureMode, LoopKind

    assert get_args(LoopKind) == N.LOOP_KINDS
    assert sorted(_PRIORITY) == sorted(N.LOOP_KINDS)
    assert get_args(FailureMode) == N.FAILURE_MODES
    assert set(N.ATTR_LOOPS_BY_KIND) == set(N.LOOP_KINDS)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="repeat_threshold"):
        LoopConfig(repeat_threshold=1)
    with pytest.raises(ValueError, match="cycle periods"):
        LoopConfig(cycle_min_period=1)
    with pytest.raises(ValueError, match="unknown loop kind"):
        LoopConfig(disabled=frozenset({"loopy"}))
    with pytest.raises(ValueError, match="near_range_overlap"):
        LoopConfig(near_range_overlap=0.0)


# --- order independence ------------------------------------------------------------------------


def _mixed_trace() -> list[SpanView]:
    """Several kinds at once, two runs, an error, parallel calls."""
    a = Agent()
    a.turn(search("x", "same"), text="Working on it.")
    a.turn(Call("open", {}, "o"), text="Working on it.")
    a.turn(search("x", "same"), text="working on it.")
    a.turn(Call("open", {}, "o"))
    a.turn(search("x", "same"), Call("open", {}, "o"), parallel=True)
    a.enter("helper")
    for i in range(3):
        a.turn(
            Call("query", {"start": f"2025-01-{1 + i:02d}", "end": f"2025-01-{9 + i:02d}"}, f"q{i}")
        )
    a.turn(Call("http", {"u": 1}, error="503"))
    a.turn(Call("http", {"u": 1}, error="503"))
    a.turn(Call("http", {"u": 1}, error="503"))
    a.leave()
    a.turn(finish="length", text="trunc")
    return a.done()


MIXED = _mixed_trace()
_, MIXED_BASELINE = run(MIXED)


def test_mixed_trace_baseline() -> None:
    assert kinds(MIXED_BASELINE) == {
        "repeat",
        "cycle",
        "no_progress",
        "near_duplicate",
        "retry_storm",
        "output_repeat",
    }
    assert modes(MIXED_BASELINE) == {"context_window_overflow", "tool_call_error"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(MIXED))
def test_trace_results_do_not_depend_on_arrival_order(order: list[SpanView]) -> None:
    _, finalized = run(order)
    trace_level = [r for r in finalized.results if r.name in (N.EVAL_LOOPS, N.EVAL_FAILURE_MODES)]
    baseline = [r for r in MIXED_BASELINE.results if r.name in (N.EVAL_LOOPS, N.EVAL_FAILURE_MODES)]
    assert trace_level == baseline
    loop_attrs = {k: v for k, v in finalized.attributes.items() if k.startswith("tracehound.loops")}
    base_attrs = {
        k: v for k, v in MIXED_BASELINE.attributes.items() if k.startswith("tracehound.loops")
    }
    assert loop_attrs == base_attrs


# --- the trace result from the streaming state ---------------------------------------------------
#
# At finalization the evaluator takes the trace result from the tracker it fed while the spans
# streamed in, when feeding the canonical trajectory again would build the same tracker
# (`loops._streamed_report`); else it feeds the trajectory again (`analyze`).


def run_refeed(
    spans: Sequence[SpanView], config: LoopConfig | None = None
) -> tuple[dict[str, list[EvaluationResult]], FinalizedTrace]:
    """`run`, with the trace result always computed again from the trajectory."""
    evaluator = LoopEvaluator(config)
    evaluator._refeed = True
    engine = Engine([evaluator])
    return _per_span(engine, spans)


def outcome(
    result: tuple[dict[str, list[EvaluationResult]], FinalizedTrace],
) -> tuple[Any, ...]:
    per_span, finalized = result
    return per_span, finalized.results, finalized.attributes


@pytest.fixture
def refeeds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The trace ids `analyze` was called for (the evaluator's re-feeds)."""
    called: list[str] = []
    real = loops.analyze

    def spy(trajectory: Trajectory, *args: Any, **kwargs: Any) -> loops.LoopReport:
        called.append(trajectory.trace_id)
        return real(trajectory, *args, **kwargs)

    monkeypatch.setattr(loops, "analyze", spy)
    return called


def by_end(spans: Sequence[SpanView]) -> list[SpanView]:
    return sorted(spans, key=lambda v: (v.end_ns, v.span_id))


def test_an_in_order_trace_is_not_fed_again(refeeds: list[str]) -> None:
    """Spans arriving as they end (agent spans last): the streaming tracker is the final one."""
    result = run(by_end(MIXED))
    assert refeeds == []
    assert outcome(result) == outcome(run_refeed(by_end(MIXED)))
    assert refeeds == [TRACE]  # the forced re-feed does call `analyze`
    assert trace_result(result[1]) == trace_result(MIXED_BASELINE)
    assert kinds(result[1]) == kinds(MIXED_BASELINE)


def test_a_trace_without_loops_takes_its_results_from_the_counts(
    monkeypatch: pytest.MonkeyPatch, refeeds: list[str]
) -> None:
    """No loop, streamed in order: neither a re-feed nor a report; the same results."""
    a = Agent()
    a.turn(filler(1), text="Reading the first file.")
    a.turn(Call("search", {"q": "refund"}, "ok", error="maximum context length exceeded"))
    a.turn(text="Done.", finish="length")
    spans = by_end(a.done())
    expected = outcome(run_refeed(spans))
    refeeds.clear()

    def no_report(*args: Any) -> None:
        raise AssertionError("the report of a trace without loops is not built")

    monkeypatch.setattr(loops, "_report", no_report)
    result = run(spans)
    assert refeeds == []
    assert outcome(result) == expected
    assert kinds(result[1]) == set()
    assert modes(result[1]) == {"context_window_overflow"}


@given(
    steps=st.integers(0, 10**6),
    failure_modes=st.sets(st.sampled_from(["context_window_overflow", "tool_call_error"])),
)
def test_the_results_without_loops_are_those_of_their_report(
    steps: int, failure_modes: set[str]
) -> None:
    evaluator = LoopEvaluator()
    ordered: Any = sorted(failure_modes)
    report = loops.LoopReport(
        loops=(),
        failure_modes=tuple(ordered),
        steps=steps,
        wasted_steps=0,
        wasted_tokens=0,
        wasted_seconds=0.0,
        score=1.0,
    )
    fast = evaluator._clean_results(steps, ordered)
    slow = evaluator.trace_results(report)
    assert fast == slow
    assert [list(r.attributes.items()) for r in fast] == [list(r.attributes.items()) for r in slow]


def test_a_trace_fed_out_of_order_is_fed_again(refeeds: list[str]) -> None:
    """Reversed arrival: steps reach the tracker in another order than the trajectory's."""
    _, finalized = run(MIXED[::-1])
    assert refeeds == [TRACE]
    assert trace_result(finalized) == trace_result(MIXED_BASELINE)


def test_a_call_compared_before_its_result_sends_the_trace_to_the_re_feed(
    refeeds: list[str],
) -> None:
    """A slow tool: the next turn's call starts before the first call's tool span ends, so the
    two are parallel — which the trajectory knows, but streaming did not yet when it compared
    them (the tool span arrives last)."""
    a = Agent()
    a.turn(search("refund status", "a"), tool_ms=5_000)
    a.t -= 4_900 * MS  # the next turns start while the first tool still runs
    a.turn(search("Refund status", "b"))
    a.turn(search("REFUND STATUS", "c"))
    spans = by_end(a.done())
    assert spans[-1].span_id == sid("t01")  # the slow tool span ends last
    streamed, finalized = run(spans)
    assert refeeds == [TRACE]
    assert outcome((streamed, finalized)) == outcome(run_refeed(spans))
    # streaming saw a near-duplicate chain; the trajectory shows calls 1 and 2 overlapping
    assert loop_labels(streamed) == {sid("c03"): {"near_duplicate"}}
    assert kinds(finalized) == set()


def _respan(
    view: SpanView,
    *,
    parent: str | None = None,
    end_ns: int | None = None,
    drop: frozenset[str] = frozenset(),
) -> SpanView:
    """The span again, with another parent, end or without some attributes."""
    doc: dict[str, Any] = {
        "traceId": view.trace_id,
        "spanId": view.span_id,
        "parentSpanId": view.parent_span_id if parent is None else parent,
        "name": view.name,
        "startTimeUnixNano": str(view.start_ns),
        "endTimeUnixNano": str(view.end_ns if end_ns is None else end_ns),
        "attributes": [
            {"key": k, "value": _value(v)} for k, v in view.attributes.items() if k not in drop
        ],
    }
    if view.status_code:
        doc["status"] = {"code": view.status_code, "message": view.status_message}
    return SpanView.from_json(doc)


_LONG = (
    "I will look up the order status for the customer now, then report back with the details "
    "of the shipment, the “refund” and the invoice — as requested… "
)
_TEXTS = st.sampled_from(
    [
        None,
        "",
        "  ",
        "Working on it.",
        "WORKING  on it.",
        " working\non it. ",
        "ﬁne",
        "fine",
        "Straße",
        "STRASSE",
        "café",
        "cafe\u0301",
        _LONG,
        _LONG.upper(),
        _LONG.replace("now,", "now,\n\n"),
        _LONG[:96] + "\u0301" + _LONG[96:],
        _LONG + "Something else.",
    ]
)
_ARGS = st.sampled_from(
    [
        None,
        {},
        {"q": "refund status"},
        {"q": "Refund status"},
        {"q": "REFUND STATUS"},
        {"q": "refund statsu"},
        {"start": "2025-01-01", "end": "2025-01-07"},
        {"start": "2025-01-02", "end": "2025-01-08"},
    ]
)
_CALLS = st.builds(
    Call,
    tool=st.sampled_from(["search", "read"]),
    args=_ARGS,
    result=st.sampled_from(["ok", "same", None]),
    error=st.sampled_from([None, None, None, "503", "maximum context length exceeded"]),
)


@dataclass
class Turn:
    calls: list[Call]
    again: bool  # the previous turn's calls once more (repeats, retries)
    text: str | None
    parallel: bool
    tool_ms: int
    overlap: bool  # the next turn starts while this one's tools still run
    finish: str | None
    nest: int  # 1: a sub-agent starts before the turn, -1: the current one ends


_TURNS = st.builds(
    Turn,
    calls=st.lists(_CALLS, max_size=3),
    again=st.booleans(),
    text=_TEXTS,
    parallel=st.booleans(),
    tool_ms=st.sampled_from([50, 50, 3_000]),
    overlap=st.booleans(),
    finish=st.sampled_from([None, None, "length"]),
    nest=st.sampled_from([0, 0, 0, 1, -1]),
)


@st.composite
def streamed_traces(draw: st.DrawFn) -> list[SpanView]:
    """Random agent traces (sub-agents, errors, retries, repeated and near calls, repeated
    outputs, overlapping turns), some spans edited (re-parented, made roots, ended later, without
    call ids), delivered in end order, nearly so, or shuffled."""
    a = Agent(propose=draw(st.booleans()))
    depth = 0
    previous: list[Call] = []
    for turn in draw(st.lists(_TURNS, min_size=1, max_size=8)):
        if turn.nest == 1 and depth < 2:
            a.enter("sub")
            depth += 1
        elif turn.nest == -1 and depth:
            a.leave()
            depth -= 1
        calls = previous if turn.again and previous else turn.calls
        a.turn(
            *calls,
            text=turn.text,
            parallel=turn.parallel,
            tool_ms=3_000 if turn.overlap else turn.tool_ms,
            finish=turn.finish,
        )
        if turn.overlap:
            a.t -= 2_980 * MS
        previous = calls
    spans = a.done()
    ids = [v.span_id for v in spans]
    edits = st.tuples(
        st.integers(0, len(spans) - 1), st.sampled_from(["parent", "root", "late", "no ids"])
    )
    for index, edit in draw(st.lists(edits, max_size=3)):
        view = spans[index]
        if edit == "parent":
            spans[index] = _respan(view, parent=draw(st.sampled_from(ids)))
        elif edit == "root":
            spans[index] = _respan(view, parent="")
        elif edit == "late":
            spans[index] = _respan(view, end_ns=view.end_ns + 2_000 * MS)
        else:
            spans[index] = _respan(
                view, drop=frozenset({"gen_ai.tool.call.id", "gen_ai.output.messages"})
            )
    order = draw(st.sampled_from(["end", "end", "swaps", "shuffle"]))
    if order == "shuffle":
        return draw(st.permutations(spans))
    spans = by_end(spans)
    if order == "swaps":
        for i in draw(st.lists(st.integers(0, len(spans) - 2), max_size=2)):
            spans[i], spans[i + 1] = spans[i + 1], spans[i]
    return spans


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=streamed_traces(), low=st.booleans())
def test_the_trace_result_from_streaming_is_the_re_fed_one(
    spans: list[SpanView], low: bool
) -> None:
    """Fast path or not, every result is the one the re-feed gives."""
    config = (
        LoopConfig(
            repeat_threshold=2,
            near_duplicate_threshold=2,
            no_progress_threshold=2,
            output_repeat_threshold=2,
            retry_storm_threshold=1,
        )
        if low
        else None
    )
    with mock.patch.object(loops, "analyze", wraps=loops.analyze) as refeed:
        streamed = run(spans, config)
    event("re-fed" if refeed.called else "streamed")
    assert outcome(streamed) == outcome(run_refeed(spans, config))


# --- steps held back while no loop can complete ---------------------------------------------------


_LOW = LoopConfig(
    repeat_threshold=2,
    near_duplicate_threshold=2,
    no_progress_threshold=2,
    output_repeat_threshold=2,
    retry_storm_threshold=1,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=streamed_traces(), low=st.booleans())
def test_holding_steps_back_changes_no_result(spans: list[SpanView], low: bool) -> None:
    """Per-span and trace results are those of a tracker fed every step as it arrives."""
    config = _LOW if low else None
    with mock.patch.object(
        loops._State, "catch_up", autospec=True, side_effect=loops._State.catch_up
    ) as made:
        held = run(spans, config)
    event("tracker made" if made.called else "all held")
    with mock.patch.object(loops._State, "hold", lambda *args: False):
        fed = run(spans, config)
    assert outcome(held) == outcome(fed)


def test_a_trace_without_repeated_values_makes_no_tracker(refeeds: list[str]) -> None:
    """Distinct calls, results and outputs: every step is held back, nothing is fed again."""
    a = Agent()
    a.turn(search("refund status", "a"), text="Looking it up.")
    a.turn(search("order 1234", "b"), text="Checking the order.")
    a.turn(Call("read", {"path": "/a.txt"}, "contents"), text="Reading the file.")
    a.turn(text="Done.")
    with mock.patch.object(
        loops._State, "catch_up", autospec=True, side_effect=loops._State.catch_up
    ) as made:
        result = run(by_end(a.done()))
    assert not made.called
    assert refeeds == []
    assert outcome(result) == outcome(run_refeed(by_end(a.done())))
    assert kinds(result[1]) == set()


def test_the_step_that_may_complete_a_loop_makes_the_tracker() -> None:
    """The third near call of a tool (near duplicates need three) makes the tracker, which
    finds the loop at that call as if it had been fed every step."""
    a = Agent()
    a.turn(search("refund status", "a"))
    a.turn(search("Refund status", "b"))
    a.turn(search("REFUND STATUS", "c"))
    spans = by_end(a.done())
    with mock.patch.object(
        loops._State, "catch_up", autospec=True, side_effect=loops._State.catch_up
    ) as made:
        streamed, finalized = run(spans)
    assert made.call_count == 1
    assert loop_labels(streamed) == {sid("c03"): {"near_duplicate"}}
    assert kinds(finalized) == {"near_duplicate"}


def test_calls_of_one_tool_that_are_not_near_are_held_back() -> None:
    """Three calls of one tool with unrelated arguments make no tracker (they cannot chain into
    near duplicates); a fourth near one of them neither (two near calls are not three)."""
    a = Agent()
    a.turn(search("refund status", "a"))
    a.turn(search("shipping address", "b"))
    a.turn(search("order history", "c"))
    a.turn(search("Refund status", "d"))
    spans = by_end(a.done())
    with mock.patch.object(
        loops._State, "catch_up", autospec=True, side_effect=loops._State.catch_up
    ) as made:
        result = run(spans)
    assert not made.called
    assert outcome(result) == outcome(run_refeed(spans))
    assert kinds(result[1]) == set()


def test_a_tool_called_past_the_calls_compared_makes_the_tracker() -> None:
    near = loops._HeldNear(LoopConfig())
    for n in range(loops._NEAR_HELD_CALLS):
        assert not near.may_complete("search", json.dumps({"q": f"topic {n}"}))
    assert near.may_complete("search", json.dumps({"q": "another"}))
    assert not near.may_complete("read", json.dumps({"q": "another"}))


class _Recorder(Evaluator):
    """What the engine gives an evaluator: each span with its steps, and the trajectory."""

    name = "recorder"
    version = "1"

    def __init__(self) -> None:
        self.spans: list[tuple[NormalizedSpan, Sequence[Step]]] = []
        self.trajectory: Trajectory | None = None

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        self.spans.append((span, steps))
        return ()

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        self.trajectory = trajectory
        return ()


def _recorded(spans: Sequence[SpanView]) -> _Recorder:
    recorder = _Recorder()
    engine = Engine([recorder])
    for view in spans:
        engine.add_span(view)
    engine.flush()
    return recorder


def test_held_steps_are_compared_with_the_trajectorys() -> None:
    """`_held_steps`: the calls and outputs of a trajectory whose steps are those held back,
    else None."""
    a = Agent()
    a.turn(search("refund status", "a"), text="Looking it up.")
    a.turn(Call("read", {"path": "/a.txt"}, "contents", error="boom"), finish="length")
    recorder = _recorded(by_end(a.done()))
    evaluator = LoopEvaluator()
    info = TraceInfo("t")
    state = evaluator.start_trace(info)
    for span, steps in recorder.spans:
        evaluator.on_span(state, span, steps, info)
    assert state.tracker is None
    assert recorder.trajectory is not None
    steps = recorder.trajectory.steps
    assert loops._held_steps(state.held, steps) == 3  # two calls, one output
    fewer = tuple(step for step in steps if step.kind != "tool_result")
    assert loops._held_steps(state.held, fewer) is None
    assert loops._held_steps([], steps) is None


# --- outputs compared by their first words -------------------------------------------------------

_FOLD_ALPHABET = st.sampled_from(
    [
        *"abcXYZ019.,-'",
        "abcdefghijklmnopqrstu",
        " ",
        "  ",
        "\n",
        "\t",
        "\u00a0",  # no-break space: NFKC makes it a space
        "\u3000",  # ideographic space
        "\u0301",  # combining acute: composes with the letter before it
        "\u0327",  # combining cedilla
        "e\u0301",
        "\u00e9",
        "\ufb01",  # ﬁ
        "\uff21",  # fullwidth A
        "ß",
        "Σ",
        "ς",
        "\u1100\u1161",  # Hangul jamo that compose into one syllable
        "\u11a8",  # a final jamo: composes with a preceding syllable
        "\ufdfa",  # one character that NFKC makes four words
        "\u2026",
        "\u201c",
        "İ",
        *loops._SEPARATORS,  # typographic punctuation, folded on the ASCII path
        "\u00b2",  # superscript two: a digit, "2" once folded
        "\u0663",  # Arabic-Indic three: a digit NFKC keeps
        "_",
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    parts=st.lists(_FOLD_ALPHABET, min_size=0, max_size=200),
    pad=st.integers(0, 9),
)
def test_an_outputs_head_is_the_first_words_of_its_folded_text(parts: list[str], pad: int) -> None:
    text = "w " * pad + "".join(parts)
    head = loops._head(text)
    assert head == " ".join(loops._spaced(loops._fold(text)).split()[: loops._HEAD_WORDS])
    if not any(c in text for c in loops._SEPARATORS):
        assert bool(head) == bool(loops._fold(text))


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(_FOLD_ALPHABET, min_size=0, max_size=40))
def test_words_and_digits_of_folded_text_follow_their_definitions(parts: list[str]) -> None:
    """The bytes paths of `_words` and `_digits` give what the regex and `str.isdigit` do."""
    folded = loops._fold("".join(parts))
    assert loops._words(folded) == loops._WORD_RE.findall(folded)
    assert loops._digits(folded) == "".join(c for c in folded if c.isdigit())
    assert loops._folded_digits("".join(parts)) == (folded, loops._digits(folded))
    plain = loops._plain("".join(parts))
    if plain is not None:
        assert plain == loops._spaced(loops._casefolded("".join(parts)))


def test_typographic_separators_fold_to_themselves_and_compose_with_nothing() -> None:
    """What the ASCII paths of `_head`, `_words` and `_digits` rely on."""
    import unicodedata

    for char in loops._SEPARATORS:
        assert unicodedata.normalize("NFKC", char) == char == char.casefold() == char.lower()
        assert unicodedata.combining(char) == 0 and not char.isalnum() and not char.isspace()
        assert unicodedata.decomposition(char) == ""
    for code in range(0x110000):  # no canonical composition has one of them as a part
        parts = unicodedata.decomposition(chr(code)).split()
        if parts and not parts[0].startswith("<"):
            assert not any(chr(int(p, 16)) in loops._SEPARATORS for p in parts), hex(code)


def test_ascii_characters_compose_with_nothing_before_them() -> None:
    """What `_Cache.head` relies on: no canonical decomposition into two characters (the
    compositions NFKC may make; Hangul syllables, not listed, pair jamo) ends in an ASCII
    character, and ASCII characters are starters."""
    import unicodedata

    pairs = 0
    for code in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                pairs += 1
                assert int(parts[1], 16) >= 0x80, hex(code)
    assert pairs > 900
    assert all(unicodedata.combining(chr(c)) == 0 for c in range(0x80))


def test_long_outputs_that_begin_alike_are_told_apart_by_their_whole_text() -> None:
    a = Agent()
    base = "Let me check the order status again for you, one moment please. " * 3
    a.turn(filler(1), text=base + "The order shipped.")
    a.turn(filler(2), text=base.upper() + "The order is late.")
    a.turn(filler(3), text=base + "the  ORDER shipped.")
    a.turn(filler(4), text=base.replace(" ", "\n") + "The order shipped.")
    per_span, _ = run(a.done())
    assert loop_labels(per_span) == {sid("c04"): {"output_repeat"}}
    assert primary(per_span, sid("c04"))[N.ATTR_LOOP_FIRST_SPAN_ID] == sid("c01")
    assert primary(per_span, sid("c04"))[N.ATTR_LOOP_COUNT] == 3


def test_an_outputs_head_on_usual_outputs() -> None:
    text = "The order \u201cORD-1001\u201d was shipped \u2014 it\u2019s on its way\u2026 " * 5
    assert loops._head(text) == "the order ord-1001 was shipped it s on"
    dots = "a " * 8 + "\u2026" * 170 + " b"  # the part read goes on to the first ASCII
    assert loops._head(dots) == "a a a a a a a a"
    dots = "a " * 2 + "\u2026" * 20 + " b" * 5 + " c" * 60  # an ellipsis is three dots
    assert loops._head(dots) == "a a " + "." * 60 + " b b b b b"
    assert loops._head("Short  text") == "short text"  # all its words
    assert loops._head("") == ""
    few = "Coroutine function definition " + "-" * 60 + " f ::= [d] \u201casync\u201d def x" * 30
    assert loops._head(few) == "coroutine function definition " + "-" * 60 + " f ::= [d] async"


# --- arguments flattened when compared -----------------------------------------------------------


def test_a_tool_called_fewer_times_than_the_threshold_is_never_flattened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flattened: list[Any] = []
    real = loops._Flat

    def counting(value: Any) -> loops._Flat:
        flattened.append(value)
        return real(value)

    monkeypatch.setattr(loops, "_Flat", counting)
    a = Agent()
    a.turn(Call("plan", {"goal": "x"}, "ok"))
    a.turn(Call("read", {"path": "/a.txt"}, "a"))
    a.turn(Call("write", {"path": "/b.txt"}, "ok"))
    a.turn(Call("read", {"path": "/c.txt"}, "c"))  # two calls of `read`: no group of three
    run(a.done())
    assert flattened == []
    a.turn(Call("read", {"path": "/d.txt"}, "d"))  # a third call of `read`: all compared
    run(a.done())
    assert flattened == [{"path": "/a.txt"}, {"path": "/c.txt"}, {"path": "/d.txt"}]


class _EagerHeldNear:
    """`_HeldNear` as it was before calls were only recorded below the threshold: every call
    of a tool after its first flattened and compared as it comes."""

    def __init__(self, config: LoopConfig, cache: Any) -> None:
        self.config = config
        self.cache = cache
        self.tools: dict[str, Any] = {}

    def may_complete(self, tool: str, arguments: str) -> bool:
        config, cache = self.config, self.cache
        entries = self.tools.get(tool)
        if entries is None:
            self.tools[tool] = arguments
            return False
        if isinstance(entries, str):
            entries = [[loops._flat_of(entries, cache, config), 0]]
        elif len(entries) >= loops._NEAR_HELD_CALLS:
            return True
        flat = loops._flat_of(arguments, cache, config)
        joined: set[int] = set()
        if flat is not None:
            for other, component in entries:
                if (
                    component not in joined
                    and other is not None
                    and loops._near_flat(other, flat, config)
                ):
                    joined.add(component)
        size = 1 + sum(1 for _, component in entries if component in joined)
        if size >= config.near_duplicate_threshold:
            return True
        new = len(entries)
        for entry in entries:
            if entry[1] in joined:
                entry[1] = new
        entries.append([flat, new])
        self.tools[tool] = entries
        return False


_NEAR_ARGUMENTS = st.sampled_from(
    [
        '{"q":"refund status"}',
        '{"q":"Refund  status"}',
        '{"q":"REFUND STATUS!"}',
        '{"q":"refnud status"}',
        '{"q":"shipping address"}',
        '{"q":"order 1001"}',
        '{"q":"order 1002"}',
        '{"from":"2024-01-01","to":"2024-01-07"}',
        '{"from":"2024-01-02","to":"2024-01-08"}',
        '{"from":"2024-03-01","to":"2024-03-02"}',
        '{"x":1.0}',
        '{"x":1.01}',
        '{"x":1.5}',
        "[1,2]",
        "not json",
        '{"q":',
        "",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(st.tuples(st.sampled_from(["a", "b", ""]), _NEAR_ARGUMENTS), max_size=40),
    threshold=st.integers(2, 5),
)
def test_held_calls_recorded_below_the_threshold_answer_as_compared_at_once(
    calls: list[tuple[str, str]], threshold: int
) -> None:
    """Comparing a tool's calls only once it has `near_duplicate_threshold` of them answers
    each call as comparing every call as it comes does (the components are the same)."""
    config = LoopConfig(near_duplicate_threshold=threshold)
    near = loops._HeldNear(config)
    eager = _EagerHeldNear(config, loops._Cache())
    seen: set[tuple[str, str]] = set()
    for tool, arguments in calls:
        if (tool, arguments) in seen:
            continue  # `_State.hold` asks only for a call with new arguments
        seen.add((tool, arguments))
        expected = eager.may_complete(tool, arguments)
        assert near.may_complete(tool, arguments) == expected
        if expected:
            break


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.5, 1.0, -2.25, float("inf")])
    | st.sampled_from(["a1", "B 22", "x", "2025-01-01", "2025-01-01T10:00:00Z", "ﬁ3", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner),
    max_leaves=8,
)


_STRINGS = st.sampled_from(
    ["a1", "B 22", "", "2025-01-01", "2025-01-01T10:00:00Z", "It’s “fine” – 3", "ﬁ3", "x" * 40]
)


@given(
    st.dictionaries(st.sampled_from(["q", "path", "b"]), _STRINGS | _JSON, min_size=1),
    st.booleans(),
)
def test_arguments_of_strings_flatten_as_any_others(value: dict[str, Any], strings: bool) -> None:
    """The path for an object of strings (`_Flat._strings`) makes the same flat as the general
    one, which it leaves to anything else (dates, other types)."""
    if strings:
        value = {k: v if isinstance(v, str) else "s" for k, v in value.items()}
    fast = loops._Flat(value)
    probe = loops._Flat.__new__(loops._Flat)
    dates = {"2025-01-01", "2025-01-01T10:00:00Z"}
    assert probe._strings(value) == all(
        isinstance(v, str) and v not in dates for v in value.values()
    )
    general = loops._Flat.__new__(loops._Flat)
    with mock.patch.object(loops._Flat, "_strings", lambda self, value: False):
        general.__init__(value)  # type: ignore[misc]
    assert (fast.shape, fast.leaves, fast.rigid, fast.interval) == (
        general.shape,
        general.leaves,
        general.rigid,
        general.interval,
    )


@given(_JSON)
def test_the_rigid_parts_of_arguments_follow_their_leaves(value: Any) -> None:
    """Integers, booleans and nulls as they are, floats as None, a string's digits; no dates."""
    flat = loops._Flat(value)
    rigid: list[Any] = []
    for leaf in flat.leaves:
        kind, item = leaf[0], leaf[1]
        if kind == "o" or (kind == "n" and isinstance(item, int)):
            rigid.append(item)
        elif kind == "n":
            rigid.append(None)
        elif kind == "s":
            assert leaf[2] == loops._fold(item)
            assert leaf[3] == "".join(c for c in leaf[2] if c.isdigit())
            rigid.append(leaf[3])
    assert flat.rigid == tuple(rigid)
    assert len(flat.shape) >= len(flat.leaves)


# --- `error.type` read from the wire -------------------------------------------------------------


def _chat_request(error_types: list[str | None]) -> bytes:
    """A request of chat spans (messages and a tool call in their attributes), one per entry of
    `error_types` (its `error.type` attribute, if any), under one agent span."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.scope.name = "openai"
    trace_id = bytes(range(16))
    agent = scope_spans.spans.add(
        trace_id=trace_id, span_id=(99).to_bytes(8, "big"), name="invoke_agent a"
    )
    agent.start_time_unix_nano, agent.end_time_unix_nano = 1, 10_000
    agent.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
    for n, error_type in enumerate(error_types, 1):
        span = scope_spans.spans.add(
            trace_id=trace_id,
            span_id=n.to_bytes(8, "big"),
            parent_span_id=agent.span_id,
            name="chat gpt-4.1",
            start_time_unix_nano=100 * n,
            end_time_unix_nano=100 * n + 50,
        )
        output = [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": f"Looking up the order number {n}."},
                    {"type": "tool_call", "id": f"c{n}", "name": "s", "arguments": {"q": n}},
                ],
                "finish_reason": "tool_call",
            }
        ]
        for key, value in (
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.request.model", "gpt-4.1"),
            ("gen_ai.input.messages", json.dumps([{"role": "user", "parts": []}])),
            ("gen_ai.output.messages", json.dumps(output)),
            ("error.type", error_type),
        ):
            if value is not None:
                span.attributes.add(key=key).value.string_value = value
    return request.SerializeToString()


@pytest.mark.parametrize(
    "error_types",
    [[None, None, None], [None, None, "context_length_exceeded"], [None, "RateLimitError", None]],
)
def test_the_error_type_of_spans_read_from_the_wire_is_a_failure_mode(
    error_types: list[str | None],
) -> None:
    """Views read from a request's bytes (their messages decoded by normalization, the rest
    left on the wire): a span's `error.type` gives the trace its failure mode."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from tracehound.spans import iter_proto_spans

    raw = _chat_request(error_types)
    views = list(iter_proto_spans(ExportTraceServiceRequest.FromString(raw), raw=raw))
    engine = Engine([LoopEvaluator()])
    assert all(engine.add_span(view).deferred for view in views[1:])  # before their root
    assert not engine.add_span(views[0]).results
    released = engine.take_released()
    assert [o.span_id for o in released] == [v.span_id for v in views[1:]]
    per_span = [o.results for o in released]
    (finalized,) = engine.flush()
    mode_of = {  # (an `error.type` makes an error step)
        None: [],
        "context_length_exceeded": ["context_window_overflow"],
        "RateLimitError": ["tool_call_error"],
    }
    for results, error_type in zip(per_span, error_types, strict=True):
        assert [r.score_label for r in results if r.name == N.EVAL_FAILURE_MODE] == mode_of[
            error_type
        ]
        assert not [r for r in results if r.name == N.EVAL_LOOP]
    (trace_modes,) = [r for r in finalized.results if r.name == N.EVAL_FAILURE_MODES]
    assert trace_modes.attributes[N.ATTR_FAILURE_MODES] == mode_of[max(error_types, key=bool)]
