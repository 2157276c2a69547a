"""Seeded differential fuzzing of the C kernels that read client bytes, against the Python code
each one stands in for (`scripts/fuzz_kernels.py`, `test_kernels_fuzz.py`).

Each kernel has a generator, which turns a `random.Random` into one *case* (bytes: the input, in
a small framing of the kernel's own, so that a case printed as hex is a complete reproducer),
and a checker, which runs the case through the C kernel and through its reference:

- `scan_trace_request`: upb (`ExportTraceServiceRequest.FromString`): the spans' ids, byte
  ranges (`Span.FromString` of each range is the parsed span) and whether any key has a GenAI
  prefix; with `validate=True` an answer also promises that upb parses the bytes.
- `decode_key_values`: `tracehound.spans._proto_attributes` over the upb-parsed message.
- `read_trace_spans`: the upb-parsed request, field by field (an answer promises upb parses it).
- `read_trace_views`: `SpanView.from_proto` of each upb-parsed span on the pure-Python path
  (None where that raises ValueError), and None exactly where `read_trace_spans` is None.
- `splice_trace_request`: the same edits made through upb, then `_drop_empty`.

Whenever the C answers (anything but None) its answer must equal the reference's; None (the
caller's fallback) is always allowed except where the kernel documents that it answers. With
`native=None` (no accelerator, or `TRACEHOUND_PURE_PYTHON=1`) a checker runs the reference alone,
with the reference's own invariants (no unexpected exception).

Inputs are the OTLP fixtures (`tests/fixtures/*.pb`), small requests made of their spans, their
spans, resources, events and links, mutated: byte flips, insertions, deletions, truncations,
duplicated chunks; and, on the protobuf structure, deleted, duplicated and moved fields,
corrupted lengths, huge and over-long varints, wrong wire types and field numbers, invalid
UTF-8, wrong id lengths, and deeply nested values. Cases on which the C answered join a small
pool that later cases mutate further.
"""

from __future__ import annotations

import functools
import math
import random
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tracehound import _accel, _wire
from tracehound.server._pipeline import _drop_empty
from tracehound.spans import ResourceView, SpanView, _proto_attributes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PREFIXES = tuple(p.encode() for p in _wire.GENAI_KEY_PREFIXES)
EVENT = _wire.DB_QUERY_RESULT.encode()
_STR_PREFIXES = _wire.GENAI_KEY_PREFIXES


class Mismatch(AssertionError):
    """The C answer differs from the reference's (or the C raised where it must not)."""


def expect(condition: object, what: str) -> None:
    if not condition:
        raise Mismatch(what)


# --- the C module, and the pure-Python path ---------------------------------------------------


def native_module() -> Any:
    """`tracehound._speedups` when the library uses it, else None (not built, or turned off by
    TRACEHOUND_PURE_PYTHON=1), given Python's constants."""
    return _accel.loaded() if _accel._in_use is not None else None


@contextmanager
def pure_python() -> Iterator[None]:
    with _accel.use_native(False):
        yield


# --- comparing values ---------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types at every depth, dicts in the same key order, floats bit for
    bit (NaN payloads and -0.0 included)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


# --- wire helpers -------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position); ValueError when malformed."""
    value = shift = 0
    for _ in range(10):
        if pos >= end:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & ((1 << 64) - 1), pos
        shift += 7
    raise ValueError("varint too long")


# Wire type of each protobuf field type.
_WIRE_TYPE = {
    FieldDescriptor.TYPE_DOUBLE: 1,
    FieldDescriptor.TYPE_FIXED64: 1,
    FieldDescriptor.TYPE_SFIXED64: 1,
    FieldDescriptor.TYPE_FLOAT: 5,
    FieldDescriptor.TYPE_FIXED32: 5,
    FieldDescriptor.TYPE_SFIXED32: 5,
    FieldDescriptor.TYPE_STRING: 2,
    FieldDescriptor.TYPE_BYTES: 2,
    FieldDescriptor.TYPE_MESSAGE: 2,
}


@dataclass(frozen=True)
class _Field:
    wire_type: int
    kind: str  # "message", "string", "bytes", "scalar"
    message: Descriptor | None


_SCHEMAS: dict[str, dict[int, _Field]] = {}


def _schema(descriptor: Descriptor) -> dict[int, _Field]:
    schema = _SCHEMAS.get(descriptor.full_name)
    if schema is None:
        schema = _SCHEMAS[descriptor.full_name] = {}
        for f in descriptor.fields:
            wt = _WIRE_TYPE.get(f.type, 0)
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                schema[f.number] = _Field(wt, "message", f.message_type)
            elif f.type == FieldDescriptor.TYPE_STRING:
                schema[f.number] = _Field(wt, "string", None)
            elif f.type == FieldDescriptor.TYPE_BYTES:
                schema[f.number] = _Field(wt, "bytes", None)
            else:
                schema[f.number] = _Field(wt, "scalar", None)
    return schema


