"""Type stubs of the optional C accelerator (`src/tracehound/_speedups*.c`)."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from types import NotImplementedType
from typing import Any, TypeVar

from _typeshed import ReadableBuffer, WriteableBuffer

from tracehound.text import Unit

_T = TypeVar("_T")

VALIDATES: bool

def scan_trace_request(
    data: bytes, prefixes: tuple[bytes, ...], event_name: bytes, validate: bool = False, /
) -> tuple[bool, list[bytes], list[int]] | None: ...
def decode_key_values(
    data: bytes, start: int, end: int, field: int, /
) -> dict[str, Any] | None: ...
def completed_attributes(data: bytes, pending: tuple[Any, ...], /) -> dict[str, Any] | None: ...
def read_trace_spans(
    data: ReadableBuffer, /
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None: ...
def splice_trace_request(
    data: ReadableBuffer, edits: list[bytes | tuple[bytes] | None], /
) -> bytes | None: ...
def read_trace_views(
    data: ReadableBuffer, cls: type[_T], resource_view: object, /
) -> tuple[list[tuple[Any, ...]], list[_T | None]] | None: ...
def trace_request_schema() -> dict[str, dict[int, tuple[str, str | None]]]: ...
def json_loads(text: object, /) -> tuple[Any] | None: ...
def step_from_fields(cls: type[_T], fields: dict[str, Any], span_id: str, run_id: str, /) -> _T: ...
def steps_from_drafts(
    cls: type[_T],
    drafts: Sequence[tuple[tuple[Any, ...], dict[str, Any]]],
    run_of_span: dict[str, str] | None,
    default_run: str,
    /,
) -> list[_T]: ...
def text_size(span: object, /) -> int | None: ...
def genai_extract(
    view: object,
    attributes: dict[str, Any],
    config: tuple[Any, ...],
    memo: list[Any] | None = None,
    /,
) -> Any | None: ...
def genai_normalize(
    view: object, config: tuple[Any, ...], memo: list[Any] | None, /
) -> Any | None: ...
def span_drafts(span: object, state: object, config: tuple[Any, ...], /) -> Any | None: ...
def builder_add(builder: object, span: object, config: tuple[Any, ...], /) -> Any | None: ...
def canonical_arguments(value: object, max_json: int, /) -> str | None: ...

class SlotProperty:
    fget: Callable[[Any], Any]
    slot: Any
    def __init__(self, slot: Any, fget: Callable[[Any], Any], /) -> None: ...
    def __get__(self, obj: Any, cls: type[Any] | None = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...

class SlotsMaker:
    def __init__(
        self, cls: type[Any], names: tuple[str, ...], defaults: tuple[Any, ...], /
    ) -> None: ...
    def __call__(self, *values: Any) -> Any: ...

def loops_hold(parts: tuple[Any, ...], span: object, steps: object, /) -> int: ...

class LoopsSpanHook:
    def __init__(
        self,
        globals: dict[str, Any],
        on_span: Callable[..., Any],
        held_results: Callable[..., Any],
        feed_span: Callable[..., Any],
        /,
    ) -> None: ...
    def __call__(self, state: Any, span: Any, steps: Any, trace: Any, /) -> Any: ...

def loops_head(text: str, /) -> str | None: ...
def convert_messages(data: object, part_type: type, message_type: type, /) -> list[Any] | None: ...
def ascii_tokens(text: str, /) -> list[str] | None: ...
def encode_key_values(attributes: object, tag: bytes, /) -> bytes | None: ...
def encode_log_record(
    attributes: object,
    trace_id: str,
    span_id: str,
    time_ns: int,
    parts: tuple[bytes, bytes, bytes, bytes],
    framed: bool,
    /,
) -> bytes | None: ...

# _speedups_engine.c: the sidecar's per-span writing of results
def encode_result_records(
    results: object,
    trace_id: str,
    span_id: str,
    time_ns: int,
    keys: tuple[str, ...],
    parts: tuple[tuple[bytes, bytes, bytes, bytes], tuple[bytes, bytes, bytes, bytes]],
    /,
) -> bytes | None: ...
def encode_span_result_records(
    spans: object,
    time_ns: int,
    keys: tuple[str, ...],
    parts: tuple[tuple[bytes, bytes, bytes, bytes], tuple[bytes, bytes, bytes, bytes]],
    /,
) -> tuple[bytes, int] | None: ...
def encode_result_attributes(results: object, present: object, tag: bytes, /) -> bytes | None: ...
def call_span_hooks(
    hooks: list[tuple[int, Callable[..., Any], Any]], span: object, steps: object, trace: object, /
) -> tuple[Any, ...] | list[Any]: ...
def engine_take_span(engine: object, view: object, /) -> tuple[Any, ...] | int: ...
def present_keys(view: object, /) -> dict[str, Any] | frozenset[str]: ...
def derived_attributes(
    root: object, results: object, constants: tuple[Any, ...], /
) -> dict[str, str | float] | None: ...
def text_tokens(
    text: str, stop_words: frozenset[str] | set[str], /
) -> tuple[str, tuple[str, ...]] | None: ...
def text_units(
    text: str,
    segments: dict[str, Unit | None],
    unit_type: type[Unit],
    stop_words: frozenset[str] | set[str],
    /,
) -> list[Unit] | None: ...
def embed_hashed(
    token_lists: Sequence[Sequence[str]],
    out: WriteableBuffer,
    lexical_dim: int,
    bigrams: bool,
    stance_index: dict[str, int] | None,
    /,
) -> bool | None: ...
def embed_hashed_sum(
    token_lists: Sequence[Sequence[str]],
    out: WriteableBuffer,
    lexical_dim: int,
    bigrams: bool,
    stance_index: dict[str, int] | None,
    /,
) -> bool | None: ...
def embed_texts_sum(
    texts: Sequence[str],
    out: WriteableBuffer,
    lexical_dim: int,
    bigrams: bool,
    stance_index: dict[str, int] | None,
    stop_words: AbstractSet[str],
    /,
) -> bool | None: ...
def crc32_utf8(text: str, /) -> int | None: ...
def round_float16(vector: ReadableBuffer, out: WriteableBuffer, /) -> bool | None: ...
def any_nonzero(vector: object, /) -> bool | None: ...
def joined_words(text: str, stop: int, /) -> str | None: ...
def embedding_distance(
    a: ReadableBuffer, b: ReadableBuffer, blocks: Sequence[tuple[int, int, float]], /
) -> float | NotImplementedType | None: ...
def ring_distances(
    rows: Sequence[ReadableBuffer | None],
    centroid: ReadableBuffer,
    run: ReadableBuffer | None,
    blocks: Sequence[tuple[int, int, float]],
    /,
) -> tuple[list[float], list[float]] | None: ...
def complexity_scores(
    x: Sequence[float],
    mean: ReadableBuffer | Sequence[float],
    m2: ReadableBuffer | Sequence[float],
    weight: float,
    absolute: ReadableBuffer | Sequence[float],
    relative: ReadableBuffer | Sequence[float],
    cap: float,
    /,
) -> tuple[list[float], list[float], float] | None: ...
def complexity_distances(
    rows: Sequence[Sequence[float]], x: Sequence[float], sigmas: Sequence[float], cap: float, /
) -> list[float] | None: ...
def tool_mixes(
    run: dict[str, float] | None, baselines: Sequence[dict[str, float] | None], /
) -> list[float] | None: ...
def recent_divergences(
    recent: tuple[Any, ...],
    x: Sequence[float],
    sigmas: Sequence[float],
    cap: float,
    run_shares: dict[str, float] | None,
    centroid: ReadableBuffer,
    run: ReadableBuffer | None,
    blocks: Sequence[tuple[int, int, float]],
    weights: tuple[float, float, float],
    top: int,
    /,
) -> tuple[list[tuple[str, str, float, int]], float | None] | None: ...
def merge_moments(
    mean_a: ReadableBuffer,
    m2_a: ReadableBuffer,
    mean_b: ReadableBuffer,
    m2_b: ReadableBuffer,
    ratio: float,
    spread: float,
    out_mean: WriteableBuffer,
    out_m2: WriteableBuffer,
    /,
) -> bool | None: ...
def drift_explanation(
    composite: float,
    severity: str,
    confidence: str,
    runs: int,
    primary: str,
    run_tools: Mapping[str, int],
    base_tools: Mapping[str, float],
    shift_threshold: float,
    z: Mapping[str, float],
    means: Sequence[float],
    values: Sequence[float],
    top: int,
    distance: float | None,
    typical: float | None,
    sample: str,
    divergences: list[tuple[str, str, float, int]],
    /,
) -> str | None: ...
def score_run(
    run_shares: dict[str, float] | None,
    base_shares: dict[str, float] | None,
    x: Sequence[float],
    run: ReadableBuffer | None,
    centroid: ReadableBuffer,
    text_weight: float,
    mean: ReadableBuffer | Sequence[float],
    m2: ReadableBuffer | Sequence[float],
    weight: float,
    blocks: Sequence[tuple[int, int, float]],
    dimensions: tuple[str, ...],
    recent: tuple[Any, ...],
    absolute: ReadableBuffer | Sequence[float],
    relative: ReadableBuffer | Sequence[float],
    cap: float,
    weights: tuple[float, float, float],
    run_tools: Mapping[str, int],
    base_tools: Mapping[str, float],
    shift_threshold: float,
    top: int,
    confidence: str,
    runs: int,
    sample: str,
    /,
) -> tuple[float, float, float, float, str, str, float | None, dict[str, float], str] | None: ...
def divide_block(
    vector: WriteableBuffer, start: int, stop: int, divisor: float, /
) -> bool | None: ...

class EvidenceCore:
    """The state and loops of `EvidenceIndex` (`src/tracehound/_speedups_evidence.c`)."""

    def __init__(self, stop_words: frozenset[str], /) -> None: ...
    def add_text(self, source_index: int, text: str, /) -> int | None: ...
    def add_units(
        self, source_index: int, units: Sequence[tuple[str, tuple[str, ...]]], /
    ) -> int: ...
    def match_text(self, text: str, /) -> list[int] | None: ...
    def match(self, tokens: Iterable[str], normalized: str, /) -> list[int]: ...
    def owner(self, unit_id: int, /) -> int: ...
    def units(self, start: int, stop: int, /) -> list[tuple[str, str, tuple[str, ...]]]: ...
    def fresh(self) -> EvidenceCore: ...
    def repeated_groups(self) -> list[list[int]]: ...
