"""A byte-level pre-check: can this OTLP protobuf contain a GenAI span at all?

Reading a span's attribute keys through upb costs ~0.4 µs per key, so for the many spans that are
not GenAI, looking at every key costs more than parsing the span. The keys are plain bytes on the
wire — each is field 1 of a `KeyValue` (tag byte 0x0a, a varint length, UTF-8) — so one regex pass
anchored on that tag byte answers "does any key start with a GenAI prefix?" for a whole request
or scope at once, and a substring search answers "does any span carry a `db.query.result` event?"
(OpenLLMetry's vector-DB spans carry only `db.*` keys).

The check may say "maybe" for bytes that are not keys (a value that happens to look like one);
that only sends those spans to the exact, key-level detection. It never says "no" for a span that
has such a key or event.
"""

from __future__ import annotations

import re

__all__ = ["GENAI_KEY_PREFIXES", "may_hold_genai"]

GENAI_KEY_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.", "ai.", "tool_")
DB_QUERY_RESULT = "db.query.result"

# Tag 0x0a, a varint length (continuation bytes ≥ 0x80, last byte < 0x80), then the prefix.
_KEY_PREFIX = re.compile(
    rb"\n[\x80-\xff]{0,4}[\x00-\x7f](?:"
    + b"|".join(re.escape(p.encode()) for p in GENAI_KEY_PREFIXES)
    + rb")"
)
_DB_QUERY_RESULT = DB_QUERY_RESULT.encode()


def may_hold_genai(data: bytes) -> bool:
    """False only if no attribute key in `data` has a GenAI prefix and no event is a
    `db.query.result` event (a serialized request, scope or span)."""
    return _KEY_PREFIX.search(data) is not None or _DB_QUERY_RESULT in data
