"""Type stubs of the optional C accelerator (`src/tracehound/_speedups.c`)."""

from typing import Any

VALIDATES: bool

def scan_trace_request(
    data: bytes, prefixes: tuple[bytes, ...], event_name: bytes, validate: bool = False, /
) -> tuple[bool, list[bytes], list[int]] | None: ...
def decode_key_values(
    data: bytes, start: int, end: int, field: int, /
) -> dict[str, Any] | None: ...
def trace_request_schema() -> dict[str, dict[int, tuple[str, str | None]]]: ...
def convert_messages(data: object, part_type: type, message_type: type, /) -> list[Any] | None: ...
