"""Loop evaluator: each signal and its threshold, hard negatives, per-span attachment, failure
modes, waste accounting, and the order independence of the trace result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import Engine, EvaluationResult, FinalizedTrace, SpanView
from tracehound import names as N
from tracehound.evaluators import LoopConfig, LoopEvaluator
from tracehound.evaluators.loops import analyze, classify_error, near_arguments

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
    per_span: dict[str, list[EvaluationResult]] = {}
    for view in spans:
        outcome = engine.add_span(view)
        if outcome.results:
            per_span.setdefault(view.span_id, []).extend(outcome.results)
    (finalized,) = engine.flush()
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
    a.turn(search("x", "r2"))
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
    per_span, finalized = run(a.done(), LoopConfig(repeat_threshold=4))
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
    second = a.turn(search("x", "r2"))
    spans = a.done()
    per_span, finalized = run(spans)
    assert loop_labels(per_span) == {second: {"consecutive"}}
    assert primary(per_span, second)[N.ATTR_LOOP_COUNT] == 2
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
    for r in range(3):
        for j, tool in enumerate(tools):
            chats.append(a.turn(Call(tool, {"id": j}, f"{tool} {r}")))
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
        a.turn(Call("open" if r % 2 == 0 else "read", {}, f"v{r}"))
    _, finalized = run(a.done())
    assert kinds(finalized) == {"repeat"}  # `open` three times, but no A,B x3


def test_one_call_repeated_is_not_reported_as_a_cycle_and_period_four_reduces_to_two() -> None:
    a = Agent()
    for r in range(6):
        a.turn(search("x", f"v{r}"))
    _, finalized = run(a.done())
    assert "cycle" not in kinds(finalized)
    b = Agent()
    for r in range(8):  # A,B x4: also A,B,A,B x2 — reported once, with period 2
        b.turn(Call("open" if r % 2 == 0 else "read", {}, f"v{r}"))
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
    _, finalized = run(a.done())
    assert "no_progress" not in kinds(finalized)
    assert kinds(finalized) == {"repeat", "consecutive"}  # identical calls, as tracecheck counts


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


def test_retry_storm_after_two_failed_attempts() -> None:
    a = Agent()
    a.turn(search("x", error="503"))
    a.turn(search("x", error="503"))
    third = a.turn(search("x", "ok"))
    per_span, finalized = run(a.done())
    assert loop_labels(per_span) == {third: {"retry_storm", "repeat"}}
    attrs = primary(per_span, third)
    assert attrs[N.ATTR_LOOP_KIND] == "retry_storm"
    assert attrs[N.ATTR_LOOP_KINDS] == ["retry_storm", "repeat"]
    assert attrs[N.ATTR_LOOP_COUNT] == 3
    assert kinds(finalized) == {"retry_storm", "repeat"}
    assert modes(finalized) == {"tool_call_error"}


def test_one_retry_that_succeeds_is_not_a_storm_unless_configured() -> None:
    a = Agent()
    a.turn(search("x", error="503"))
    a.turn(filler(1))
    retry = a.turn(search("x", "ok"))
    spans = a.done()
    per_span, finalized = run(spans)
    assert loop_labels(per_span) == {} and kinds(finalized) == set()
    per_span, finalized = run(spans, LoopConfig(retry_storm_threshold=1))
    assert loop_labels(per_span) == {retry: {"retry_storm"}}


def test_a_retry_with_fixed_arguments_is_not_a_storm() -> None:
    a = Agent()
    a.turn(Call("read", {"path": "/a.txt"}, error="not found"))
    a.turn(Call("read", {"path": "/b.txt"}, error="not found"))
    a.turn(Call("read", {"path": "/c.txt"}, "ok"))
    _, finalized = run(a.done())
    assert kinds(finalized) == set()


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
    chats = [a.turn(search("q", f"r{i}")) for i in range(3)]
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
    assert all(r.evaluator == "loops" and r.evaluator_version == "1.0.0" for r in finalized.results)


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
    a.turn(Call("open", {}, "o1"), text="Working on it.")
    a.turn(search("x", "same"), text="working on it.")
    a.turn(Call("open", {}, "o2"))
    a.turn(search("x", "same"), Call("open", {}, "o3"), parallel=True)
    a.enter("helper")
    for i in range(3):
        a.turn(
            Call("query", {"start": f"2025-01-{1 + i:02d}", "end": f"2025-01-{9 + i:02d}"}, f"q{i}")
        )
    a.turn(Call("http", {"u": 1}, error="503"))
    a.turn(Call("http", {"u": 1}, error="503"))
    a.turn(Call("http", {"u": 1}, "200"))
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