@dataclass(frozen=True)
class Node:
    """One field of a serialized message, where it lies in the bytes: its tag at `start`, its
    length varint (wire type 2) from `tag_end`, its payload from `payload` to `end`."""

    start: int
    tag_end: int
    payload: int
    end: int
    number: int
    wire_type: int
    kind: str  # as in _Field; "unknown" for fields the message does not define
    message: Descriptor | None  # the field's message type (kind "message")


def fields_of(data: bytes, pos: int, end: int, descriptor: Descriptor) -> list[Node] | None:
    """The fields of the serialized `descriptor` at `data[pos:end]` (not their sub-fields);
    None when the bytes are not well-formed."""
    schema = _schema(descriptor)
    nodes: list[Node] = []
    while pos < end:
        start = pos
        try:
            key, pos = _read_varint(data, pos, end)
            number, wt = key >> 3, key & 7
            tag_end = pos
            if wt == 0:
                _, pos = _read_varint(data, pos, end)
                payload = tag_end
            elif wt in {1, 5}:
                payload = pos
                pos += 8 if wt == 1 else 4
            elif wt == 2:
                n, payload = _read_varint(data, pos, end)
                pos = payload + n
            else:
                return None
        except ValueError:
            return None
        if pos > end or number == 0:
            return None
        f = schema.get(number)
        if f is not None and f.wire_type == wt:
            nodes.append(Node(start, tag_end, payload, pos, number, wt, f.kind, f.message))
        else:
            nodes.append(Node(start, tag_end, payload, pos, number, wt, "unknown", None))
    return nodes


def pick_field(
    rng: random.Random, data: bytes, descriptor: Descriptor
) -> tuple[list[Node], list[Node], int] | None:
    """A field of `data` at some depth, chosen by walking down from the top (into a well-formed
    sub-message 4 times in 5): (its enclosing fields, outermost first; its siblings; its index
    among them). None when the top level is not well-formed or empty."""
    siblings = fields_of(data, 0, len(data), descriptor)
    if not siblings:
        return None
    ancestors: list[Node] = []
    while True:
        i = rng.randrange(len(siblings))
        node = siblings[i]
        if node.kind == "message" and node.message is not None and rng.random() < 0.8:
            inner = fields_of(data, node.payload, node.end, node.message)
            if inner and len(ancestors) < 300:
                ancestors.append(node)
                siblings = inner
                continue
        return ancestors, siblings, i


def rebuild(data: bytes, ancestors: list[Node], lo: int, hi: int, replacement: bytes) -> bytes:
    """`data` with `data[lo:hi]` (inside the innermost of `ancestors`) replaced, the length of
    every enclosing field rewritten to fit."""
    for p in reversed(ancestors):
        payload = data[p.payload : lo] + replacement + data[hi : p.end]
        replacement = data[p.start : p.tag_end] + varint(len(payload)) + payload
        lo, hi = p.start, p.end
    return data[:lo] + replacement + data[hi:]


def sub_messages(data: bytes, descriptor: Descriptor, out: dict[str, list[bytes]]) -> None:
    """Every well-formed sub-message of `data`, at every depth, by message type."""
    for node in fields_of(data, 0, len(data), descriptor) or ():
        if node.kind == "message" and node.message is not None:
            payload = data[node.payload : node.end]
            out.setdefault(node.message.full_name, []).append(payload)
            sub_messages(payload, node.message, out)


# --- seeds ----------------------------------------------------------------------------------------

_DESCRIPTORS: dict[str, Descriptor] = {}


def _descriptor_by_name(name: str) -> Descriptor:
    return _DESCRIPTORS[name]


def _collect_descriptors(descriptor: Descriptor) -> None:
    if descriptor.full_name in _DESCRIPTORS:
        return
    _DESCRIPTORS[descriptor.full_name] = descriptor
    for f in descriptor.fields:
        if f.message_type is not None:
            _collect_descriptors(f.message_type)


_collect_descriptors(ExportTraceServiceRequest.DESCRIPTOR)
REQUEST = ExportTraceServiceRequest.DESCRIPTOR.full_name
_ANY_VALUE = _DESCRIPTORS["opentelemetry.proto.common.v1.AnyValue"]
# decode_key_values: the attributes field number of each message kind it reads
ATTRIBUTE_MESSAGES: dict[int, Any] = {9: Span, 1: Resource, 3: Span.Event, 4: Span.Link}


