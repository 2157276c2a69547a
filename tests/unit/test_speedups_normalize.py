"""`genai_normalize`: the usual OTel GenAI span decided and mapped in one C call.

For views located in their request's bytes, the C call reads the attributes from those bytes
and the message attributes straight from their UTF-8, leaving their str values on the wire until
`SpanView.attributes` is asked for. Whatever it answers must be what `normalize` makes on the
pure-Python path (upb views, `json.loads`, the dataclasses), and the view's attributes, asked for
afterwards, what upb decodes; None (the Python code then runs) is always allowed, but the usual
spans must take the C path.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracehound import _speedups, _wire, conventions
from tracehound.conventions import NormalizedSpan, normalize
from tracehound.spans import ResourceView, SpanView, iter_proto_spans
from tracehound.steps import _NATIVE_ADDING, TrajectoryBuilder

SETTINGS = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
needs_native = pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off",
)

TRACE_ID = bytes(range(16))


def any_value(value: Any) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        out = AnyValue()
        out.array_value.values.extend(any_value(v) for v in value)
        return out
    out = AnyValue()
    out.kvlist_value.values.extend(KeyValue(key=k, value=any_value(v)) for k, v in value.items())
    return out


def request_of(spans: list[dict[str, Any]], scope: str = "openai") -> bytes:
    """A request of spans given as {"name", "attributes": [(key, value), ...], "events"}."""
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.scope.name = scope
    for n, spec in enumerate(spans, 1):
        span = scope_spans.spans.add(
            trace_id=TRACE_ID,
            span_id=n.to_bytes(8, "big"),
            name=spec["name"],
            start_time_unix_nano=100 * n,
            end_time_unix_nano=100 * n + 50,
        )
        if spec.get("error"):
            span.status.code = 2
            span.status.message = "boom"
        if "status" in spec:
            span.status.code, span.status.message = spec["status"]
        if "times" in spec:
            span.start_time_unix_nano, span.end_time_unix_nano = spec["times"]
        for key, value in spec["attributes"]:
            span.attributes.add(key=key, value=any_value(value))
        for event in spec.get("events", ()):
            span.events.add(name=event, time_unix_nano=1)
    return request.SerializeToString()


def wire_views(raw: bytes) -> list[SpanView]:
    """Views made in C from the bytes, as the sidecar makes them."""
    read = _wire.read_trace_views(raw, SpanView, ResourceView.from_wire)
    assert read is not None
    return [v for v in read[1] if v is not None]


def located_views(raw: bytes) -> list[SpanView]:
    """upb views located in the bytes (`iter_proto_spans` with `raw`)."""
    return list(iter_proto_spans(ExportTraceServiceRequest.FromString(raw), raw=raw))


def facts(span: NormalizedSpan | None) -> Any:
    if span is None:
        return None
    return [(f.name, getattr(span, f.name)) for f in dataclasses.fields(span) if f.name != "view"]


def reference(raw: bytes) -> tuple[list[Any], list[Any]]:
    """Facts and attributes on the pure-Python path (upb views, one memo for the trace)."""
    with pure_python():
        views = list(iter_proto_spans(ExportTraceServiceRequest.FromString(raw), raw=raw))
        memo: list[Any] = [None, None, None]
        mapped = [facts(normalize(view, None, memo)) for view in views]
        return mapped, [read_back(view) for view in views]


def read_back(view: SpanView) -> Any:
    """What a view gives when asked after normalization."""
    return (
        plain(view.attributes),
        view.start_ns,
        view.end_ns,
        view.status_code,
        view.status_message,
        view.kind,
    )


def plain(value: Any) -> Any:
    """Type- and order-preserving comparison form (NaN equal to itself)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return [(k, plain(v)) for k, v in value.items()]
    return (type(value).__name__, value)


def native_run(views: list[SpanView]) -> tuple[list[Any], list[Any]]:
    for view in views:  # names memoized as the engine's first spans of each name leave them
        conventions._name_flags(view.name)
    memo: list[Any] = [None, None, None]
    mapped = [facts(normalize(view, None, memo)) for view in views]
    return mapped, [read_back(view) for view in views]


# --- strategies ---------------------------------------------------------------------------------

