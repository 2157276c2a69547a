"""`tracehound._speedups` (C) against the Python/upb reference it replaces on the hot path.

Whenever a C function answers (anything but None), its answer must be exactly the reference's:
`tracehound.spans._proto_attributes` over the upb-parsed message for `decode_key_values` (same
keys, key order, values and value types, NaN payloads and -0.0 included), and the spans of the
upb-parsed request for `scan_trace_request`. None is always allowed for input the C code does not
handle exactly (the caller falls back); for some shapes None is required (protobuf merge
semantics). Hostile input must never crash the interpreter or raise.

`scan_trace_request(..., validate=True)` vouches for the bytes: it answers only if
`ExportTraceServiceRequest.FromString` (upb) parses them, and then exactly as without validation.
Every input `check_scan` sees is checked for that, and section 6 aims at what upb checks: wire
structure at every depth, UTF-8 of every string field, nesting depth.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from _kernel_fuzz import expected_genai
from _leaks import assert_leak_free, expecting
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tracehound import _speedups
from tracehound.spans import MAX_VALUE_DEPTH, _proto_attributes

decode_key_values = _speedups.decode_key_values
scan_trace_request = _speedups.scan_trace_request

PREFIXES = (b"gen_ai.", b"llm.", b"openinference.", b"traceloop.", b"ai.", b"tool_")
EVENT = b"db.query.result"

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- wire helpers -------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag(field, 2) + varint(len(payload)) + payload


def vi(field: int, n: int) -> bytes:
    """A varint field."""
    return tag(field, 0) + varint(n)


def kv_bytes(key: bytes | None, *values: bytes) -> bytes:
    """A serialized KeyValue: the key (if any), then each serialized AnyValue as field 2."""
    return (ld(1, key) if key is not None else b"") + b"".join(ld(2, v) for v in values)


def span_bytes(*kvs: bytes, trace_id: bytes = b"T" * 16, span_id: bytes = b"S" * 8) -> bytes:
    """A serialized Span with the given serialized KeyValues as attributes (field 9)."""
    return ld(1, trace_id) + ld(2, span_id) + b"".join(ld(9, kv) for kv in kvs)


def request_bytes(*spans: bytes) -> bytes:
    """A serialized ExportTraceServiceRequest holding the serialized Spans in one scope."""
    scope_spans = b"".join(ld(2, s) for s in spans)
    return ld(1, ld(2, scope_spans))


# --- the reference ------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, dicts in the same key order, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def all_spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def message_levels(message: Message) -> int:
    """Nesting levels of a parsed message as upb counts them: 1 + its deepest sub-message."""
    deepest = 0
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for sub in value if field.is_repeated else [value]:
                deepest = max(deepest, message_levels(sub))
    return 1 + deepest


# The message levels the validating scan enters (upb's limit: 101, the request included).
VALIDATE_LEVELS = 64


def check_scan(data: bytes, *, require_answer: bool = False) -> Any:
    """scan_trace_request(data) is None or agrees with upb (when upb can parse `data`), and the
    validating scan answers only if upb parses `data`, then as the plain scan does.
    require_answer: the plain scan must answer, and so must the validating scan if upb parses
    `data` and it is at most VALIDATE_LEVELS deep."""
    got = scan_trace_request(data, PREFIXES, EVENT)
    validated = scan_trace_request(data, PREFIXES, EVENT, True)
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        request = None
    if validated is not None:  # the key property: vouched-for bytes are bytes upb parses
        assert request is not None, "the validating scan answered for bytes upb refuses"
        assert validated == got
    if require_answer:
        assert got is not None
        if validated is None and request is not None:
            assert message_levels(request) > VALIDATE_LEVELS
    if got is None:
        return None
    genai, keys, offsets = got
    assert type(genai) is bool
    assert isinstance(keys, list)
    assert isinstance(offsets, list)
    assert len(offsets) == 2 * len(keys)
    assert all(type(k) is bytes and len(k) == 24 for k in keys)
    assert all(type(o) is int for o in offsets)
    if request is None:
        return got
    spans = all_spans(request)
    assert keys == [s.trace_id + s.span_id for s in spans]
    assert genai == expected_genai(request)
    for span, start, end in zip(spans, offsets[::2], offsets[1::2], strict=True):
        assert 0 <= start <= end <= len(data)
        assert Span.FromString(data[start:end]) == span
    return got


def _upb_parses(data: bytes) -> bool:
    """Does ExportTraceServiceRequest.FromString (upb) parse `data`?"""
    try:
        ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        return False
    return True


def no_answer(data: bytes) -> None:
    """Neither scan answers for `data`."""
    assert scan_trace_request(data, PREFIXES, EVENT) is None
    assert scan_trace_request(data, PREFIXES, EVENT, True) is None


def check_decode(data: bytes | bytearray | memoryview, start: int, end: int, field: int) -> Any:
    """decode_key_values is None or equals _proto_attributes over the upb-parsed message."""
    got = decode_key_values(data, start, end, field)
    assert got is None or type(got) is dict
    try:
        message = _MESSAGE_OF_FIELD[field].FromString(bytes(data[start:end]))
    except DecodeError:
        return got
    if got is not None:
        want = _proto_attributes(message.attributes)
        assert same(got, want), (got, want)
    return got


_MESSAGE_OF_FIELD: dict[int, Any] = {9: Span, 1: Resource, 3: Span.Event, 4: Span.Link}


# --- strategies ---------------------------------------------------------------------------------

_PLAIN_KEYS = (
    "http.request.method",
    "db.system",
    "",
    "gen_ai",  # near misses of the GenAI prefixes
    "Gen_ai.system",
    "ai",
    "tool",
    "xllm.",
    "ключ",
    "🦊.astral",
    "db.query.result",
)
_GENAI_KEYS = ("gen_ai.request.model", "llm.", "openinference.span.kind", "ai.x", "tool_calls")
_EVENT_NAMES = ("exception", "", "db.query.results", "db.query.resul", "Db.query.result")

_text = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0x10000, max_codepoint=0x1FFFF), max_size=4),
    st.sampled_from(["", "a", "é", "😀 text", "\x00nul"]),
)
_int64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1]),
)
_double = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324]),
)


def _scalar(kind: str, value: Any) -> AnyValue:
    if kind == "none":
        return AnyValue()
    if kind == "strindex":
        out = AnyValue()
        out.string_value_strindex = value
        return out
    return AnyValue(**{kind: value})


_scalars = st.one_of(
    _text.map(lambda v: _scalar("string_value", v)),
    st.booleans().map(lambda v: _scalar("bool_value", v)),
    _int64.map(lambda v: _scalar("int_value", v)),
    _double.map(lambda v: _scalar("double_value", v)),
    st.binary(max_size=12).map(lambda v: _scalar("bytes_value", v)),
    st.just(None).map(lambda v: _scalar("none", v)),
    st.integers(0, 5).map(lambda v: _scalar("strindex", v)),
)


def _array(values: list[AnyValue]) -> AnyValue:
    out = AnyValue()
    out.array_value.SetInParent()
    out.array_value.values.extend(values)
    return out


def _kvlist(items: list[KeyValue]) -> AnyValue:
    out = AnyValue()
    out.kvlist_value.SetInParent()
    out.kvlist_value.values.extend(items)
    return out


def _key_value(key: str | None, value: AnyValue | None) -> KeyValue:
    kv = KeyValue()
    if key is not None:
        kv.key = key
    if value is not None:
        kv.value.CopyFrom(value)
    return kv


_keys = st.one_of(st.sampled_from(_PLAIN_KEYS), _text)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(_array),
        st.lists(
            st.builds(_key_value, st.one_of(st.none(), _keys), st.one_of(st.none(), inner)),
            max_size=4,
        ).map(_kvlist),
    ),
    max_leaves=8,
)


@st.composite
def _deep_values(draw: st.DrawFn) -> AnyValue:
    """Arrays and kvlists nested past MAX_VALUE_DEPTH, as deep as upb still parses inside a
    request: 100 message levels, 7 down to an event's attribute value, +2 per array level and +3
    per kvlist level."""
    levels = draw(st.integers(MAX_VALUE_DEPTH - 3, 47))
    kinds = draw(st.integers(0, 2**levels - 1))  # bit i set: level i is a kvlist
    value = draw(_scalars)
    budget = 93
    for level in range(levels):
        is_array = not kinds >> level & 1
        cost = 2 if is_array else 3
        if budget < cost:
            break
        budget -= cost
        value = _array([value]) if is_array else _kvlist([_key_value("k", value)])
    return value


@st.composite
def _attributes(draw: st.DrawFn, genai: bool) -> list[KeyValue]:
    keys = st.one_of(_keys, st.sampled_from(_GENAI_KEYS)) if genai else _keys
    values = st.one_of(st.none(), _values, _deep_values()) if draw(st.booleans()) else _values
    items = draw(st.lists(st.builds(_key_value, st.one_of(st.none(), keys), values), max_size=5))
    if items and draw(st.booleans()):  # a duplicate key, with another value
        items.append(_key_value(items[0].key, draw(_values)))
    return items


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    genai = draw(st.booleans())
    # A few attribute lists, each used by any of the messages: fewer draws, same coverage.
    pool = draw(st.lists(_attributes(genai), min_size=1, max_size=3))
    attributes = st.sampled_from(pool)
    event_names = st.sampled_from(_EVENT_NAMES + ((EVENT.decode(),) if genai else ()))
    texts = st.sampled_from(["", "GET /", "chat gpt-4o", "é😀"])
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = request.resource_spans.add(schema_url=draw(texts))
        if draw(st.booleans()):
            rs.resource.attributes.extend(draw(attributes))
        if draw(st.booleans()):
            rs.resource.entity_refs.add(
                schema_url=draw(texts), type=draw(texts), id_keys=[draw(texts)] * 2
            ).description_keys.append(draw(texts))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add(schema_url=draw(texts))
            if draw(st.booleans()):
                ss.scope.name = draw(texts)
                ss.scope.version = draw(texts)
                ss.scope.attributes.extend(draw(attributes))
            for _ in range(draw(st.integers(0, 3))):
                span = ss.spans.add(
                    trace_id=draw(st.binary(min_size=16, max_size=16)),
                    span_id=draw(st.binary(min_size=8, max_size=8)),
                    parent_span_id=b"P" * 8,
                    trace_state=draw(texts),
                    name=draw(texts),
                    kind=3,
                    start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    end_time_unix_nano=2**64 - 1,
                    flags=0x300,
                    dropped_attributes_count=1,
                )
                span.attributes.extend(draw(attributes))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add(name=draw(event_names), time_unix_nano=1)
                    event.attributes.extend(draw(attributes))
                if draw(st.booleans()):
                    link = span.links.add(
                        trace_id=b"L" * 16, span_id=b"l" * 8, flags=1, trace_state=draw(texts)
                    )
                    link.attributes.extend(draw(attributes))
                    span.status.CopyFrom(Status(code=2, message=draw(texts)))
    return request


# --- 1 and 2: parity on valid requests ----------------------------------------------------------


@SETTINGS
@given(_requests())
def test_parity_with_upb_on_random_requests(request: ExportTraceServiceRequest) -> None:
    data = request.SerializeToString()
    parsed = ExportTraceServiceRequest.FromString(data)
    spans = all_spans(parsed)

    got = scan_trace_request(data, PREFIXES, EVENT)
    assert got is not None
    # validated: the same answer, unless nested deeper than the validating scan goes
    validated = scan_trace_request(data, PREFIXES, EVENT, True)
    if validated is not None:
        assert validated == got
    else:
        assert message_levels(parsed) > VALIDATE_LEVELS
    genai, keys, offsets = got
    assert keys == [s.trace_id + s.span_id for s in spans]
    assert genai is expected_genai(parsed)
    assert len(offsets) == 2 * len(spans)
    for span, start, end in zip(spans, offsets[::2], offsets[1::2], strict=True):
        assert data[start:end] == span.SerializeToString()
        attrs = decode_key_values(data, start, end, 9)
        want = _proto_attributes(span.attributes)
        assert attrs is not None
        assert same(attrs, want), (attrs, want)
        for event in span.events:
            raw = event.SerializeToString()
            assert same(decode_key_values(raw, 0, len(raw), 3), _proto_attributes(event.attributes))
        for link in span.links:
            raw = link.SerializeToString()
            assert same(decode_key_values(raw, 0, len(raw), 4), _proto_attributes(link.attributes))
    for rs in parsed.resource_spans:
        raw = rs.resource.SerializeToString()
        want = _proto_attributes(rs.resource.attributes)
        assert same(decode_key_values(raw, 0, len(raw), 1), want)
        for ss in rs.scope_spans:
            raw = ss.scope.SerializeToString()
            assert same(
                decode_key_values(raw, 0, len(raw), 3), _proto_attributes(ss.scope.attributes)
            )


def test_every_value_kind_and_depth_rule() -> None:
    deep_array = AnyValue(int_value=7)
    for _ in range(40):
        deep_array = _array([deep_array, AnyValue(bytes_value=b"b")])
    span = Span(trace_id=b"t" * 16, span_id=b"s" * 8)
    span.attributes.extend(
        [
            _key_value("s", AnyValue(string_value="😀 ü")),
            _key_value("empty", AnyValue(string_value="")),
            _key_value("no value", None),
            _key_value(None, AnyValue(bool_value=False)),
            _key_value("t", AnyValue(bool_value=True)),
            _key_value("i", AnyValue(int_value=-(2**63))),
            _key_value("d", AnyValue(double_value=float("-0.0"))),
            _key_value("nan", AnyValue(double_value=float("nan"))),
            _key_value("b", AnyValue(bytes_value=b"\x00\xff")),
            _key_value("a", _array([AnyValue(int_value=1), AnyValue(), AnyValue(string_value="")])),
            _key_value("kv", _kvlist([_key_value("x", AnyValue(double_value=1.5))])),
            _key_value("deep", deep_array),
            _key_value("s", AnyValue(int_value=2)),  # duplicate key: value replaced, order kept
        ]
    )
    raw = span.SerializeToString()
    got = decode_key_values(raw, 0, len(raw), 9)
    want = _proto_attributes(Span.FromString(raw).attributes)
    assert same(got, want)
    assert list(got) == ["s", "empty", "no value", "", "t", "i", "d", "nan", "b", "a", "kv", "deep"]
    assert got["s"] == 2 and got[""] is False and got["no value"] is None

    level = got["deep"]  # depth 0 .. 31 are lists; the array at depth 32 is None
    for depth in range(MAX_VALUE_DEPTH):
        assert type(level) is list, depth
        assert level[1] == (b"b" if depth + 1 < MAX_VALUE_DEPTH else None)  # bytes too
        level = level[0]
    assert level is None


def test_buffers_and_offsets() -> None:
    span = span_bytes(kv_bytes(b"k", ld(1, "v€".encode())), kv_bytes(b"n", vi(3, 5)))
    padded = b"\xff" * 7 + span + b"\x00\x00"
    want = {"k": "v€", "n": 5}
    for data in (padded, bytearray(padded), memoryview(padded)):
        assert decode_key_values(data, 7, 7 + len(span), 9) == want
    assert decode_key_values(memoryview(padded)[7:], 0, len(span), 9) == want
    assert decode_key_values(span, 0, 0, 9) == {}
    assert decode_key_values(span, len(span), len(span), 9) == {}
    assert decode_key_values(span, 0, len(span), 10) == {}  # no such field: nothing to decode
    request = request_bytes(span)
    got = scan_trace_request(memoryview(request), PREFIXES, EVENT)
    assert got is not None
    assert got[0] is False
    assert got[1] == [b"T" * 16 + b"S" * 8]
    assert request[got[2][0] : got[2][1]] == span
    assert scan_trace_request(bytearray(request), PREFIXES, EVENT) == got
    assert scan_trace_request(b"", PREFIXES, EVENT) == (False, [], [])


def test_scan_genai_sources() -> None:
    plain = kv_bytes(b"http.method", ld(1, b"GET"))
    genai = kv_bytes(b"gen_ai.system", ld(1, b"openai"))
    base = span_bytes(plain)

    def scan(data: bytes) -> bool:
        return check_scan(data, require_answer=True)[0]

    assert scan(request_bytes(base)) is False
    assert scan(request_bytes(span_bytes(plain, genai))) is True
    # a Resource attribute, a scope attribute, an event attribute or name, a link attribute
    assert scan(ld(1, ld(1, ld(1, genai)) + ld(2, ld(2, base)))) is True
    assert scan(ld(1, ld(2, ld(1, ld(3, genai)) + ld(2, base)))) is True
    assert scan(request_bytes(base + ld(11, ld(3, genai)))) is True
    assert scan(request_bytes(base + ld(11, ld(2, EVENT)))) is True
    assert scan(request_bytes(base + ld(11, ld(2, EVENT + b"s")))) is False
    assert scan(request_bytes(base + ld(13, ld(4, genai)))) is True
    # the last key of a KeyValue counts (upb keeps it): here the key is not a GenAI key
    assert scan(request_bytes(span_bytes(ld(1, b"gen_ai.x") + ld(1, b"http.x")))) is False
    assert scan(request_bytes(span_bytes(ld(1, b"http.x") + ld(1, b"gen_ai.x")))) is True
    # so does the last event name
    assert scan(request_bytes(base + ld(11, ld(2, EVENT) + ld(2, b"x")))) is False
    # keys inside kvlist values are not attribute keys
    nested = kv_bytes(b"outer", ld(6, ld(1, kv_bytes(b"gen_ai.inner", ld(1, b"v")))))
    assert scan(request_bytes(span_bytes(nested))) is False
    # the prefixes and the event name are the caller's
    data = request_bytes(span_bytes(plain))
    assert scan_trace_request(data, (b"http.",), EVENT)[0] is True
    assert scan_trace_request(data, (b"",), EVENT)[0] is True
    assert scan_trace_request(data, (), EVENT)[0] is False
    assert scan_trace_request(request_bytes(span_bytes(kv_bytes(None))), (b"",), b"x")[0] is True
    assert scan_trace_request(request_bytes(base + ld(11, b"")), (), b"")[0] is True


def test_scan_ids() -> None:
    # the last occurrence of trace_id / span_id counts (proto3 singular fields)
    span = ld(1, b"x" * 16) + ld(2, b"y" * 8) + ld(1, b"a" * 16) + ld(2, b"b" * 8)
    assert check_scan(request_bytes(span), require_answer=True)[1] == [b"a" * 16 + b"b" * 8]
    # a missing id or one of the wrong size: the caller's slower path reports it
    for bad in (
        span_bytes(trace_id=b"t" * 15),
        span_bytes(span_id=b"s" * 9),
        span_bytes(trace_id=b""),
        ld(2, b"s" * 8),
        ld(1, b"t" * 16),
        span + ld(1, b""),
    ):
        no_answer(request_bytes(span_bytes(), bad))
    # many resources and scopes, in wire order; unknown fields everywhere are skipped
    s1, s2, s3 = (span_bytes(trace_id=bytes([i]) * 16) for i in (1, 2, 3))
    unknown = vi(99, 1) + ld(100, b"zz") + tag(101, 1) + b"8bytes!!" + tag(102, 5) + b"4byt"
    data = (
        ld(1, ld(2, ld(2, s1) + unknown + ld(2, s2 + unknown)) + unknown)
        + unknown
        + ld(1, ld(3, b"schema") + ld(2, ld(1, ld(1, b"scope") + unknown) + ld(2, s3)))
    )
    got = check_scan(data, require_answer=True)
    assert [k[0] for k in got[1]] == [1, 2, 3]


# --- 3: hostile input ---------------------------------------------------------------------------


def _small_request() -> bytes:
    span = Span(
        trace_id=bytes(range(16)),
        span_id=bytes(range(8)),
        name="chat",
        kind=3,
        start_time_unix_nano=1,
        end_time_unix_nano=2**64 - 1,
        flags=0x100,
    )
    span.attributes.extend(
        [
            _key_value("gen_ai.system", AnyValue(string_value="openai")),
            _key_value("i", AnyValue(int_value=-5)),
            _key_value("d", AnyValue(double_value=2.5)),
            _key_value("b", AnyValue(bool_value=True)),
            _key_value("y", AnyValue(bytes_value=b"\x01")),
            _key_value("a", _array([AnyValue(string_value="é"), AnyValue(int_value=300)])),
            _key_value("m", _kvlist([_key_value("k", AnyValue(string_value="v"))])),
        ]
    )
    span.events.add(name="db.query.result").attributes.add(key="e", value=AnyValue(int_value=1))
    span.links.add(trace_id=b"L" * 16, span_id=b"l" * 8).attributes.add(key="l")
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
    ss = rs.scope_spans.add()
    ss.scope.name = "scope"
    ss.spans.append(span)
    ss.spans.append(Span(trace_id=b"2" * 16, span_id=b"2" * 8))
    return request.SerializeToString()


SMALL_REQUEST = _small_request()
SMALL_SPAN = ExportTraceServiceRequest.FromString(SMALL_REQUEST)
SMALL_SPAN_BYTES = SMALL_SPAN.resource_spans[0].scope_spans[0].spans[0].SerializeToString()


def test_small_request_is_handled() -> None:
    got = check_scan(SMALL_REQUEST, require_answer=True)
    assert got[0] is True
    assert check_decode(SMALL_SPAN_BYTES, 0, len(SMALL_SPAN_BYTES), 9) is not None


def test_truncated_requests() -> None:
    for n in range(len(SMALL_REQUEST)):
        check_scan(SMALL_REQUEST[:n])
    for n in range(len(SMALL_SPAN_BYTES)):
        check_decode(SMALL_SPAN_BYTES[:n], 0, n, 9)
        check_decode(SMALL_SPAN_BYTES, 0, n, 9)


def _mutations(data: bytes) -> Iterable[bytes]:
    for i, byte in enumerate(data):
        for new in {0x00, 0x01, 0x7F, 0x80, 0xFF, byte ^ 0x01, byte ^ 0x07, byte ^ 0x08}:
            if new != byte:
                yield data[:i] + bytes([new]) + data[i + 1 :]


def test_single_byte_mutations() -> None:
    for data in _mutations(SMALL_REQUEST):
        check_scan(data)
    for data in _mutations(SMALL_SPAN_BYTES):
        check_decode(data, 0, len(data), 9)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.data())
def test_random_bytes(data: bytes, draw: st.DataObject) -> None:
    check_scan(data)
    check_scan(SMALL_REQUEST + data)
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    check_decode(data, start, end, 9)
    check_decode(data, 0, len(data), draw.draw(st.sampled_from([1, 3, 4, 9])))
    spliced = SMALL_SPAN_BYTES + ld(9, data) + data
    check_decode(spliced, 0, len(spliced), 9)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(tag(1, 2) + b"\xff\xff\xff\xff\x0f", id="huge-length"),
        pytest.param(tag(1, 2) + b"\xff" * 9 + b"\x01", id="length-2**64"),
        pytest.param(tag(1, 2) + b"\x80" * 10 + b"\x00", id="11-byte-length"),
        # over-long tags of the unknown field 5, followed by a valid varint value
        pytest.param(b"\xa8" + b"\x80" * 8 + b"\x00" + b"\x01", id="10-byte-tag"),
        pytest.param(b"\xa8\x80\x80\x80\x80\x00\x01", id="6-byte-tag"),
        pytest.param(varint(1 << 32 | 5 << 3) + b"\x01", id="tag-over-32-bits"),
        pytest.param(vi(5, 0) + b"\x80" * 10 + b"\x01", id="11-byte-varint"),
        pytest.param(tag(5, 0) + b"\xff" * 10 + b"\x01", id="11-byte-varint-value"),
        pytest.param(tag(5, 0) + b"\x80" * 10 + b"\x00", id="11-byte-varint-zero"),
        pytest.param(tag(5, 0) + b"\xff" * 10, id="unterminated-10-byte-varint"),
        pytest.param(tag(5, 0) + b"\x80\x80", id="unterminated-varint"),
        pytest.param(tag(5, 3) + tag(5, 4), id="group"),
        pytest.param(tag(5, 4), id="end-group"),
        pytest.param(tag(5, 6) + b"\x00", id="wire-type-6"),
        pytest.param(tag(5, 7) + b"\x00", id="wire-type-7"),
        pytest.param(b"\x00\x00", id="field-0"),
        pytest.param(b"\x02\x00", id="field-0-length"),
        pytest.param(tag(5, 1) + b"1234567", id="short-fixed64"),
        pytest.param(tag(5, 5) + b"123", id="short-fixed32"),
    ],
)
def test_malformed_wire_data(data: bytes) -> None:
    assert not _upb_parses(data) or data[0] & 7 == 3  # upb skips a group as an unknown field
    # at every level the C code walks: request, resource spans, scope spans, span, key-value,
    # any-value, array, kvlist
    span_prefix = ld(1, b"t" * 16) + ld(2, b"s" * 8)
    for wrapped in (
        data,
        ld(1, data),
        ld(1, ld(1, data)),
        ld(1, ld(2, data)),
        ld(1, ld(2, ld(1, data))),
        request_bytes(span_prefix + data),
        request_bytes(span_prefix + ld(9, data)),
        request_bytes(span_prefix + ld(11, data)),
        request_bytes(span_prefix + ld(11, ld(3, data))),
        request_bytes(span_prefix + ld(13, data)),
        request_bytes(span_prefix + ld(13, ld(4, data))),
    ):
        no_answer(wrapped)
    # attribute values are not walked by the plain scan (decode_key_values reads them); the
    # validating scan walks them
    check_scan(request_bytes(span_prefix + ld(9, ld(1, b"k") + ld(2, data))))
    for wrapped in (
        data,
        span_bytes(kv_bytes(b"k"), data),
        span_bytes(kv_bytes(b"k", data)),
        span_bytes(ld(1, b"k") + data),
        span_bytes(kv_bytes(b"k", ld(5, data))),
        span_bytes(kv_bytes(b"k", ld(6, data))),
        span_bytes(kv_bytes(b"k", ld(5, ld(1, data)))),
        span_bytes(kv_bytes(b"k", ld(6, ld(1, kv_bytes(b"n", data))))),
    ):
        assert check_decode(wrapped, 0, len(wrapped), 9) is None


def test_invalid_utf8_is_not_decoded() -> None:
    for bad in (b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b"a\xf4\x90\x80\x80"):  # surrogate, overlong
        data = span_bytes(kv_bytes(bad, vi(3, 1)))
        assert decode_key_values(data, 0, len(data), 9) is None
        data = span_bytes(kv_bytes(b"k", ld(1, bad)))
        assert decode_key_values(data, 0, len(data), 9) is None
        data = span_bytes(kv_bytes(b"k", ld(5, ld(1, ld(1, bad)))))
        assert decode_key_values(data, 0, len(data), 9) is None


def _nested(levels: int, kvlist: bool) -> bytes:
    """A serialized AnyValue nested `levels` deep (kvlists or arrays), built in linear time."""
    leaf = vi(3, 42)
    size = len(leaf)  # of the AnyValue built so far
    headers = []
    for _ in range(levels):
        if kvlist:  # AnyValue{kvlist_value=KeyValueList{values=[KeyValue{key="k", value=...}]}}
            kv_head = ld(1, b"k") + tag(2, 2) + varint(size)
            kv_size = len(kv_head) + size
            list_size = len(tag(1, 2) + varint(kv_size)) + kv_size
            head = tag(6, 2) + varint(list_size) + tag(1, 2) + varint(kv_size) + kv_head
        else:  # AnyValue{array_value=ArrayValue{values=[...]}}
            array_size = len(tag(1, 2) + varint(size)) + size
            head = tag(5, 2) + varint(array_size) + tag(1, 2) + varint(size)
        headers.append(head)
        size += len(head)
    return b"".join(reversed(headers)) + leaf


@pytest.mark.parametrize("kvlist", [True, False])
def test_very_deep_values(kvlist: bool) -> None:
    value = _nested(10_000, kvlist)
    span = span_bytes(kv_bytes(b"deep", value), kv_bytes(b"after", vi(3, 1)))
    with pytest.raises(DecodeError):  # upb refuses it; the C code still answers safely
        Span.FromString(span)
    got = decode_key_values(span, 0, len(span), 9)
    want: Any = None  # the container at depth MAX_VALUE_DEPTH
    for _ in range(MAX_VALUE_DEPTH):
        want = {"k": want} if kvlist else [want]
    assert got == {"deep": want, "after": 1}
    assert check_scan(request_bytes(span), require_answer=True)[1] == [b"T" * 16 + b"S" * 8]
    # nested as deep as upb parses: the same answer as the reference
    for levels in (MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1):
        span = span_bytes(kv_bytes(b"deep", _nested(levels, kvlist)))
        assert check_decode(span, 0, len(span), 9) is not None or kvlist


# --- 4: what the C code must leave to upb -------------------------------------------------------


@pytest.mark.parametrize(
    "kv",
    [
        pytest.param(kv_bytes(b"k", ld(1, b"a"), ld(1, b"b")), id="value-twice"),
        pytest.param(kv_bytes(b"k", vi(3, 1), ld(1, b"b")), id="value-twice-other-member"),
        pytest.param(kv_bytes(b"k", b"", b""), id="empty-value-twice"),
        pytest.param(ld(1, b"k") + ld(1, b"j") + ld(2, vi(3, 1)), id="key-twice"),
        pytest.param(kv_bytes(b"k", ld(1, b"a") + vi(3, 1)), id="two-members"),
        pytest.param(kv_bytes(b"k", ld(1, b"a") + ld(1, b"b")), id="string-twice"),
        pytest.param(kv_bytes(b"k", ld(1, b"") + ld(1, b"")), id="empty-string-twice"),
        pytest.param(kv_bytes(b"k", vi(3, 1) + vi(3, 2)), id="int-twice"),
        pytest.param(kv_bytes(b"k", ld(5, b"") + ld(5, ld(1, vi(3, 1)))), id="array-twice"),
        pytest.param(kv_bytes(b"k", ld(6, b"") + ld(7, b"")), id="kvlist-and-bytes"),
        pytest.param(kv_bytes(b"k", vi(8, 1) + ld(1, b"a")), id="strindex-and-string"),
        pytest.param(kv_bytes(b"k", ld(1, b"a") + vi(8, 1)), id="string-and-strindex"),
        pytest.param(
            kv_bytes(b"k", ld(6, ld(1, kv_bytes(b"x", b"", b"")))), id="nested-value-twice"
        ),
        pytest.param(kv_bytes(b"k", ld(5, ld(1, vi(2, 1) + vi(2, 0)))), id="nested-bool-twice"),
        # a known field with an unexpected wire type
        pytest.param(vi(1, 5), id="key-as-varint"),
        pytest.param(ld(1, b"k") + vi(2, 0), id="value-as-varint"),
        pytest.param(ld(1, b"k") + ld(3, b""), id="key-strindex-as-bytes"),
        pytest.param(kv_bytes(b"k", vi(1, 0)), id="string-as-varint"),
        pytest.param(kv_bytes(b"k", ld(2, b"\x01")), id="bool-as-bytes"),
        pytest.param(kv_bytes(b"k", ld(3, b"\x01")), id="int-as-bytes"),
        pytest.param(kv_bytes(b"k", tag(4, 5) + b"1234"), id="double-as-fixed32"),
        pytest.param(kv_bytes(b"k", vi(4, 0)), id="double-as-varint"),
        pytest.param(kv_bytes(b"k", tag(5, 1) + b"12345678"), id="array-as-fixed64"),
        pytest.param(kv_bytes(b"k", vi(6, 0)), id="kvlist-as-varint"),
        pytest.param(kv_bytes(b"k", vi(7, 0)), id="bytes-as-varint"),
        pytest.param(kv_bytes(b"k", ld(8, b"")), id="strindex-as-bytes"),
        pytest.param(kv_bytes(b"k", ld(5, vi(1, 1))), id="array-values-as-varint"),
        pytest.param(kv_bytes(b"k", ld(6, vi(1, 1))), id="kvlist-values-as-varint"),
        # an AnyValue field this code does not know may be a oneof member of a newer schema
        pytest.param(kv_bytes(b"k", vi(9, 1)), id="anyvalue-unknown-field"),
        pytest.param(kv_bytes(b"k", ld(1, b"a") + ld(100, b"")), id="anyvalue-unknown-after"),
    ],
)
def test_left_to_upb(kv: bytes) -> None:
    span = span_bytes(kv_bytes(b"first", ld(1, b"v")), kv)
    assert decode_key_values(span, 0, len(span), 9) is None
    nested = span_bytes(kv_bytes(b"outer", ld(6, ld(1, kv))))
    assert decode_key_values(nested, 0, len(nested), 9) is None


def test_wrong_wire_type_of_the_attributes_field() -> None:
    span = ld(1, b"t" * 16) + vi(9, 1)
    assert decode_key_values(span, 0, len(span), 9) is None
    # the same field number is not special in another message
    assert decode_key_values(span, 0, len(span), 3) == {}


@pytest.mark.parametrize(
    ("field", "wrong"),
    [
        *[(1, 0), (2, 5), (3, 1), (4, 0), (5, 0), (6, 2), (7, 0), (8, 5), (9, 0)],
        *[(10, 2), (11, 0), (12, 1), (13, 5), (14, 2), (15, 0), (16, 0), (16, 1)],
    ],
)
def test_scan_wrong_wire_type_in_span(field: int, wrong: int) -> None:
    payload = {0: varint(1), 1: b"12345678", 2: varint(1) + b"x", 5: b"1234"}[wrong]
    span = span_bytes() + tag(field, wrong) + payload
    no_answer(request_bytes(span))
    ExportTraceServiceRequest.FromString(request_bytes(span))  # upb: an unknown field
    unknown = span_bytes() + tag(field + 100, wrong) + payload
    assert check_scan(request_bytes(unknown), require_answer=True)[0] is False


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(vi(1, 1), id="resource-spans-as-varint"),
        pytest.param(ld(1, vi(1, 1)), id="resource-as-varint"),
        pytest.param(ld(1, vi(2, 1)), id="scope-spans-as-varint"),
        pytest.param(ld(1, vi(3, 1)), id="schema-url-as-varint"),
        pytest.param(ld(1, ld(1, ld(2, b""))), id="resource-dropped-as-bytes"),
        pytest.param(ld(1, ld(1, vi(1, 0))), id="resource-attributes-as-varint"),
        pytest.param(ld(1, ld(2, vi(1, 0))), id="scope-as-varint"),
        pytest.param(ld(1, ld(2, vi(2, 0))), id="span-as-varint"),
        pytest.param(ld(1, ld(2, ld(1, vi(1, 0)))), id="scope-name-as-varint"),
        pytest.param(ld(1, ld(2, ld(1, ld(4, b"")))), id="scope-dropped-as-bytes"),
        pytest.param(request_bytes(span_bytes() + ld(11, ld(1, b""))), id="event-time-as-bytes"),
        pytest.param(request_bytes(span_bytes() + ld(11, vi(2, 0))), id="event-name-as-varint"),
        pytest.param(request_bytes(span_bytes() + ld(13, vi(4, 0))), id="link-attrs-as-varint"),
        pytest.param(request_bytes(span_bytes() + ld(13, vi(6, 0))), id="link-flags-as-varint"),
        pytest.param(request_bytes(span_bytes(vi(1, 0))), id="attribute-key-as-varint"),
    ],
)
def test_scan_wrong_wire_type(data: bytes) -> None:
    no_answer(data)
    ExportTraceServiceRequest.FromString(data)  # upb: an unknown field


def test_unknown_fields_are_skipped() -> None:
    unknown = (
        vi(50, 2**64 - 1) + ld(51, b"\xff\xfe") + tag(52, 1) + b"12345678" + tag(53, 5) + b"1234"
    )
    kv = ld(1, b"k") + unknown + ld(2, ld(1, b"v")) + vi(3, 7)  # key_strindex is skipped too
    array = kv_bytes(b"a", ld(5, unknown + ld(1, vi(3, 1)) + unknown))
    kvlist = kv_bytes(b"m", ld(6, unknown + ld(1, ld(1, b"x") + unknown) + unknown))
    span = span_bytes(kv, array, kvlist) + unknown
    got = check_decode(span, 0, len(span), 9)
    assert got == {"k": "v", "a": [1], "m": {"x": None}}
    assert check_decode(unknown + span, 0, len(unknown + span), 9) == got


# --- 6: validation: answers only for what upb parses ---------------------------------------------

_VARINT_TYPES = (
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_ENUM,
)
_FIXED64_TYPES = (
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_DOUBLE,
)
_FIXED32_TYPES = (
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_FLOAT,
)
_KIND_OF_TYPE: dict[int, str] = {
    **dict.fromkeys(_VARINT_TYPES, "varint"),
    **dict.fromkeys(_FIXED64_TYPES, "fixed64"),
    **dict.fromkeys(_FIXED32_TYPES, "fixed32"),
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_MESSAGE: "message",
    # no TYPE_GROUP: a group field would fail the schema test
}
_WIRE_TYPE_OF_KIND = {
    "varint": 0,
    "fixed64": 1,
    "fixed32": 5,
    "bytes": 2,
    "string": 2,
    "message": 2,
}


def descriptor_schema() -> dict[str, dict[int, tuple[str, str | None]]]:
    """{message: {field number: (kind, message type)}} for every message type reachable from
    ExportTraceServiceRequest, from the installed opentelemetry-proto's descriptors."""
    schema: dict[str, dict[int, tuple[str, str | None]]] = {}

    def walk(descriptor: Descriptor) -> None:
        if descriptor.full_name in schema:
            return
        fields = schema[descriptor.full_name] = {}
        for field in descriptor.fields:
            kind = _KIND_OF_TYPE.get(field.type, f"type {field.type}, not handled")
            target = field.message_type.full_name if kind == "message" else None
            fields[field.number] = (kind, target)
            if field.message_type is not None:
                walk(field.message_type)

    walk(ExportTraceServiceRequest.DESCRIPTOR)
    return schema


