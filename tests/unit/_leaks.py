"""Leak checks for the C accelerator's functions: call one many times, then compare reference
counts and memory."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable


def assert_leak_free(call: Callable[[], object], watched: list[object], n: int = 100_000) -> None:
    """`call` n times: no reference or memory block may be left behind. The n calls are counted
    in pymalloc blocks (cheap); n // 10 more run under tracemalloc, which also sees PyMem_Malloc
    buffers too big for pymalloc. `watched` objects (with None, True, False) must keep their
    reference counts."""
    watched = [None, True, False, *watched]
    for _ in range(1000):  # warm up: caches, free lists
        call()
    gc.collect()
    refcounts = [sys.getrefcount(o) for o in watched]
    blocks = sys.getallocatedblocks()
    for _ in range(n):
        call()
    gc.collect()
    grown = sys.getallocatedblocks() - blocks
    refcounts_after = [sys.getrefcount(o) for o in watched]  # before any assert: pytest's
    # rewritten asserts keep None in temporaries
    assert refcounts_after == refcounts
    assert grown < 1000, f"{grown} memory blocks left behind by {n} calls"
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(n // 10):
            call()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64 * 1024, f"{end - start} bytes left behind by {n // 10} calls"


def expecting(call: Callable[[], object], *errors: type[BaseException]) -> Callable[[], None]:
    """`call`, which must raise one of `errors` (the raising path is leak-checked too)."""

    def run() -> None:
        try:
            call()
        except errors:
            return
        raise AssertionError("no exception")

    return run
