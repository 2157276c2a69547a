"""`tracehound._speedups.convert_messages` (C) against `parse_messages`, the Python reference.

`convert_messages(data, Part, Message)` takes what `parse_json_value` returned for
`gen_ai.input.messages` / `gen_ai.output.messages`. Whenever it answers (anything but None), the
answer must be exactly what `parse_messages` builds from the same data with no problem recorded:
the same messages and parts, field by field, with the same types, and the very string objects of
the input as contents. None is always allowed (the caller then runs the Python code); exceptions
raised by the classes it calls propagate.
"""

from __future__ import annotations

import gc
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracehound import _speedups
from tracehound.conventions._messages import parse_messages
from tracehound.conventions.base import Message, Part

convert_messages = _speedups.convert_messages

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PART_FIELDS = ("type", "content", "id", "name", "arguments", "response")

# --- the oracle ----------------------------------------------------------------------------------


def _same_value(got: object, want: object, where: str) -> None:
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    assert got is want or got == want, f"{where}: {got!r} != {want!r}"


def assert_same(got: object, want: list[Message]) -> None:
    """`got` is `want`, field by field, with the same types; contents, arguments and responses
    are the very objects the Python code took from the input."""
    assert type(got) is list
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert type(g) is Message
        _same_value(g.role, w.role, f"[{i}].role")
        _same_value(g.finish_reason, w.finish_reason, f"[{i}].finish_reason")
        assert type(g.parts) is list
        assert len(g.parts) == len(w.parts), f"[{i}].parts"
        for j, (gp, wp) in enumerate(zip(g.parts, w.parts, strict=True)):
            assert type(gp) is Part
            for field in PART_FIELDS:
                _same_value(getattr(gp, field), getattr(wp, field), f"[{i}].parts[{j}].{field}")
            # strings are passed on, not copied; arguments and responses as they are
            assert gp.content is wp.content
            assert gp.arguments is wp.arguments
            assert gp.response is wp.response
        assert g == w


def check(data: Any, *, require_answer: bool = False) -> list[Message] | None:
    """convert_messages(data) is None or what parse_messages makes of data without a problem."""
    got = convert_messages(data, Part, Message)
    if got is None:
        assert not require_answer, f"no answer for {data!r}"
        return None
    problems: list[str] = []
    want = parse_messages(data, "x", problems)
    assert problems == []
    assert_same(got, want)
    return got


def python_problems(data: Any) -> list[str]:
    problems: list[str] = []
    parse_messages(data, "x", problems)
    return problems


# --- strategies ----------------------------------------------------------------------------------

TEXTS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "hello", "é😀 “quoted” — dash", "a\x00b", "\ud800"]),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=12,
)
KNOWN_TYPES = st.sampled_from(
    ["text", "tool_call", "tool_call_response", "reasoning", "thinking", "tool_result"]
)
PART_TYPES = st.one_of(
    KNOWN_TYPES,
    st.sampled_from(["image", "TEXT", "text ", "", None, 0, 1, 0.0, False, True, [], ["x"], {}]),
    st.text(max_size=20),
)
STR_OR_NONE = st.none() | TEXTS
IDS = st.one_of(STR_OR_NONE, st.integers(), st.sampled_from([0, 1.5, True, [], {"a": 1}]))
CONTENTS = st.one_of(STR_OR_NONE, JSON)
ROLES = st.one_of(
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.sampled_from(["", None, 0, False, 0.0, [], {}, 5, True, ["user"], {"a": 1}]),
    TEXTS,
)
FINISH = st.one_of(
    st.sampled_from(["stop", "length", "tool_call", "", None]), st.integers(), TEXTS, JSON
)

