"""The receiver's byte-level id reader: whenever it answers, it answers what the protobuf says.

`_fast_keys` reads every span's (trace id + span id) from the serialized request with one regex
pass; when its matches do not line up one to one with the spans it gives up (None) and the
span-by-span pass decides. Attribute values, links and resources are free to hold bytes that look
like a span's start, so the property is checked on requests built to contain such bytes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tracehound.server._pipeline import _fast_keys

# Bytes that imitate a span's start inside other fields: the `spans` tag, a length, the trace id
# tag and size, then ids — as a string value, a link, or glued to other bytes.
_LOOKALIKE = st.builds(
    lambda length, trace, span, tail: (
        b"\x12" + length + b"\x0a\x10" + trace + b"\x12\x08" + span + tail
    ),
    st.sampled_from([b"\x05", b"\x90\x02", b"\x80\x80\x01"]),
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
    st.binary(max_size=4),
)
_IDS = st.tuples(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8))


@st.composite
def _span(draw: st.DrawFn) -> Span:
    trace_id, span_id = draw(_IDS)
    span = Span(trace_id=trace_id, span_id=span_id, name=draw(st.text(max_size=8)))
    for index, blob in enumerate(draw(st.lists(st.one_of(_LOOKALIKE, st.binary()), max_size=3))):
        text = blob.decode("latin-1")  # any byte value, as UTF-8 on the wire
        span.attributes.append(KeyValue(key=f"k{index}", value=AnyValue(string_value=text)))
        span.attributes.append(KeyValue(key=f"b{index}", value=AnyValue(bytes_value=blob)))
    if draw(st.booleans()):
        link_trace, link_span = draw(_IDS)
        span.links.add(trace_id=link_trace, span_id=link_span)
    return span


@st.composite
def _request(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        resource_spans = ResourceSpans()
        for _ in range(draw(st.integers(1, 2))):
            resource_spans.scope_spans.append(ScopeSpans(spans=draw(st.lists(_span(), max_size=4))))
        request.resource_spans.append(resource_spans)
    return request


@settings(max_examples=300, deadline=None)
@given(_request())
def test_fast_keys_agree_with_the_protobuf_or_give_up(request: ExportTraceServiceRequest) -> None:
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    raw = request.SerializeToString()
    fast = _fast_keys(raw, len(spans))
    if fast is None:
        return
    keys, trace_ids = fast
    assert keys == [s.trace_id + s.span_id for s in spans]
    assert trace_ids == {s.trace_id for s in spans}


def test_fast_keys_read_plain_requests() -> None:
    """The common case answers (the property above could pass by always giving up)."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in range(1, 300):
        span = spans.add(trace_id=n.to_bytes(16, "big"), span_id=n.to_bytes(8, "big"), name="GET")
        span.attributes.append(KeyValue(key="http.route", value=AnyValue(string_value="/x" * n)))
    fast = _fast_keys(request.SerializeToString(), 299)
    assert fast is not None
    assert fast[0] == [n.to_bytes(16, "big") + n.to_bytes(8, "big") for n in range(1, 300)]