texts = st.text(
    st.characters(blacklist_categories=["Cs"]) | st.sampled_from('“”—’é\n\t"\\/\x00\x1f😀'),
    max_size=40,
)
part = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_call", "tool_call_response", "thinking", "x"])},
    optional={
        "content": st.none() | texts | texts | st.integers(),
        "id": st.none() | st.sampled_from(["", "c1", "c2"]),
        "name": st.none() | st.sampled_from(["", "search"]),
        "arguments": st.none() | st.just({"q": "x"}) | st.just('{"q": 1}'),
        "response": st.none() | texts,
        "n": st.integers() | st.floats() | st.booleans(),
    },
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", ""])},
    optional={
        "parts": st.lists(part | texts, max_size=3),
        "finish_reason": st.none() | st.sampled_from(["", "stop"]),
    },
)


@st.composite
def message_json(draw: st.DrawFn, history: list[Any]) -> str:
    """A messages document: often the history so far and more (chat spans resend it)."""
    if history and draw(st.booleans()):
        del history[draw(st.integers(0, len(history))) :]
    history.extend(draw(st.lists(message, max_size=2)))
    text = json.dumps(
        history,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, None, 1])),
    )
    return text + draw(st.sampled_from(["", "", "", "", " ", "\n", "x", ",]"]))


ints = st.integers(-(2**63), 2**63 - 1)
odd_message_values = st.sampled_from(["[", "{}", "[1]", "", "  [ ]  ", '{"role": "user"}']) | (
    ints | st.lists(ints, max_size=2)
)


@st.composite
def genai_span(draw: st.DrawFn, history: list[Any]) -> dict[str, Any]:
    name = draw(
        st.sampled_from(
            ["chat m"] * 4 + ["execute_tool t", "invoke_agent a", "agent run", "GET /x"]
        )
    )
    attributes: list[tuple[str, Any]] = []
    if draw(st.integers(0, 3)):
        attributes.append(("gen_ai.operation.name", name.partition(" ")[0]))
    optional = {
        "gen_ai.provider.name": st.sampled_from(["openai", ""]),
        "gen_ai.system": st.just("openai"),
        "gen_ai.request.model": st.sampled_from(["m", ""]),
        "gen_ai.usage.input_tokens": st.integers(-5, 10**12) | st.just(2.0),
        "gen_ai.usage.output_tokens": st.integers(0, 9),
        "gen_ai.response.finish_reasons": st.lists(st.sampled_from(["stop", ""]), max_size=2),
        "gen_ai.tool.name": st.just("search"),
        "gen_ai.tool.call.id": st.sampled_from(["c1", ""]),
        "gen_ai.tool.call.result": texts,
        "gen_ai.agent.name": st.just("agent"),
        "error.type": st.just("Timeout"),
        "http.route": st.just("/x"),
        "payload": st.binary(max_size=4) | st.just({"a": [1, "b"]}),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=6)):
        attributes.append((key, draw(optional[key])))
    if draw(st.integers(0, 7)) == 0:  # mapped by the Python code
        attributes.append(("gen_ai.system_instructions", "be brief"))
    if draw(st.integers(0, 7)) == 0:  # claimed by OpenInference
        attributes.append(("llm.model_name", "m"))
    for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
        if draw(st.integers(0, 4)):
            value = draw(
                odd_message_values if draw(st.integers(0, 5)) == 0 else message_json(history)
            )
            attributes.append((key, value))
    if draw(st.integers(0, 9)) == 0 and attributes:  # a key written twice: the last one wins
        attributes.append((attributes[0][0], draw(st.sampled_from(["again", 3]))))
    draw(st.randoms()).shuffle(attributes)
    events = draw(st.sampled_from([[]] * 6 + [["db.query.result"], ["exception"]]))
    spec = {"name": name, "attributes": attributes, "events": events, "error": draw(st.booleans())}
    if draw(st.integers(0, 3)) == 0:
        spec["status"] = (
            draw(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, 2])),
            draw(texts),
        )
    if draw(st.booleans()):
        spec["times"] = (draw(st.integers(0, 2**64 - 1)), draw(st.integers(0, 2**64 - 1)))
    return spec


@st.composite
def genai_traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    history: list[Any] = []
    return draw(st.lists(genai_span(history), min_size=1, max_size=5))


# --- parity -------------------------------------------------------------------------------------


@needs_native
@SETTINGS
@given(genai_traces(), st.sampled_from(["openai", "openai", "openai", "pydantic-ai"]))
def test_normalize_parity(spans: list[dict[str, Any]], scope: str) -> None:
    raw = request_of(spans, scope)
    want = reference(raw)
    assert native_run(wire_views(raw)) == want
    assert native_run(located_views(raw)) == want


