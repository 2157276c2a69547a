"""One read-only view over a span, whatever carried it.

A `SpanView` reads its identity (ids, name, kind, times, status) eagerly and everything else
lazily: attribute values, events and resource attributes are decoded only when a convention asks
for them. Most spans in a real application are not GenAI spans, and for those the only extra
cost is listing the attribute keys.

Three sources are supported:

- OTLP protobuf `Span` (with its `Resource` and `InstrumentationScope`),
- OTel SDK `ReadableSpan`,
- OTLP/JSON dicts (hex ids, integer enums, int64 as strings, `kvlistValue` / `arrayValue`).

`LogView` does the same for log records, which several instrumentations use to carry message
content (legacy per-message events, `gen_ai.client.inference.operation.details`).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracehound._wire import (
    RESOURCE_ATTRIBUTES_FIELD,
    SPAN_ATTRIBUTES_FIELD,
    decode_key_values,
    may_hold_genai,
    read_trace_views,
    scan_trace_request,
)

__all__ = [
    "AttributeValue",
    "LogView",
    "ResourceView",
    "SpanEventView",
    "SpanView",
    "decode_any_value_json",
    "decode_any_value_proto",
]

AttributeValue = Any
"""A decoded attribute value: str, bool, int, float, bytes, list or dict (kvlist)."""

# OTLP numbering (opentelemetry/proto/trace/v1/trace.proto).
SPAN_KIND_NAMES = {
    0: "UNSPECIFIED",
    1: "INTERNAL",
    2: "SERVER",
    3: "CLIENT",
    4: "PRODUCER",
    5: "CONSUMER",
}
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2

# Field 1, wire type 2 (a KeyValue's key) as an over-long tag of 2 to 5 bytes, which upb reads.
_OVERLONG_KEY_TAG = re.compile(rb"\x8a\x80{0,3}\x00")

# Deeply nested AnyValues are a cheap way to attack a decoder; nothing real nests this deep.
MAX_VALUE_DEPTH = 32
# SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_REMOTE_PARENT_FLAGS = 0x300


def decode_any_value_proto(value: Any, depth: int = 0) -> AttributeValue:
    """Decode an OTLP protobuf `AnyValue` into plain Python values."""
    text = value.string_value
    if text:  # only the set member of the oneof can be non-empty: skip WhichOneof for strings
        return text
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bool_value":
        return value.bool_value
    if depth >= MAX_VALUE_DEPTH:
        return None
    if which == "array_value":
        return [decode_any_value_proto(v, depth + 1) for v in value.array_value.values]
    if which == "kvlist_value":
        return {
            kv.key: decode_any_value_proto(kv.value, depth + 1) for kv in value.kvlist_value.values
        }
    if which == "bytes_value":
        return bytes(value.bytes_value)
    return None


def _proto_attributes(items: Iterable[Any]) -> dict[str, AttributeValue]:
    """Decode a repeated `KeyValue` field; most values are strings, read without a call."""
    out: dict[str, AttributeValue] = {}
    for kv in items:
        value = kv.value
        text = value.string_value
        out[kv.key] = text if text else decode_any_value_proto(value)
    return out


def decode_any_value_json(value: Any, depth: int = 0) -> AttributeValue:
    """Decode an OTLP/JSON `AnyValue` dict. Wrong shapes decode to None rather than raise."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        v = value["stringValue"]
        return v if isinstance(v, str) else str(v)
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in value:
        v = value["doubleValue"]
        try:
            return float(v)  # "NaN", "Infinity" are valid JSON-mapping strings
        except (TypeError, ValueError):
            return None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if depth >= MAX_VALUE_DEPTH:
        return None
    if "arrayValue" in value:
        arr = value["arrayValue"]
        values = arr.get("values", []) if isinstance(arr, dict) else []
        if not isinstance(values, list):
            return None
        return [decode_any_value_json(v, depth + 1) for v in values]
    if "kvlistValue" in value:
        kvl = value["kvlistValue"]
        items = kvl.get("values", []) if isinstance(kvl, dict) else []
        out: dict[str, AttributeValue] = {}
        if isinstance(items, list):
            for kv in items:
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    out[kv["key"]] = decode_any_value_json(kv.get("value"), depth + 1)
        return out
    if "bytesValue" in value:
        try:
            return base64.b64decode(value["bytesValue"])
        except (binascii.Error, TypeError, ValueError):
            return None
    return None