@dataclass
class Seeds:
    """What the generators start from."""

    requests: list[bytes] = field(default_factory=list)  # small ones made of fixture spans
    full_requests: list[bytes] = field(default_factory=list)  # the fixtures as they are
    messages: dict[int, list[bytes]] = field(default_factory=dict)  # attributes field -> msgs
    # message type name -> serialized sub-messages of it, for crossover
    parts: dict[str, list[bytes]] = field(default_factory=dict)


@functools.cache
def seeds() -> Seeds:
    return _make_seeds()


def _make_seeds() -> Seeds:
    s = Seeds()
    rng = random.Random(0)
    all_spans: list[tuple[Any, Any, Span]] = []
    for path in sorted(FIXTURES.glob("*.pb")):
        if path.name.endswith(".logs.pb"):
            continue
        data = path.read_bytes()
        request = ExportTraceServiceRequest.FromString(data)
        s.full_requests.append(data)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    all_spans.append((rs, ss, span))
    for rs, ss, span in all_spans:
        one = ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=rs.resource,
                    schema_url=rs.schema_url,
                    scope_spans=[ScopeSpans(scope=ss.scope, spans=[span], schema_url="")],
                )
            ]
        )
        s.requests.append(one.SerializeToString())
        s.messages.setdefault(9, []).append(span.SerializeToString())
        s.messages.setdefault(1, []).append(rs.resource.SerializeToString())
        for event in span.events:
            s.messages.setdefault(3, []).append(event.SerializeToString())
        link = Span.Link(
            trace_id=span.trace_id,
            span_id=span.span_id,
            trace_state="k=v",
            attributes=list(span.attributes)[:4],
            flags=0x301,
        )
        s.messages.setdefault(4, []).append(link.SerializeToString())
    # requests of a few spans, over one or two resources and scopes
    for _ in range(60):
        picks = rng.sample(all_spans, rng.randint(2, 4))
        request = ExportTraceServiceRequest()
        for rs, ss, span in picks:
            if not request.resource_spans or rng.random() < 0.4:
                target = request.resource_spans.add(resource=rs.resource)
            else:
                target = request.resource_spans[-1]
            if not target.scope_spans or rng.random() < 0.4:
                target.scope_spans.add(scope=ss.scope)
            target.scope_spans[-1].spans.append(span)
        s.requests.append(request.SerializeToString())
    for data in s.requests:
        sub_messages(data, ExportTraceServiceRequest.DESCRIPTOR, s.parts)
    for name in s.parts:
        # shortest first, then by content: the same order whatever the hash seed
        parts = sorted(set(s.parts[name]), key=lambda part: (len(part), part))[:400]
        s.parts[name] = parts
    return s


# --- mutations --------------------------------------------------------------------------------

_INTERESTING_INTS = (
    0,
    1,
    0x7F,
    0x80,
    0x3FFF,
    0x4000,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**63 - 1,
    2**63,
    2**64 - 1,
    (1 << 64) - 2**31,  # negative int32 as written by protobuf
)
_BAD_UTF8 = (
    b"\xff",
    b"\xc0\x80",  # over-long NUL
    b"\xc3",  # truncated 2-byte
    b"\xe2\x82",  # truncated 3-byte
    b"\xed\xa0\x80",  # a surrogate
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xf0\x9f\x98",  # truncated 4-byte
    b"\x80",  # lone continuation
    b"\xe0\x80\xaf",  # over-long
    b"\xf8\x88\x80\x80\x80",  # 5-byte form
)
_GOOD_UTF8 = ("é", "😀", "\u2019", "ß", "\x00", "Σ", "\u00a0", "ﬁ", "\uffff", "\U0010ffff")
_KEYS = (
    b"gen_ai.system",
    b"gen_ai.",
    b"llm.",
    b"openinference.span.kind",
    b"traceloop.entity.input",
    b"ai.",
    b"tool_",
    b"gen_ai",
    b"Gen_ai.system",
    b"http.route",
    b"db.query.result",
    b"service.name",
    b"",
)


def _mutate_varint(rng: random.Random) -> bytes:
    choice = rng.random()
    if choice < 0.5:
        return varint(rng.choice(_INTERESTING_INTS))
    if choice < 0.7:  # over-long: padded with continuation bytes (upb accepts up to 10 bytes)
        v = varint(rng.choice(_INTERESTING_INTS[:6]))
        pad = rng.randint(1, 10)
        return bytes(b | 0x80 for b in v) + b"\x80" * (pad - 1) + b"\x00"
    if choice < 0.85:  # 11 bytes or more: malformed
        return b"\xff" * rng.randint(10, 12) + b"\x01"
    return varint(rng.getrandbits(rng.choice((7, 14, 32, 64))))


def _bad_string(rng: random.Random, payload: bytes) -> bytes:
    i = rng.randint(0, len(payload))
    if rng.random() < 0.6:
        return payload[:i] + rng.choice(_BAD_UTF8) + payload[i:]
    return payload[:i] + rng.choice(_GOOD_UTF8).encode() + payload[i:]