SCHEMA = descriptor_schema()
_REQUEST = ExportTraceServiceRequest.DESCRIPTOR.full_name
_SPAN = Span.DESCRIPTOR.full_name
_SPAN_IDS = ld(1, b"T" * 16) + ld(2, b"S" * 8)


def test_schema_is_complete() -> None:
    """The C schema is the installed opentelemetry-proto's: a new field (a new string field that
    would go unchecked) fails here."""
    assert _speedups.trace_request_schema() == SCHEMA
    assert "opentelemetry.proto.common.v1.EntityRef" in SCHEMA  # a recent addition
    assert SCHEMA["opentelemetry.proto.common.v1.AnyValue"][8] == ("varint", None)


Path = tuple[tuple[str, int], ...]  # (message, field number) steps from the request down


def place(path: Path, field: bytes) -> bytes:
    """A request holding the serialized `field` in the message at the end of `path` (spans on
    the way get valid ids)."""
    inner = field
    message = SCHEMA[path[-1][0]][path[-1][1]][1] if path else _REQUEST
    for parent, number in reversed(path):
        if message == _SPAN:
            inner = _SPAN_IDS + inner
        inner = ld(number, inner)
        message = parent
    return inner


def _paths() -> list[tuple[Path, str, int]]:
    """(path, message, field number) of every string field: once per simple path from the request
    (each message type at most once), and inside arrays and kvlists of span attributes."""
    out: list[tuple[Path, str, int]] = []

    def walk(message: str, path: Path, seen: frozenset[str]) -> None:
        for number, (kind, target) in SCHEMA[message].items():
            if kind == "string":
                out.append((path, message, number))
            elif kind == "message" and target is not None and target not in seen:
                walk(target, (*path, (message, number)), seen | {target})

    walk(_REQUEST, (), frozenset({_REQUEST}))
    common = "opentelemetry.proto.common.v1."
    kv, any_value = common + "KeyValue", common + "AnyValue"
    attribute_value: Path = (
        (_REQUEST, 1),
        ("opentelemetry.proto.trace.v1.ResourceSpans", 2),
        ("opentelemetry.proto.trace.v1.ScopeSpans", 2),
        (_SPAN, 9),
        (kv, 2),
    )
    array: Path = ((any_value, 5), (common + "ArrayValue", 1))
    kvlist: Path = ((any_value, 6), (common + "KeyValueList", 1))
    out += [
        ((*attribute_value, *array), any_value, 1),
        ((*attribute_value, *kvlist), kv, 1),
        ((*attribute_value, *kvlist, (kv, 2)), any_value, 1),
        ((*attribute_value, *array, *kvlist, (kv, 2), *array), any_value, 1),
    ]
    return out


