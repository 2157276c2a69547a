"""Switching the C accelerator on or off for a comparison inside one test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType

from tracehound import _wire


@contextmanager
def native_module(module: ModuleType | None) -> Iterator[None]:
    """Run the block with `_wire._native` set to `module` (None: the pure-Python paths), then
    restore it."""
    saved = _wire._native
    _wire._native = module
    try:
        yield
    finally:
        _wire._native = saved


def pure_python() -> AbstractContextManager[None]:
    """Run the block on the pure-Python paths."""
    return native_module(None)
