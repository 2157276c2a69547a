"""What every convention module produces: one `NormalizedSpan` per GenAI span.

A convention answers two questions about a span: "is this mine?" (from attribute keys, scope and
name only, so that non-GenAI spans stay cheap) and "what does it say?" (operation, model, tokens,
messages, tool call, documents, error). Turning normalized spans into the trace's ordered,
deduplicated Steps is the job of `tracehound.steps`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MemberDescriptorType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tracehound.spans import LogView, SpanView

__all__ = [
    "Convention",
    "Document",
    "Message",
    "NormalizedSpan",
    "Operation",
    "Part",
    "canonical_arguments",
    "fields_maker",
    "parse_json_value",
    "slots_maker",
    "to_text",
]

Operation = Literal["llm", "tool", "agent", "retrieval", "embeddings", "workflow", "other"]

# Past this size a JSON attribute is not parsed: the step keeps the fact, not the content.
MAX_JSON_BYTES = 8 * 1024 * 1024

# What `json.dumps` would build on every call with these options; encoders keep no state
# between calls, so one of each is shared (saves ~1.5 µs per call on the per-span path).
_TEXT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
_CANONICAL_JSON = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def _c_encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """`encoder.encode`, through one C encoder made once rather than one per call.

    Without the circular-reference markers: a circular value then raises RecursionError rather
    than ValueError, which both callers treat alike. The Python method where the C encoder is
    missing (another interpreter) or takes other arguments.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    try:
        c_encode = make(
            None,
            encoder.default,
            json.encoder.encode_basestring,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )
    except TypeError:
        return encoder.encode
    join = "".join

    def encode(value: Any) -> str:
        return join(c_encode(value, 0))

    return encode


_text_json = _c_encoder(_TEXT_JSON)
_canonical_json = _c_encoder(_CANONICAL_JSON)


@dataclass(slots=True)
class Part:
    """One message part, normalized (`thinking` → `reasoning`, `result` → `response`)."""

    type: str  # text | reasoning | tool_call | tool_call_response | other types kept as given
    content: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: Any = None
    response: Any = None
    # a tool_call_response that says the call failed (`is_error`, `status: "error"`)
    is_error: bool = False


@dataclass(slots=True)
class Message:
    role: str
    parts: list[Part]
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Document:
    id: str | None = None
    content: str | None = None
    score: float | None = None


@dataclass(slots=True)
class NormalizedSpan:
    """The GenAI facts of one span, whatever convention it followed."""

    view: SpanView
    convention: str
    operation: Operation
    agent_name: str | None = None
    model: str | None = None
    provider: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    system_instructions: list[str] = field(default_factory=list)
    input_messages: list[Message] = field(default_factory=list)
    output_messages: list[Message] = field(default_factory=list)
    # Whole conversation recorded on an agent span (pydantic-ai); used only for what the
    # children did not already show.
    history: list[Message] = field(default_factory=list)
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: Any = None
    tool_result: Any = None
    query: str | None = None
    source: str | None = None
    documents: list[Document] = field(default_factory=list)
    declared_output: str | None = None
    # Set on a span that is a step of an agent whose own span is this span's parent, when the
    # parent does not say it is an agent (a LangGraph node: its parent is the graph; a LlamaIndex
    # agent workflow step: its parent is the agent's run): the parent's run is then an agent run,
    # named this (empty: the parent span's own name).
    parent_agent: str | None = None
    error: str | None = None
    # Problems met while mapping (invalid JSON, wrong types): mapped as far as valid, and said.
    problems: list[str] = field(default_factory=list)
    # Text bytes this span contributed (for the per-trace text budget).
    text_bytes: int = 0

    @property
    def span_id(self) -> str:
        return self.view.span_id


@dataclass(frozen=True, slots=True)
class Convention:
    """A convention family: a cheap detector and an extractor."""

    name: str
    detect: Callable[[SpanView, frozenset[str]], bool]
    extract: Callable[[SpanView, list[LogView]], NormalizedSpan]


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")


def slots_maker(cls: type[_T]) -> Callable[..., _T]:
    """What makes `cls` instances from their fields' values, positionally (the last ones may be
    left to their defaults)."""
    return _positional(cls)


