"""`tracehound._speedups.encode_key_values` (C) against the protobuf field API.

The bytes it returns, merged into a message (`MergeFromString` appends to repeated fields),
must leave the message exactly as `tracehound.server._otlp.set_attributes` leaves it through
upb's field API; for anything it does not encode exactly that way it answers None.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import pytest
from _leaks import assert_leak_free
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracehound import _accel, _speedups
from tracehound.emit import event_attributes
from tracehound.evaluators.base import EvaluationResult
from tracehound.server._otlp import (
    SPAN_ATTRIBUTES_TAG,
    add_event,
    evaluation_log_record,
    merge_attributes,
    set_attributes,
)

encode_key_values = _speedups.encode_key_values

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past int64: written as strings
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.sampled_from([0, 0.0, -0.0, "", b"", False, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1]),
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(0, 9)), children, max_size=3),
    ),
    max_leaves=20,
)
_keys = st.one_of(st.sampled_from(["tracehound.score", "a", "", "é", "gen_ai.x"]), st.text())


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value, {"k": value, 3: (value,)}]
    return value


def by_field_api(attributes: dict[str, Any]) -> Span:
    span = Span(name="chat")
    set_attributes(span.attributes, attributes)
    return span


def by_bytes(attributes: dict[str, Any]) -> Span:
    span = Span(name="chat")
    encoded = encode_key_values(attributes, SPAN_ATTRIBUTES_TAG)
    assert encoded is not None
    span.MergeFromString(encoded)
    return span


def same(a: Span, b: Span) -> bool:
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


@SETTINGS
@given(st.dictionaries(_keys, _values, max_size=6))
def test_the_bytes_make_the_message_the_field_api_makes(attributes: dict[str, Any]) -> None:
    assert same(by_bytes(attributes), by_field_api(attributes))


@pytest.mark.parametrize("levels", [2, 3, 4, 5])  # past _any_value's depth limit: str()
def test_deep_values_are_cut_as_the_field_api_cuts_them(levels: int) -> None:
    attributes = {"deep": _deep(levels)}
    assert same(by_bytes(attributes), by_field_api(attributes))


class Level(IntEnum):
    LOW = 1
    HUGE = 2**64


def test_values_in_each_form() -> None:
    attributes: dict[str, Any] = {
        "s": "x",
        "unicode": "é — \U0001f600",
        "t": True,
        "f": False,
        "i": -1,
        "big": 2**64,
        "enum": Level.LOW,
        "huge enum": Level.HUGE,
        "d": math.nan,
        "neg zero": -0.0,
        "b": b"\x00\xff",
        "ba": bytearray(b"ab"),
        "l": [1, "a", None, [], {}],
        "t2": (1.5,),
        "m": {"k": {"n": [True]}, 7: "int key"},
        "none": None,
        "": "empty key",
        "long": "x" * 70_000,  # a length over two varint bytes
    }
    assert same(by_bytes(attributes), by_field_api(attributes))


class Odd:
    def __str__(self) -> str:
        return "odd"


class Failing:
    def __str__(self) -> str:
        raise ValueError("no text")


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({1: "x"}, id="key-not-str"),
        pytest.param({"a": Odd()}, id="other-type"),
        pytest.param({"a": {1, 2}}, id="set"),
        pytest.param({"a": OrderedDict(k=1)}, id="dict-subclass"),
        pytest.param({"a": "\ud800"}, id="lone-surrogate"),
        pytest.param({"a": [1, "\udfff"]}, id="nested-lone-surrogate"),
        pytest.param({"a": {Failing(): 1}}, id="key-str-raises"),
        pytest.param(OrderedDict(a=1), id="attributes-not-a-dict"),
    ],
)
def test_what_it_leaves_to_the_field_api(attributes: Any) -> None:
    assert encode_key_values(attributes, SPAN_ATTRIBUTES_TAG) is None


def test_empty() -> None:
    assert encode_key_values({}, SPAN_ATTRIBUTES_TAG) == b""


@pytest.mark.parametrize("tag", [b"", b"123456", "J"])
def test_bad_tag(tag: Any) -> None:
    with pytest.raises(TypeError):
        encode_key_values({"a": 1}, tag)


# --- where the sidecar uses it --------------------------------------------------------------------


@pytest.fixture(params=["native", "pure-python"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure-python":
        monkeypatch.setattr(_accel, "_in_use", None)
    return str(request.param)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    existing=st.dictionaries(_keys, _values, max_size=3),
    attributes=st.dictionaries(_keys, _values, max_size=5),
    know=st.booleans(),
)
def test_merge_attributes_is_set_attributes(
    existing: dict[str, Any], attributes: dict[str, Any], know: bool
) -> None:
    span = Span(name="chat")
    set_attributes(span.attributes, existing)
    expected, merged = Span(), Span()
    expected.CopyFrom(span)
    merged.CopyFrom(span)
    set_attributes(expected.attributes, attributes)
    present = frozenset(existing) if know else None
    merge_attributes(merged, SPAN_ATTRIBUTES_TAG, attributes, present)
    assert same(merged, expected)


def test_merge_attributes_takes_the_bytes_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    class Spy:
        def encode_key_values(self, attributes: object, tag: bytes) -> bytes | None:
            calls.append(attributes)
            return encode_key_values(attributes, tag)

    monkeypatch.setattr(_accel, "_in_use", Spy())
    span = Span()
    span.attributes.add(key="tracehound.score").value.int_value = 1
    merge_attributes(span, SPAN_ATTRIBUTES_TAG, {"new": 1}, {"tracehound.score"})
    assert calls == [{"new": 1}]
    # a key already there: replaced through the field API, never appended as bytes
    merge_attributes(span, SPAN_ATTRIBUTES_TAG, {"tracehound.score": 2}, {"tracehound.score"})
    assert calls == [{"new": 1}]
    assert [kv.key for kv in span.attributes] == ["tracehound.score", "new"]
    assert span.attributes[0].value == AnyValue(int_value=2)


def test_events_and_log_records_both_ways(path: str) -> None:
    result = EvaluationResult(
        name="tracehound.loops",
        evaluator="loops",
        evaluator_version="1",
        span_id="00" * 8,
        score_value=2.0,
        score_label="loop",
        explanation="called search 3 times — é",
        attributes={"tracehound.loops.kinds": ["repeat", "cycle"]},
    )
    record = evaluation_log_record(result, "01" * 16, "02" * 8, 123)
    expected = LogRecord()
    expected.CopyFrom(record)
    del expected.attributes[:]
    set_attributes(expected.attributes, event_attributes(result))
    assert record.SerializeToString(deterministic=True) == expected.SerializeToString(
        deterministic=True
    )
    span, reference = Span(), Span()
    add_event(span, "gen_ai.evaluation.result", event_attributes(result), 5)
    event = reference.events.add(name="gen_ai.evaluation.result", time_unix_nano=5)
    set_attributes(event.attributes, event_attributes(result))
    assert same(span, reference)


# --- leaks ----------------------------------------------------------------------------------------

_ATTRIBUTES: dict[str, Any] = {
    "s": "text é",
    "i": 2**70,
    "l": [1, (2.5, None), {"k": b"x", 3: [True]}],
    "deep": _deep(5),
}
_REFUSED: dict[str, Any] = {"a": 1, "b": [Odd()]}


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(lambda: encode_key_values(_ATTRIBUTES, SPAN_ATTRIBUTES_TAG), 20_000, id="ok"),
        pytest.param(lambda: encode_key_values(_REFUSED, SPAN_ATTRIBUTES_TAG), 50_000, id="none"),
        pytest.param(
            lambda: encode_key_values({"a": "\ud800"}, SPAN_ATTRIBUTES_TAG), 50_000, id="surrogate"
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], n: int) -> None:
    assert_leak_free(call, [_ATTRIBUTES, _REFUSED, SPAN_ATTRIBUTES_TAG], n)
