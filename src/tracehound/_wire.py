"""Reading OTLP protobuf bytes directly, before (or instead of) going through upb.

Two jobs, each with a C fast path (`tracehound._speedups`, built when a compiler is available)
and a pure-Python path that gives the same answers:

- **The GenAI pre-check**: can this request contain a GenAI span at all? Reading a span's
  attribute keys through upb costs ~0.4 µs per key, so for the many spans that are not GenAI,
  looking at every key costs more than parsing the span. The keys are plain bytes on the wire —
  each is field 1 of a `KeyValue` (tag byte 0x0a, a varint length, UTF-8) — so one regex pass
  anchored on that tag byte answers "does any key start with a GenAI prefix?" for a whole request
  or scope, and a substring search answers "does any span carry a `db.query.result` event?"
  (OpenLLMetry's vector-DB spans carry only `db.*` keys). That check may say "maybe" for bytes
  that are not keys; it never says "no" for a span that has such a key or event. The C scan
  (`scan_trace_request`) walks the message structure instead and looks at real keys only.
- **Span ids and attributes from the bytes**: the C scan also returns each span's trace and span
  id and where the span lies in the request, so that its attributes can be decoded straight from
  those bytes (`decode_key_values`), without a Python wrapper object per field. Its strings are
  decoded by the module's own UTF-8 decoder, which gives the str `bytes.decode` gives, faster for
  text that is mostly ASCII with some other characters among it.

The C functions answer None for anything they do not handle exactly as upb would (malformed
data, merge semantics of repeated singular fields); callers then take the Python path. The C
is reached only through `tracehound._accel`, which lists every kernel.
"""

from __future__ import annotations

import re
from typing import Any

from tracehound import _accel

__all__ = [
    "GENAI_KEY_PREFIXES",
    "decode_key_values",
    "may_hold_genai",
    "read_trace_spans",
    "read_trace_views",
    "scan_trace_request",
    "splice_trace_request",
]

GENAI_KEY_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.", "ai.", "tool_")
DB_QUERY_RESULT = "db.query.result"

# Tag 0x0a, a varint length (continuation bytes ≥ 0x80, last byte < 0x80), then the prefix.
_KEY_PREFIX = re.compile(
    rb"\n[\x80-\xff]{0,4}[\x00-\x7f](?:"
    + b"|".join(re.escape(p.encode()) for p in GENAI_KEY_PREFIXES)
    + rb")"
)
_DB_QUERY_RESULT = DB_QUERY_RESULT.encode()
_PREFIX_BYTES = tuple(p.encode() for p in GENAI_KEY_PREFIXES)

# Span.attributes is field 9 of the `Span` message, Resource.attributes field 1 of `Resource`.
SPAN_ATTRIBUTES_FIELD = 9
RESOURCE_ATTRIBUTES_FIELD = 1


def may_hold_genai(data: bytes) -> bool:
    """False only if no attribute key in `data` has a GenAI prefix and no event is a
    `db.query.result` event (a serialized request, scope or span)."""
    return _KEY_PREFIX.search(data) is not None or _DB_QUERY_RESULT in data


def scan_trace_request(
    data: bytes, *, validate: bool = False
) -> tuple[bool, list[bytes], list[int]] | None:
    """One pass over a serialized `ExportTraceServiceRequest` (C accelerator only): whether any
    resource, scope, span, event or link attribute key has a GenAI prefix or any event is a
    `db.query.result` event; each span's trace id + span id (24 bytes), in order; each span's
    byte range in `data` (start, end, start, end, …). None without the accelerator, for malformed
    data, or when a span's ids have the wrong size (the caller's slower path reports those).

    With `validate`, the scan also checks everything upb checks when it parses the request
    (wire structure at every depth, UTF-8 of every string field) and answers None when it cannot
    vouch for it: an answer then means upb would parse these bytes without error."""
    native = _accel.kernel("scan_trace_request")
    if native is None:
        return None
    result: tuple[bool, list[bytes], list[int]] | None = native(
        data, _PREFIX_BYTES, _DB_QUERY_RESULT, validate
    )
    if result is None:
        _accel.declined("scan_trace_request")
    return result


def decode_key_values(data: bytes, start: int, end: int, field: int) -> dict[str, Any] | None:
    """The repeated `KeyValue` field `field` of the message at `data[start:end]`, decoded as
    `tracehound.spans` decodes it through upb; None without the accelerator or when the bytes
    need upb's own handling."""
    native = _accel.kernel("decode_key_values")
    if native is None:
        return None
    result: dict[str, Any] | None = native(data, start, end, field)
    if result is None:
        _accel.declined("decode_key_values")
    return result


def read_trace_spans(data: bytes) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None:
    """What the sidecar needs of every scope and span of a serialized `ExportTraceServiceRequest`
    (C accelerator only), read as upb reads it: (scopes, spans) — see `_speedups.pyi`. None
    without the accelerator or for bytes it does not read exactly as upb (then parse them)."""
    native = _accel.kernel("read_trace_spans")
    if native is None:
        return None
    result: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None = native(data)
    if result is None:
        _accel.declined("read_trace_spans")
    return result


def read_trace_views(
    data: bytes, cls: type[Any], resource_view: Any
) -> tuple[list[tuple[Any, ...]], list[Any]] | None:
    """`read_trace_spans` with each span's `cls.from_wire` view (None where it refuses the span)
    in place of its tuple, made in the same C pass; `resource_view(data, start, end)` makes each
    resource's view. None without the accelerator or where `read_trace_spans` is None."""
    native = _accel.kernel("read_trace_views")
    if native is None:
        return None
    result: tuple[list[tuple[Any, ...]], list[Any]] | None = native(data, cls, resource_view)
    if result is None:
        _accel.declined("read_trace_views")
    return result


def splice_trace_request(data: bytes, edits: list[Any]) -> bytes | None:
    """`data` (a serialized `ExportTraceServiceRequest`) after per-span edits, written from its
    bytes (C accelerator only): per span, None cuts it out, bytes are appended to it (b"": as
    is), a 1-tuple of bytes replaces it; scopes and resources left empty are dropped. None
    without the accelerator or for malformed data."""
    native = _accel.kernel("splice_trace_request")
    if native is None:
        return None
    result: bytes | None = native(data, edits)
    if result is None:
        _accel.declined("splice_trace_request")
    return result
