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

The module also holds the other hot paths, each beside the Python code it stands in for:

- **Normalization and steps**: the JSON of GenAI attributes (`json_loads`, used by
  `tracehound.conventions.base.parse_json_value`), decoded message lists into `Message`/`Part`
  objects (`convert_messages`, `tracehound.conventions._messages.parse_messages`), the OTel GenAI
  mapping of a span in one call (`genai_extract`, `tracehound.conventions.genai.extract`), and
  its detection with it, the messages read from the wire's UTF-8 (`genai_normalize`,
  `tracehound.conventions.normalize`), the message strings it left on the wire decoded when the
  view's attributes are asked for (`completed_attributes`, `tracehound.spans`), a
  span's trajectory drafts and tool-call arguments (`span_drafts`, `canonical_arguments`,
  `steps_from_drafts`, `step_from_fields`, `builder_add`, `tracehound.steps`), the span view's
  lazy fields read without a Python call (`SlotProperty`, `tracehound.spans`), the engine's text
  budget (`text_size`), its evaluators' span hooks called in one loop (`call_span_hooks`), the
  engine's whole per-span step for the sidecar, without a `SpanOutcome` (`engine_take_span`,
  `tracehound.engine.Engine.span_taker`), the trace-level drift summaries of the root span
  (`derived_attributes`, `tracehound.evaluators.summary`) and frozen slotted dataclasses made
  without their `__init__` (`slots_maker`, `fields_maker`).
- **The sidecar on bytes**: span views of a request read in one pass (`read_trace_views`,
  `read_trace_spans`), the request to forward spliced from the bytes received
  (`splice_trace_request`), result attributes and `gen_ai.evaluation.result` records written as
  protobuf (`encode_key_values`, `encode_log_record`, and straight from a span's results:
  `encode_result_attributes`, `encode_result_records`, `encode_span_result_records`;
  `tracehound.server._otlp`), and the keys such a span is checked against taken from its decoded
  attributes (`present_keys`, `tracehound.server._pipeline`).
- **Text and evidence**: the tokenizer for mostly-ASCII text (`ascii_tokens`, `tracehound.text`),
  a text's normalized form and informative tokens (`text_tokens`), evidence units (`text_units`),
  and the evidence index (`EvidenceCore`, `tracehound.evaluators._evidence_index`), which also
  cuts, tokenizes and matches ASCII-path texts itself.
- **Drift**: the hashed embedding (`embed_hashed`, `embed_hashed_sum`, `embed_texts_sum`, the same
  bits as numpy), the scorer's kernels (`embedding_distance`, `ring_distances`,
  `complexity_scores`, `complexity_distances`, `tool_mixes`, `recent_divergences` — sums in their
  own order, within 1e-12 of the Python code's, not to the bit) and the baselines' helpers
  (`round_float16`, `merge_moments`, `any_nonzero`, `joined_words`, `divide_block`, to the
  bit), a score's explanation text in one call (`drift_explanation`, the same text) and a run's
  whole score and text in one call (`score_run`, those kernels in a row).
- **Loops**: a span's bookkeeping and its steps held back while none can complete a loop
  (`loops_hold`, `loops_held_steps`, `loops_head`, and `LoopsSpanHook`, the evaluator's
  `on_span` without its Python frame; `tracehound.evaluators.loops`).

The C functions answer None for anything they do not handle exactly as upb would (malformed
data, merge semantics of repeated singular fields); callers then take the Python path. Set
`TRACEHOUND_PURE_PYTHON=1` to use the Python paths only (for comparison and debugging).
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = [
    "GENAI_KEY_PREFIXES",
    "NATIVE",
    "accelerator_status",
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

_TURNED_OFF = os.environ.get("TRACEHOUND_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes")
_native: Any
try:
    from tracehound import _speedups as _native
except ImportError:  # built without a C compiler: the Python paths below
    _native = None
if _TURNED_OFF:
    _native = None

NATIVE = _native is not None
"""Whether the C accelerator is in use."""


def accelerator_status() -> str:
    """What start-up logs and `--check-config` print about the C accelerator."""
    if _native is not None:
        return "in use"
    if _TURNED_OFF:
        return "off (TRACEHOUND_PURE_PYTHON)"
    return "not built (no C compiler at install time): same results, slower"


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
    if _native is None:
        return None
    result: tuple[bool, list[bytes], list[int]] | None = _native.scan_trace_request(
        data, _PREFIX_BYTES, _DB_QUERY_RESULT, validate
    )
    return result


def decode_key_values(data: bytes, start: int, end: int, field: int) -> dict[str, Any] | None:
    """The repeated `KeyValue` field `field` of the message at `data[start:end]`, decoded as
    `tracehound.spans` decodes it through upb; None without the accelerator or when the bytes
    need upb's own handling."""
    if _native is None:
        return None
    result: dict[str, Any] | None = _native.decode_key_values(data, start, end, field)
    return result


def read_trace_spans(data: bytes) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None:
    """What the sidecar needs of every scope and span of a serialized `ExportTraceServiceRequest`
    (C accelerator only), read as upb reads it: (scopes, spans) — see `_speedups.pyi`. None
    without the accelerator or for bytes it does not read exactly as upb (then parse them)."""
    if _native is None:
        return None
    result: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None = _native.read_trace_spans(
        data
    )
    return result


def read_trace_views(
    data: bytes, cls: type[Any], resource_view: Any
) -> tuple[list[tuple[Any, ...]], list[Any]] | None:
    """`read_trace_spans` with each span's `cls.from_wire` view (None where it refuses the span)
    in place of its tuple, made in the same C pass; `resource_view(data, start, end)` makes each
    resource's view. None without the accelerator or where `read_trace_spans` is None."""
    if _native is None:
        return None
    result: tuple[list[tuple[Any, ...]], list[Any]] | None = _native.read_trace_views(
        data, cls, resource_view
    )
    return result


def splice_trace_request(data: bytes, edits: list[Any]) -> bytes | None:
    """`data` (a serialized `ExportTraceServiceRequest`) after per-span edits, written from its
    bytes (C accelerator only): per span, None cuts it out, bytes are appended to it (b"": as
    is), a 1-tuple of bytes replaces it; scopes and resources left empty are dropped. None
    without the accelerator or for malformed data."""
    if _native is None:
        return None
    result: bytes | None = _native.splice_trace_request(data, edits)
    return result
