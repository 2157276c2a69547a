"""The one door to the optional C accelerator, `tracehound._speedups` (sources in `src/native/`).

The C holds byte- and text-level kernels only — reading and splicing OTLP protobuf, decoding
and encoding attributes, the evidence index and the drift embedding's hashing — each beside the
Python code that is its reference and its fallback, as CPython keeps `heapq` beside `_heapq`.
Every rule (conventions, steps, runs, the engine, the evaluators' decisions, results) exists
once, in Python.

Callers ask for a kernel by name when they run (`kernel("decode_key_values")`), so that the switch
reaches every one of them: `TRACEHOUND_PURE_PYTHON=1` at start-up (or a comma-separated list of
kernel names, to turn off those only), or `use_native(False)` in a test. A kernel answers None
for input it does not handle exactly as its reference; the caller then runs the reference and
counts the refusal with `declined(name)`, which the sidecar exports as
`tracehound.accelerator.fallbacks` (by kernel) and its `listening` log record shows.

The one constant the kernels need is Python's, given to the C once, at first use (`loaded`):
the typographic separators of `tracehound.text._TYPOGRAPHIC`, which the evidence index and the
hashing embedder take as the tokenizer does. Until then those kernels decline every text
holding a non-ASCII character.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KERNELS",
    "NATIVE",
    "PURE_PYTHON_ENV",
    "Kernel",
    "declined",
    "fallbacks",
    "kernel",
    "loaded",
    "status",
    "use_native",
]

PURE_PYTHON_ENV = "TRACEHOUND_PURE_PYTHON"
"""Set to 1 (or true/yes) to run without the C accelerator, for comparison and debugging."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Kernel:
    """One C kernel: its name in `tracehound._speedups`, the Python code it stands in for (the
    reference its tests and the fuzz session compare it with) and what it does."""

    name: str
    reference: str
    does: str


KERNELS: tuple[Kernel, ...] = (
    # OTLP protobuf bytes (client input)
    Kernel(
        name="scan_trace_request",
        reference="upb: ExportTraceServiceRequest.FromString + tracehound._wire.may_hold_genai",
        does="one pass over a trace request: GenAI keys?, span ids, span byte ranges; validates",
    ),
    Kernel(
        name="decode_key_values",
        reference="tracehound.spans._proto_attributes over upb's message",
        does="a message's attributes decoded from its bytes",
    ),
    Kernel(
        name="read_trace_spans",
        reference="upb: ExportTraceServiceRequest.FromString",
        does="every scope and span of a trace request, as the sidecar reads them",
    ),
    Kernel(
        name="read_trace_views",
        reference="tracehound.spans.iter_proto_spans",
        does="read_trace_spans with each span's view made in the same pass",
    ),
    Kernel(
        name="trace_request_schema",
        reference="the opentelemetry-proto descriptors",
        does="the field table the scan validates against (checked against the descriptors)",
    ),
    Kernel(
        name="splice_trace_request",
        reference="upb: parse, edit the spans, SerializeToString",
        does="the request to forward, written from the bytes received with per-span edits",
    ),
    Kernel(
        name="encode_key_values",
        reference="tracehound.server._otlp.set_attributes + SerializeToString",
        does="attributes written as protobuf KeyValue fields",
    ),
    Kernel(
        name="encode_log_record",
        reference="tracehound.server._otlp.evaluation_log_record(...).SerializeToString()",
        does="a gen_ai.evaluation.result log record written as protobuf",
    ),
    # evidence
    Kernel(
        name="EvidenceCore",
        reference="tracehound.evaluators._evidence_index (the Python index)",
        does="the evidence index: units stored and matched by their rarest tokens",
    ),
    # drift
    Kernel(
        name="embed_hashed",
        reference="tracehound.drift._embed.HashingEmbedder (numpy)",
        does="the hashing embedder's vector of one token list",
    ),
    Kernel(
        name="embed_hashed_sum",
        reference="tracehound.drift._embed.HashingEmbedder (numpy)",
        does="the summed vectors of several token lists",
    ),
    Kernel(
        name="embed_texts_sum",
        reference="tracehound.drift._embed.HashingEmbedder (numpy)",
        does="the summed vectors of several texts, tokenized in the same pass",
    ),
    Kernel(
        name="crc32_utf8",
        reference="zlib.crc32 of the UTF-8 bytes",
        does="the CRC the embedder hashes tokens with",
    ),
)
"""Every kernel the C accelerator exports, in one list: `docs/performance.md` and
`src/native/README.md` show it, and a test checks that the module exports these and no
other function."""

_SWITCH = os.environ.get(PURE_PYTHON_ENV, "").strip()
_TURNED_OFF = _SWITCH.lower() in ("1", "true", "yes")
# A comma-separated list of kernel names turns off those only (to measure what each one pays)
_KERNELS_OFF = frozenset() if _TURNED_OFF else frozenset(filter(None, _SWITCH.split(",")))
_module: Any
try:
    from tracehound import _speedups as _module
except ImportError:  # built without a C compiler: the Python code everywhere
    _module = None

NATIVE = _module is not None and not _TURNED_OFF
"""Whether the C accelerator is in use (built, and not turned off)."""

_in_use: Any = _module if NATIVE else None
# The constant is given at first use, not here: the module that holds it imports this one
_configured = _module is None
_configure_lock = threading.Lock()
_fallbacks: dict[str, int] = {}
_fallbacks_lock = threading.Lock()


def kernel(name: str) -> Callable[..., Any] | None:
    """The C kernel `name` while the accelerator is in use, else None (then run the Python
    code). Asked for at each use, so that `use_native` reaches every caller."""
    module = _in_use
    if module is None or name in _KERNELS_OFF:
        return None
    if not _configured:
        loaded()
    found: Callable[..., Any] | None = getattr(module, name, None)
    return found


def loaded() -> Any:
    """`tracehound._speedups` given the constant Python owns (once), or None when it is not
    built, whether or not it is in use: `kernel` calls it at first use, and tests that call the
    module's functions directly do."""
    global _configured  # noqa: PLW0603 - set once, under the lock
    if not _configured:
        with _configure_lock:
            if not _configured:
                # here, not at the top: tracehound.text imports this module
                from tracehound.text import _TYPOGRAPHIC

                _module.configure("".join(_TYPOGRAPHIC))
                _configured = True
    return _module


def declined(name: str) -> None:
    """Count one input kernel `name` answered None for (its caller then ran the Python code)."""
    with _fallbacks_lock:
        _fallbacks[name] = _fallbacks.get(name, 0) + 1


def fallbacks() -> dict[str, int]:
    """How many inputs each kernel left to the Python code since start-up."""
    with _fallbacks_lock:
        return dict(_fallbacks)


def status() -> str:
    """What start-up logs and `--check-config` print about the C accelerator."""
    if _in_use is not None:
        off = f"; off: {', '.join(sorted(_KERNELS_OFF))}" if _KERNELS_OFF else ""
        return f"in use ({len(KERNELS)} kernels, src/native{off})"
    if _module is not None:
        return f"off ({PURE_PYTHON_ENV})"
    return "not built (no C compiler at install time): same results, slower"


@contextmanager
def use_native(on: bool) -> Iterator[None]:
    """Run the block with the accelerator on (when built) or off, then restore it: for tests
    that compare the two paths in one process."""
    global _in_use  # noqa: PLW0603 - the one switch every `kernel` call reads
    saved = _in_use
    _in_use = _module if on else None
    try:
        yield
    finally:
        _in_use = saved