# every key optional, every value of every kind
MESSY_PART = st.fixed_dictionaries(
    {},
    optional={
        "type": PART_TYPES,
        "kind": PART_TYPES,
        "content": CONTENTS,
        "text": CONTENTS,
        "id": IDS,
        "name": IDS,
        "arguments": JSON,
        "response": CONTENTS,
        "result": CONTENTS,
    },
)
PARTS = st.one_of(MESSY_PART, TEXTS, JSON)
MESSY_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": ROLES,
        "parts": st.lists(PARTS, max_size=5) | JSON,
        "content": CONTENTS,
        "finish_reason": FINISH,
    },
)

# well-formed: what instrumentations write; convert_messages must answer for all of it
GOOD_TEXT = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "reasoning", "thinking", "image"])},
    optional={"content": STR_OR_NONE, "text": STR_OR_NONE},
)
GOOD_KIND = st.fixed_dictionaries(
    {"kind": st.sampled_from(["text", "thinking", "tool_call"]), "content": STR_OR_NONE},
    optional={"type": st.sampled_from(["", None])},
)
GOOD_CALL = st.fixed_dictionaries(
    {"type": st.just("tool_call")},
    optional={"id": STR_OR_NONE, "name": STR_OR_NONE, "arguments": JSON},
)
GOOD_RESPONSE = st.fixed_dictionaries(
    {"type": st.sampled_from(["tool_call_response", "tool_result"])},
    optional={"id": STR_OR_NONE, "name": STR_OR_NONE, "response": STR_OR_NONE, "result": JSON},
).filter(lambda p: "response" in p or p.get("result") is None or isinstance(p["result"], str))
GOOD_PART = st.one_of(GOOD_TEXT, GOOD_KIND, GOOD_CALL, GOOD_RESPONSE, TEXTS)
GOOD_MESSAGE = st.fixed_dictionaries(
    {"parts": st.lists(GOOD_PART, max_size=5)},
    optional={
        "role": st.sampled_from(["system", "user", "assistant", "tool", "", None]) | TEXTS,
        "finish_reason": STR_OR_NONE,
        "content": CONTENTS,  # ignored when there are parts
    },
)
GOOD_DATA = st.lists(GOOD_MESSAGE, max_size=5)
DATA = st.one_of(
    GOOD_DATA,
    st.lists(st.one_of(GOOD_MESSAGE, MESSY_MESSAGE, JSON), max_size=5),
    st.lists(MESSY_MESSAGE, max_size=3),
    JSON,
)


@SETTINGS
@given(DATA)
def test_parity_with_parse_messages(data: Any) -> None:
    check(data)


@SETTINGS
@given(GOOD_DATA)
def test_well_formed_messages_are_answered(data: list[dict[str, Any]]) -> None:
    check(data, require_answer=True)


@SETTINGS
@given(JSON)
def test_arbitrary_json(data: Any) -> None:
    check(data)
    check([data])
    check([{"role": "user", "parts": [data]}])
    check([{"role": "user", "parts": data}])


# --- each rule -----------------------------------------------------------------------------------