STRING_PATHS = _paths()
_PATH_IDS = [
    "/".join(m.rsplit(".", 1)[1] + f".{n}" for m, n in path) + f"/{m.rsplit('.', 1)[1]}.{n}"
    for path, m, n in STRING_PATHS
]

# Invalid UTF-8, each refused by upb (checked below): stray and missing continuation bytes,
# overlong forms, surrogates, code points above U+10FFFF, bytes never in UTF-8.
BAD_UTF8 = (
    b"\x80",
    b"\xbf",
    b"\xff",
    b"\xfe",
    b"\xc0\x80",  # overlong U+0000
    b"\xc1\xbf",
    b"\xe0\x80\xaf",  # overlong "/"
    b"\xe0\x9f\xbf",
    b"\xf0\x80\x80\xaf",
    b"\xf0\x8f\xbf\xbf",
    b"\xed\xa0\x80",  # U+D800
    b"\xed\xbf\xbf",  # U+DFFF
    b"\xed\xa0\xbd\xed\xb8\x80",  # a surrogate pair (CESU-8)
    b"\xf4\x90\x80\x80",  # U+110000
    b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc3",  # truncated
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xe2\x82a",
    b"\xc3\xa9\xa9",
)


@pytest.mark.parametrize(("path", "message", "number"), STRING_PATHS, ids=_PATH_IDS)
def test_invalid_utf8_in_every_string_field(path: Path, message: str, number: int) -> None:
    for good in (b"", b"ok", "é😀ü€".encode(), "\x00\U0010ffff\ufffe".encode()):
        check_scan(place(path, ld(number, good)), require_answer=True)
    for bad in BAD_UTF8:
        for text in (bad, b"ok " + bad, bad + b" ok", b"x" * 20 + "é".encode() + bad + b"y" * 9):
            data = place(path, ld(number, text))
            assert not _upb_parses(data), text
            assert scan_trace_request(data, PREFIXES, EVENT, True) is None, text
            # the last occurrence wins for upb, yet each occurrence is checked
            data = place(path, ld(number, text) + ld(number, b"ok"))
            assert not _upb_parses(data)
            assert scan_trace_request(data, PREFIXES, EVENT, True) is None