@needs_native
@SETTINGS
@given(st.binary(min_size=1, max_size=6), st.integers(0, 60))
def test_bytes_that_are_not_utf8_decide_as_upb_does(junk: bytes, at: int) -> None:
    """A message string whose bytes are replaced on the wire: invalid UTF-8 makes upb refuse
    the span; valid bytes must read as their decoded str does."""
    text = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 64}]}])
    spans = [{"name": "chat m", "attributes": [("gen_ai.input.messages", text)]}]
    raw = request_of(spans)
    marker = text.encode()
    where = raw.index(marker) + min(at, len(marker) - len(junk))
    raw = raw[:where] + junk + raw[where + len(junk) :]
    try:
        want: Any = reference(raw)
    except Exception as exc:  # upb refuses the bytes (invalid UTF-8)
        want = type(exc)
    for views in (wire_views, located_views):
        try:
            got: Any = native_run(views(raw))
        except Exception as exc:
            got = type(exc)
        assert got == want


# --- the usual spans take the C path ------------------------------------------------------------

CHAT_INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": "Be “brief”.\n"}]},
    {"role": "user", "parts": [{"type": "text", "content": "what is \\u00e9? \U0001f600"}]},
]
CHAT = {
    "name": "chat gpt-4.1",
    "attributes": [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4.1"),
        ("gen_ai.usage.input_tokens", 10),
        ("gen_ai.input.messages", json.dumps(CHAT_INPUT, ensure_ascii=False)),
        (
            "gen_ai.output.messages",
            json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "text", "content": "sure"},
                            {"type": "tool_call", "id": "c1", "name": "s", "arguments": {"q": 1}},
                        ],
                        "finish_reason": "tool_call",
                    }
                ]
            ),
        ),
    ],
}
TOOL = {
    "name": "execute_tool s",
    "attributes": [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "s"),
        ("gen_ai.tool.call.id", "c1"),
        ("gen_ai.tool.call.result", "found it"),
    ],
}
LATER_CHAT = {
    "name": "chat gpt-4.1",
    "attributes": [
        ("gen_ai.operation.name", "chat"),
        (
            "gen_ai.input.messages",
            json.dumps([*CHAT_INPUT, {"role": "tool", "parts": []}], ensure_ascii=False),
        ),
    ],
}


@needs_native
@pytest.mark.parametrize("make_views", [wire_views, located_views])
def test_usual_spans_take_the_c_path(make_views: Any) -> None:
    raw = request_of([CHAT, TOOL, LATER_CHAT])
    views = make_views(raw)
    memo: list[Any] = [None, None, None]
    mapped = []
    for view in views:
        conventions._name_flags(view.name)
        span = _speedups.genai_normalize(view, conventions._NATIVE_NORMALIZE, memo)
        assert span is not None
        mapped.append(span)
    # the chat spans' message strings are left on the wire until asked for (not for the keys)
    assert views[0]._attributes is None and views[0]._pending is not None
    assert views[0].attribute_keys == tuple(key for key, _ in CHAT["attributes"])
    assert views[0]._attributes is None
    assert isinstance(views[1]._attributes, dict)  # nothing left: the attributes as decoded
    # the later chat span reuses the messages its conversation had
    assert mapped[2].input_messages[1] is mapped[0].input_messages[1]
    assert [facts(span) for span in mapped] == reference(raw)[0]
    assert [read_back(view) for view in views] == reference(raw)[1]
    assert views[0]._pending is None


@needs_native
def test_views_asked_for_their_attributes_first_take_the_c_path() -> None:
    raw = request_of([CHAT])
    view = wire_views(raw)[0]
    attributes = view.attributes
    conventions._name_flags(view.name)
    span = _speedups.genai_normalize(view, conventions._NATIVE_NORMALIZE, [None, None, None])
    assert span is not None and view.attributes is attributes
    assert facts(span) == reference(raw)[0][0]


@needs_native
def test_engine_spans_take_the_c_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = _speedups.genai_normalize

    def counted(*args: Any) -> Any:
        made = real(*args)
        calls.append(made is not None)
        return made

    monkeypatch.setattr(_speedups, "genai_normalize", counted)
    raw = request_of([CHAT, TOOL, LATER_CHAT, CHAT])
    memo: list[Any] = [None, None, None]
    for view in wire_views(raw):
        normalize(view, None, memo)
    assert calls[-1] and sum(calls) >= 2


# --- bad arguments, leaks -------------------------------------------------------------------------


