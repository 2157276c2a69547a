"""Switching the C accelerator off for a comparison inside one test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tracehound import _wire


@contextmanager
def pure_python() -> Iterator[None]:
    """Run the block on the pure-Python paths (`_wire._native` None), then restore it."""
    saved = _wire._native
    _wire._native = None
    try:
        yield
    finally:
        _wire._native = saved