def test_bytes_and_unknown_fields_are_not_utf8() -> None:
    bad = b"\xff\xc0\x80\xed\xa0\x80"
    for data in (
        request_bytes(span_bytes(trace_id=bad + b"t" * 10, span_id=bad + b"xx")),
        request_bytes(span_bytes() + ld(4, bad)),  # parent_span_id
        request_bytes(span_bytes() + ld(13, ld(1, bad) + ld(2, bad))),  # link ids
        request_bytes(span_bytes(kv_bytes(b"k", ld(7, bad)))),  # bytes_value
        request_bytes(span_bytes() + ld(99, bad)),  # unknown fields, at every level
        ld(1, ld(2, ld(1, ld(99, bad)) + ld(99, bad)) + ld(99, bad)) + ld(99, bad),
        place(((_REQUEST, 1), ("opentelemetry.proto.trace.v1.ResourceSpans", 1)), ld(9, bad)),
        place(
            ((_REQUEST, 1), ("opentelemetry.proto.trace.v1.ResourceSpans", 1)),
            ld(1, kv_bytes(b"k", ld(5, ld(1, ld(7, bad) + ld(99, bad))))),
        ),
    ):
        check_scan(data, require_answer=True)


def test_utf8_sequences() -> None:
    """Every 1- and 2-byte string, and 3- and 4-byte strings around every boundary, at several
    alignments: the validating scan answers exactly for valid UTF-8, as upb parses exactly those."""
    tails = (0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF)
    texts = [bytes([a, b]) for a in range(256) for b in range(256)]
    texts += [bytes([a, b, c]) for a in range(0xC0, 0x100) for b in range(256) for c in tails[::2]]
    texts += [
        bytes([a, b, c, d]) for a in range(0xE0, 0x100) for b in tails for c in tails for d in tails
    ]
    for i, text in enumerate(texts):
        text = b"a" * (i % 19) + text + b"z" * (i % 7)
        try:
            text.decode()
        except UnicodeDecodeError:
            valid = False
        else:
            valid = True
        data = ld(1, ld(3, text))  # ResourceSpans.schema_url
        assert (scan_trace_request(data, PREFIXES, EVENT, True) is not None) is valid, text
        if i % 7 == 0:
            assert _upb_parses(data) is valid, text