@needs_native
def test_genai_normalize_no_leaks() -> None:
    raw = request_of([CHAT, TOOL, LATER_CHAT, {**CHAT, "events": ["exception"]}])
    config = conventions._NATIVE_NORMALIZE
    for view in wire_views(raw):
        conventions._name_flags(view.name)

    def call() -> None:
        memo: list[Any] = [None, None, None]
        for view in wire_views(raw):
            _speedups.genai_normalize(view, config, memo)
            view.attributes  # noqa: B018 - completed from what the call left
        expecting(lambda: _speedups.genai_normalize(None, (), memo), TypeError)()
        expecting(lambda: _speedups.genai_normalize(None, config, [1]), TypeError)()

    # (not the small int in config: other code holds and drops references to it)
    assert_leak_free(call, [raw, *config[:2], *config[3:]], 5_000)


# --- SlotProperty -------------------------------------------------------------------------------


class _Lazy:
    __slots__ = ("_value", "calls")

    def __init__(self) -> None:
        self.calls = 0

    def _read(self) -> Any:
        self.calls += 1
        value = getattr(self, "_value", None)
        if value is None:
            value = self._value = "read"
        return value


@needs_native
def test_slot_property_reads_the_slot_else_calls() -> None:
    prop = _speedups.SlotProperty(_Lazy.__dict__["_value"], _Lazy._read)
    lazy = _Lazy()
    assert prop.__get__(lazy, _Lazy) == "read" and lazy.calls == 1  # unset: the function
    assert prop.__get__(lazy, _Lazy) == "read" and lazy.calls == 1  # set: the slot
    lazy._value = None
    assert prop.__get__(lazy, _Lazy) == "read" and lazy.calls == 2  # None: the function
    assert prop.__get__(None, _Lazy) is prop and prop.fget is _Lazy._read
    with pytest.raises(AttributeError):  # not a _Lazy: the function decides, and fails
        prop.__get__(object(), object)
    with pytest.raises(AttributeError):
        prop.__set__(lazy, 1)
    with pytest.raises(TypeError):
        _speedups.SlotProperty(property(_Lazy._read), _Lazy._read)
    with pytest.raises(TypeError):
        _speedups.SlotProperty(_Lazy.__dict__["_value"], 3)


@needs_native
def test_span_view_fields_are_read_in_c() -> None:
    for name in ("start_ns", "end_ns", "status_code", "attributes", "events"):
        assert isinstance(SpanView.__dict__[name], _speedups.SlotProperty), name
    view = wire_views(request_of([CHAT]))[0]
    with pytest.raises(AttributeError):
        view.start_ns = 3  # type: ignore[misc]


def test_slot_property_no_leaks() -> None:
    if _wire._native is None:
        pytest.skip("TRACEHOUND_PURE_PYTHON=1: the C path is off")
    prop = _speedups.SlotProperty(_Lazy.__dict__["_value"], _Lazy._read)
    lazy = _Lazy()

    def call() -> None:
        lazy._value = None
        prop.__get__(lazy, _Lazy)
        prop.__get__(lazy, _Lazy)
        expecting(lambda: prop.__set__(lazy, 1), AttributeError)()
        _speedups.SlotProperty(_Lazy.__dict__["_value"], _Lazy._read)

    assert_leak_free(call, [prop, lazy], 20_000)


@needs_native
def test_what_a_held_span_keeps_is_mostly_not_tracked() -> None:
    """A trace's views and normalized spans are held until it ends: the lists and tuples they
    hold that can be in no reference cycle are left out of the cycle collector's walks."""
    raw = request_of([CHAT, TOOL])
    views = wire_views(raw)
    memo: list[Any] = [None, None, None]
    for view in views:
        conventions._name_flags(view.name)
    spans = [_speedups.genai_normalize(view, conventions._NATIVE_NORMALIZE, memo) for view in views]
    assert not gc.is_tracked(views[1]._wire_at) and not gc.is_tracked(views[1]._events)
    for span in spans:
        for name in (
            "finish_reasons",
            "system_instructions",
            "input_messages",
            "output_messages",
            "history",
            "documents",
            "problems",
        ):
            assert not gc.is_tracked(getattr(span, name)), name
        span.problems.append("still a list")
        assert span.problems == ["still a list"]


# --- messages read straight from their JSON -------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
json_values = (
    json_scalars
    | st.lists(json_scalars, max_size=3)
    | st.dictionaries(texts, json_scalars | st.lists(json_scalars, max_size=2), max_size=3)
)
part_keys = st.sampled_from(
    ["type", "kind", "content", "text", "id", "name", "arguments", "response", "result", "x"]
)
part_values = (
    st.sampled_from(
        ["text", "tool_call", "tool_call_response", "thinking", "tool_result", "", "c1"]
    )
    | json_values
)


