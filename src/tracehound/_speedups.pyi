"""Type stubs of the optional C accelerator (`src/native/_speedups*.c`)."""

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from _typeshed import ReadableBuffer, WriteableBuffer

_T = TypeVar("_T")

VALIDATES: bool

def configure(typographic: str, /) -> None: ...
def scan_trace_request(
    data: bytes, prefixes: tuple[bytes, ...], event_name: bytes, validate: bool = False, /
) -> tuple[bool, list[bytes], list[int]] | None: ...
def decode_key_values(
    data: bytes, start: int, end: int, field: int, /
) -> dict[str, Any] | None: ...
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
