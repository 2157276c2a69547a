"""`tracehound._speedups` (C) against the Python/upb reference it replaces on the hot path.

Whenever a C function answers (anything but None), its answer must be exactly the reference's:
`tracehound.spans._proto_attributes` over the upb-parsed message for `decode_key_values` (same
keys, key order, values and value types, NaN payloads and -0.0 included), and the spans of the
upb-parsed request for `scan_trace_request`. None is always allowed for input the C code does not
handle exactly (the caller falls back); for some shapes None is required (protobuf merge
semantics). Hostile input must never crash the interpreter or raise.
"""

from __future__ import annotations

import gc
import inspect
import struct
import sys
import tracemalloc
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from google.protobuf.message import DecodeError
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
_STR_PREFIXES = tuple(p.decode() for p in PREFIXES)

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


def expected_genai(request: ExportTraceServiceRequest) -> bool:
    def hit(attributes: Iterable[KeyValue]) -> bool:
        return any(kv.key.startswith(_STR_PREFIXES) for kv in attributes)

    event_name = EVENT.decode()
    for rs in request.resource_spans:
        if hit(rs.resource.attributes):
            return True
        for ss in rs.scope_spans:
            if hit(ss.scope.attributes):
                return True
            for span in ss.spans:
                if hit(span.attributes) or any(hit(link.attributes) for link in span.links):
                    return True
                if any(hit(e.attributes) or e.name == event_name for e in span.events):
                    return True
    return False


def check_scan(data: bytes, *, require_answer: bool = False) -> Any:
    """scan_trace_request(data) is None or agrees with upb (when upb can parse `data`)."""
    got = scan_trace_request(data, PREFIXES, EVENT)
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        request = None
    if require_answer:
        assert got is not None
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
        rs = request.resource_spans.add()
        if draw(st.booleans()):
            rs.resource.attributes.extend(draw(attributes))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            if draw(st.booleans()):
                ss.scope.name = draw(texts)
                ss.scope.attributes.extend(draw(attributes))
            for _ in range(draw(st.integers(0, 3))):
                span = ss.spans.add(
                    trace_id=draw(st.binary(min_size=16, max_size=16)),
                    span_id=draw(st.binary(min_size=8, max_size=8)),
                    parent_span_id=b"P" * 8,
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
                    link = span.links.add(trace_id=b"L" * 16, span_id=b"l" * 8, flags=1)
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
        assert scan_trace_request(request_bytes(span_bytes(), bad), PREFIXES, EVENT) is None
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
        assert scan_trace_request(wrapped, PREFIXES, EVENT) is None
    # attribute values are not walked by the scan (decode_key_values reads them)
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
    assert scan_trace_request(request_bytes(span), PREFIXES, EVENT) is None
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
    assert scan_trace_request(data, PREFIXES, EVENT) is None


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
    ]:
        with pytest.raises(TypeError):
            scan_trace_request(*args)


def test_documented() -> None:
    assert _speedups.__doc__
    assert str(inspect.signature(decode_key_values)) == "(data, start, end, field, /)"
    assert str(inspect.signature(scan_trace_request)) == "(data, prefixes, event_name, /)"
    assert "None" in (decode_key_values.__doc__ or "")
    assert "None" in (scan_trace_request.__doc__ or "")


# --- 5: no leaks ---------------------------------------------------------------------------------


def _leak_free(call: Callable[[], object], n: int = 100_000) -> None:
    """`call` n times: no reference or memory block may be left behind. The n calls are
    counted in pymalloc blocks (cheap); n // 10 more run under tracemalloc, which also sees
    PyMem_Malloc buffers too big for pymalloc."""
    watched = [None, True, False, PREFIXES, EVENT, *PREFIXES]
    for _ in range(1000):  # warm up: caches, free lists
        call()
    gc.collect()
    refcounts = [sys.getrefcount(o) for o in watched]
    blocks = sys.getallocatedblocks()
    for _ in range(n):
        call()
    gc.collect()
    grown = sys.getallocatedblocks() - blocks
    refcounts_after = [sys.getrefcount(o) for o in watched]  # before any assert: pytest's
    # rewritten asserts keep None in temporaries
    assert refcounts_after == refcounts
    assert grown < 1000, f"{grown} memory blocks left behind by {n} calls"
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(n // 10):
            call()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64 * 1024, f"{end - start} bytes left behind by {n // 10} calls"


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


def test_leak_inputs_take_the_intended_paths() -> None:
    got = check_decode(_LEAK_SPAN, 0, len(_LEAK_SPAN), 9)
    assert got is not None
    assert got["strindex"] is None and got["absent"] is None and got["none"] is None
    assert got["a"] == [1000, None, None]
    assert all(decode_key_values(d, 0, len(d), 9) is None for d in _LEAK_NONE)
    assert all(scan_trace_request(d, PREFIXES, EVENT) is None for d in _SCAN_NONE)


def _raises(call: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except (TypeError, ValueError):
            return
        raise AssertionError("no exception")

    return run


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
            lambda: [scan_trace_request(d, PREFIXES, EVENT) for d in _SCAN_NONE],
            len(_SCAN_NONE),
            id="scan-none",
        ),
        pytest.param(
            _raises(lambda: scan_trace_request(SMALL_REQUEST, (*PREFIXES, 1), EVENT)),
            1,
            id="scan-type-error",
        ),
        pytest.param(_raises(lambda: decode_key_values(_LEAK_SPAN, 5, 1, 9)), 1, id="decode-error"),
    ],
)
def test_no_leaks(call: Callable[[], object], calls_per_call: int) -> None:
    _leak_free(call, 100_000 // calls_per_call)  # 100,000 calls of the C function each time
