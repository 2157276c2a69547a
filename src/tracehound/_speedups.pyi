"""Type stubs of the optional C accelerator (`src/tracehound/_speedups.c`)."""

from typing import Any

def scan_trace_request(
    data: bytes, prefixes: tuple[bytes, ...], event_name: bytes
) -> tuple[bool, list[bytes], list[int]] | None: ...
def decode_key_values(data: bytes, start: int, end: int, field: int) -> dict[str, Any] | None: ...