def one(parts: list[Any], **message: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": parts, **message}]


def test_data_that_is_not_a_list() -> None:
    for data in ({"role": "user", "parts": []}, None, "[]", b"[]", 5, (), ({"parts": []},)):
        assert convert_messages(data, Part, Message) is None
    assert python_problems({"role": "user", "parts": []})  # read as one message, with a problem
    assert check([], require_answer=True) == []


def test_messages_that_are_not_dicts() -> None:
    for bad in (None, "m", 5, [], [{"role": "user", "parts": []}]):
        data = [{"role": "user", "parts": []}, bad]
        assert convert_messages(data, Part, Message) is None
        assert python_problems(data)


def test_roles() -> None:
    for falsy in (None, "", 0, False, 0.0, [], {}):
        got = check([{"role": falsy, "parts": []}], require_answer=True)
        assert got == [Message("assistant", [])]
    assert check([{"parts": []}], require_answer=True) == [Message("assistant", [])]
    role = "".join(["us", "er"])
    got = check([{"role": role, "parts": []}], require_answer=True)
    assert got is not None
    assert got[0].role is role
    for truthy in (5, True, 1.5, math.nan, ["user"], {"a": 1}, b"user", object()):
        assert convert_messages([{"role": truthy, "parts": []}], Part, Message) is None


def test_parts_missing_or_not_a_list() -> None:
    for message in (
        {"role": "user"},
        {"role": "user", "content": "hi"},
        {"role": "user", "parts": None, "content": "hi"},
        {"role": "user", "parts": "hi"},
        {"role": "user", "parts": {"type": "text", "content": "hi"}},
        {"role": "user", "parts": ("hi",)},
    ):
        assert convert_messages([message], Part, Message) is None
    got = check([{"role": "user", "parts": [], "content": "ignored"}], require_answer=True)
    assert got == [Message("user", [])]


def test_bare_string_parts() -> None:
    text = "".join(["a ", "bare part"])
    got = check(one([text, ""]), require_answer=True)
    assert got is not None
    assert got[0].parts == [Part("text", text), Part("text", "")]
    assert got[0].parts[0].content is text


def test_parts_that_are_not_dicts() -> None:
    for bad in (None, 5, 1.5, True, [], ["text"], b"text"):
        data = one([{"type": "text", "content": "ok"}, bad])
        assert convert_messages(data, Part, Message) is None
        assert python_problems(data)


def test_part_type_or_kind() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"content": "c"}, "text"),
        ({"type": None, "content": "c"}, "text"),
        ({"type": "", "kind": "", "content": "c"}, "text"),
        ({"type": 0, "kind": None, "content": "c"}, "text"),
        ({"type": False, "kind": 0.0, "content": "c"}, "text"),
        ({"type": [], "kind": {}, "content": "c"}, "text"),
        ({"kind": "thinking", "content": "c"}, "reasoning"),
        ({"type": "", "kind": "image", "content": "c"}, "image"),
        ({"type": "reasoning", "kind": "text", "content": "c"}, "reasoning"),
        ({"type": "thinking", "content": "c"}, "reasoning"),
        ({"type": "Text", "content": "c"}, "Text"),
        ({"type": "texts", "content": "c"}, "texts"),
        ({"type": "tool_cal", "content": "c"}, "tool_cal"),
        ({"type": "é", "content": "c"}, "é"),
    ]
    for part, ptype in cases:
        got = check(one([part]), require_answer=True)
        assert got is not None
        assert got[0].parts == [Part(ptype, "c")]
    for bad in (5, 1.5, True, ["text"], {"a": 1}, math.nan):
        assert convert_messages(one([{"type": bad, "content": "c"}]), Part, Message) is None
        assert convert_messages(one([{"kind": bad, "content": "c"}]), Part, Message) is None


def test_text_content() -> None:
    content = "".join(["the ", "content"])
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({"type": "text", "content": content}, content),
        ({"type": "text", "text": content}, content),
        ({"type": "text", "content": None, "text": "not read"}, None),
        ({"type": "text"}, None),
        ({"type": "text", "content": "", "text": "not read"}, ""),
        ({"type": "image", "text": content}, content),
        ({"kind": "text", "content": content}, content),
    ]
    for part, want in cases:
        got = check(one([part]), require_answer=True)
        assert got is not None
        assert got[0].parts[0].content == want
        if want is not None:
            assert got[0].parts[0].content is part.get("content", part.get("text"))
    for bad in (5, 1.5, True, ["a"], {"a": "b"}, b"bytes"):
        for part in ({"type": "text", "content": bad}, {"type": "text", "text": bad}):
            assert convert_messages(one([part]), Part, Message) is None
        assert convert_messages(one([{"type": "reasoning", "content": bad}]), Part, Message) is None