def test_every_code_point() -> None:
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF).encode()
    for skew in range(17):  # every alignment of the 16- and 8-byte ASCII checks
        data = request_bytes(span_bytes() + ld(5, b"a" * skew + text))
        assert check_scan(data, require_answer=True) is not None


def _chain(kinds: str, leaf: bytes = vi(3, 1)) -> bytes:
    """A serialized AnyValue: `kinds` from the outside in, "a" an array and "k" a kvlist around
    the next; innermost the AnyValue `leaf`."""
    value = leaf
    for kind in reversed(kinds):
        value = ld(5, ld(1, value)) if kind == "a" else ld(6, ld(1, kv_bytes(b"k", value)))
    return value


@pytest.mark.parametrize("leaf", [vi(3, 1), b"", ld(1, b"text")], ids=["int", "empty", "str"])
def test_nesting_depth(leaf: bytes) -> None:
    """Answers up to VALIDATE_LEVELS message levels, None beyond; upb parses up to 101."""
    seen = set()
    for arrays in range(50):
        for kvlists in range(3):
            kinds = "k" * kvlists + "a" * arrays
            data = request_bytes(span_bytes(kv_bytes(b"key", _chain(kinds, leaf))))
            levels = 6 + 2 * arrays + 3 * kvlists  # request, ..., span, key-value, any-value
            if levels > 103:
                continue
            seen.add(levels)
            assert _upb_parses(data) is (levels <= 101), levels
            request = ExportTraceServiceRequest.FromString(data) if levels <= 101 else None
            assert request is None or message_levels(request) == levels
            validated = scan_trace_request(data, PREFIXES, EVENT, True)
            assert (validated is not None) is (levels <= VALIDATE_LEVELS), levels
            check_scan(data)
    assert {VALIDATE_LEVELS - 1, VALIDATE_LEVELS, VALIDATE_LEVELS + 1, 101, 102} <= seen
    # a key-value at the last level (the shape the C code reads without the general walk):
    # without a value it answers; with one, its value is a level too deep
    arrays = "a" * ((VALIDATE_LEVELS - 8) // 2)  # 6 levels down to the first value, 2 per array
    data = request_bytes(span_bytes(kv_bytes(b"key", _chain(arrays, ld(6, ld(1, ld(1, b"k")))))))
    assert message_levels(ExportTraceServiceRequest.FromString(data)) == VALIDATE_LEVELS
    assert check_scan(data, require_answer=True) is not None
    with_value = _chain(arrays, ld(6, ld(1, kv_bytes(b"k", vi(3, 1)))))
    data = request_bytes(span_bytes(kv_bytes(b"key", with_value)))
    assert message_levels(ExportTraceServiceRequest.FromString(data)) == VALIDATE_LEVELS + 1
    assert scan_trace_request(data, PREFIXES, EVENT, True) is None
    # invalid UTF-8 deep in a value: the plain scan does not look there, the validating one does
    data = request_bytes(span_bytes(kv_bytes(b"key", _chain("a" * 29, ld(1, b"\xff")))))
    assert not _upb_parses(data)
    assert scan_trace_request(data, PREFIXES, EVENT) is not None  # the plain scan: not walked
    assert scan_trace_request(data, PREFIXES, EVENT, True) is None


def _known_fields() -> list[tuple[Path, str, int, str]]:
    """(path, message, number, kind) of every known field, one path per message type."""
    paths: dict[str, Path] = {}
    for path, message, _ in STRING_PATHS:
        for i, (step, _) in enumerate(path):
            paths.setdefault(step, path[:i])
        paths.setdefault(message, path)
    assert set(paths) == set(SCHEMA)
    return [
        (paths[message], message, number, kind)
        for message, fields in SCHEMA.items()
        for number, (kind, _) in fields.items()
    ]


_WIRE_PAYLOAD = {0: varint(1), 1: b"12345678", 2: varint(2) + b"ok", 5: b"1234"}


@pytest.mark.parametrize(("path", "message", "number", "kind"), _known_fields())
def test_wrong_wire_types_everywhere(path: Path, message: str, number: int, kind: str) -> None:
    """upb keeps a known field with another wire type as an unknown field (no error); the
    validating scan answers None for it, as the plain scan does."""
    right = _WIRE_TYPE_OF_KIND[kind]
    if right == 2:  # a valid value: an empty message, a span with ids, text, ids
        good = {(_SPAN, 1): b"t" * 16, (_SPAN, 2): b"s" * 8}.get((message, number), b"ok")
        if kind == "message":
            good = _SPAN_IDS if SCHEMA[message][number][1] == _SPAN else b""
        payload = varint(len(good)) + good
    else:
        payload = _WIRE_PAYLOAD[right]
    check_scan(place(path, tag(number, right) + payload), require_answer=True)
    for wrong in (0, 1, 2, 5):
        if wrong != right:
            data = place(path, tag(number, wrong) + _WIRE_PAYLOAD[wrong])
            assert _upb_parses(data)
            assert scan_trace_request(data, PREFIXES, EVENT, True) is None
    for wrong in (3, 4, 6, 7):  # groups; wire types that do not exist
        assert scan_trace_request(place(path, tag(number, wrong)), PREFIXES, EVENT, True) is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(ld(1, b"") + tag(1, 2) + b"\x80" * 5 + b"\x00", id="6-byte-length"),
        pytest.param(tag(1, 2) + b"\x80" * 9 + b"\x00", id="10-byte-length"),
        pytest.param(request_bytes(span_bytes() + tag(4, 2) + b"\x82\x80\x80\x80\x80\x00"), id="6"),
        pytest.param(request_bytes(span_bytes() + tag(99, 2) + b"\x80" * 6 + b"\x00"), id="7"),
    ],
)
def test_padded_lengths(data: bytes) -> None:
    """upb reads a length in at most 5 bytes (the plain scan takes up to 10)."""
    assert not _upb_parses(data)
    assert scan_trace_request(data, PREFIXES, EVENT, True) is None
    padded5 = request_bytes(span_bytes() + tag(4, 2) + b"\x80\x80\x80\x80\x00")
    assert _upb_parses(padded5)
    check_scan(padded5, require_answer=True)