def _nested_value(rng: random.Random, levels: int) -> bytes:
    """A serialized AnyValue nested `levels` deep in arrays and kvlists."""
    value = rng.choice((b"\x18\x01", b"", ld(1, b"leaf"), b"\x21" + struct.pack("<d", 1.5)))
    for _ in range(levels):
        if rng.random() < 0.5:
            value = ld(5, ld(1, value))  # array_value { values }
        else:
            value = ld(6, ld(1, ld(1, b"k") + ld(2, value)))  # kvlist_value { values { k, v } }
    return value


def mutate_message(rng: random.Random, data: bytes, descriptor_name: str) -> bytes:
    """One structural mutation of the serialized message `data`."""
    picked = pick_field(rng, data, _descriptor_by_name(descriptor_name))
    if picked is None:
        return mutate_bytes(rng, data)
    ancestors, siblings, i = picked
    node = siblings[i]

    def put(replacement: bytes) -> bytes:
        return rebuild(data, ancestors, node.start, node.end, replacement)

    whole = data[node.start : node.end]
    tag = data[node.start : node.tag_end]
    payload = data[node.payload : node.end]
    op = rng.random()
    if op < 0.08:  # delete the field
        return put(b"")
    if op < 0.16:  # duplicate it (repeated singular fields: the last occurrence wins)
        return put(whole * rng.randint(2, 3))
    if op < 0.22:  # move it after its next sibling
        if i + 1 == len(siblings):
            return put(whole + whole)
        sibling = siblings[i + 1]
        moved = data[sibling.start : sibling.end] + whole
        return rebuild(data, ancestors, node.start, sibling.end, moved)
    if op < 0.32:  # the tag: another wire type, another or unknown number, over-long
        number, wt = node.number, node.wire_type
        what = rng.random()
        if what < 0.4:
            wt = rng.choice([w for w in range(8) if w != wt])
        elif what < 0.7:
            number = rng.choice((number + 1, number - 1, 99, 1000, 2**29 - 1, 0, 15, 16, 2048))
        key = varint((number & 0x1FFFFFFF) << 3 | wt)
        if what >= 0.7:
            key = bytes(b | 0x80 for b in key) + b"\x00"
        return put(key + data[node.tag_end : node.end])
    if op < 0.42 and node.wire_type == 2:  # the length: off by a little, huge, or padded
        length = node.end - node.payload
        what = rng.random()
        if what < 0.5:
            new = varint(max(0, length + rng.choice((-3, -2, -1, 1, 2, 3))))
        elif what < 0.75:
            new = _mutate_varint(rng)
        else:
            new = bytes(b | 0x80 for b in varint(length)) + b"\x80" * rng.randint(0, 3) + b"\x00"
        return put(tag + new + payload)
    if node.kind == "string":
        if rng.random() < 0.7:
            return put(tag + _ld_payload(_bad_string(rng, payload)))
        new = rng.choice(_KEYS) + (payload[: rng.randint(0, len(payload))])
        return put(tag + _ld_payload(new))
    if node.kind == "bytes" and node.number in (1, 2, 3, 4) and len(payload) in (0, 8, 16, 32):
        # an id: a wrong length
        n = rng.choice((0, 1, 7, 8, 9, 15, 16, 17, 32))
        new = (payload * 3)[:n] if payload else bytes(rng.getrandbits(8) for _ in range(n))
        return put(tag + _ld_payload(new))
    if node.wire_type == 0:
        return put(tag + _mutate_varint(rng))
    if node.wire_type in (1, 5):
        n = 8 if node.wire_type == 1 else 4
        if rng.random() < 0.5:
            new = bytes(rng.getrandbits(8) for _ in range(n))
        else:
            new = rng.choice((b"\xff" * n, b"\x00" * n, b"\x00" * (n - 1) + b"\x80"))
            if n == 8 and rng.random() < 0.5:
                new = struct.pack("<d", rng.choice((math.nan, -0.0, math.inf, 5e-324)))
        return put(tag + new)
    if node.kind == "message":
        what = rng.random()
        if node.message is _ANY_VALUE and what < 0.35:
            levels = rng.choice((rng.randint(1, 8), rng.randint(25, 40), rng.randint(40, 70)))
            return put(tag + _ld_payload(_nested_value(rng, levels)))
        assert node.message is not None
        parts = seeds().parts.get(node.message.full_name)
        if parts and what < 0.7:  # crossover: the same kind of message from another seed
            return put(tag + _ld_payload(rng.choice(parts)))
        if what < 0.8:
            return put(tag + _ld_payload(b""))
        # an unknown field inside it
        extra = rng.choice((ld(99, b"x"), b"\xf8\x06\x01", b"\x9d\x0f" + b"\x00" * 4))
        return put(tag + _ld_payload(payload + extra))
    # bytes or unknown length-delimited: byte-level inside, lengths fixed
    return put(tag + _ld_payload(mutate_bytes(rng, payload)))


