"""`tracehound._speedups.read_trace_spans` and `splice_trace_request` (C) against upb.

`read_trace_spans` must read every span, scope and resource exactly as the upb-parsed request
has them (the last occurrence of a field winning, enums as int32, status occurrences merged), or
answer None; `splice_trace_request` must give bytes that parse to the request upb serializes
after the same edits (spans cut out, fields merged into spans, spans replaced, then empty scopes
and resources dropped as the sidecar drops them). `SpanView.from_wire` over the first must see
every span as `SpanView.from_proto` sees the parsed one.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from _kernel_fuzz import expected_read as _expected
from _leaks import assert_leak_free, expecting
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, Status

from tracehound import _accel, _speedups
from tracehound.server._pipeline import _drop_empty
from tracehound.spans import ResourceView, SpanView

read_trace_spans = _speedups.read_trace_spans
splice_trace_request = _speedups.splice_trace_request

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_texts = st.sampled_from(["", "GET /", "chat gpt-4o", "é😀", "x" * 300])
_keys = st.sampled_from(["gen_ai.operation.name", "http.route", "é", ""])
_values = st.one_of(
    st.text(max_size=20).map(lambda s: AnyValue(string_value=s)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.just(AnyValue()),
)
_attributes = st.lists(st.builds(lambda k, v: KeyValue(key=k, value=v), _keys, _values), max_size=3)
# enum values beyond the declared ones and beyond int32 (upb keeps the low 32 bits)
_enums = st.sampled_from([0, 1, 2, 3, 5, 7, 2**31 - 1, -1, -(2**31)])


@st.composite
def _requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    trace_ids = [draw(st.binary(min_size=16, max_size=16)) for _ in range(2)]
    for _ in range(draw(st.integers(0, 3))):
        rs = request.resource_spans.add(schema_url=draw(_texts))
        if draw(st.booleans()):
            rs.resource.attributes.extend(draw(_attributes))
            rs.resource.dropped_attributes_count = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(0, 3))):
            ss = rs.scope_spans.add(schema_url=draw(_texts))
            if draw(st.booleans()):
                ss.scope.name = draw(_texts)
                ss.scope.version = draw(_texts)
                ss.scope.attributes.extend(draw(_attributes))
            for _ in range(draw(st.integers(0, 4))):
                span = ss.spans.add(
                    trace_id=draw(st.sampled_from(trace_ids)),
                    span_id=draw(st.binary(min_size=8, max_size=8)),
                    parent_span_id=draw(st.sampled_from([b"", b"P" * 8, b"\x00" * 8, b"p" * 3])),
                    trace_state=draw(_texts),
                    name=draw(_texts),
                    kind=draw(_enums),
                    start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    end_time_unix_nano=draw(st.sampled_from([0, 1, 2**64 - 1])),
                    flags=draw(st.sampled_from([0, 0x100, 0x300, 0x301, 2**32 - 1])),
                )
                span.attributes.extend(draw(_attributes))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add(name=draw(_texts), time_unix_nano=7)
                    event.attributes.extend(draw(_attributes))
                if draw(st.booleans()):
                    span.status.CopyFrom(Status(code=draw(_enums), message=draw(_texts)))
                if draw(st.booleans()):
                    span.links.add(trace_id=b"L" * 16, span_id=b"l" * 8)
    return request


def check_read(data: bytes) -> Any:
    """read_trace_spans(data) must be None or exactly what upb reads; returns its answer."""
    answer = read_trace_spans(data)
    if answer is None:
        return None
    request = ExportTraceServiceRequest.FromString(data)
    scopes, spans = answer
    expected_scopes, expected_spans = _expected(request)
    assert [(s[0], s[3], s[6], s[7], s[8], s[9]) for s in scopes] == expected_scopes
    assert [s[:11] for s in spans] == expected_spans
    flat = [
        (rs, ss, span)
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    k = 0
    for scope in scopes:
        index = scope[0]
        rs = request.resource_spans[index]
        assert Resource.FromString(data[scope[1] : scope[2]]) == rs.resource
        ss = ScopeSpans.FromString(data[scope[10] : scope[11]])
        assert InstrumentationScope.FromString(data[scope[4] : scope[5]]) == ss.scope
        for _ in range(scope[9]):
            assert flat[k][1] == ss
            k += 1
    for (_, _, span), fields in zip(flat, spans, strict=True):
        assert Span.FromString(data[fields[11] : fields[12]]) == span
    return answer


# --- read_trace_spans ---------------------------------------------------------------------------


@SETTINGS
@given(_requests())
def test_read_parity_with_upb(request: ExportTraceServiceRequest) -> None:
    data = request.SerializeToString()
    answer = check_read(data)
    if all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in _all_spans(request)):
        assert answer is not None  # everything upb writes is read


def _all_spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _span(*extra: bytes) -> bytes:
    return _ld(1, b"T" * 16) + _ld(2, b"S" * 8) + b"".join(extra)


def _request(*spans: bytes, resource: bytes = b"", scope: bytes = b"") -> bytes:
    return _ld(1, resource + _ld(2, scope + b"".join(_ld(2, s) for s in spans)))


def test_last_occurrence_wins_and_status_merges() -> None:
    span = _span(
        _ld(5, b"first"),
        _ld(5, b"second"),
        b"\x30\x02",  # kind 2, then 3
        b"\x30\x03",
        _ld(15, b"\x18\x02" + _ld(2, b"bad")),  # two Status occurrences merge field by field
        _ld(15, _ld(2, b"worse")),
        b"\x85\x01" + struct.pack("<I", 0x300),  # flags (field 16, fixed32)
        _ld(99, b"unknown"),
    )
    data = _request(span)
    answer = check_read(data)
    assert answer is not None
    fields = answer[1][0]
    assert fields[3] == "second" and fields[4] == 3 and fields[7] is True
    assert (fields[8], fields[9]) == (2, "worse")


def test_fields_after_the_spans_are_read() -> None:
    # schema URLs and the scope after the spans, as a hand-written encoder may put them
    scope_spans = _ld(2, _span()) + _ld(1, _ld(1, b"late.scope")) + _ld(3, b"s-url")
    data = _ld(1, _ld(2, scope_spans) + _ld(1, _ld(1, _ld(1, b"k"))) + _ld(3, b"r-url"))
    answer = check_read(data)
    assert answer is not None
    assert answer[0][0][3] == "r-url" and answer[0][0][6] == "late.scope"


@pytest.mark.parametrize(
    "data",
    [
        _request(_span(), resource=_ld(1, b"") + _ld(1, b"")),  # two resources: upb merges
        _ld(1, _ld(2, _ld(1, b"") + _ld(1, b"") + _ld(2, _span()))),  # two scopes
        _request(_ld(1, b"T" * 15) + _ld(2, b"S" * 8)),  # a 15-byte trace id
        _request(_span(_ld(5, b"\xff"))),  # invalid UTF-8 name
        _request(_span(_ld(15, _ld(2, b"\xc0\x80")))),  # overlong UTF-8 in the status
        _request(_span(b"\x28\x01")),  # the name (field 5) as a varint
        _request(_span()) + b"\x0a",  # truncated
        b"\x08\x01",  # resource_spans as a varint
    ],
)
def test_unread_bytes_are_none(data: bytes) -> None:
    assert read_trace_spans(data) is None


def test_empty_and_buffers() -> None:
    assert read_trace_spans(b"") == ([], [])
    data = _request(_span())
    assert read_trace_spans(bytearray(data)) == read_trace_spans(memoryview(data))
    with pytest.raises(TypeError):
        read_trace_spans("text")  # type: ignore[arg-type]


def test_trace_id_strings_are_shared_within_a_trace() -> None:
    answer = read_trace_spans(_request(_span(), _span()))
    assert answer is not None
    assert answer[1][0][0] is answer[1][1][0]


# --- SpanView.from_wire -------------------------------------------------------------------------


def _view_state(view: SpanView) -> tuple[Any, ...]:
    return (
        view.trace_id,
        view.span_id,
        view.parent_span_id,
        view.name,
        view.parent_is_remote,
        view.scope_name,
        view.scope_version,
        view.kind,
        view.start_ns,
        view.end_ns,
        view.status_code,
        view.status_message,
        view.attributes,
        view.attribute_keys,
        [(e.name, e.time_ns, e.attributes) for e in view.events],
        view.has_event("é😀"),
        view.resource.attributes,
        view.source,
    )


@SETTINGS
@given(_requests())
def test_wire_views_see_what_proto_views_see(request: ExportTraceServiceRequest) -> None:
    data = request.SerializeToString()
    answer = read_trace_spans(data)
    if answer is None:
        return
    scopes, spans = answer
    k = 0
    for scope in scopes:
        rs = request.resource_spans[scope[0]]
        wire_resource = ResourceView.from_wire(data, scope[1], scope[2])
        proto_resource = ResourceView(rs.resource, "proto")
        for _ in range(scope[9]):
            fields = spans[k]
            proto_span = _all_spans(request)[k]
            k += 1
            ss_scope = InstrumentationScope.FromString(data[scope[4] : scope[5]])
            try:
                proto = SpanView.from_proto(proto_span, proto_resource, ss_scope)
            except ValueError:
                with pytest.raises(ValueError):
                    SpanView.from_wire(data, fields, wire_resource, scope[6], scope[7])
                continue
            proto.locate_in(data, fields[11], fields[12])  # as the sidecar's upb path does
            wire = SpanView.from_wire(data, fields, wire_resource, scope[6], scope[7])
            assert _view_state(wire) == _view_state(proto)
            # a pre-check: "maybe" (True) is always allowed, "no" only where upb's says no
            assert wire.may_be_genai() or not proto.may_be_genai()


def test_a_wire_view_prechecks_its_bytes() -> None:
    genai = _request(_span(_ld(9, _ld(1, b"gen_ai.system"))))
    plain = _request(_span(_ld(9, _ld(1, b"http.route"))))
    # the same key with an over-long tag (0x8a 0x00): upb reads it as the key
    overlong = _request(_span(_ld(9, b"\x8a\x00" + _varint(13) + b"gen_ai.system")))
    for data, expected in ((genai, True), (plain, False), (overlong, True)):
        answer = read_trace_spans(data)
        assert answer is not None
        view = SpanView.from_wire(data, answer[1][0], ResourceView.from_wire(data, 0, 0), "", "")
        assert view.may_be_genai() is expected


def test_a_wire_view_parses_its_span_only_when_asked() -> None:
    data = _request(_span(_ld(9, _ld(1, b"gen_ai.system") + _ld(2, _ld(1, b"openai")))))
    answer = read_trace_spans(data)
    assert answer is not None
    view = SpanView.from_wire(data, answer[1][0], ResourceView.from_wire(data, 0, 0), "", "")
    assert view.attributes == {"gen_ai.system": "openai"}
    assert view.events == [] and not view.has_event("x")
    if _accel._in_use is not None:  # the attributes from the bytes: nothing needed the message
        assert view._source is None
    assert view.source == Span.FromString(data[answer[1][0][11] : answer[1][0][12]])


# --- splice_trace_request -----------------------------------------------------------------------

_ADDED = _ld(9, _ld(1, b"tracehound.loop.detected") + _ld(2, b"\x10\x01")) + _ld(
    11, b"\x09" + struct.pack("<Q", 5) + _ld(2, b"gen_ai.evaluation.result")
)


@SETTINGS
@given(_requests(), st.data())
def test_splice_parity_with_upb(request: ExportTraceServiceRequest, draw: st.DataObject) -> None:
    data = request.SerializeToString()
    spans = _all_spans(request)
    replacement = Span(trace_id=b"R" * 16, span_id=b"r" * 8, name="replaced")
    edits = draw.draw(
        st.lists(
            st.sampled_from([None, b"", _ADDED, (replacement.SerializeToString(),)]),
            min_size=len(spans),
            max_size=len(spans),
        )
    )
    spliced = splice_trace_request(data, edits)
    assert spliced is not None
    expected = ExportTraceServiceRequest()
    expected.CopyFrom(request)
    # the same edits through upb, in order, then the sidecar's drop of empty containers
    k = 0
    cuts: list[tuple[Any, int]] = []
    for rs in expected.resource_spans:
        for ss in rs.scope_spans:
            for index, span in enumerate(ss.spans):
                edit = edits[k]
                k += 1
                if edit is None:
                    cuts.append((ss.spans, index))
                elif isinstance(edit, tuple):
                    span.CopyFrom(Span.FromString(edit[0]))
                else:
                    span.MergeFromString(edit)
    for container, index in reversed(cuts):
        del container[index]
    _drop_empty(expected)
    assert ExportTraceServiceRequest.FromString(spliced) == expected
    if (
        not any(e is None or e for e in edits)
        and all(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        and all(len(rs.scope_spans) for rs in request.resource_spans)
    ):
        assert spliced == data  # nothing changed: the bytes as received


def test_splice_keeps_other_fields_as_received() -> None:
    unknown = _ld(99, b"kept")
    data = _ld(1, _ld(2, _ld(2, _span()) + unknown) + unknown) + unknown
    spliced = splice_trace_request(data, [_ld(5, b"n")])
    assert spliced == _ld(1, _ld(2, _ld(2, _span(_ld(5, b"n"))) + unknown) + unknown) + unknown
    # a long span: its length varint grows with what is appended
    long = _span(_ld(5, b"x" * 120))
    spliced = splice_trace_request(_request(long), [b"y" * 20])
    assert spliced == _request(long + b"y" * 20)


def test_splice_errors() -> None:
    data = _request(_span(), _span())
    with pytest.raises(ValueError):
        splice_trace_request(data, [b""])
    with pytest.raises(ValueError):
        splice_trace_request(data, [b"", b"", b""])
    with pytest.raises(TypeError):
        splice_trace_request(data, [b"", "text"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        splice_trace_request(data, (b"", b""))  # type: ignore[arg-type]
    assert splice_trace_request(data + b"\x0a", [b"", b""]) is None
    assert splice_trace_request(b"\x08\x01", []) is None
    assert splice_trace_request(data, [None, None]) == b""


# --- leaks --------------------------------------------------------------------------------------


def test_no_leaks() -> None:
    data = _request(
        _span(_ld(5, b"chat"), _ld(15, _ld(2, b"m"))),
        _span(_ld(4, b"P" * 8)),
        resource=_ld(1, _ld(1, _ld(1, b"k"))),
        scope=_ld(1, _ld(1, b"scope")),
    )
    bad_name = _request(_span(_ld(5, b"\xff")))
    edits: list[Any] = [_ADDED, None]
    watched: list[object] = [data, bad_name, edits, _ADDED]
    assert_leak_free(lambda: read_trace_spans(data), watched, n=20_000)
    assert_leak_free(lambda: read_trace_spans(bad_name), watched, n=20_000)
    assert_leak_free(lambda: splice_trace_request(data, edits), watched, n=20_000)
    assert_leak_free(
        expecting(lambda: splice_trace_request(data, [b""]), ValueError), watched, n=20_000
    )
    assert_leak_free(
        expecting(lambda: splice_trace_request(data, [b"", 1]), TypeError), watched, n=20_000
    )


# --- read_trace_views ---------------------------------------------------------------------------


def _slots(view: SpanView) -> dict[str, Any]:
    return {name: getattr(view, name, "<unset>") for name in SpanView.__slots__}


@SETTINGS
@given(_requests())
def test_read_trace_views_are_from_wire_views(request: ExportTraceServiceRequest) -> None:
    data = request.SerializeToString()
    made: list[tuple[int, int]] = []

    def resource_view(data: bytes, start: int, end: int) -> ResourceView:
        made.append((start, end))
        return ResourceView.from_wire(data, start, end)

    answer = _speedups.read_trace_views(data, SpanView, resource_view)
    spans = read_trace_spans(data)
    assert (answer is None) == (spans is None)
    if answer is None or spans is None:
        return
    assert answer[0] == spans[0]
    assert len(made) == len(request.resource_spans)
    k = 0
    for scope in spans[0]:
        for _ in range(scope[9]):
            view = answer[1][k]
            try:
                expected = SpanView.from_wire(
                    data, spans[1][k], ResourceView.from_wire(data, 0, 0), scope[6], scope[7]
                )
            except ValueError:
                assert view is None
            else:
                assert view is not None
                assert (view.resource._source[1], view.resource._source[2]) == scope[1:3]
                view.resource = expected.resource
                assert _slots(view) == _slots(expected)
            k += 1


def test_read_trace_views_errors_and_leaks() -> None:
    data = _request(_span(_ld(5, b"chat")), _span(_ld(4, b"p" * 3)), resource=_ld(1, b""))
    read = _speedups.read_trace_views

    def failing(data: bytes, start: int, end: int) -> None:
        raise KeyError("resource")

    with pytest.raises(TypeError):
        read(data, int, ResourceView.from_wire)
    with pytest.raises(KeyError):
        read(data, SpanView, failing)
    assert read(data + b"\x0a", SpanView, ResourceView.from_wire) is None
    watched: list[object] = [data, SpanView]
    assert_leak_free(lambda: read(data, SpanView, ResourceView.from_wire), watched, n=20_000)
    assert_leak_free(expecting(lambda: read(data, SpanView, failing), KeyError), watched, 20_000)