def _full_request() -> bytes:
    """A request with every field of every message type set, text non-ASCII."""
    values = [
        AnyValue(string_value="ü"),
        AnyValue(bool_value=True),
        AnyValue(int_value=-1),
        AnyValue(double_value=0.5),
        AnyValue(bytes_value=b"\xff"),
        _scalar("strindex", 3),
        _array([AnyValue(string_value="ä"), AnyValue()]),
        _kvlist([_key_value("ö", AnyValue(string_value="é"))]),
    ]
    attributes = [_key_value(f"k{i}é", value) for i, value in enumerate(values)]
    attributes.append(KeyValue(key_strindex=2))
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add(schema_url="https://é")
    rs.resource.attributes.extend(attributes)
    rs.resource.dropped_attributes_count = 1
    rs.resource.entity_refs.add(
        schema_url="s€", type="service", id_keys=["service.name", "ü"], description_keys=["d😀"]
    )
    ss = rs.scope_spans.add(schema_url="ß")
    ss.scope.name = "scöpe"
    ss.scope.version = "1.0‑β"
    ss.scope.attributes.extend(attributes)
    ss.scope.dropped_attributes_count = 2
    span = ss.spans.add(
        trace_id=bytes(range(16)),
        span_id=bytes(range(8)),
        trace_state="k=ä",
        parent_span_id=b"P" * 8,
        flags=0x100,
        name="名前",
        kind=2,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        dropped_attributes_count=3,
        dropped_events_count=4,
        dropped_links_count=5,
    )
    span.attributes.extend(attributes)
    event = span.events.add(time_unix_nano=1, name="éve", dropped_attributes_count=6)
    event.attributes.extend(attributes)
    link = span.links.add(
        trace_id=b"L" * 16, span_id=b"l" * 8, trace_state="ø", dropped_attributes_count=7, flags=1
    )
    link.attributes.extend(attributes)
    span.status.message = "ошибка"
    span.status.code = 2
    return request.SerializeToString()