def _ld_payload(payload: bytes) -> bytes:
    return varint(len(payload)) + payload


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One byte-level mutation."""
    n = len(data)
    op = rng.random()
    if n == 0 or op < 0.1:
        i = rng.randint(0, n)
        return data[:i] + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8))) + data[i:]
    i = rng.randrange(n)
    if op < 0.3:  # flip bits of one byte
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if op < 0.45:  # an interesting byte
        b = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x08, 0x22))
        return data[:i] + bytes([b]) + data[i + 1 :]
    if op < 0.6:  # delete a range
        j = min(n, i + rng.choice((1, 1, 2, 4, 16, 64)))
        return data[:i] + data[j:]
    if op < 0.75:  # truncate
        return data[:i]
    if op < 0.87:  # duplicate a chunk
        j = min(n, i + rng.choice((1, 2, 8, 32, 256)))
        return data[:j] + data[i:j] + data[j:]
    # splice in a chunk of itself from elsewhere
    j = rng.randrange(n)
    k = min(n, j + rng.randint(1, 32))
    return data[:i] + data[j:k] + data[i:]


# --- kernels ---------------------------------------------------------------------------------


@dataclass
class Counts:
    inputs: int = 0
    answered: int = 0
    declined: int = 0
    raised: int = 0  # documented errors (a wrong edit count)
    # answered for bytes upb refuses, where the kernel promises nothing (its callers only pass
    # bytes upb parses): counted within `answered`, compared with nothing
    unchecked: int = 0
    mismatches: int = 0


@dataclass
class Kernel:
    name: str
    generate: Callable[[random.Random, list[bytes]], bytes]
    check: Callable[[bytes, Any], str]  # "answered", "declined", "raised" or "reference"
    describe: Callable[[bytes], str]
    # what of an answered case joins the pool the generator mutates further
    pool_item: Callable[[bytes], bytes] = lambda case: case


def _pick_request(rng: random.Random, pool: list[bytes]) -> bytes:
    s = seeds()
    r = rng.random()
    if pool and r < 0.35:
        return rng.choice(pool)
    if r < 0.41:
        return rng.choice(s.full_requests)
    return rng.choice(s.requests)


def _mutated_request(rng: random.Random, pool: list[bytes]) -> bytes:
    data = _pick_request(rng, pool)
    r = rng.random()
    if r < 0.12 and data not in pool:
        return data  # as it is
    if r < 0.75:
        data = mutate_message(rng, data, REQUEST)
        if rng.random() < 0.25:
            data = mutate_message(rng, data, REQUEST)
        return data
    if r < 0.85:
        data = mutate_message(rng, data, REQUEST)
    return mutate_bytes(rng, data)


def _upb_request(data: bytes) -> Any:
    try:
        return ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        return None


def _all_spans(request: Any) -> list[Any]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def expected_genai(request: Any) -> bool:
    """What the scan's GenAI answer must be, from the upb-parsed request: whether any resource,
    scope, span, link or event attribute key has a GenAI prefix, or any event is a
    `db.query.result` event."""

    def hit(attributes: Any) -> bool:
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


# scan_trace_request ------------------------------------------------------------------------


def _check_scan(case: bytes, native: Any) -> str:
    data = case
    request = _upb_request(data)
    if native is None:
        if request is not None:  # the reference's own: every span's bytes re-parse alike
            for span in _all_spans(request):
                expect(Span.FromString(span.SerializeToString()) == span, "upb round trip")
        return "reference"
    got = native.scan_trace_request(data, PREFIXES, EVENT, False)
    validated = native.scan_trace_request(data, PREFIXES, EVENT, True)
    if validated is not None:
        expect(request is not None, "validate=True answered for bytes upb refuses")
        expect(validated == got, "validate=True answered otherwise than validate=False")
    if got is None:
        return "declined"
    genai, keys, offsets = got
    expect(type(genai) is bool and type(keys) is list and type(offsets) is list, "types")
    expect(len(offsets) == 2 * len(keys), "offsets per key")
    expect(all(type(k) is bytes and len(k) == 24 for k in keys), "24-byte keys")
    if request is None:  # not validated: the caller parses such bytes with upb anyway
        return "unchecked"
    spans = _all_spans(request)
    expect(keys == [s.trace_id + s.span_id for s in spans], "span ids")
    expect(genai == expected_genai(request), f"genai: C {genai}")
    for span, start, end in zip(spans, offsets[::2], offsets[1::2], strict=True):
        expect(type(start) is int and type(end) is int, "offset types")
        expect(0 <= start <= end <= len(data), "offsets in range")
        expect(Span.FromString(data[start:end]) == span, f"span bytes at {start}:{end}")
    return "answered"


# decode_key_values ---------------------------------------------------------------------------

_MESSAGE_NAMES = {
    9: Span.DESCRIPTOR.full_name,
    1: Resource.DESCRIPTOR.full_name,
    3: Span.Event.DESCRIPTOR.full_name,
    4: Span.Link.DESCRIPTOR.full_name,
}


def _gen_decode(rng: random.Random, pool: list[bytes]) -> bytes:
    s = seeds()
    if pool and rng.random() < 0.3:  # an answered one: its field number, then the message
        item = rng.choice(pool)
        number, message = item[0], item[1:]
        r = rng.random() * 0.85
    else:
        number = rng.choice((9, 9, 9, 1, 1, 3, 4))
        message = rng.choice(s.messages[number])
        r = rng.random()
    if r < 0.7:
        message = mutate_message(rng, message, _MESSAGE_NAMES[number])
        if rng.random() < 0.3:
            message = mutate_message(rng, message, _MESSAGE_NAMES[number])
    elif r < 0.85:
        message = mutate_bytes(rng, message)
    before = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 1, 5))))
    after = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 1, 7))))
    data = before + message + after
    start, end = len(before), len(before) + len(message)
    if rng.random() < 0.1:
        start = rng.randint(0, len(data))
        end = rng.randint(start, len(data))
    if rng.random() < 0.05:
        number = rng.choice((1, 3, 4, 9))  # the attributes of another kind of message
    return struct.pack("<III", start, end, number) + data


def _check_decode(case: bytes, native: Any) -> str:
    start, end, number = struct.unpack_from("<III", case)
    data = case[12:]
    try:
        message = ATTRIBUTE_MESSAGES[number].FromString(data[start:end])
    except DecodeError:
        message = None
    want = _proto_attributes(message.attributes) if message is not None else None
    if native is None:
        return "reference"
    got = native.decode_key_values(data, start, end, number)
    if got is None:
        return "declined"
    expect(type(got) is dict, "a dict")
    if message is None:  # its callers decode spans of requests upb parses or the scan validated
        return "unchecked"
    expect(same(got, want), f"attributes: C {got!r}\n  reference {want!r}")
    return "answered"


def _decode_pool_item(case: bytes) -> bytes:
    start, end, number = struct.unpack_from("<III", case)
    return bytes([number]) + case[12 + start : 12 + end]


def _describe_decode(case: bytes) -> str:
    start, end, number = struct.unpack_from("<III", case)
    return f"decode_key_values(bytes.fromhex({case[12:].hex()!r}), {start}, {end}, {number})"


# read_trace_spans ----------------------------------------------------------------------------


def expected_read(request: Any) -> tuple[list[Any], list[Any]]:
    """What read_trace_spans must answer, from the upb-parsed request (ranges left out)."""
    scopes: list[Any] = []
    spans: list[Any] = []
    for index, rs in enumerate(request.resource_spans):
        for ss in rs.scope_spans:
            scopes.append(
                (
                    index,
                    rs.schema_url,
                    ss.scope.name,
                    ss.scope.version,
                    ss.schema_url,
                    len(ss.spans),
                )
            )
            for span in ss.spans:
                spans.append(
                    (
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        int(span.kind),
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        span.flags & 0x300 == 0x300,
                        int(span.status.code),
                        span.status.message,
                        len(span.events) > 0,
                    )
                )
    return scopes, spans


def _validated(native: Any, data: bytes) -> bool:
    return native.scan_trace_request(data, PREFIXES, EVENT, True) is not None


def _check_read(case: bytes, native: Any) -> str:
    data = case
    request = _upb_request(data)
    if native is None:
        if request is not None:
            expected_read(request)
        return "reference"
    answer = native.read_trace_spans(data)
    if answer is None:
        return "declined"
    if request is None:  # no promise here: its callers pass bytes the validating scan accepted
        expect(not _validated(native, data), "answered otherwise for bytes the scan validated")
        return "unchecked"
    _compare_read(data, request, answer)
    return "answered"


def _compare_read(data: bytes, request: Any, answer: Any) -> None:
    scopes, spans = answer
    expected_scopes, expected_spans = expected_read(request)
    got_scopes = [(s[0], s[3], s[6], s[7], s[8], s[9]) for s in scopes]
    expect(got_scopes == expected_scopes, f"scopes: C {got_scopes}\n  upb {expected_scopes}")
    got_spans = [s[:11] for s in spans]
    expect(got_spans == expected_spans, f"spans: C {got_spans}\n  upb {expected_spans}")
    flat = [(rs, ss) for rs in request.resource_spans for ss in rs.scope_spans for _ in ss.spans]
    k = 0
    for scope in scopes:
        rs = request.resource_spans[scope[0]]
        expect(Resource.FromString(data[scope[1] : scope[2]]) == rs.resource, "resource range")
        ss = ScopeSpans.FromString(data[scope[10] : scope[11]])
        expect(InstrumentationScope.FromString(data[scope[4] : scope[5]]) == ss.scope, "scope")
        for _ in range(scope[9]):
            expect(flat[k][1] == ss, "scope spans range")
            k += 1
    for span, fields in zip(_all_spans(request), spans, strict=True):
        expect(Span.FromString(data[fields[11] : fields[12]]) == span, "span range")


# read_trace_views ----------------------------------------------------------------------------


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
        # a view over a parsed span lists a repeated key twice unless it was located in the
        # bytes (then it lists the attributes' keys, as a view from the bytes does)
        tuple(dict.fromkeys(view.attribute_keys)),
        view.has_event("gen_ai.choice"),
        view.resource.attributes,
        view.source,
    )


_VIEW_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "parent_is_remote",
    "scope_name",
    "scope_version",
    "kind",
    "start_ns",
    "end_ns",
    "status_code",
    "status_message",
    "attributes",
    "attribute_keys",
    "has_event",
    "resource.attributes",
    "source",
)


def _check_views(case: bytes, native: Any) -> str:
    data = case
    request = _upb_request(data)
    expected: list[tuple[Any, ...] | None] = []
    if request is not None:
        with pure_python():  # the reference: views over the upb-parsed spans
            for rs in request.resource_spans:
                resource = ResourceView(rs.resource, "proto")
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        try:
                            view = SpanView.from_proto(span, resource, ss.scope)
                        except ValueError:
                            expected.append(None)
                        else:
                            expected.append(_view_state(view))
    if native is None:
        return "reference"
    made: list[tuple[int, int]] = []

    def resource_view(data: bytes, start: int, end: int) -> ResourceView:
        made.append((start, end))
        return ResourceView.from_wire(data, start, end)

    answer = native.read_trace_views(data, SpanView, resource_view)
    spans = native.read_trace_spans(data)
    expect((answer is None) == (spans is None), "None exactly where read_trace_spans is None")
    if answer is None:
        return "declined"
    expect(answer[0] == spans[0], "scopes as read_trace_spans reads them")
    if request is None:  # no promise here: its callers pass bytes the validating scan accepted
        expect(not _validated(native, data), "answered otherwise for bytes the scan validated")
        return "unchecked"
    expect(len(made) == len(request.resource_spans), "one resource view per resource")
    views = answer[1]
    expect(len(views) == len(expected), "one view per span")
    for i, (view, want) in enumerate(zip(views, expected, strict=True)):
        if want is None:
            expect(view is None, f"span {i}: a view where from_proto raises ValueError")
            continue
        expect(type(view) is SpanView, f"span {i}: no view")
        state = _view_state(view)
        for k, (a, b) in enumerate(zip(state, want, strict=True)):
            ok = same(a, b) if isinstance(b, dict) else a == b
            expect(ok, f"span {i}, {_VIEW_FIELDS[k]}: C view {a!r}\n  upb view {b!r}")
    return "answered"


# splice_trace_request ------------------------------------------------------------------------

_ADDED = ld(9, ld(1, b"tracehound.loop.detected") + ld(2, b"\x10\x01")) + ld(
    11, b"\x09" + struct.pack("<Q", 5) + ld(2, b"gen_ai.evaluation.result")
)
_REPLACEMENT = Span(trace_id=b"R" * 16, span_id=b"r" * 8, name="replaced").SerializeToString()
_EDIT_APPENDS = (b"", b"", _ADDED, ld(5, b"renamed"), b"\x38\x05", ld(9, ld(1, b"k" * 200)))


def _gen_splice(rng: random.Random, pool: list[bytes]) -> bytes:
    data = _mutated_request(rng, pool)
    count = _count_spans(data)
    if rng.random() < 0.04:
        count = max(0, count + rng.choice((-1, 1)))
    edits = bytearray(struct.pack("<I", count))
    for _ in range(count):
        r = rng.random()
        if r < 0.25:
            edits += b"\x00"
        elif r < 0.85:
            added = rng.choice(_EDIT_APPENDS)
            edits += b"\x01" + struct.pack("<I", len(added)) + added
        else:
            new = rng.choice(seeds().messages[9]) if rng.random() < 0.5 else _REPLACEMENT
            edits += b"\x02" + struct.pack("<I", len(new)) + new
    return bytes(edits) + data


def _count_spans(data: bytes) -> int:
    """The spans of a request as far as its structure is well-formed (upb may refuse it)."""
    count = 0
    for rs in fields_of(data, 0, len(data), ExportTraceServiceRequest.DESCRIPTOR) or ():
        if rs.kind == "message" and rs.message is not None:
            for ss in fields_of(data, rs.payload, rs.end, rs.message) or ():
                if ss.kind == "message" and ss.message is not None:
                    inner = fields_of(data, ss.payload, ss.end, ss.message) or ()
                    count += sum(1 for span in inner if span.number == 2 and span.kind != "unknown")
    return count


def _decode_splice(case: bytes) -> tuple[list[Any], bytes]:
    (count,) = struct.unpack_from("<I", case)
    pos = 4
    edits: list[Any] = []
    for _ in range(count):
        kind = case[pos]
        pos += 1
        if kind == 0:
            edits.append(None)
            continue
        (n,) = struct.unpack_from("<I", case, pos)
        pos += 4
        payload = case[pos : pos + n]
        pos += n
        edits.append(payload if kind == 1 else (payload,))
    return edits, case[pos:]


def _check_splice(case: bytes, native: Any) -> str:
    edits, data = _decode_splice(case)
    request = _upb_request(data)
    expected = None
    if request is not None and len(_all_spans(request)) == len(edits):
        expected = ExportTraceServiceRequest()
        expected.CopyFrom(request)
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
    if native is None:
        return "reference"
    try:
        spliced = native.splice_trace_request(data, edits)
    except ValueError:
        # documented: the edits are not one per span
        expect(request is None or len(_all_spans(request)) != len(edits), "ValueError")
        return "raised"
    if spliced is None:
        return "declined"
    expect(type(spliced) is bytes, "bytes")
    if request is None:  # the sidecar splices validated requests only
        return "unchecked"
    expect(expected is not None, "answered for edits that are not one per span")
    got = _upb_request(spliced)
    expect(got is not None, "the spliced request does not parse")
    expect(got == expected, "the spliced request is not the request edited through upb")
    return "answered"


def _describe_splice(case: bytes) -> str:
    edits, data = _decode_splice(case)
    return f"splice_trace_request(bytes.fromhex({data.hex()!r}), {edits!r})"


def _hex_call(name: str) -> Callable[[bytes], str]:
    return lambda case: f"{name}(bytes.fromhex({case.hex()!r}))"


KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            "scan_trace_request",
            _mutated_request,
            _check_scan,
            _hex_call("scan_trace_request"),
        ),
        Kernel(
            "decode_key_values", _gen_decode, _check_decode, _describe_decode, _decode_pool_item
        ),
        Kernel("read_trace_spans", _mutated_request, _check_read, _hex_call("read_trace_spans")),
        Kernel("read_trace_views", _mutated_request, _check_views, _hex_call("read_trace_views")),
        Kernel(
            "splice_trace_request",
            _gen_splice,
            _check_splice,
            _describe_splice,
            lambda case: _decode_splice(case)[1],
        ),
    )
}

_POOL_SIZE = 512


@dataclass
class Failure:
    kernel: str
    case: bytes
    error: str


def run_kernel(
    name: str,
    inputs: int,
    seed: int,
    native: Any,
    *,
    on_case: Callable[[bytes], None] | None = None,
    failures: list[Failure] | None = None,
    max_failures: int = 5,
) -> Counts:
    """`inputs` cases of kernel `name` from `seed` (the same cases for the same seed whatever
    else runs), each checked; mismatches (and unexpected exceptions) are counted and the first
    `max_failures` kept in `failures`. `on_case` sees each case before it runs (the driver
    keeps the last one where a crash leaves it readable)."""
    kernel = KERNELS[name]
    rng = random.Random(f"{seed}:{name}")
    pool: list[bytes] = []
    counts = Counts()
    for _ in range(inputs):
        case = kernel.generate(rng, pool)
        if on_case is not None:
            on_case(case)
        counts.inputs += 1
        try:
            outcome = kernel.check(case, native)
        except Exception as e:  # a mismatch, or the C (or a reference) raised
            counts.mismatches += 1
            if failures is not None and len(failures) < max_failures:
                what = str(e) if isinstance(e, Mismatch) else f"{type(e).__name__}: {e}"
                failures.append(Failure(name, case, what[:2000]))
            continue
        if outcome in ("answered", "unchecked"):
            counts.answered += 1
            counts.unchecked += outcome == "unchecked"
            if len(pool) < _POOL_SIZE:
                pool.append(kernel.pool_item(case))
            elif rng.random() < 0.05:
                pool[rng.randrange(_POOL_SIZE)] = kernel.pool_item(case)
        elif outcome == "declined":
            counts.declined += 1
        elif outcome == "raised":
            counts.raised += 1
    return counts


def replay(name: str, case: bytes, native: Any) -> str:
    """Run one case; its outcome, or raises Mismatch."""
    return KERNELS[name].check(case, native)