def fields_maker(cls: type[_T]) -> Callable[..., _T]:
    """What makes a `cls` instance from the values of all its fields, in their order (those
    not in `__init__` included): the class itself, or a function calling it by keywords when
    some fields are keyword-only or not in `__init__`."""
    names = tuple(f.name for f in fields(cls))
    in_init = tuple(f.init for f in fields(cls))
    if all(in_init) and not any(f.kw_only for f in fields(cls)):
        return cls
    setters = _slot_setters(cls)
    if setters is not None:
        return _slot_filler(cls, setters, ())

    def make(*values: Any) -> _T:
        out = cls(**{n: v for n, v, i in zip(names, values, in_init, strict=True) if i})
        for name, value, init in zip(names, values, in_init, strict=True):
            if not init:
                object.__setattr__(out, name, value)
        return out

    return make


def _positional(cls: type[_T]) -> Callable[..., _T]:
    """`cls` called with positional values, also when its fields are keyword-only."""
    if not any(f.kw_only for f in fields(cls)):
        return cls
    setters = _slot_setters(cls)
    if setters is not None:
        return _slot_filler(cls, setters, tuple(_default_of(f) for f in fields(cls)))
    names = tuple(f.name for f in fields(cls))

    def make(*values: Any) -> _T:
        return cls(**dict(zip(names, values, strict=False)))  # the last ones: defaults

    return make


def _slot_setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The `__set__` of each field's slot, in field order; None for a class that is not slotted
    field by field or whose construction runs code of its own (`__post_init__`)."""
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return None
    slots = [cls.__dict__.get(f.name) for f in fields(cls)]
    setters = [slot.__set__ for slot in slots if isinstance(slot, MemberDescriptorType)]
    return tuple(setters) if len(setters) == len(slots) else None


def _default_of(f: Field[Any]) -> Callable[[], Any]:
    """What gives field `f` its default value (a field without one: a TypeError when left out,
    as from `__init__`)."""
    if f.default_factory is not MISSING:
        return f.default_factory
    if f.default is not MISSING:
        default = f.default
        return lambda: default

    def missing() -> Any:
        raise TypeError(f"missing value for field {f.name!r}")

    return missing


def _slot_filler(
    cls: type[_T], setters: tuple[Callable[[Any, Any], None], ...], defaults: tuple[Any, ...]
) -> Callable[..., _T]:
    """A keyword-only or partly-not-`__init__` dataclass made from positional values by filling
    its slots, what its `__init__` does (a frozen one through `object.__setattr__` field by
    field, after a dict of keywords: ~2× the time); the fields not given take `defaults`."""
    new = object.__new__
    count = len(setters)

    def make(*values: Any) -> _T:
        if len(values) > count or (len(values) < count and not defaults):
            raise TypeError(f"{cls.__name__}: {count} field values expected, got {len(values)}")
        out = new(cls)
        for set_slot, value in zip(setters, values, strict=False):  # the rest: defaults, below
            set_slot(out, value)
        for position in range(len(values), count):
            setters[position](out, defaults[position]())
        return out

    return make


_DECODER = json.JSONDecoder()


def _loads(text: str) -> Any:
    """`json.loads(text)`, minus its per-call checks and whitespace scans for a document that
    starts with its value and ends with it (what instrumentations write); anything else, valid
    or not, goes through `json.loads` itself."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


def parse_json_value(value: Any, what: str, problems: list[str]) -> Any:
    """Return the structured value of an attribute that may be a JSON string or already structured.

    Invalid JSON is reported in `problems` and yields None; the caller maps what it can.
    """
    if value is None:
        return None
    if isinstance(value, (list, dict)):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{what}: bytes that are not UTF-8")
            return None
    if isinstance(value, str):
        if len(value) > MAX_JSON_BYTES:
            problems.append(f"{what}: {len(value)} bytes, over the {MAX_JSON_BYTES} byte limit")
            return None
        try:
            return _loads(value)
        except (ValueError, RecursionError):
            problems.append(f"{what}: not valid JSON")
            return None
    problems.append(f"{what}: unexpected type {type(value).__name__}")
    return None


def to_text(value: Any) -> str | None:
    """Text of a content value: strings as they are, anything else as compact JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        return _text_json(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def canonical_arguments(value: Any) -> str | None:
    """Canonical form of tool-call arguments: sorted-key compact JSON when they are JSON.

    `{"b":1,"a":2}`, `'{"a": 2, "b": 1}'` and a kvlist with the same items all give
    `{"a":2,"b":1}`, so equal calls compare equal whatever the instrumentation did.
    """
    if value is None:
        return None
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= MAX_JSON_BYTES:
            try:
                value = _loads(stripped)
            except (ValueError, RecursionError):
                return str(value)
        else:
            return str(value)
    try:
        return _canonical_json(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)
