"""Type stubs of the optional C accelerator (`src/tracehound/_speedups*.c`)."""

from collections.abc import Sequence
from typing import Any

from _typeshed import WriteableBuffer

VALIDATES: bool

def scan_trace_request(
    data: bytes, prefixes: tuple[bytes, ...], event_name: bytes, validate: bool = False, /
) -> tuple[bool, list[bytes], list[int]] | None: ...
def decode_key_values(
    data: bytes, start: int, end: int, field: int, /
) -> dict[str, Any] | None: ...
def trace_request_schema() -> dict[str, dict[int, tuple[str, str | None]]]: ...
def convert_messages(data: object, part_type: type, message_type: type, /) -> list[Any] | None: ...
def ascii_tokens(text: str, /) -> list[str] | None: ...
def embed_hashed(
    token_lists: Sequence[Sequence[str]],
    out: WriteableBuffer,
    lexical_dim: int,
    bigrams: bool,
    stance_index: dict[str, int] | None,
    /,
) -> bool | None: ...
def crc32_utf8(text: str, /) -> int | None: ...