FULL_REQUEST = _full_request()


def test_full_request_sets_every_field() -> None:
    found: set[tuple[str, int]] = set()

    def walk(message: Message) -> None:
        for field, value in message.ListFields():
            found.add((message.DESCRIPTOR.full_name, field.number))
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for sub in value if field.is_repeated else [value]:
                    walk(sub)

    walk(ExportTraceServiceRequest.FromString(FULL_REQUEST))
    assert found == {(m, n) for m, fields in SCHEMA.items() for n in fields}
    assert check_scan(FULL_REQUEST, require_answer=True)[0] is False


def test_full_request_truncations_and_mutations() -> None:
    answered = parsed = 0
    for n in range(len(FULL_REQUEST)):
        check_scan(FULL_REQUEST[:n])
    for i, byte in enumerate(FULL_REQUEST):
        for new in {0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xED, 0xF4, 0xFF, byte ^ 0x01, byte ^ 0x40}:
            if new != byte:
                data = FULL_REQUEST[:i] + bytes([new]) + FULL_REQUEST[i + 1 :]
                check_scan(data)
                parsed += _upb_parses(data)
                answered += scan_trace_request(data, PREFIXES, EVENT, True) is not None
    # and not None for everything: None is rare for bytes upb parses (a tag changed into a known
    # field with another wire type, say)
    assert answered > 0.9 * parsed


@settings(SETTINGS, max_examples=100)
@given(_requests(), st.data())
def test_mutated_requests(request: ExportTraceServiceRequest, draw: st.DataObject) -> None:
    data = bytearray(request.SerializeToString() or b"\x0a\x00")
    for _ in range(draw.draw(st.integers(1, 4))):
        i = draw.draw(st.integers(0, len(data)))
        op = draw.draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        chunk = draw.draw(st.binary(min_size=1, max_size=3))
        if op == "set":
            data[i : i + len(chunk)] = chunk
        elif op == "insert":
            data[i:i] = chunk
        elif op == "delete":
            del data[i : i + len(chunk)]
        else:
            del data[i:]
    check_scan(bytes(data))


@SETTINGS
@given(st.sampled_from(STRING_PATHS), st.data())
def test_random_strings(where: tuple[Path, str, int], draw: st.DataObject) -> None:
    """Random bytes in any string field: an answer exactly for valid UTF-8."""
    text = draw.draw(st.one_of(st.binary(max_size=24), st.text(max_size=24).map(str.encode)))
    if draw.draw(st.booleans()) and text:  # one byte changed
        i = draw.draw(st.integers(0, len(text) - 1))
        text = text[:i] + bytes([draw.draw(st.integers(0x80, 0xFF))]) + text[i + 1 :]
    path, _, number = where
    data = place(path, ld(number, text))
    try:
        text.decode()
    except UnicodeDecodeError:
        valid = False
    else:
        valid = True
    assert _upb_parses(data) is valid
    check_scan(data, require_answer=valid)
    assert (scan_trace_request(data, PREFIXES, EVENT, True) is not None) is valid


# --- arguments -----------------------------------------------------------------------------------


def test_bad_arguments() -> None:
    data = span_bytes()
    for args in [
        ("abc", 0, 0, 9),
        (None, 0, 0, 9),
        (memoryview(b"abcd")[::2], 0, 1, 9),
        (data, 0.0, 1, 9),
        (data, 0, "1", 9),
        (data, 0, 1, None),
        (data, 0, 1),
        (data, 0, 1, 9, 9),
    ]:
        with pytest.raises(TypeError):
            decode_key_values(*args)
    with pytest.raises(TypeError):
        decode_key_values(data=data, start=0, end=1, field=9)
    for args in [
        (data, -1, 1, 9),
        (data, 2, 1, 9),
        (data, 0, len(data) + 1, 9),
        (data, 0, 2**70, 9),
        (data, 0, 1, 0),
        (data, 0, 1, -9),
        (data, 0, 1, 2**29),
        (data, 0, 1, 2**70),
    ]:
        with pytest.raises(ValueError):
            decode_key_values(*args)
    for args in [
        ("abc", PREFIXES, EVENT),
        (memoryview(b"abcd")[::2], PREFIXES, EVENT),
        (data, list(PREFIXES), EVENT),
        (data, ("gen_ai.",), EVENT),
        (data, (b"gen_ai.", None), EVENT),
        (data, PREFIXES, "db.query.result"),
        (data, PREFIXES, bytearray(EVENT)),
        (data, PREFIXES),
        (data, PREFIXES, EVENT, True, True),
    ]:
        with pytest.raises(TypeError):
            scan_trace_request(*args)
    with pytest.raises(TypeError):
        scan_trace_request(data, PREFIXES, EVENT, validate=True)

    class Unsure:
        def __bool__(self) -> bool:
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):  # the truth of `validate` is asked once, as usual
        scan_trace_request(data, PREFIXES, EVENT, Unsure())
    request = request_bytes(span_bytes())
    for validate in (1, "yes", [0]):
        assert scan_trace_request(request, PREFIXES, EVENT, validate) is not None
    for validate in (False, 0, None, ""):
        assert scan_trace_request(request, PREFIXES, EVENT, validate) == scan_trace_request(
            request, PREFIXES, EVENT
        )