def _key(draw: st.DrawFn, key: str) -> str:
    """A key as JSON text, sometimes with an escape (the same key to json.loads)."""
    text = json.dumps(key)
    if key and draw(st.integers(0, 5)) == 0:
        text = '"' + f"\\u{ord(key[0]):04x}" + json.dumps(key)[2:]
    return text


@st.composite
def json_object_text(draw: st.DrawFn, members: list[tuple[str, str]]) -> str:
    space = draw(st.sampled_from(["", " ", "\n  "]))
    inner = f",{space}".join(f"{_key(draw, k)}:{space}{v}" for k, v in members)
    return "{" + space + inner + space + "}"


@st.composite
def message_documents(draw: st.DrawFn) -> str:
    messages = []
    for _ in range(draw(st.integers(0, 3))):
        members: list[tuple[str, str]] = []
        for key in draw(
            st.lists(
                st.sampled_from(["role", "parts", "finish_reason", "content", "y"]), max_size=5
            )
        ):
            if key == "parts" and draw(st.integers(0, 5)):
                parts = []
                for _ in range(draw(st.integers(0, 3))):
                    if draw(st.integers(0, 6)) == 0:
                        parts.append(json.dumps(draw(json_values)))
                        continue
                    pairs = [
                        (k, json.dumps(draw(part_values), ensure_ascii=draw(st.booleans())))
                        for k in draw(st.lists(part_keys, max_size=5))
                    ]
                    parts.append(draw(json_object_text(pairs)))
                members.append((key, "[" + ", ".join(parts) + "]"))
            else:
                value = draw(st.sampled_from(["user", "assistant", "", "stop"]) | json_values)
                members.append((key, json.dumps(value, ensure_ascii=False)))
        messages.append(draw(json_object_text(members)) if draw(st.integers(0, 9)) else "3")
    return "[" + ", ".join(messages) + "]" + draw(st.sampled_from(["", "", " ", "]"]))


@needs_native
@SETTINGS
@given(st.lists(message_documents(), min_size=1, max_size=3))
def test_messages_read_from_json_as_json_loads_reads_them(documents: list[str]) -> None:
    spans = [
        {
            "name": "chat m",
            "attributes": [("gen_ai.operation.name", "chat"), ("gen_ai.input.messages", doc)],
        }
        for doc in documents
    ]
    raw = request_of(spans)
    want = reference(raw)
    assert native_run(wire_views(raw)) == want
    # the str path (attributes decoded before), with its memo
    views = wire_views(raw)
    for view in views:
        view.attributes  # noqa: B018
    assert native_run(views) == want


# --- builder_add ----------------------------------------------------------------------------------


@needs_native
def test_builder_add_declines_other_containers_and_does_not_leak() -> None:
    raw = request_of([CHAT, TOOL, CHAT])
    memo: list[Any] = [None, None, None]
    for view in wire_views(raw):
        conventions._name_flags(view.name)
    spans = [normalize(view, None, memo) for view in wire_views(raw)]
    odd = TrajectoryBuilder("t")
    odd._spans = {}.items()  # type: ignore[assignment]
    assert _speedups.builder_add(odd, spans[0], _NATIVE_ADDING) is None

    def call() -> None:
        builder = TrajectoryBuilder("t")
        for span in spans:
            assert span is not None
            _speedups.builder_add(builder, span, _NATIVE_ADDING)
        expecting(lambda: _speedups.builder_add(builder, spans[0], ()), TypeError)()

    assert_leak_free(call, [*spans], 5_000)


@needs_native
def test_key_sets_are_asked_by_identity_and_value() -> None:
    """genai_normalize remembers which attribute keys are in its key sets: another set given
    next is asked again, not answered from what the first set said."""
    raw = request_of([CHAT])
    config = list(conventions._NATIVE_NORMALIZE)

    def mapped() -> bool:
        view = wire_views(raw)[0]
        conventions._name_flags(view.name)
        return _speedups.genai_normalize(view, tuple(config), [None, None, None]) is not None

    assert mapped()
    # a key another family claims (a set of its own): the Python code decides
    config[3] = frozenset(["".join(["gen_ai.", "operation.name"])])
    assert not mapped()
    config[3] = frozenset(["gen_ai.operation.other"])
    assert mapped()
    config[3] = conventions._CLAIMED_BEFORE_GENAI
    assert mapped()
    # not a frozenset: asked every time
    config[3] = {"gen_ai.operation.name"}
    assert not mapped()
    config[3].clear()
    assert mapped()
