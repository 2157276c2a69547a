"""Convention families and the registry that picks one per span.

Detection looks only at attribute keys, the scope and the span name; values are decoded only for
spans a family claims. The first family that claims a span maps it; the more specific families
come first (OpenInference and Vercel use their own namespaces, Traceloop and pydantic-ai extend
the OTel GenAI shapes).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from operator import methodcaller

from tracehound._wire import GENAI_KEY_PREFIXES
from tracehound.conventions import genai, openinference, pydantic_ai, traceloop, vercel_ai
from tracehound.conventions.base import (
    Convention,
    Document,
    Message,
    NormalizedSpan,
    Operation,
    Part,
    canonical_arguments,
    to_text,
)
from tracehound.spans import LogView, SpanView

__all__ = [
    "CONVENTIONS",
    "Convention",
    "Document",
    "Message",
    "NormalizedSpan",
    "Operation",
    "Part",
    "canonical_arguments",
    "detect_convention",
    "normalize",
    "to_text",
]

_logger = logging.getLogger(__name__)

CONVENTIONS: tuple[Convention, ...] = (
    Convention(openinference.NAME, openinference.detect, openinference.extract),
    Convention(vercel_ai.NAME, vercel_ai.detect, vercel_ai.extract),
    Convention(pydantic_ai.NAME, pydantic_ai.detect, pydantic_ai.extract),
    Convention(traceloop.NAME, traceloop.detect, traceloop.extract),
    Convention(genai.NAME, genai.detect, genai.extract),
)

# Keys from which a span may be GenAI at all: a span with none of them, no GenAI scope and no
# known span name is skipped after one set intersection.
_ANY_GENAI_PREFIXES = GENAI_KEY_PREFIXES
# Vector-DB spans of OpenLLMetry carry only `db.*` keys; what makes them GenAI is their
# `db.query.result` span events (the retrieved documents).
_DB_QUERY_RESULT = traceloop.DB_QUERY_RESULT

# Spans named like OTel GenAI operations (`chat gpt-4o`, `execute_tool x`) nearly always pass and
# are mapped next: they skip that pre-check, and their keys come from their decoded attributes
# (which the mapping needs anyway) rather than from a separate pass over the protobuf.
_GENAI_OPERATIONS = frozenset(genai.OPERATION_MAP)
# The gate's key test, run in C (no generator frame per key).
_STARTS_GENAI = methodcaller("startswith", _ANY_GENAI_PREFIXES)
# Every key by which a family before OTel GenAI (in `CONVENTIONS`) claims a span: a span named
# like an OTel GenAI operation with none of them, and no name, scope or event another family
# claims, is OTel GenAI exactly when `genai.detect` says so (its keys all pass the gate).
_CLAIMED_BEFORE_GENAI = (
    openinference.CLAIM_KEYS | vercel_ai.CLAIM_KEYS | pydantic_ai.DETECT_KEYS | traceloop.CLAIM_KEYS
)
_GENAI_CONVENTION = CONVENTIONS[-1]


# What a span name alone says, memoized: span names repeat (`GET /api/orders/{id}`, `SELECT
# users`), and this runs for every span of an application. Bounded: cleared when full.
_HINTED, _BY_NAME = 1, 2
_NAME_FLAGS: dict[str, int] = {}
_NAME_FLAGS_MAX = 4096


def _name_flags(name: str) -> int:
    """Compute and memoize what `name` says (`_NAME_FLAGS.get(name)` first, in the caller)."""
    flags = _HINTED if name.partition(" ")[0] in _GENAI_OPERATIONS else 0
    if name in ("agent run", "running tool") or name.startswith("ai."):
        flags |= _BY_NAME
    if len(_NAME_FLAGS) >= _NAME_FLAGS_MAX:
        _NAME_FLAGS.clear()
    _NAME_FLAGS[name] = flags
    return flags


def detect_convention(view: SpanView) -> Convention | None:
    flags = _NAME_FLAGS.get(view.name)
    if flags is None:
        flags = _name_flags(view.name)
    if not flags and view.scope_name != pydantic_ai.SCOPE_NAME and not view.may_be_genai():
        return None
    hinted = flags & _HINTED
    by_name = flags & _BY_NAME or view.scope_name == pydantic_ai.SCOPE_NAME
    if hinted and not by_name:  # the usual GenAI span: one pass over its keys, in C
        attributes = view.attributes
        if (
            _CLAIMED_BEFORE_GENAI.isdisjoint(attributes)
            and view.name not in pydantic_ai.SPAN_NAMES
            and not view.has_event(_DB_QUERY_RESULT)
        ):
            return None if genai.DETECT_KEYS.isdisjoint(attributes) else _GENAI_CONVENTION
    keys: Collection[str] = view.attributes.keys() if hinted else view.attribute_keys
    if not by_name and not any(map(_STARTS_GENAI, keys)) and not view.has_event(_DB_QUERY_RESULT):
        return None
    keyset = frozenset(keys)
    for convention in CONVENTIONS:
        if convention.detect(view, keyset):
            return convention
    return None


def normalize(view: SpanView, logs: list[LogView] | None = None) -> NormalizedSpan | None:
    """Map one span (and the log events joined to it) to its GenAI facts; None if not GenAI.

    Never raises: a mapping that fails is reported as a problem on an `other` span, so the span
    still passes through and the failure is counted.
    """
    convention = detect_convention(view)
    if convention is None:
        if logs:  # an unmarked span whose content arrived as log events (legacy GenAI events)
            convention = CONVENTIONS[-1]
        else:
            return None
    try:
        return convention.extract(view, logs or [])
    except Exception as exc:  # a mapping bug or hostile value must not stop the pipeline
        _logger.debug("mapping %s span %s failed", convention.name, view.span_id, exc_info=True)
        return NormalizedSpan(
            view=view,
            convention=convention.name,
            operation="other",
            problems=[f"mapping failed: {type(exc).__name__}: {exc}"],
        )