def test_documented() -> None:
    assert _speedups.__doc__
    assert str(inspect.signature(decode_key_values)) == "(data, start, end, field, /)"
    assert (
        str(inspect.signature(scan_trace_request))
        == "(data, prefixes, event_name, validate=False, /)"
    )
    assert str(inspect.signature(_speedups.trace_request_schema)) == "()"
    assert _speedups.VALIDATES is True
    assert "validate" in (scan_trace_request.__doc__ or "")
    assert "None" in (decode_key_values.__doc__ or "")
    assert "None" in (scan_trace_request.__doc__ or "")


# --- 5: no leaks ---------------------------------------------------------------------------------


# every kind of value, and the None ones: absent value, empty AnyValue, strindex, too deep
_LEAK_SPAN = span_bytes(
    kv_bytes(b"s", ld(1, "é😀".encode())),
    kv_bytes(b"empty", ld(1, b"")),
    kv_bytes(b"absent"),
    kv_bytes(b"none", b""),
    kv_bytes(b"strindex", vi(8, 3)),
    kv_bytes(b"b", vi(2, 1)),
    kv_bytes(b"i", vi(3, 2**64 - 1)),
    kv_bytes(b"d", tag(4, 1) + struct.pack("<d", 1.5)),
    kv_bytes(b"y", ld(7, b"\x00")),
    kv_bytes(b"a", ld(5, ld(1, vi(3, 1000)) + ld(1, b"") + ld(1, vi(8, 1)))),
    kv_bytes(b"m", ld(6, ld(1, kv_bytes(b"x", vi(2, 0))) + ld(1, kv_bytes(b"x", vi(2, 1))))),
    kv_bytes(b"deep", _nested(MAX_VALUE_DEPTH + 1, False)),
    kv_bytes(None, vi(3, 5)),
    kv_bytes(b"s", vi(3, 7)),
)
# None after some values were built: each error path must drop what it holds
_LEAK_NONE = [
    span_bytes(  # three attributes decoded, then invalid UTF-8 in a kvlist: None
        *[kv_bytes(b"k%d" % i, ld(5, ld(1, vi(2, 1)) + ld(1, ld(6, b"")))) for i in range(3)],
        kv_bytes(b"x", ld(6, ld(1, kv_bytes(b"y", ld(1, b"\xff"))))),
    ),
    span_bytes(kv_bytes(b"ok", ld(1, b"v")), kv_bytes(b"\xff", ld(5, ld(1, ld(1, b"x"))))),
    span_bytes(kv_bytes(b"a", ld(5, ld(1, vi(3, 1)) + ld(1, ld(1, b"\xff"))))),
    span_bytes(kv_bytes(b"a", ld(5, ld(1, vi(3, 1)) + ld(1, vi(3, 1) + vi(3, 2))))),
    span_bytes(kv_bytes(b"m", ld(6, ld(1, kv_bytes(b"x", vi(2, 0))) + ld(1, ld(1, b"\xff"))))),
    span_bytes(kv_bytes(b"ok", ld(1, b"v")), kv_bytes(b"t", vi(3, 1)) + b"\x80"),
]
_SCAN_NONE = [
    SMALL_REQUEST[:-3],
    request_bytes(span_bytes(), span_bytes(), span_bytes(trace_id=b"short")),
    request_bytes(span_bytes(), span_bytes() + vi(15, 1)),
]
# None from the validating scan only, after some spans were recorded
_VALIDATE_NONE = [
    request_bytes(span_bytes(), span_bytes(kv_bytes(b"k", ld(5, ld(1, ld(1, b"\xed\xa0\x80")))))),
    request_bytes(span_bytes(), span_bytes(kv_bytes(b"k", _nested(40, False)))),
    request_bytes(span_bytes(), span_bytes() + ld(13, ld(3, b"\xc0\x80"))),
]


def test_leak_inputs_take_the_intended_paths() -> None:
    got = check_decode(_LEAK_SPAN, 0, len(_LEAK_SPAN), 9)
    assert got is not None
    assert got["strindex"] is None and got["absent"] is None and got["none"] is None
    assert got["a"] == [1000, None, None]
    assert all(decode_key_values(d, 0, len(d), 9) is None for d in _LEAK_NONE)
    assert all(scan_trace_request(d, PREFIXES, EVENT) is None for d in _SCAN_NONE)
    assert all(scan_trace_request(d, PREFIXES, EVENT) is not None for d in _VALIDATE_NONE)
    assert all(scan_trace_request(d, PREFIXES, EVENT, True) is None for d in _VALIDATE_NONE)
    assert check_scan(SMALL_REQUEST, require_answer=True) is not None
    assert check_scan(FULL_REQUEST, require_answer=True) is not None


@pytest.mark.parametrize(
    ("call", "calls_per_call"),
    [
        pytest.param(
            lambda: decode_key_values(_LEAK_SPAN, 0, len(_LEAK_SPAN), 9), 1, id="decode-values"
        ),
        pytest.param(
            lambda: [decode_key_values(d, 0, len(d), 9) for d in _LEAK_NONE],
            len(_LEAK_NONE),
            id="decode-none",
        ),
        pytest.param(lambda: scan_trace_request(SMALL_REQUEST, PREFIXES, EVENT), 1, id="scan"),
        pytest.param(
            lambda: scan_trace_request(FULL_REQUEST, PREFIXES, EVENT, True), 1, id="validate"
        ),
        pytest.param(
            lambda: [scan_trace_request(d, PREFIXES, EVENT, True) for d in _VALIDATE_NONE],
            len(_VALIDATE_NONE),
            id="validate-none",
        ),
        pytest.param(_speedups.trace_request_schema, 10, id="schema"),
        pytest.param(
            lambda: [scan_trace_request(d, PREFIXES, EVENT) for d in _SCAN_NONE],
            len(_SCAN_NONE),
            id="scan-none",
        ),
        pytest.param(
            expecting(
                lambda: scan_trace_request(SMALL_REQUEST, (*PREFIXES, 1), EVENT),
                TypeError,
                ValueError,
            ),
            1,
            id="scan-type-error",
        ),
        pytest.param(
            expecting(lambda: decode_key_values(_LEAK_SPAN, 5, 1, 9), TypeError, ValueError),
            1,
            id="decode-error",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], calls_per_call: int) -> None:
    # 100,000 calls of the C function each time
    assert_leak_free(call, [PREFIXES, EVENT, *PREFIXES], 100_000 // calls_per_call)


def test_keys_decoded_before_are_the_same_strings() -> None:
    """ASCII keys of up to 64 bytes come from the module's key cache: the second decoding of a
    key gives the string made the first time (its hash already computed); other keys, and keys
    whose cache slot another key took since, are decoded afresh, equal all the same."""
    keys = ["gen_ai.operation.name", "k" * 64, "k" * 65, "clé", "", "a\x00b"]
    keys += [f"key.{i}" for i in range(2000)]  # more keys than slots: slots are reused
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.attributes.extend(_key_value(k, AnyValue(int_value=i)) for i, k in enumerate(keys))
    raw = span.SerializeToString()
    first = decode_key_values(raw, 0, len(raw), 9)
    second = decode_key_values(raw, 0, len(raw), 9)
    assert same(first, _proto_attributes(span.attributes))
    assert same(second, first)
    assert list(first) == list(second) == keys
    one = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    one.attributes.append(_key_value("gen_ai.operation.name", AnyValue(string_value="chat")))
    raw_one = one.SerializeToString()
    a = next(iter(decode_key_values(raw_one, 0, len(raw_one), 9)))
    b = next(iter(decode_key_values(raw_one, 0, len(raw_one), 9)))
    assert a is b
    long_key = [k for k in decode_key_values(raw, 0, len(raw), 9) if len(k) == 65]
    assert long_key and long_key[0] is not next(k for k in first if len(k) == 65)