def test_tool_calls() -> None:
    arguments = {"query": "q", "limit": 3}
    for args in (arguments, "{}", None, 5, [1], object()):
        got = check(
            one([{"type": "tool_call", "id": "c1", "name": "f", "arguments": args}]),
            require_answer=True,
        )
        assert got is not None
        assert got[0].parts == [Part("tool_call", None, "c1", "f", args)]
        assert got[0].parts[0].arguments is args
    got = check(
        one([{"type": "tool_call", "id": "", "name": None, "content": "ignored"}]),
        require_answer=True,
    )
    assert got is not None
    assert got[0].parts == [Part("tool_call", None, None, None, None)]
    got = check(one([{"kind": "tool_call"}]), require_answer=True)
    assert got is not None
    assert got[0].parts == [Part("tool_call")]
    for key in ("id", "name"):
        for bad in (5, 0, 1.5, True, False, ["a"], {}):
            part = {"type": "tool_call", "id": "c1", "name": "f", key: bad}
            assert convert_messages(one([part]), Part, Message) is None


def test_tool_call_responses() -> None:
    text = "".join(["the ", "result"])
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({"response": text}, text),
        ({"result": text}, text),
        ({"response": text, "result": "not read"}, text),
        ({"response": None, "result": "not read"}, None),
        ({}, None),
        ({"response": ""}, ""),
        ({"result": None}, None),
    ]
    for ptype in ("tool_call_response", "tool_result"):
        for fields, want in cases:
            part = {"type": ptype, "id": "c1", **fields}
            got = check(one([part], role="tool"), require_answer=True)
            assert got is not None
            assert got[0].parts == [Part("tool_call_response", want, "c1", None, None, want)]
            assert got[0].parts[0].content is got[0].parts[0].response
            if want is not None:
                assert got[0].parts[0].content is text or want == ""
    got = check(one([{"type": "tool_result", "id": "", "name": "f"}]), require_answer=True)
    assert got is not None
    assert got[0].parts == [Part("tool_call_response", None, None, "f")]
    # to_text would JSON-encode these: left to Python
    for bad in ({"a": 1}, [1], 5, 1.5, True, False):
        for fields in ({"response": bad}, {"result": bad}, {"response": bad, "result": "r"}):
            part = {"type": "tool_call_response", **fields}
            assert convert_messages(one([part]), Part, Message) is None
    # a bad result is not read when there is a response
    check(one([{"type": "tool_result", "response": "r", "result": {"a": 1}}]), require_answer=True)
    for key in ("id", "name"):
        for bad in (5, 0, True, ["a"]):
            part = {"type": "tool_call_response", "response": "r", key: bad}
            assert convert_messages(one([part]), Part, Message) is None


def test_finish_reasons() -> None:
    stop = "".join(["st", "op"])
    for finish, want in ((stop, stop), ("", None), (None, None)):
        got = check(one([], finish_reason=finish), require_answer=True)
        assert got is not None
        assert got[0].finish_reason == want
        if want is not None:
            assert got[0].finish_reason is stop
    assert check(one([]), require_answer=True) == [Message("user", [])]
    for bad in (0, 5, 1.5, True, False, [], ["stop"], {}):
        assert convert_messages(one([], finish_reason=bad), Part, Message) is None


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


class _Str(str):
    __slots__ = ()


def test_subclasses_are_left_to_python() -> None:
    good = {"type": "text", "content": "c"}
    for data in (
        _List([{"role": "user", "parts": [good]}]),
        [_Dict(role="user", parts=[good])],
        [{"role": "user", "parts": _List([good])}],
        one([_Dict(good)]),
        one([_Str("bare")]),
        one([{"type": _Str("text"), "content": "c"}]),
        one([{"type": "text", "content": _Str("c")}]),
        one([{"type": "tool_call", "id": _Str("c1")}]),
        one([{"type": "tool_call_response", "response": _Str("r")}]),
        [{"role": _Str("user"), "parts": [good]}],
        one([good], finish_reason=_Str("stop")),
    ):
        assert convert_messages(data, Part, Message) is None