def _json_attributes(items: Any) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    if isinstance(items, list):
        for kv in items:
            if isinstance(kv, dict):
                key = kv.get("key")
                if isinstance(key, str):
                    out[key] = decode_any_value_json(kv.get("value"))
    return out


def _json_keys(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(
        kv["key"] for kv in items if isinstance(kv, dict) and isinstance(kv.get("key"), str)
    )


def _sdk_value(value: Any, depth: int = 0) -> AttributeValue:
    # SDK span attribute values are str/bool/int/float or homogeneous tuples of them; SDK log
    # record attributes and bodies may nest (the SDK turns every inner list into a tuple, e.g.
    # `gen_ai.input.messages` on the openai-v2 details event is a tuple of dicts whose `parts`
    # are tuples again), so convert all the way down.
    if isinstance(value, (tuple, list)):
        if depth >= MAX_VALUE_DEPTH:
            return None
        return [_sdk_value(v, depth + 1) for v in value]
    if isinstance(value, Mapping):
        if depth >= MAX_VALUE_DEPTH:
            return None
        return {str(k): _sdk_value(v, depth + 1) for k, v in value.items()}
    return value


def hex_id(value: Any, width: int) -> str:
    """Normalize an id (bytes, int, hex or base64 string) to lowercase hex; '' when absent."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, int):
        return format(value, f"0{width}x") if value else ""
    if isinstance(value, str):
        s = value.strip()
        if len(s) == width and all(c in "0123456789abcdefABCDEF" for c in s):
            return s.lower()
        if not s:
            return ""
        # protobuf's own JSON mapping writes bytes as base64; accept it too
        try:
            raw = base64.b64decode(s, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"invalid id {value!r}") from None
        if len(raw) * 2 != width:
            raise ValueError(f"invalid id {value!r}")
        return raw.hex()
    raise ValueError(f"invalid id type {type(value).__name__}")


class ResourceView:
    """Resource attributes, decoded once and shared by every span of the resource."""

    __slots__ = ("_attributes", "_source", "_source_kind")

    def __init__(self, source: Any, source_kind: str) -> None:
        self._source = source
        self._source_kind = source_kind
        self._attributes: dict[str, AttributeValue] | None = None

    @classmethod
    def from_wire(cls, data: bytes, start: int, end: int) -> ResourceView:
        """View over the serialized `Resource` at `data[start:end]` (decoded on first use)."""
        return cls((data, start, end), "wire")

    @classmethod
    def from_mapping(cls, attributes: Mapping[str, Any]) -> ResourceView:
        view = cls(None, "dict")
        view._attributes = {k: _sdk_value(v) for k, v in attributes.items()}
        return view

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        if self._attributes is None:
            if self._source_kind == "proto":
                self._attributes = _proto_attributes(self._source.attributes)
            elif self._source_kind == "wire":
                data, start, end = self._source
                decoded = decode_key_values(data, start, end, RESOURCE_ATTRIBUTES_FIELD)
                if decoded is None:
                    decoded = _proto_attributes(_parse("resource", data[start:end]).attributes)
                self._attributes = decoded
            elif self._source_kind == "sdk":
                self._attributes = {k: _sdk_value(v) for k, v in self._source.items()}
            elif self._source_kind == "json":
                src = self._source if isinstance(self._source, dict) else {}
                self._attributes = _json_attributes(src.get("attributes"))
            else:
                self._attributes = {}
        return self._attributes

    @property
    def service_name(self) -> str:
        value = self.attributes.get("service.name")
        return value if isinstance(value, str) else ""


EMPTY_RESOURCE = ResourceView.from_mapping({})


class SpanEventView:
    """A span event (e.g. `exception`, `db.query.result`)."""

    __slots__ = ("attributes", "name", "time_ns")

    def __init__(self, name: str, time_ns: int, attributes: dict[str, AttributeValue]) -> None:
        self.name = name
        self.time_ns = time_ns
        self.attributes = attributes

    def __repr__(self) -> str:
        return f"SpanEventView({self.name!r})"


def _new_view(cls: type[SpanView]) -> SpanView:
    return object.__new__(cls)


class _ScopeGate:
    """The byte-level pre-check of one instrumentation scope, run when a span of it first asks.

    Spans named like GenAI operations (`chat gpt-4o`) never ask, so a scope of them is not
    re-serialized; a scope of other spans is scanned once for all of them.
    """

    __slots__ = ("_answer", "_scope_spans")

    def __init__(self, scope_spans: Any) -> None:
        self._scope_spans = scope_spans
        self._answer: bool | None = None

    def may_hold_genai(self) -> bool:
        if self._answer is None:
            self._answer = may_hold_genai(self._scope_spans.SerializeToString())
            self._scope_spans = None
        return self._answer


class SpanView:
    """Read-only view of one span.

    The identity the engine needs for every span (ids, parent, name) is read eagerly; everything
    else — kind, times, status, attribute keys and values, events, resource — only when asked,
    because most spans of a real application are not GenAI spans and are never asked.
    """

    __slots__ = (
        "_attributes",
        "_end_ns",
        "_events",
        "_gate",
        "_keys",
        "_kind",
        "_scope_gate",
        "_source",
        "_source_kind",
        "_start_ns",
        "_status_code",
        "_status_message",
        "_wire_at",
        "name",
        "parent_is_remote",
        "parent_span_id",
        "resource",
        "scope_name",
        "scope_version",
        "span_id",
        "trace_id",
    )

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    parent_is_remote: bool
    scope_name: str
    scope_version: str
    resource: ResourceView

    # Slots other than the identity are filled on first use; an unset slot (or None) means "not
    # read yet" (no __init__: a view of a span that is never asked about costs one allocation).
    _attributes: dict[str, AttributeValue] | None
    _events: list[SpanEventView] | None
    _keys: tuple[str, ...]
    _kind: int
    _start_ns: int | None
    _end_ns: int | None
    _status_code: int | None
    _status_message: str
    _gate: bool
    _scope_gate: _ScopeGate
    _source: Any
    _source_kind: str
    _wire_at: tuple[bytes, int, int]  # the request's bytes and this span's range in them

    # --- constructors -------------------------------------------------------------------------

    @classmethod
    def from_proto(
        cls,
        span: Any,
        resource: ResourceView | None = None,
        scope: Any = None,
    ) -> SpanView:
        """View over an `opentelemetry.proto.trace.v1.trace_pb2.Span`.

        Raises ValueError when the trace, span or parent id has the wrong size.
        """
        return cls._from_proto(
            span,
            resource if resource is not None else EMPTY_RESOURCE,
            scope.name if scope is not None else "",
            scope.version if scope is not None else "",
        )

    @classmethod
    def _from_proto(
        cls, span: Any, resource: ResourceView, scope_name: str, scope_version: str
    ) -> SpanView:
        trace_id, span_id = span.trace_id, span.span_id
        if len(trace_id) != 16 or len(span_id) != 8:
            raise ValueError("invalid trace/span/parent id size")
        return cls._from_proto_key(span, trace_id + span_id, resource, scope_name, scope_version)

    @classmethod
    def _from_proto_key(
        cls, span: Any, key: bytes, resource: ResourceView, scope_name: str, scope_version: str
    ) -> SpanView:
        """The view over a protobuf span whose trace id + span id (`key`, sizes checked) are
        known: from the C scan of the request, one `hex` instead of two upb reads and two `hex`.
        """
        view = object.__new__(cls)  # per span on the receiver's hot path: no helper call
        view._source = span
        view._source_kind = "proto"
        ids = key.hex()
        view.trace_id = ids[:32]
        view.span_id = ids[32:]
        parent = view.parent_span_id = span.parent_span_id.hex()
        if len(parent) not in (0, 16):
            raise ValueError("invalid trace/span/parent id size")
        view.name = span.name
        view.parent_is_remote = (span.flags & _REMOTE_PARENT_FLAGS) == _REMOTE_PARENT_FLAGS
        view.scope_name = scope_name
        view.scope_version = scope_version
        view.resource = resource
        # "Not read yet" as None rather than as an unset slot: reading an unset slot raises an
        # AttributeError, whose formatted message costs more than the read it stands for.
        view._attributes = view._events = None
        view._start_ns = view._end_ns = view._status_code = None
        return view

    @classmethod
    def from_wire(
        cls,
        data: bytes,
        fields: tuple[Any, ...],
        resource: ResourceView,
        scope_name: str,
        scope_version: str,
    ) -> SpanView:
        """View over a span of the serialized request `data`, from its entry in
        `tracehound._wire.read_trace_spans` (`fields`): no protobuf message is built unless a
        part that entry does not carry is asked for (events, `source`).

        Raises ValueError when the parent id is neither empty nor 8 bytes.
        """
        (
            trace_id,
            span_id,
            parent,
            name,
            kind,
            start_ns,
            end_ns,
            remote,
            status_code,
            status_message,
            has_events,
            start,
            end,
        ) = fields
        if len(parent) not in (0, 16):
            raise ValueError("invalid trace/span/parent id size")
        view = object.__new__(cls)
        view._source = None
        view._source_kind = "proto"
        view._wire_at = (data, start, end)
        view.trace_id = trace_id
        view.span_id = span_id
        view.parent_span_id = parent
        view.name = name
        view.parent_is_remote = remote
        view.scope_name = scope_name
        view.scope_version = scope_version
        view.resource = resource
        view._kind = kind
        view._start_ns = start_ns
        view._end_ns = end_ns
        view._status_code = status_code
        view._status_message = status_message
        view._attributes = None
        view._events = None if has_events else []
        return view

    # --- lazy identity details (read from the source on first use) --------------------------

    @property
    def kind(self) -> int:
        """OTLP span kind (1 INTERNAL, 2 SERVER, 3 CLIENT, 4 PRODUCER, 5 CONSUMER)."""
        try:
            return self._kind
        except AttributeError:
            self._kind = int(self._source.kind)
            return self._kind

    @property
    def start_ns(self) -> int:
        try:
            value = self._start_ns
        except AttributeError:
            value = None
        if value is None:
            value = self._start_ns = int(self._source.start_time_unix_nano)
        return value

    @property
    def end_ns(self) -> int:
        try:
            value = self._end_ns
        except AttributeError:
            value = None
        if value is None:
            value = self._end_ns = int(self._source.end_time_unix_nano)
        return value

    @property
    def status_code(self) -> int:
        try:
            code = self._status_code
        except AttributeError:
            code = None
        if code is None:
            status = self._source.status
            code = self._status_code = int(status.code)
            self._status_message = status.message
        return code

    @property
    def status_message(self) -> str:
        self.status_code  # noqa: B018 - reads code and message together, once
        return self._status_message

    @classmethod
    def from_json(
        cls,
        span: Mapping[str, Any],
        resource: ResourceView | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> SpanView:
        """View over an OTLP/JSON span dict. Raises ValueError on a span without valid ids."""
        view = _new_view(cls)
        view._source = span
        view._source_kind = "json"
        view.trace_id = hex_id(span.get("traceId"), 32)
        view.span_id = hex_id(span.get("spanId"), 16)
        if not view.trace_id or not view.span_id:
            raise ValueError("span without traceId/spanId")
        view.parent_span_id = hex_id(span.get("parentSpanId"), 16)
        name = span.get("name", "")
        view.name = name if isinstance(name, str) else str(name)
        view._kind = _as_int(span.get("kind", 0))
        view._start_ns = _as_int(span.get("startTimeUnixNano", 0))
        view._end_ns = _as_int(span.get("endTimeUnixNano", 0))
        status = span.get("status") or {}
        if not isinstance(status, dict):
            status = {}
        view._status_code = _status_code(status.get("code", 0))
        message = status.get("message", "")
        view._status_message = message if isinstance(message, str) else str(message)
        view.parent_is_remote = (
            _as_int(span.get("flags", 0)) & _REMOTE_PARENT_FLAGS
        ) == _REMOTE_PARENT_FLAGS
        scope = scope if isinstance(scope, Mapping) else {}
        view.scope_name = str(scope.get("name", "") or "")
        view.scope_version = str(scope.get("version", "") or "")
        view.resource = resource if resource is not None else EMPTY_RESOURCE
        return view

    @classmethod
    def from_readable(cls, span: Any) -> SpanView:
        """View over an OTel SDK `ReadableSpan` (what a SpanProcessor's `on_end` receives)."""
        view = _new_view(cls)
        view._source = span
        view._source_kind = "sdk"
        ctx = span.context
        view.trace_id = format(ctx.trace_id, "032x")
        view.span_id = format(ctx.span_id, "016x")
        parent = span.parent
        view.parent_span_id = format(parent.span_id, "016x") if parent is not None else ""
        view.parent_is_remote = bool(parent is not None and parent.is_remote)
        view.name = span.name
        view._kind = span.kind.value + 1  # SDK SpanKind starts at INTERNAL=0; OTLP at INTERNAL=1
        view._start_ns = span.start_time or 0
        view._end_ns = span.end_time or 0
        view._status_code = span.status.status_code.value
        view._status_message = span.status.description or ""
        scope = span.instrumentation_scope
        view.scope_name = scope.name if scope is not None else ""
        view.scope_version = (scope.version or "") if scope is not None else ""
        res = span.resource
        # Converted on first use (root spans only, in practice), not once per span.
        view.resource = ResourceView(res.attributes, "sdk") if res is not None else EMPTY_RESOURCE
        return view

    # --- lazy parts ----------------------------------------------------------------------------

    def may_be_genai(self) -> bool:
        """Cheap pre-check for detection: False only when the span certainly has no GenAI key
        prefix and no `db.query.result` event. Exact for dict-backed sources; for protobuf spans
        it looks at the wire bytes (see `tracehound._wire`) unless a request- or scope-level check
        already answered."""
        try:
            return self._gate
        except AttributeError:
            if self._source_kind == "proto" and not hasattr(self, "_keys"):
                scope_gate = getattr(self, "_scope_gate", None)
                gate = scope_gate is None or scope_gate.may_hold_genai()
                if gate and self._source is None:  # a view from bytes (`from_wire`)
                    data, start, end = self._wire_at
                    span = data[start:end]
                    # the bytes as received: the same answer as upb's serialization unless a
                    # key's tag is written over-long (0x8a 0x80... 0x00), which "maybe" covers
                    gate = may_hold_genai(span) or _OVERLONG_KEY_TAG.search(span) is not None
                elif gate:
                    gate = may_hold_genai(self._source.SerializeToString())
            else:
                gate = True  # keys are cheap to read here; detection reads them
            self._gate = gate
            return gate

    def locate_in(self, data: bytes, start: int, end: int) -> None:
        """Record that this (protobuf) span is `data[start:end]`, as the C scan of the request
        found it (`tracehound._wire.scan_trace_request`): its attributes are then decoded from
        those bytes, with upb as the fallback."""
        self._wire_at = (data, start, end)

    def wire_range(self) -> tuple[bytes, int, int] | None:
        """The request's bytes and this span's range in them, when the view reads them
        (`locate_in`, `from_wire`)."""
        return getattr(self, "_wire_at", None)

    def mark_not_genai(self) -> None:
        """Record that the bytes this span came in were checked (`tracehound._wire`) and hold no
        GenAI key: detection then skips it without reading its attributes."""
        self._gate = False

    @property
    def attribute_keys(self) -> tuple[str, ...]:
        """The attribute keys, without decoding any value (cheap: used for detection)."""
        if not hasattr(self, "_keys"):
            kind = self._source_kind
            if kind == "proto":
                if hasattr(self, "_wire_at"):  # decoding them all from the bytes costs less
                    self._keys = tuple(self.attributes)
                else:
                    self._keys = tuple(kv.key for kv in self._source.attributes)
            elif kind == "json":
                self._keys = _json_keys(self._source.get("attributes"))
            elif kind == "sdk":
                attrs = self._source.attributes
                self._keys = tuple(attrs) if attrs else ()
            else:
                self._keys = tuple(self.attributes)
        return self._keys

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        try:  # read many times per GenAI span: the set slot first, without a hasattr call
            attributes = self._attributes
        except AttributeError:
            attributes = None
        if attributes is not None:
            return attributes
        kind = self._source_kind
        if kind == "proto":
            decoded = None
            wire_at = getattr(self, "_wire_at", None)
            if wire_at is not None:  # straight from the bytes (C accelerator)
                data, start, end = wire_at
                decoded = decode_key_values(data, start, end, SPAN_ATTRIBUTES_FIELD)
            if decoded is None:
                decoded = _proto_attributes(self._proto_span().attributes)
            self._attributes = decoded
        elif kind == "json":
            self._attributes = _json_attributes(self._source.get("attributes"))
        elif kind == "sdk":
            attrs = self._source.attributes or {}
            # strings (most values) need no conversion: no call for them
            self._attributes = {k: v if type(v) is str else _sdk_value(v) for k, v in attrs.items()}
        else:
            self._attributes = {}
        return self._attributes

    def get(self, key: str, default: Any = None) -> AttributeValue:
        return self.attributes.get(key, default)

    def get_str(self, key: str) -> str | None:
        value = self.attributes.get(key)
        if value is None:
            return None
        return value if isinstance(value, str) else str(value)

    def get_int(self, key: str) -> int | None:
        value = self.attributes.get(key)
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return None
        return None

    @property
    def events(self) -> list[SpanEventView]:
        events = getattr(self, "_events", None)
        if events is None:
            kind = self._source_kind
            events = []
            if kind == "proto":
                for ev in self._proto_span().events:
                    events.append(
                        SpanEventView(
                            ev.name,
                            ev.time_unix_nano,
                            _proto_attributes(ev.attributes),
                        )
                    )
            elif kind == "json":
                raw = self._source.get("events")
                if isinstance(raw, list):
                    for ev in raw:
                        if isinstance(ev, dict):
                            events.append(
                                SpanEventView(
                                    str(ev.get("name", "")),
                                    _as_int(ev.get("timeUnixNano", 0)),
                                    _json_attributes(ev.get("attributes")),
                                )
                            )
            elif kind == "sdk":
                for ev in self._source.events or ():
                    attrs = ev.attributes or {}
                    events.append(
                        SpanEventView(
                            ev.name, ev.timestamp or 0, {k: _sdk_value(v) for k, v in attrs.items()}
                        )
                    )
            self._events = events
        return events

    def has_event(self, name: str) -> bool:
        """Whether an event of this span is named `name`. A protobuf span without events, or
        located in the request's bytes and whose bytes do not hold the name, has no such event:
        its events are then not decoded (detection asks this of every GenAI span)."""
        if getattr(self, "_events", None) is None and self._source_kind == "proto":
            source = self._source  # None: a view from bytes (`from_wire`), not parsed
            if source is not None and not source.events:  # the usual case, nothing decoded
                return False
            wire_at = getattr(self, "_wire_at", None)
            if wire_at is not None:
                data, start, end = wire_at
                if data.find(name.encode(), start, end) < 0:
                    return False
        return any(event.name == name for event in self.events)

    @property
    def service_name(self) -> str:
        return self.resource.service_name

    @property
    def is_error(self) -> bool:
        return self.status_code == STATUS_ERROR

    @property
    def source(self) -> Any:
        """The object this view reads (protobuf Span, ReadableSpan or dict)."""
        return self._proto_span() if self._source_kind == "proto" else self._source

    def _proto_span(self) -> Any:
        """The protobuf `Span`; a view made from the request's bytes (`from_wire`) parses its
        span's bytes on first need (its events, an attribute value the C decoder leaves to upb)."""
        source = self._source
        if source is None:
            data, start, end = self._wire_at
            source = self._source = _parse("span", data[start:end])
        return source

    def __repr__(self) -> str:
        return f"SpanView({self.name!r}, trace={self.trace_id}, span={self.span_id})"


class LogView:
    """Read-only view of a log record; only event records matter to tracehound."""

    __slots__ = ("attributes", "body", "event_name", "scope_name", "span_id", "time_ns", "trace_id")

    def __init__(
        self,
        *,
        trace_id: str,
        span_id: str,
        event_name: str,
        time_ns: int,
        attributes: dict[str, AttributeValue],
        body: AttributeValue,
        scope_name: str = "",
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        # The event name sits in LogRecord.event_name (SDK >= 1.35) or, from the older Events API,
        # in an `event.name` attribute.
        if not event_name:
            alt = attributes.get("event.name")
            event_name = alt if isinstance(alt, str) else ""
        self.event_name = event_name
        self.time_ns = time_ns
        self.attributes = attributes
        self.body = body
        self.scope_name = scope_name

    @classmethod
    def from_proto(cls, record: Any, scope: Any = None) -> LogView:
        return cls(
            trace_id=record.trace_id.hex(),
            span_id=record.span_id.hex(),
            event_name=record.event_name,
            time_ns=record.time_unix_nano or record.observed_time_unix_nano,
            attributes={kv.key: decode_any_value_proto(kv.value) for kv in record.attributes},
            body=decode_any_value_proto(record.body) if record.HasField("body") else None,
            scope_name=scope.name if scope is not None else "",
        )

    @classmethod
    def from_json(
        cls, record: Mapping[str, Any], scope: Mapping[str, Any] | None = None
    ) -> LogView:
        body = record.get("body")
        return cls(
            trace_id=hex_id(record.get("traceId"), 32),
            span_id=hex_id(record.get("spanId"), 16),
            event_name=str(record.get("eventName", "") or ""),
            time_ns=_as_int(record.get("timeUnixNano", 0))
            or _as_int(record.get("observedTimeUnixNano", 0)),
            attributes=_json_attributes(record.get("attributes")),
            body=decode_any_value_json(body) if body else None,
            scope_name=str((scope or {}).get("name", "") or ""),
        )

    @classmethod
    def from_sdk(cls, record: Any, scope_name: str = "") -> LogView:
        """View over an SDK `LogRecord` (`ReadableLogRecord.log_record` / `LogData.log_record`)."""
        attrs = record.attributes or {}
        body = _sdk_value(record.body)
        return cls(
            trace_id=format(record.trace_id or 0, "032x") if record.trace_id else "",
            span_id=format(record.span_id or 0, "016x") if record.span_id else "",
            event_name=getattr(record, "event_name", None) or "",
            time_ns=record.timestamp or record.observed_timestamp or 0,
            attributes={k: _sdk_value(v) for k, v in attrs.items()},
            body=body,
            scope_name=scope_name,
        )

    def __repr__(self) -> str:
        return f"LogView({self.event_name!r}, span={self.span_id})"


def _parse(kind: str, data: bytes) -> Any:
    """A `Span` or `Resource` message from its bytes (views made from a request's bytes)."""
    if kind == "span":
        from opentelemetry.proto.trace.v1.trace_pb2 import Span

        return Span.FromString(data)
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    return Resource.FromString(data)


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return 0
    if isinstance(value, float) and not math.isnan(value):
        return int(value)
    return 0


_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _status_code(value: Any) -> int:
    if isinstance(value, str) and value in _STATUS_NAMES:
        return _STATUS_NAMES[value]
    return _as_int(value)


def iter_proto_spans(
    request: Any, errors: list[str] | None = None, *, raw: bytes | None = None
) -> Iterable[SpanView]:
    """Yield a view per span of an `ExportTraceServiceRequest` (or `TracesData`).

    Spans whose ids have the wrong size are skipped and described in `errors`, as in
    `iter_json_spans`. With `raw` (the request's serialized bytes, which a receiver or a file
    reader has anyway), a request that holds no GenAI key at all marks every view as non-GenAI at
    the cost of one scan. Otherwise each instrumentation scope is checked once, when one of its
    spans first needs it (scopes are nearly always all-GenAI or all-not); a request of a single
    scope needs no scope check beside the request's. With the C accelerator, the views are read
    from `raw` in one pass (`SpanView.from_wire`, as the sidecar reads them; the same values),
    or, where that pass declines the bytes, located in them by the scan, decoding their
    attributes from those bytes.
    """
    from_proto = SpanView._from_proto
    from_key = SpanView._from_proto_key
    resource_spans_list = request.resource_spans
    scan = scan_trace_request(raw) if raw is not None else None
    keys: list[bytes] | None = None
    offsets: list[int] | None = None
    if scan is not None:
        assert raw is not None
        request_gate: bool | None = None if scan[0] else False
        keys, offsets = scan[1], scan[2]
        total = 0
        for resource_spans in resource_spans_list:
            for scope_spans in resource_spans.scope_spans:
                total += len(scope_spans.spans)
        if total != len(keys):  # `raw` is not this request as it is now
            keys = offsets = None
        else:
            # every view read from the bytes in one C pass, as the sidecar reads them
            read = read_trace_views(raw, SpanView, ResourceView.from_wire)
            views = read[1] if read is not None else None
            if views is not None and len(views) == total and None not in views:
                if request_gate is False:
                    for view in views:
                        view._gate = False
                yield from views
                return
            if request_gate is False:
                offsets = None  # no span of it is asked for its attributes
    else:
        request_gate = None if raw is None or may_hold_genai(raw) else False
    single_scope = (
        raw is not None
        and len(resource_spans_list) == 1
        and len(resource_spans_list[0].scope_spans) == 1
    )
    index = -1
    for resource_spans in resource_spans_list:
        resource = ResourceView(resource_spans.resource, "proto")
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            scope_gate = None
            if request_gate is None and not single_scope:
                scope_gate = _ScopeGate(scope_spans)
            for span in scope_spans.spans:
                index += 1
                try:
                    if keys is not None:
                        view = from_key(span, keys[index], resource, scope_name, scope_version)
                    else:
                        view = from_proto(span, resource, scope_name, scope_version)
                except ValueError as exc:
                    if errors is not None:
                        errors.append(f"span {span.name!r}: {exc}")
                    continue
                if request_gate is not None:
                    view._gate = request_gate
                elif scope_gate is not None:
                    view._scope_gate = scope_gate
                if offsets is not None:
                    assert raw is not None
                    view.locate_in(raw, offsets[2 * index], offsets[2 * index + 1])
                yield view


def iter_proto_logs(request: Any) -> Iterable[LogView]:
    """Yield a view per log record of an `ExportLogsServiceRequest` (or `LogsData`)."""
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            for record in scope_logs.log_records:
                yield LogView.from_proto(record, scope)


def iter_json_spans(
    document: Mapping[str, Any], errors: list[str] | None = None
) -> Iterable[SpanView]:
    """Yield a view per span of an OTLP/JSON traces document.

    Spans that cannot be read (no valid ids) are skipped and described in `errors`, so that one
    bad span never hides the good ones sent with it.
    """
    resource_spans_list = document.get("resourceSpans")
    if not isinstance(resource_spans_list, list):
        return
    for resource_spans in resource_spans_list:
        if not isinstance(resource_spans, dict):
            continue
        resource = ResourceView(resource_spans.get("resource") or {}, "json")
        for scope_spans in _dict_list(resource_spans.get("scopeSpans")):
            scope = scope_spans.get("scope")
            scope = scope if isinstance(scope, dict) else {}
            for span in _dict_list(scope_spans.get("spans")):
                try:
                    yield SpanView.from_json(span, resource, scope)
                except ValueError as exc:
                    if errors is not None:
                        errors.append(f"span {span.get('name', '?')!r}: {exc}")


def iter_json_logs(
    document: Mapping[str, Any], errors: list[str] | None = None
) -> Iterable[LogView]:
    """Yield a view per log record of an OTLP/JSON logs document."""
    resource_logs_list = document.get("resourceLogs")
    if not isinstance(resource_logs_list, list):
        return
    for resource_logs in resource_logs_list:
        if not isinstance(resource_logs, dict):
            continue
        for scope_logs in _dict_list(resource_logs.get("scopeLogs")):
            scope = scope_logs.get("scope")
            scope = scope if isinstance(scope, dict) else {}
            for record in _dict_list(scope_logs.get("logRecords")):
                try:
                    yield LogView.from_json(record, scope)
                except ValueError as exc:
                    if errors is not None:
                        errors.append(f"log record: {exc}")


def _dict_list(value: Any) -> Sequence[dict[str, Any]]:
    if not isinstance(value, list):
        return ()
    return [v for v in value if isinstance(v, dict)]
