"""Run `tracehound serve` with memory introspection, for `soak.py --probe` (a test harness, not
part of the product).

    python benchmarks/_memprobe.py OUT.jsonl INTERVAL TRACEMALLOC_FRAMES serve ARGS...

A daemon thread in the sidecar's process writes one JSON line to OUT.jsonl every INTERVAL
seconds: the length of every container held by an attribute of the long-lived tracehound
objects (found at the first sample by walking everything reachable: `Class.attr`, summed over
instances) and by tracehound's modules, `functools` LRU cache sizes, the object count of each
type in `gc.get_objects()` (young objects and garbage awaiting a collection), `gc.get_stats()`,
glibc's `mallinfo2()`, pymalloc's arena figures from `sys._debugmallocstats()`, and — with
TRACEMALLOC_FRAMES > 0 — the allocation sites whose traced size grew most since the first
sample. `MEMPROBE_FULL_EVERY=N` repeats the full walk (every reachable object's type and
container) every N samples; it holds the GIL for a second or more on a large heap.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import gc
import itertools
import json
import os
import re
import sys
import tempfile
import threading
import time
import tracemalloc
import types
from collections.abc import Iterator
from typing import Any

CONTAINERS = (dict, list, set, frozenset, collections.deque, bytearray)


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def mallinfo() -> dict[str, int]:
    """glibc heap: `arena` bytes from sbrk/mmap'd arenas, `uordblks` in use, `fordblks` free
    inside them (fragmentation), `hblkhd` in large mmap'd blocks."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        return {}
    info = libc.mallinfo2()
    return {name: int(getattr(info, name)) // 1024 for name, _ in MallInfo2._fields_}


def pymalloc_stats() -> dict[str, int]:
    """Arena totals from `sys._debugmallocstats()` (it writes to C's stderr: captured via fd 2)."""
    with tempfile.TemporaryFile(mode="w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()  # type: ignore[attr-defined]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    stats: dict[str, int] = {}
    for key, pattern in (
        ("arenas_allocated_total", r"# arenas allocated total\s*=\s*([\d,]+)"),
        ("arenas_reclaimed", r"# arenas reclaimed\s*=\s*([\d,]+)"),
        ("arenas_highwater", r"# arenas highwater mark\s*=\s*([\d,]+)"),
        ("arenas_current", r"# arenas allocated current\s*=\s*([\d,]+)"),
        ("allocated_blocks_kib", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
        ("available_blocks_kib", r"# bytes in available blocks\s*=\s*([\d,]+)"),
        ("unused_pools_kib", r"unused pools \* \d+ bytes\s*=\s*([\d,]+)"),
        ("arenas_kib", r"Total\s*=\s*([\d,]+)"),
    ):
        match = re.search(pattern, text)
        if match:
            value = int(match.group(1).replace(",", ""))
            stats[key] = value // 1024 if key.endswith("_kib") else value
    return stats


def _length(value: Any) -> int | None:
    if isinstance(value, CONTAINERS):
        return len(value)
    return None


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    with contextlib.suppress(TypeError):  # no __dict__
        yield from vars(obj).items()
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                yield slot, getattr(obj, slot, None)


def reachable() -> list[Any]:
    """Every object reachable from the modules and the threads' frames, found by walking
    `gc.get_referents`: unlike `gc.get_objects()` it includes what `gc.freeze()` moved to the
    permanent generation (the sidecar freezes what start-up built) and excludes garbage that
    waits for a collection."""
    roots: list[Any] = [sys.modules, *sys._current_frames().values()]
    seen = {id(o) for o in roots}
    found = list(roots)
    frontier = roots
    while frontier:
        batch = []
        for child in gc.get_referents(*frontier):
            if id(child) not in seen and not isinstance(child, type):
                seen.add(id(child))
                batch.append(child)
        found.extend(batch)
        frontier = batch
    return found


def container_sizes(objects: list[Any]) -> dict[str, list[int]]:
    """`Class.attr` → [total length, instances, largest] over live tracehound objects; module
    globals as `module.name`; LRU caches as `lru:qualname`."""
    sizes: dict[str, list[int]] = {}

    def add(key: str, n: int) -> None:
        entry = sizes.setdefault(key, [0, 0, 0])
        entry[0] += n
        entry[1] += 1
        entry[2] = max(entry[2], n)

    for name, module in list(sys.modules.items()):
        if name.startswith(("tracehound", "grpc", "opentelemetry", "wordllama")) and isinstance(
            module, types.ModuleType
        ):
            for attr, value in list(vars(module).items()):
                if attr.startswith("__"):
                    continue
                n = _length(value)
                if n is not None and n > 0:
                    add(f"{name}.{attr}", n)
    for obj in objects:
        klass = type(obj)
        if isinstance(obj, functools._lru_cache_wrapper):
            add(
                f"lru:{getattr(obj, '__module__', '?')}.{obj.__qualname__}",
                obj.cache_info().currsize,
            )
            continue
        module = getattr(klass, "__module__", "") or ""
        if not module.startswith("tracehound"):
            continue
        for attr, value in _attributes(obj):
            n = _length(value)
            if n is not None:
                add(f"{klass.__qualname__}.{attr}", n)
                if isinstance(value, dict) and value:
                    # one level down: dicts of containers (per-agent or per-name maps)
                    inner = sum(_length(v) or 0 for v in list(value.values())[:10_000])
                    if inner:
                        add(f"{klass.__qualname__}.{attr}[*]", inner)
    return sizes


def type_counts(objects: list[Any]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for obj in objects:
        klass = type(obj)
        counts[f"{klass.__module__}.{klass.__qualname__}"] += 1
    return dict(counts.most_common(60))


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def long_lived(objects: list[Any]) -> list[Any]:
    """The tracehound objects among `objects` that `gc.freeze()` put in the permanent generation
    at start-up (the pipeline, the engine, the stores, evaluators and embedders): not those of
    the traces in flight, which are in `gc.get_objects()`."""
    young = {id(o) for o in gc.get_objects()}
    return [
        o
        for o in objects
        if (type(o).__module__ or "").startswith("tracehound") and id(o) not in young
    ]


def probe(path: str, interval: float, frames: int, full_every: int) -> None:
    started = time.monotonic()
    baseline: tracemalloc.Snapshot | None = None
    owners: list[Any] = []
    with open(path, "a") as out:
        for n in itertools.count():
            time.sleep(interval)
            began = time.perf_counter()
            record: dict[str, Any] = {
                "t_s": round(time.monotonic() - started, 1),
                "rss_kib": rss_kib(),
                "mallinfo_kib": mallinfo(),
                "pymalloc_kib": pymalloc_stats(),
                "gc_counts": gc.get_count(),
                "gc_stats": gc.get_stats(),
            }
            if n == 0 or (full_every and n % full_every == 0):
                live = reachable()
                if n == 0:
                    owners = long_lived(live)
                record["reachable_objects"] = len(live)
                record["types"] = type_counts(live)
                record["all_containers"] = container_sizes(live)
                del live
            record["containers"] = container_sizes(owners)
            tracked = gc.get_objects()  # gens 0-2: new objects and garbage awaiting collection
            record["tracked_objects"] = len(tracked)
            record["tracked_types"] = type_counts(tracked)
            del tracked
            if frames:
                snapshot = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__)]
                )
                traced, peak = tracemalloc.get_traced_memory()
                record["tracemalloc_kib"] = {"traced": traced // 1024, "peak": peak // 1024}
                if baseline is None:
                    baseline = snapshot
                else:
                    record["growth"] = [
                        {
                            "site": str(stat.traceback).replace(os.getcwd(), "."),
                            "kib": stat.size // 1024,
                            "kib_diff": stat.size_diff // 1024,
                            "count_diff": stat.count_diff,
                        }
                        for stat in snapshot.compare_to(baseline, "lineno")[:25]
                    ]
            record["probe_s"] = round(time.perf_counter() - began, 2)
            out.write(json.dumps(record) + "\n")
            out.flush()


def main() -> int:
    path, interval, frames, *argv = sys.argv[1:]
    cache_size = os.environ.get("MEMPROBE_FINALIZED_CACHE_SIZE")
    if cache_size:  # an experiment: the engine's finalized-trace cache at another size
        from tracehound.engine import EngineConfig

        assert EngineConfig.__init__.__kwdefaults__ is not None
        EngineConfig.__init__.__kwdefaults__["finalized_cache_size"] = int(cache_size)
    if int(frames):
        tracemalloc.start(int(frames))
    full_every = int(os.environ.get("MEMPROBE_FULL_EVERY", "0"))  # 0: only the first sample
    threading.Thread(
        target=probe,
        args=(path, float(interval), int(frames), full_every),
        daemon=True,
        name="memprobe",
    ).start()
    from tracehound.cli import main as tracehound_main

    return tracehound_main(argv)


if __name__ == "__main__":
    sys.exit(main())