def test_positional_arguments_passed() -> None:
    """Each class is called with the positional arguments the Python code passes."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    class RecPart:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append(("part", args, kwargs))

    class RecMessage:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append(("message", args, kwargs))

    args_ = {"a": 1}
    data = one(
        [
            {"type": "text", "content": "t"},
            "bare",
            {"type": "tool_call", "id": "c", "name": "f", "arguments": args_},
            {"type": "tool_result", "id": "c", "result": "r"},
            {"kind": "thinking", "text": "h"},
        ],
        finish_reason="stop",
    )
    got = convert_messages(data, RecPart, RecMessage)
    assert got is not None
    assert len(got) == 1
    assert type(got[0]) is RecMessage
    assert calls[:5] == [
        ("part", ("text", "t"), {}),
        ("part", ("text", "bare"), {}),
        ("part", ("tool_call", None, "c", "f", args_), {}),
        ("part", ("tool_call_response", "r", "c", None, None, "r"), {}),
        ("part", ("reasoning", "h"), {}),
    ]
    assert calls[5][0] == "message"
    assert calls[5][1][0] == "user"
    assert [type(p) for p in calls[5][1][1]] == [RecPart] * 5
    assert calls[5][1][2] == "stop"
    assert len(calls[5][1]) == 3
    assert calls[5][2] == {}
    assert len(calls) == 6


class _Boom(Exception):
    pass


class _RaisingPart:
    def __init__(self, *args: Any) -> None:
        if args[0] == "tool_call":
            raise _Boom(args)


class _RaisingMessage:
    def __init__(self, *args: Any) -> None:
        raise _Boom(args)


_GOOD_THEN_CALL = one(
    [{"type": "text", "content": "a"}, "b", {"type": "tool_call", "id": "c"}, "never built"]
)


def test_exceptions_propagate() -> None:
    with pytest.raises(_Boom):
        convert_messages(_GOOD_THEN_CALL, _RaisingPart, Message)
    with pytest.raises(_Boom):
        convert_messages(one(["a"]), Part, _RaisingMessage)
    # the data is left to Python before the class would be called
    assert convert_messages(one([5, {"type": "tool_call"}]), _RaisingPart, Message) is None


def test_bad_arguments() -> None:
    for args in ((), ([],), ([], Part), ([], Part, Message, None)):
        with pytest.raises(TypeError):
            convert_messages(*args)
    for part_type, message_type in ((None, Message), (Part, "Message"), (1, 2)):
        with pytest.raises(TypeError):
            convert_messages([], part_type, message_type)
    with pytest.raises(TypeError):
        convert_messages(data=[], part_type=Part, message_type=Message)


def test_input_changed_by_the_calls() -> None:
    """Classes that empty the input while it is read: no crash, the loops stop as Python's."""
    data: list[Any] = one(["a", "b", {"type": "tool_call", "id": "c", "arguments": {"x": 1}}])
    data.append({"role": "user", "parts": ["d"]})

    class Clearing:
        def __init__(self, *args: Any) -> None:
            self.args = args
            for message in data:
                message["parts"].clear()
                message.clear()
            data.clear()
            gc.collect()

    got = convert_messages(data, Clearing, Message)
    assert got is not None
    assert len(got) == 1
    assert [p.args for p in got[0].parts] == [("text", "a")]
    assert got[0].role == "user"


def test_documented() -> None:
    assert "parse_messages" in (convert_messages.__doc__ or "")
    assert "None" in (convert_messages.__doc__ or "")
    assert convert_messages.__text_signature__ == "($module, data, part_type, message_type, /)"


# --- the benchmark's workload --------------------------------------------------------------------


