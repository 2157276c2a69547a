"""The C accelerator's per-span paths against their Python references.

- `SlotsMaker` makes the same instances as the dataclasses' constructors;
- `text_size` is the engine's `_text_size` sum;
- `genai_extract` maps a span as `conventions.genai.extract` does;
- `canonical_arguments` writes what `conventions.base.canonical_arguments` writes;
- `span_drafts` drafts LLM and tool spans as `steps._span_drafts` does, with the same changes to
  the trace's dedupe state.

Each may answer None (the caller then runs the Python code) but never anything else than the
reference; the usual inputs must take the C path.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _speedups, steps
from tracehound.conventions import genai
from tracehound.conventions.base import (
    MAX_JSON_BYTES,
    Document,
    Message,
    NormalizedSpan,
    Part,
    canonical_arguments,
    slots_maker,
)
from tracehound.engine import FinalizedTrace, SpanOutcome, _text_size
from tracehound.evaluators.base import EvaluationResult
from tracehound.spans import SpanView
from tracehound.steps import Run, Step, Trajectory, TrajectoryBuilder

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
needs_native = pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off",
)


def make_view(attributes: dict[str, Any], span_id: str = "1" * 16, start: int = 10) -> SpanView:
    view = SpanView.from_json(
        {
            "traceId": "a" * 32,
            "spanId": span_id,
            "name": "chat m",
            "startTimeUnixNano": start,
            "endTimeUnixNano": start + 5,
        }
    )
    view._attributes = attributes
    return view


# --- SlotsMaker ------------------------------------------------------------------------------


def _fields(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def test_maker_makes_what_the_class_makes() -> None:
    view = make_view({})
    step = Step(kind="user", span_id="s", start_ns=1, end_ns=2)
    run = Run(
        run_id="r", agent_name="a", span_id="r", parent_run_id=None, start_ns=1, end_ns=2, depth=0
    )
    trajectory = Trajectory("t", (step,), (run,), ("otel_genai",))
    cases: list[tuple[type[Any], tuple[Any, ...]]] = [
        (SpanOutcome, ("t", "s", True, (step,), (), False, False, True)),
        (FinalizedTrace, ("t", "r", trajectory, (), "flush", 3, False, {"x": 1})),
        (Trajectory, ("t", (step,), (run,), ("c",), ("p",))),
        (Run, ("r", "a", "s", None, 1, 2, 0, "svc", "out", True)),
        (NormalizedSpan, (view, "otel_genai", "llm")),
        (Part, ("text", "hello")),
        (Message, ("user", [Part("text", "x")])),
        (EvaluationResult, ("n", "e", "1", None, 0.5, "low", "why", {"k": 1}, None)),
    ]
    for cls, values in cases:
        made = slots_maker(cls)(*values)
        names = _fields(cls)[: len(values)]
        want = cls(**dict(zip(names, values, strict=True)))
        assert type(made) is cls
        assert made == want
        assert repr(made) == repr(want)
        if cls.__hash__ is not None and cls not in (FinalizedTrace, EvaluationResult):  # dicts
            assert hash(made) == hash(want)


@needs_native
def test_maker_defaults_and_frozen() -> None:
    make = slots_maker(NormalizedSpan)
    assert isinstance(make, _speedups.SlotsMaker)
    a, b = make(make_view({}), "otel_genai", "llm"), make(make_view({}), "otel_genai", "tool")
    assert a.input_messages == [] and a.input_messages is not b.input_messages  # fresh lists
    assert a.text_bytes == 0 and a.model is None
    outcome = slots_maker(SpanOutcome)("t", "s", True, (), (), False, False, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.genai = False  # type: ignore[misc]


@needs_native
@pytest.mark.parametrize(
    "args",
    [
        (int, ("real",)),  # not a slot of object.__new__'s making
        (Step, ("kind",)),  # a dict-backed class: no slots
        (SpanOutcome, ("nope",)),
        (SpanOutcome, (1,)),
        ("SpanOutcome", ()),
        (SpanOutcome, ("trace_id",), ("a", "b")),  # more defaults than names
    ],
)
def test_maker_type_errors(args: tuple[Any, ...]) -> None:
    with pytest.raises((TypeError, AttributeError)):
        _speedups.SlotsMaker(*args)


@needs_native
def test_maker_call_errors() -> None:
    make = _speedups.SlotsMaker(SpanOutcome, _fields(SpanOutcome))
    with pytest.raises(TypeError):
        make("t")
    with pytest.raises(TypeError):
        make("t", "s", True, (), (), False, False, True, "extra")
    with pytest.raises(TypeError):
        make("t", "s", True, (), (), False, False, evaluated=True)


@needs_native
def test_maker_no_leaks() -> None:
    make = _speedups.SlotsMaker(SpanOutcome, _fields(SpanOutcome))
    part = _speedups.SlotsMaker(Part, _fields(Part), (None, None, None, None, None))
    span = slots_maker(NormalizedSpan)
    view = make_view({})

    def call() -> None:
        make("t", "s", True, (), (), False, False, True)
        part("text", "x")
        span(view, "otel_genai", "llm")
        expecting(lambda: make("t"), TypeError)()

    assert_leak_free(call, [SpanOutcome, Part, view], 20_000)


# --- text_size --------------------------------------------------------------------------------

texts = st.sampled_from(["", "a", "héllo", "日本語", "x" * 40])
content_values = st.none() | texts
parts = st.builds(Part, st.sampled_from(["text", "reasoning", "tool_call"]), content_values)
messages = st.lists(st.builds(Message, st.sampled_from(["user", "assistant"]), st.lists(parts)))
loose = st.none() | texts | st.integers() | st.dictionaries(st.text(max_size=3), st.integers())


@st.composite
def spans_for_size(draw: st.DrawFn) -> NormalizedSpan:
    span = NormalizedSpan(make_view({}), "otel_genai", "llm")
    span.input_messages = draw(messages)
    span.output_messages = draw(messages)
    span.history = draw(messages)
    span.system_instructions = draw(st.lists(texts))
    span.tool_arguments = draw(loose)
    span.tool_result = draw(loose)
    span.declared_output = draw(st.none() | texts)
    span.documents = draw(st.lists(st.builds(Document, content=content_values)))
    return span


@SETTINGS
@given(spans_for_size())
def test_text_size_parity(span: NormalizedSpan) -> None:
    got = _speedups.text_size(span)
    with pure_python():
        want = _text_size(span)
    assert got is None or got == want
    assert got is not None  # these types all take the C path


def test_text_size_unusual_types() -> None:
    class Text(str):
        pass

    span = NormalizedSpan(make_view({}), "otel_genai", "tool")
    span.tool_result = Text("abc")
    assert _speedups.text_size(span) is None
    span.tool_result = None
    span.input_messages = [Message("user", [Part("text", ["not", "a", "str"])])]  # type: ignore[arg-type]
    assert _speedups.text_size(span) is None
    assert _text_size(span) == 3  # the Python code: len() of what is there


def test_text_size_no_leaks() -> None:
    span = NormalizedSpan(make_view({}), "otel_genai", "llm")
    span.input_messages = [Message("user", [Part("text", "hello"), Part("tool_call")])]
    span.tool_result = "r" * 10
    assert_leak_free(lambda: _speedups.text_size(span), [span], 20_000)


# --- canonical_arguments -------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_data = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
argument_values = (
    json_data
    | json_data.map(lambda v: json.dumps(v, ensure_ascii=False))
    | json_data.map(lambda v: "  \n" + json.dumps(v, indent=1) + " \u2003")
    | st.text(max_size=12)
    | st.sampled_from(["{", "[1,", "{bad}", '{"a": NaN}', "[1e400]", '{"a":1,"a":2}', "  plain "])
    | st.tuples(st.integers())
    | st.dictionaries(st.integers(), st.integers(), max_size=2)
)


@SETTINGS
@given(argument_values)
def test_canonical_arguments_parity(value: Any) -> None:
    got = _speedups.canonical_arguments(value, MAX_JSON_BYTES)
    with pure_python():
        want = canonical_arguments(value)
    assert got is None or (type(got) is str and got == want)
    assert canonical_arguments(value) == want  # through the C path where it answers


@needs_native
def test_canonical_arguments_takes_the_usual() -> None:
    for value in ('{"query": "x", "a": [1, 2.5, true, null]}', {"b": 1, "a": "é"}, "plain"):
        assert _speedups.canonical_arguments(value, MAX_JSON_BYTES) is not None
    assert _speedups.canonical_arguments('{"a": 1}', 3) == '{"a": 1}'  # over the size limit


def test_canonical_arguments_no_leaks() -> None:
    def call() -> None:
        _speedups.canonical_arguments('{"b": [1, "x\\n"], "a": 2.5}', MAX_JSON_BYTES)
        _speedups.canonical_arguments({"a": float("nan")}, MAX_JSON_BYTES)
        _speedups.canonical_arguments("{bad", MAX_JSON_BYTES)
        expecting(lambda: _speedups.canonical_arguments("x", "big"), TypeError)()

    assert_leak_free(call, [], 20_000)


# --- genai_extract ------------------------------------------------------------------------------

raw_part = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_call", "tool_call_response", "thinking", "image"])},
    optional={
        "content": st.none() | texts | st.integers(),
        "id": st.none() | st.sampled_from(["", "c1", "c2"]),
        "name": st.none() | st.sampled_from(["", "search"]),
        "arguments": st.none() | st.just({"q": "x"}) | st.just('{"q": 1}'),
        "response": st.none() | texts | st.just({"r": 1}),
    },
)
raw_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
    optional={
        "parts": st.lists(raw_part | texts, max_size=3),
        "finish_reason": st.none() | st.sampled_from(["", "stop", "tool_call"]),
        "content": texts,
    },
)
raw_messages = st.lists(raw_message, max_size=3)
message_values = (
    raw_messages.map(json.dumps)
    | raw_messages
    | st.none()
    | st.sampled_from(["[", "{}", '{"role": "user"}', "[1]", "", "  [ ]  "])
    | st.integers()
)
attribute_values: dict[str, st.SearchStrategy[Any]] = {
    "gen_ai.operation.name": st.sampled_from(
        ["chat", "execute_tool", "invoke_agent", "retrieval", "embeddings", "custom", ""]
    )
    | st.integers(),
    "gen_ai.provider.name": st.sampled_from(["openai", ""]) | st.integers(),
    "gen_ai.system": st.sampled_from(["openai", ""]),
    "gen_ai.agent.name": st.sampled_from(["agent", ""]) | st.integers(),
    "gen_ai.request.model": st.sampled_from(["m", ""]) | st.none(),
    "gen_ai.response.model": st.sampled_from(["m2", ""]),
    "gen_ai.usage.input_tokens": st.integers() | st.booleans() | st.sampled_from([2.0, "7", None]),
    "gen_ai.usage.prompt_tokens": st.integers(),
    "gen_ai.usage.output_tokens": st.integers() | st.none(),
    "gen_ai.usage.completion_tokens": st.integers() | st.sampled_from(["x"]),
    "gen_ai.response.finish_reasons": st.lists(st.none() | st.sampled_from(["stop", ""]))
    | st.sampled_from(["stop", "", 3, None, ["stop", 1]]),
    "gen_ai.input.messages": message_values,
    "gen_ai.output.messages": message_values,
    "gen_ai.system_instructions": st.sampled_from(["be brief", '[{"type": "text"}]']),
    "gen_ai.tool.name": st.sampled_from(["search", ""]) | st.integers(),
    "gen_ai.tool.call.id": st.sampled_from(["c1", ""]),
    "gen_ai.tool.call.arguments": st.none() | st.just('{"q": 1}') | st.just({"q": 1}),
    "gen_ai.tool.call.result": st.none() | texts | st.just([1, 2]),
    "error.type": st.sampled_from(["Timeout"]),
}


@st.composite
def genai_attributes(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(attribute_values)), unique=True))
    return {key: draw(attribute_values[key]) for key in keys}


def _extract_both(
    attributes: dict[str, Any], view: SpanView | None = None
) -> tuple[NormalizedSpan, NormalizedSpan]:
    view = view if view is not None else make_view(attributes)
    got = genai.extract(view, [])
    with pure_python():
        want = genai.extract(view, [])
    return got, want


@SETTINGS
@given(genai_attributes())
def test_genai_extract_parity(attributes: dict[str, Any]) -> None:
    view = make_view(attributes)
    direct = _speedups.genai_extract(view, attributes, genai._NATIVE_CONFIG)
    got, want = _extract_both(attributes, view)
    assert got == want
    assert got.problems == want.problems
    if direct is not None:
        direct.error = want.error
        assert direct == want and not want.problems


CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4.1",
    "gen_ai.usage.input_tokens": 10,
    "gen_ai.usage.output_tokens": 5,
    "gen_ai.response.finish_reasons": ["tool_call"],
    "gen_ai.input.messages": json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": "Be “brief”.\n"}]},
            {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        ],
        ensure_ascii=False,
    ),
    "gen_ai.output.messages": json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "s", "arguments": {"q": 1}}],
                "finish_reason": "tool_call",
            }
        ]
    ),
}
TOOL = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "s",
    "gen_ai.tool.call.id": "c1",
    "gen_ai.tool.call.arguments": '{"q": 1}',
    "gen_ai.tool.call.result": "found",
}


@needs_native
def test_genai_extract_takes_the_usual_spans() -> None:
    for attributes in (CHAT, TOOL, {"gen_ai.operation.name": "invoke_agent"}):
        view = make_view(dict(attributes))
        made = _speedups.genai_extract(view, view.attributes, genai._NATIVE_CONFIG)
        assert made is not None
        got, want = _extract_both(dict(attributes))
        assert got == want


def test_genai_extract_no_leaks() -> None:
    view = make_view(dict(CHAT))
    unusual = make_view({**CHAT, "gen_ai.input.messages": "[1]"})
    config = genai._NATIVE_CONFIG

    def call() -> None:
        _speedups.genai_extract(view, view.attributes, config)
        _speedups.genai_extract(unusual, unusual.attributes, config)
        expecting(lambda: _speedups.genai_extract(view, {}, ()), TypeError)()

    assert_leak_free(call, [view, unusual, *config], 20_000)


# --- span_drafts --------------------------------------------------------------------------------

call_ids = st.sampled_from([None, "", "c1", "c2", "c3"])
tool_names = st.sampled_from([None, "", "search", "read"])
arguments = st.sampled_from([None, '{"q": 1}', '{"q":1}', {"q": 1}, "[1, 2]", " {bad", 3, "OTel"])
draft_parts = st.builds(
    lambda t, c, i, n, a: (t, c, i, n, a),
    st.sampled_from(["text", "reasoning", "tool_call", "tool_call_response", "image"]),
    st.sampled_from([None, "", "a", "b", "same text"]),
    call_ids,
    tool_names,
    arguments,
)
draft_messages = st.lists(
    st.tuples(
        st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
        st.lists(draft_parts, max_size=3),
        st.sampled_from([None, "stop"]),
    ),
    max_size=3,
)
span_specs = st.one_of(
    st.fixed_dictionaries(
        {
            "operation": st.just("llm"),
            "system": st.lists(st.sampled_from(["s1", "s2"]), max_size=2),
            "inputs": draft_messages,
            "outputs": draft_messages,
            "finish": st.lists(st.sampled_from(["stop", "length"]), max_size=1),
            "error": st.sampled_from([None, "", "boom"]),
            "start": st.integers(0, 3),
        }
    ),
    st.fixed_dictionaries(
        {
            "operation": st.just("tool"),
            "tool_name": tool_names,
            "call_id": call_ids,
            "arguments": arguments,
            "result": st.sampled_from([None, "r", {"a": 1}]),
            "error": st.sampled_from([None, "boom"]),
            "start": st.integers(0, 3),
        }
    ),
)


def build_span(spec: dict[str, Any], index: int) -> NormalizedSpan:
    view = make_view({}, span_id=f"{index + 1:016x}", start=spec["start"])
    span = NormalizedSpan(view, "otel_genai", spec["operation"])
    span.error = spec["error"]
    if spec["operation"] == "llm":

        def messages(raw: list[Any]) -> list[Message]:
            return [
                Message(role, [Part(t, c, i, n, a) for t, c, i, n, a in raw_parts], finish)
                for role, raw_parts, finish in raw
            ]

        span.system_instructions = list(spec["system"])
        span.input_messages = messages(spec["inputs"])
        span.output_messages = messages(spec["outputs"])
        span.finish_reasons = list(spec["finish"])
        span.model, span.input_tokens = "m", 3
    else:
        span.tool_name = spec["tool_name"]
        span.tool_call_id = spec["call_id"]
        span.tool_arguments = spec["arguments"]
        span.tool_result = spec["result"]
    return span


def _drafted(specs: list[dict[str, Any]]) -> tuple[Any, ...]:
    builder = TrajectoryBuilder("t")
    added = [
        [list(vars(step).items()) for step in builder.add(build_span(spec, i))]
        for i, spec in enumerate(specs)
    ]
    state = builder._state
    drafts = [(key, list(fields.items())) for key, fields in builder._drafts]
    trajectory = builder.build()
    return (
        added,
        drafts,
        state.seen_ids,
        list(state.content_counts.items()),
        {k: (v[0], list(v[1].items())) for k, v in state.call_steps.items()},
        list(state.call_names.items()),
        state.pending_calls,
        state.anonymous,
        [list(vars(step).items()) for step in trajectory.steps],
    )


@SETTINGS
@given(st.lists(span_specs, max_size=6))
def test_span_drafts_parity(specs: list[dict[str, Any]]) -> None:
    got = _drafted(specs)
    with pure_python():
        want = _drafted(specs)
    assert got == want


@needs_native
def test_span_drafts_takes_the_usual_spans() -> None:
    state = steps._State()
    llm = build_span(
        {
            "operation": "llm",
            "system": ["s"],
            "inputs": [("user", [("text", "q", None, None, None)], None)],
            "outputs": [("assistant", [("tool_call", None, "c1", "search", '{"q": 1}')], "stop")],
            "finish": ["stop"],
            "error": None,
            "start": 1,
        },
        0,
    )
    tool = build_span(
        {
            "operation": "tool",
            "tool_name": "search",
            "call_id": "c1",
            "arguments": '{"q": 1}',
            "result": "r",
            "error": None,
            "start": 2,
        },
        1,
    )
    for span in (llm, tool):
        assert _speedups.span_drafts(span, state, steps._NATIVE_DRAFTING) is not None
    assert state.pending_calls == [] and ("tool_result", "c1") in state.seen_ids


def test_span_drafts_unusual_types_change_nothing() -> None:
    class Role(str):
        pass

    state = steps._State()
    span = build_span(
        {
            "operation": "llm",
            "system": ["s"],
            "inputs": [("user", [("text", "q", None, None, None)], None)],
            "outputs": [],
            "finish": [],
            "error": None,
            "start": 1,
        },
        0,
    )
    span.input_messages.append(Message(Role("user"), [Part("text", "other")]))
    assert _speedups.span_drafts(span, state, steps._NATIVE_DRAFTING) is None
    assert state == steps._State()
    agent = NormalizedSpan(make_view({}), "otel_genai", "agent")
    assert _speedups.span_drafts(agent, state, steps._NATIVE_DRAFTING) is None


def test_span_drafts_no_leaks() -> None:
    specs = [
        {
            "operation": "llm",
            "system": ["s"],
            "inputs": [
                (
                    "user",
                    [("text", "q", None, None, None), ("tool_call", None, "", "x", "[1]")],
                    None,
                ),
                ("tool", [("tool_call_response", "r", "", "x", None)], None),
            ],
            "outputs": [("assistant", [("tool_call", None, "c1", "search", '{"q": 1}')], "stop")],
            "finish": ["stop"],
            "error": "boom",
            "start": 1,
        },
        {
            "operation": "tool",
            "tool_name": "search",
            "call_id": None,
            "arguments": '{"q": 1}',
            "result": {"a": 1},
            "error": None,
            "start": 2,
        },
    ]
    spans = [build_span(spec, i) for i, spec in enumerate(specs)]

    def call() -> None:
        state = steps._State()
        for span in spans:
            _speedups.span_drafts(span, state, steps._NATIVE_DRAFTING)
        expecting(lambda: _speedups.span_drafts(spans[0], state, ()), TypeError)()

    assert_leak_free(call, [*spans], 10_000)


def test_genai_extract_error_spans() -> None:
    view = SpanView.from_json(
        {
            "traceId": "a" * 32,
            "spanId": "2" * 16,
            "name": "chat m",
            "status": {"code": 2, "message": "rate limited"},
        }
    )
    view._attributes = dict(CHAT)
    got, want = _extract_both(dict(CHAT), view)
    assert got == want and got.error == "rate limited"
    view._attributes = {**CHAT, "error.type": "Timeout"}
    got, want = _extract_both(view._attributes, view)
    assert got == want and got.error == "rate limited"


# --- steps_from_drafts ---------------------------------------------------------------------------


@SETTINGS
@given(st.lists(span_specs, max_size=5), st.booleans())
def test_steps_from_drafts_parity(specs: list[dict[str, Any]], with_runs: bool) -> None:
    builder = TrajectoryBuilder("t")
    for i, spec in enumerate(specs):
        builder.add(build_span(spec, i))
    drafts = list(builder._drafts)
    run_of_span = {f"{1:016x}": "run-1"} if with_runs else None
    got = _speedups.steps_from_drafts(Step, drafts, run_of_span, "default")
    with pure_python():
        want = steps._steps_of(drafts, run_of_span, "default")
    assert [list(vars(s).items()) for s in got] == [list(vars(s).items()) for s in want]


def test_steps_from_drafts_errors_and_leaks() -> None:
    drafts = [((1, 1, "s", 0), {"kind": "user", "text": "x", "start_ns": 1, "end_ns": 1})]
    for bad in ([(1, 2)], [((1,), {})], ("not", "a list")):
        with pytest.raises(TypeError):
            _speedups.steps_from_drafts(Step, bad, None, "")
    with pytest.raises(TypeError):
        _speedups.steps_from_drafts(int, drafts, None, "")

    def call() -> None:
        _speedups.steps_from_drafts(Step, drafts, {"s": "r"}, "")
        _speedups.steps_from_drafts(Step, drafts, None, "")
        expecting(lambda: _speedups.steps_from_drafts(Step, [(1, 2)], None, ""), TypeError)()

    assert_leak_free(call, [Step, *drafts[0]], 20_000)


@needs_native
def test_steps_are_made_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    native = _speedups.steps_from_drafts

    def counting(*args: Any) -> Any:
        calls.append(len(args[1]))
        return native(*args)

    native_add = _speedups.builder_add

    def counting_add(*args: Any) -> Any:
        made = native_add(*args)
        calls.append(len(made))
        return made

    monkeypatch.setattr(_speedups, "steps_from_drafts", counting)
    monkeypatch.setattr(_speedups, "builder_add", counting_add)
    builder = TrajectoryBuilder("t")
    builder.add(
        build_span(
            {
                "operation": "tool",
                "tool_name": "s",
                "call_id": "c",
                "arguments": None,
                "result": "r",
                "error": None,
                "start": 1,
            },
            0,
        )
    )
    builder.build()
    assert calls == [2, 2]


# --- the trace's message memo ----------------------------------------------------------------

history_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "parts": st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "tool_call"]), "content": texts}
            ),
            max_size=2,
        ),
    }
)


@st.composite
def conversations(draw: st.DrawFn) -> list[str]:
    """Input message texts of successive chat spans: each mostly the last one and more."""
    history: list[Any] = []
    texts_out: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        if history and draw(st.booleans()):
            history = history[: draw(st.integers(0, len(history)))]  # a shorter context
        history = history + draw(st.lists(history_message, max_size=2))
        indent = draw(st.sampled_from([None, None, 1]))
        text = json.dumps(history, ensure_ascii=draw(st.booleans()), indent=indent)
        texts_out.append(text + draw(st.sampled_from(["", " ", "\n", "x", ",]"])))
    return texts_out


@SETTINGS
@given(conversations())
def test_genai_extract_memo_parity(inputs: list[str]) -> None:
    memo: list[Any] = [None, None, None]
    for text in inputs:
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": text}
        view = make_view(attributes)
        got = genai.extract(view, [], memo)
        with pure_python():
            want = genai.extract(view, [])
        assert got == want
        assert got.problems == want.problems


@needs_native
def test_genai_extract_memo_reuses_messages() -> None:
    first = json.loads(CHAT["gen_ai.input.messages"])
    memo: list[Any] = [None, None, None]
    a = genai.extract(make_view(dict(CHAT)), [], memo)
    more = [*first, {"role": "user", "parts": []}]
    longer = {**CHAT, "gen_ai.input.messages": json.dumps(more, ensure_ascii=False)}
    b = genai.extract(make_view(longer), [], memo)
    assert b.input_messages[0] is a.input_messages[0]
    assert b.input_messages[1] is a.input_messages[1]
    assert len(b.input_messages) == 3 and memo[1] is b.input_messages


def test_genai_extract_memo_no_leaks() -> None:
    longer = {**CHAT, "gen_ai.input.messages": CHAT["gen_ai.input.messages"][:-1] + ", {}]"}
    views = [make_view(dict(CHAT)), make_view(longer)]
    config = genai._NATIVE_CONFIG

    def call() -> None:
        memo: list[Any] = [None, None, None]
        for view in views:
            _speedups.genai_extract(view, view.attributes, config, memo)
        expecting(lambda: _speedups.genai_extract(views[0], {}, config, [1]), TypeError)()

    assert_leak_free(call, [*views, *config], 10_000)
