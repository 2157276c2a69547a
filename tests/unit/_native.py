"""Switching the C accelerator on or off for a comparison inside one test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType

from tracehound import _accel


@contextmanager
def native_module(module: ModuleType | None) -> Iterator[None]:
    """Run the block with `module` as the accelerator every `_accel.kernel` call answers from
    (None: the pure-Python paths), then restore it."""
    saved = _accel._in_use
    _accel._in_use = module
    try:
        yield
    finally:
        _accel._in_use = saved


def pure_python() -> AbstractContextManager[None]:
    """Run the block on the pure-Python paths."""
    return _accel.use_native(False)


def in_use() -> ModuleType | None:
    """The accelerator the kernels are taken from now, or None."""
    module: ModuleType | None = _accel._in_use
    return module