def _workload_messages() -> Iterator[Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import normalize_cost

    for raw in normalize_cost.make_workload("genai", 512):
        request = ExportTraceServiceRequest.FromString(raw)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for kv in span.attributes:
                        if kv.key in ("gen_ai.input.messages", "gen_ai.output.messages"):
                            yield json.loads(kv.value.string_value)


def test_benchmark_workload() -> None:
    n = 0
    for data in _workload_messages():
        check(data, require_answer=True)
        n += 1
    assert n == 2 * 512


# --- no leaks ------------------------------------------------------------------------------------


_CONTENT = "é😀 “content”"
_ARGS = {"query": "q", "limit": 3}
_LEAK_GOOD = [
    {"role": "system", "parts": [{"type": "text", "content": _CONTENT}]},
    {"role": None, "parts": [_CONTENT, {"kind": "thinking", "text": _CONTENT}]},
    {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "c1", "name": "f", "arguments": _ARGS},
            {"type": "tool_call", "id": "", "name": None},
        ],
        "finish_reason": "tool_call",
    },
    {"role": "tool", "parts": [{"type": "tool_result", "id": "c1", "result": _CONTENT}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "response": None, "result": "x"}]},
    {"role": "user", "parts": [], "finish_reason": ""},
]
# None half-way: after parts, messages (or both) were built
_LEAK_NONE = [
    [*_LEAK_GOOD, {"role": "user", "parts": [{"type": "text", "content": _CONTENT}, 5]}],
    [*_LEAK_GOOD, {"role": "user", "parts": ["a", {"type": "tool_call", "id": 7}]}],
    [*_LEAK_GOOD, {"role": "user", "parts": ["a", {"type": "tool_result", "response": [1]}]}],
    [*_LEAK_GOOD, {"role": "user", "parts": ["a", {"type": "text", "content": {}}]}],
    [*_LEAK_GOOD, {"role": "user", "parts": ["a", {"type": 5}]}],
    [*_LEAK_GOOD, {"role": "user", "parts": ["a"], "finish_reason": 1}],
    [*_LEAK_GOOD, {"role": 5, "parts": ["a"]}],
    [*_LEAK_GOOD, {"role": "user"}],
    [*_LEAK_GOOD, "not a message"],
]


def _containers(value: object) -> Iterator[object]:
    """Every list and dict in `value`, itself included (what the C code holds references to)."""
    if isinstance(value, (list, dict)):
        yield value
        for item in value.values() if isinstance(value, dict) else value:
            yield from _containers(item)


def test_leak_inputs_take_the_intended_paths() -> None:
    assert check(_LEAK_GOOD, require_answer=True) is not None
    for data in _LEAK_NONE:
        assert convert_messages(data, Part, Message) is None
    with pytest.raises(_Boom):
        convert_messages(_LEAK_GOOD, _RaisingPart, Message)


@pytest.mark.parametrize(
    ("call", "calls_per_call"),
    [
        pytest.param(lambda: convert_messages(_LEAK_GOOD, Part, Message), 1, id="good"),
        pytest.param(
            lambda: [convert_messages(d, Part, Message) for d in _LEAK_NONE],
            len(_LEAK_NONE),
            id="none-half-way",
        ),
        pytest.param(
            expecting(
                lambda: convert_messages(_LEAK_GOOD, _RaisingPart, Message), _Boom, TypeError
            ),
            1,
            id="part-raises",
        ),
        pytest.param(
            expecting(
                lambda: convert_messages(_LEAK_GOOD, Part, _RaisingMessage), _Boom, TypeError
            ),
            1,
            id="message-raises",
        ),
        pytest.param(
            expecting(lambda: convert_messages([], None, Message), _Boom, TypeError),
            1,
            id="type-error",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], calls_per_call: int) -> None:
    watched: list[object] = [_CONTENT, *_containers([_LEAK_GOOD, _LEAK_NONE])]
    assert_leak_free(call, [Part, Message, *watched], 100_000 // calls_per_call)


def test_made_objects_are_not_tracked_by_the_cycle_collector() -> None:
    """Messages and parts hold no container that could refer back to them: left untracked,
    the collector does not walk them for as long as their trace is held."""
    got = check(_LEAK_GOOD, require_answer=True)
    assert got is not None
    assert not gc.is_tracked(got)
    for message in got:
        assert not gc.is_tracked(message)
        assert not gc.is_tracked(message.parts)
        for part in message.parts:
            assert not gc.is_tracked(part)
